# The two commands: `make run` and `make test`. Each does all of its own set-up.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: run test setup lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

run: setup
	./scripts/run.sh

test: setup
	./scripts/test.sh

lint: setup
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) var
