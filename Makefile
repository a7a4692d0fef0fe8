# The two commands of the quick start: `make demo` and `make test`. CONTRIBUTING.md lists the rest.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
export KERAS_BACKEND ?= tensorflow
export TF_CPP_MIN_LOG_LEVEL ?= 3
export TF_ENABLE_ONEDNN_OPTS ?= 0
export PYTHONHASHSEED ?= 0
# Tests run in parallel (pytest-xdist), one worker per core by default; `make test WORKERS=0`
# runs them in one process.
WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -q -p no:cacheprovider -n $(WORKERS)
# Extra pip arguments for the installs: CI's constraints (the CPU build of torch we test with,
# .ci/constraints.txt); test-keras-min adds its own.
CONSTRAINTS := -c .ci/constraints.txt
PIP_ARGS ?= $(CONSTRAINTS)

.PHONY: demo test test-slow test-jax test-torch test-keras-min test-keras-nightly keras-min-venv keras-nightly-venv docs lint format format-check dist smoke-wheel bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# `make demo` installs exactly what a user installs to run the examples: the package with the
# `tensorflow` extra (the demo serves a SavedModel) and the `examples` extra (scikit-learn for
# the digits data), nothing the test suite happens to bring.
$(VENV)/.installed-examples: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install $(PIP_ARGS) -e ".[tensorflow,examples]"
	touch $@

# `dev` brings the three backends, so every backend's tests run from one environment.
$(VENV)/.installed-dev: $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install $(PIP_ARGS) -e ".[dev]"
	touch $(VENV)/.installed-examples $@

demo: $(VENV)/.installed-examples
	$(BIN)/python examples/quickstart.py

# The fast suite, docstring examples (tests/test_docstrings.py) included. `SUITE` selects
# the backend suite for the oldest Keras (below).
SUITE ?=
test: $(VENV)/.installed-dev
	$(PYTEST) $(SUITE) -m "not slow"

# The other backends run the *backend suite* (CONTRIBUTING.md, "The CI matrix";
# tests/conftest.py): every test of keras_normkit's own code, without the backend-independent
# tests of scripts, documents and benchmarks (which run on TensorFlow), but for one
# end-to-end example. Tests marked `requires_tensorflow` (and, on PyTorch, `requires_xla`)
# skip themselves there.
BACKEND_SUITE := --backend-suite
# JAX runs it in four pytest runs (every file still runs once): a single JAX process that
# had run ~500 tests segfaulted inside XLA compilation twice (once in test_linear_scan, once
# in test_constraints; each file passes on its own). The jax2tf export tests, which load
# TensorFlow into the JAX process, run apart.
JAX_SPLIT := tests/layers tests/ops tests/backend tests/callbacks tests/calibration
test-jax: $(VENV)/.installed-dev
	KERAS_BACKEND=jax $(PYTEST) $(BACKEND_SUITE) -m "not slow" -k "not jax_export" tests/layers
	KERAS_BACKEND=jax $(PYTEST) $(BACKEND_SUITE) -m "not slow" -k "not jax_export" tests/ops tests/backend tests/callbacks tests/calibration
	KERAS_BACKEND=jax $(PYTEST) $(BACKEND_SUITE) -m "not slow" -k "not jax_export" tests $(addprefix --ignore=,$(JAX_SPLIT))
	KERAS_BACKEND=jax $(PYTEST) $(BACKEND_SUITE) -m "not slow" -k "jax_export"

test-torch: $(VENV)/.installed-dev
	KERAS_BACKEND=torch $(PYTEST) $(BACKEND_SUITE) -m "not slow"

# The backend suite against the oldest Keras we support (keras 3.10 with TensorFlow 2.20, the
# newest TensorFlow that accepts it), in its own venv. `make keras-min-venv` only installs it
# (.ci/run does that in the background while other tests run).
KERAS_MIN_VENV := .venv-keras-min
KERAS_MIN_PIP := $(CONSTRAINTS) -c .ci/keras-min-constraints.txt
keras-min-venv:
	$(MAKE) $(KERAS_MIN_VENV)/.installed-dev VENV=$(KERAS_MIN_VENV) PIP_ARGS="$(KERAS_MIN_PIP)"
	$(KERAS_MIN_VENV)/bin/python -c "import keras; assert keras.__version__.startswith('3.10'), keras.__version__"

test-keras-min: keras-min-venv
	$(MAKE) test VENV=$(KERAS_MIN_VENV) PIP_ARGS="$(KERAS_MIN_PIP)" SUITE="$(BACKEND_SUITE)"

# The layers, engines and backend code against keras-nightly (TensorFlow backend), in its own
# venv: a Keras release that changes what we rely on fails here before users see it. The venv
# takes the newest nightly when it is made (`make keras-nightly-venv`; `rm -rf
# .venv-keras-nightly` for a newer one); `make test-keras-nightly
# KERAS_NIGHTLY===3.16.0.dev2026102704` in a new venv pins one nightly.
KERAS_NIGHTLY ?=
NIGHTLY_VENV := .venv-keras-nightly
$(NIGHTLY_VENV)/.installed:
	$(PYTHON) -m venv $(NIGHTLY_VENV)
	$(NIGHTLY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(NIGHTLY_VENV)/bin/python -m pip install --quiet -e ".[tensorflow]" pytest pytest-xdist hypothesis
	$(NIGHTLY_VENV)/bin/python -m pip uninstall --quiet --yes keras
	$(NIGHTLY_VENV)/bin/python -m pip install --quiet --pre --no-deps --force-reinstall "keras-nightly$(KERAS_NIGHTLY)"
	$(NIGHTLY_VENV)/bin/python -c "import keras; print('keras', keras.__version__); assert '.dev' in keras.__version__"
	touch $@

keras-nightly-venv: $(NIGHTLY_VENV)/.installed

test-keras-nightly: $(NIGHTLY_VENV)/.installed
	$(NIGHTLY_VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(WORKERS) -m "not slow" tests/layers tests/ops tests/backend

# `--dist loadfile`: the tests of one file share a worker, so a module's fixture runs once (the
# two multi-process tests share five training runs; `--dist loadgroup` would group them by
# mark, but with pytest 9.2 it silently stops grouping: pytest-xdist issue #1386).
# `--durations`: CI's log shows where the slow suite's time goes.
test-slow: $(VENV)/.installed-dev
	$(PYTEST) --dist loadfile -m slow --durations=25

# The API reference (mkdocs + mkdocstrings); --strict turns every broken reference into an error.
docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

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

# The benchmarks run with TensorFlow's default oneDNN setting (on for x86 CPUs), as users get
# it, not with the tests' TF_ENABLE_ONEDNN_OPTS=0 above.
bench: $(VENV)/.installed-dev
	for f in benchmarks/bench_*.py; do env -u TF_ENABLE_ONEDNN_OPTS $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) $(KERAS_MIN_VENV) $(NIGHTLY_VENV) build dist site *.egg-info .pytest_cache .ruff_cache
