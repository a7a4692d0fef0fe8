"""Imports of optional dependencies, with an error that names the extra to install.

The core of keras_normkit needs only Keras and NumPy. TensorFlow is an extra
(`pip install "keras_normkit[tensorflow]"`): SavedModel/TFLite export, `tf.data` streaming
and the XLA-cluster training path use it. A function that needs it calls
`import_tensorflow(feature)` at call time, never at import time, so `import keras_normkit`
works in an environment without TensorFlow.
"""

import importlib

EXTRAS = {"tensorflow": "tensorflow", "tensorboard": "tensorboard", "sklearn": "examples"}


def import_optional(module, feature):
    """`importlib.import_module(module)`, or an `ImportError` naming `feature` and the extra."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        extra = EXTRAS.get(module.split(".")[0], module)
        raise ImportError(
            f"{feature} needs the `{module.split('.')[0]}` package, which is not installed. "
            f'Install it with: pip install "keras_normkit[{extra}]"'
        ) from error


def import_tensorflow(feature):
    """The `tensorflow` module, or an `ImportError` saying `feature` needs the extra."""
    return import_optional("tensorflow", feature)
