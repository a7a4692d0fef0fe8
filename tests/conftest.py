"""Test configuration: the Keras backend and quiet TensorFlow logs are set before any import."""

import os

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
