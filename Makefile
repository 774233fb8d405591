# Two commands a new user runs: `make demo` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
WORKDIR ?= runs/demo
PYTEST_ARGS ?=

.PHONY: demo test test-all venv clean

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	TF_CPP_MIN_LOG_LEVEL=2 $(PY) launch/demo.py --workdir=$(WORKDIR)

# Fast suite plus the small set of end-to-end tests marked `ci`.
test: venv
	$(PY) -m pytest -q -m "not slow or ci" $(PYTEST_ARGS)

# Everything, including slow end-to-end tests.
test-all: venv
	$(PY) -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) runs
