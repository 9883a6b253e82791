"""A fuzzer for the platform's three bindings: it sends mutated valid requests and schema-driven
REST requests, and counts every answer that is not the binding's own (docs/fuzzing.md).

    python -m fuzz --requests 10000 --web http://127.0.0.1:8000 --grpc 127.0.0.1:50051 \\
        --key KEY --agent tenant/agent --seed 1

`fuzz.run.fuzz` is the same run as a function, for the test suite (tests/e2e/test_fuzz.py).
"""
