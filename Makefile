# The two commands of the quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 3
export TF_ENABLE_ONEDNN_OPTS ?= 0
export PYTHONHASHSEED ?= 0

.PHONY: demo test test-slow test-all lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.installed: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -e .
	touch $@

$(VENV)/.installed-dev: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -e ".[dev]"
	touch $(VENV)/.installed $@

demo: $(VENV)/.installed
	$(BIN)/python examples/quickstart.py

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m "not slow" -q -p no:cacheprovider

test-slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m slow -q -p no:cacheprovider

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

bench: $(VENV)/.installed-dev
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
