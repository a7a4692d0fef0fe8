# The two commands of the quick start: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 3
export TF_ENABLE_ONEDNN_OPTS ?= 0
export PYTHONHASHSEED ?= 0

.PHONY: demo test test-slow test-jax lint bench clean

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

$(VENV)/.installed-jax: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -e ".[dev,jax]"
	touch $(VENV)/.installed $(VENV)/.installed-dev $@

# The backend-agnostic tests (layers, cells, activations, schedules, regularizers,
# constraints, initializers, metrics, callbacks) on the JAX backend; TF-only tests skip.
JAX_TESTS := $(wildcard tests/layers tests/test_activations.py tests/test_self_normalization.py \
	tests/test_schedules.py tests/test_regularizers.py tests/test_constraints.py \
	tests/test_initializers.py tests/test_metrics.py tests/callbacks tests/test_compilation.py)

test-jax: $(VENV)/.installed-jax
	KERAS_BACKEND=jax $(BIN)/python -m pytest -m "not slow" -q -p no:cacheprovider $(JAX_TESTS)

test-slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -m slow -q -p no:cacheprovider

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

bench: $(VENV)/.installed-dev
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache
