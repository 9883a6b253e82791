"""The platform on many processes, and what happens to it when they die.

`faults.cluster` starts the production profile as named processes (daphne web processes,
Celery workers, beat, gRPC sidecars, HAProxy in front) on throwaway PostgreSQL and Redis, and
stops, kills and restarts any of them, the servers included. `python -m faults` runs the fault
suite on it (docs/reliability.md); tests/e2e/test_topology.py, tests/e2e/test_faults.py and
bench/topology.py use the same cluster.
"""
