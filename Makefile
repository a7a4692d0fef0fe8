# The two commands of the quick start: `make demo` and `make test`. CONTRIBUTING.md lists the rest.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 3
export TF_ENABLE_ONEDNN_OPTS ?= 0
export PYTHONHASHSEED ?= 0
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider

.PHONY: demo test test-slow test-jax docs lint format format-check dist smoke-wheel bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# `make demo` installs exactly what a user installs to run the examples: the package and the
# `examples` extra (scikit-learn for the digits data), nothing the test suite happens to bring.
$(VENV)/.installed-examples: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -e ".[examples]"
	touch $@

$(VENV)/.installed-dev: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -e ".[dev]"
	touch $(VENV)/.installed-examples $@

demo: $(VENV)/.installed-examples
	$(BIN)/python examples/quickstart.py

# The fast suite, docstring examples (tests/test_docstrings.py) included.
test: $(VENV)/.installed-dev
	$(PYTEST) -m "not slow"

$(VENV)/.installed-jax: $(VENV)/.installed-dev
	$(BIN)/python -m pip install -e ".[dev,jax]"
	touch $@

# The backend-agnostic tests (layers, cells, activations, schedules, regularizers,
# constraints, initializers, metrics, callbacks) on the JAX backend; TF-only tests skip.
JAX_TESTS := $(wildcard tests/layers tests/test_activations.py tests/test_self_normalization.py \
	tests/test_schedules.py tests/test_regularizers.py tests/test_constraints.py \
	tests/test_initializers.py tests/test_metrics.py tests/callbacks tests/test_compilation.py)

test-jax: $(VENV)/.installed-jax
	KERAS_BACKEND=jax $(PYTEST) -m "not slow" $(JAX_TESTS)

test-slow: $(VENV)/.installed-dev
	$(PYTEST) -m slow

# The API reference (mkdocs + mkdocstrings); --strict turns every broken reference into an error.
docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict --site-dir site

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .

format-check: $(VENV)/.installed-dev
	$(BIN)/ruff format --check .

format: $(VENV)/.installed-dev
	$(BIN)/ruff format .

# The release artefacts: sdist and wheel, checked as PyPI would check them.
dist: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build --outdir dist .
	$(BIN)/twine check --strict dist/*

# Installs the built wheel into a brand-new venv and runs a smoke test from outside the source
# tree, so nothing can pass because the checkout is on sys.path.
smoke-wheel: dist
	bash .ci/smoke_wheel.sh dist

bench: $(VENV)/.installed-dev
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist site *.egg-info .pytest_cache .ruff_cache
