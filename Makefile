# The two commands: `make run` and `make test`. Each does all of its own set-up.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test setup lint clean bench

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[dev,bench]'
	touch $(STAMP)

run: setup
	./scripts/run.sh

test: setup
	./scripts/test.sh

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) var

# `make bench`: the platform beside the a2a-sdk's own server, every scenario (bench/compare.py,
# about 15 minutes); BENCH_ARGS="--quick" for a short run, "--embedded" to add that profile.
bench: setup
	$(VENV)/bin/python bench/compare.py $(BENCH_ARGS)
