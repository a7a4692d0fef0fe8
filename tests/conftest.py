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


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _float32_policy():
    """Each test starts and ends with the float32 policy, even if a mixed-precision test fails."""
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")


requires_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason=(
        "TensorFlow-only test (tf.GradientTape, tf.function, SavedModel/TFLite export, "
        "tf.data or tf.distribute)"
    ),
)
