"""Test configuration: the Keras backend and quiet TensorFlow logs are set before any import."""

import os
import zlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import keras  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "keras_normkit",
    deadline=None,
    max_examples=25,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("keras_normkit")


def max_examples(n):
    """`n` hypothesis examples, a quarter of them (at least 4) on JAX: there every eager call
    with new shapes compiles again (the same code runs the full count on TensorFlow and
    PyTorch)."""
    return max(4, n // 4) if keras.backend.backend() == "jax" else n


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _seeded(request):
    """Each test starts from a random state of its own, whatever ran before it in its
    process: Python's, NumPy's and the backend's generators seeded from a hash of the test's
    id. Under pytest-xdist the tests a worker runs before a given test change from run to
    run, so a test drawing weights or data from the global generators met other values on
    each CI run; now its outcome no longer depends on the order the tests run in."""
    keras.utils.set_random_seed(zlib.crc32(request.node.nodeid.encode()) % 2**31)


@pytest.fixture(autouse=True)
def _float32_policy():
    """Each test starts and ends with the float32 policy, even if a mixed-precision test fails."""
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


# Backend markers. Every test runs on every backend (`make test`, `make test-jax`,
# `make test-torch` run the same files) except those marked here, which are skipped where
# their backend feature does not exist; the selection is by marker, not by a list of files.
requires_tensorflow = pytest.mark.requires_tensorflow
requires_xla = pytest.mark.requires_xla

_SKIP_REASONS = {
    "requires_tensorflow": (
        "TensorFlow-only test (tf.GradientTape, tf.function, SavedModel/TFLite export, "
        "tf.data or tf.distribute)",
        lambda backend: backend != "tensorflow",
    ),
    "requires_xla": (
        "XLA test (jit_compile=True): PyTorch has no XLA; its jit_compile is torch.compile",
        lambda backend: backend not in ("tensorflow", "jax"),
    ),
}


def pytest_collection_modifyitems(config, items):
    backend = keras.backend.backend()
    for item in items:
        for name, (reason, skip_on) in _SKIP_REASONS.items():
            if item.get_closest_marker(name) is not None and skip_on(backend):
                item.add_marker(pytest.mark.skip(reason=f"{reason}; backend is {backend}"))


# The CI matrix (CONTRIBUTING.md, "The CI matrix"). TensorFlow runs the whole fast suite
# (`make test`). JAX, PyTorch and the oldest Keras run the *backend suite*
# (`pytest --backend-suite`): every test of keras_normkit's own code, without the tests of the
# scripts, documents and benchmarks around it, which do not depend on the backend (they run
# examples, build pages, compare tables with JSON files) but for one end-to-end example per
# backend. `tests/test_ci_matrix.py` checks that every module of keras_normkit is imported
# by a test of the backend suite.
TENSORFLOW_SUITE_ONLY = (
    "examples/",
    "benchmarks/",
    "test_docs.py",
    "test_docstrings.py",
    "test_guides.py",
    "test_notebooks.py",
    "test_internals.py",
    "test_imports.py",
    "test_ci_matrix.py",
    "test_cross_backend.py",
)
# The end-to-end example every backend runs (it trains, calibrates and reports).
EVERY_BACKEND = ("examples/test_calibration_benchmarks.py",)
TESTS = os.path.dirname(os.path.abspath(__file__))


def pytest_addoption(parser):
    parser.addoption(
        "--backend-suite",
        action="store_true",
        help="leave out the backend-independent tests of scripts, documents and benchmarks",
    )


def in_backend_suite(relative_path):
    """Whether the test file at `relative_path` (from `tests/`, with `/`) runs in the backend
    suite."""
    if relative_path in EVERY_BACKEND:
        return True
    return not any(
        relative_path == entry or (entry.endswith("/") and relative_path.startswith(entry))
        for entry in TENSORFLOW_SUITE_ONLY
    )


def pytest_ignore_collect(collection_path, config):
    if not config.getoption("--backend-suite") or not collection_path.is_file():
        return None
    relative = os.path.relpath(str(collection_path), TESTS).replace(os.sep, "/")
    if relative.startswith("..") or not relative.endswith(".py"):
        return None
    return None if in_backend_suite(relative) else True
