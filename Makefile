# The two commands: `make run` and `make test`. Each does all of its own set-up.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test setup lint clean bench lock protos fuzz faults bench-topology bench-noisy

setup: $(STAMP)

# The versions constraints.txt pins (`make lock`), so that every machine and the image run the
# same ones; a change to either file installs again.
$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev,bench]'
	touch $(STAMP)

# `make lock`: constraints.txt again from pyproject.toml, each package at the newest version its
# range allows (scripts/lock.py; Python 3.11, the image's). Then `make setup` installs them.
lock:
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python scripts/lock.py

# run.sh runs as a job of its own in the foreground of make's terminal, if there is one
# (scripts/foreground.py), whatever the output goes to: Ctrl-C reaches run.sh alone, which stops
# everything and exits 0, and make with it. (An interrupt sent to make's own process, as
# `kill -INT` to its process group does without a terminal, still stops everything, but make
# then says 130: GNU make re-raises every interrupt it receives once its recipe has ended.)
run: setup
	@$(VENV)/bin/python scripts/foreground.py ./scripts/run.sh

test: setup
	./scripts/test.sh

# ruff, and the import contracts of docs/architecture.md (import-linter, pyproject.toml).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV) var

# The gRPC messages and the `a2a.A2AService` description of bindings/protos, regenerated from
# their .proto files (the generated modules are checked in).
protos: setup
	bindings/protos/generate.sh

# `make bench`: the platform beside the a2a-sdk's own server, every scenario (bench/compare.py,
# about 15 minutes), then the noisy neighbour (bench/noisy_neighbour.py, about 6 minutes);
# BENCH_ARGS="--quick" for a short run of both, "--embedded" to add that profile to the first.
bench: setup
	$(VENV)/bin/python bench/compare.py $(BENCH_ARGS)
	$(VENV)/bin/python bench/noisy_neighbour.py $(filter --quick,$(BENCH_ARGS)) $(NOISY_ARGS)

# `make bench-noisy`: the noisy neighbour alone, one tenant's latency while another bursts, with
# and without a plan limiting the noisy one (bench/noisy_neighbour.py, docs/benchmarks.md);
# NOISY_ARGS="--quick" for a short run, e.g. "--platform-env A2A_LANE_WINDOW=0 --variants none".
bench-noisy: setup
	$(VENV)/bin/python bench/noisy_neighbour.py $(NOISY_ARGS)

# `make faults`: the fault suite (faults/, docs/reliability.md): every fault, 20 trials each,
# on a cluster of its own behind HAProxy (about 20 minutes on 2 cores);
# FAULTS_ARGS="--trials 2 --only redis-restart,web-sigterm" for a part of it.
faults: setup
	$(VENV)/bin/python -m faults $(FAULTS_ARGS)

# `make bench-topology`: the platform on one process of each kind and on two, behind HAProxy
# (bench/topology.py, about 8 minutes); BENCH_ARGS="--quick" for a short run.
bench-topology: setup
	$(VENV)/bin/python bench/topology.py $(BENCH_ARGS)

# `make fuzz`: the fuzzer (python -m fuzz, docs/fuzzing.md) against a platform of its own, started
# as `make test` starts it: FUZZ_REQUESTS requests (default 10000) from FUZZ_SEED (default 1).
# `make test` runs the same test with 1,000.
fuzz: setup
	FUZZ_REQUESTS=$${FUZZ_REQUESTS:-10000} FUZZ_SEED=$${FUZZ_SEED:-1} ./scripts/test.sh \
	  tests/e2e/test_fuzz.py -k fuzzed_requests -s -p no:cacheprovider
