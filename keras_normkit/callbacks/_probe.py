"""The probe batch of a callback in its config (`DivergenceGuard`, `ActivationStatistics`,
`GradientStatistics`): arrays as nested lists, and back."""

import numpy as np


def probe_to_config(value):
    """An array (NumPy, a tensor, nested lists) as nested lists for `get_config`; `None` kept.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.callbacks._probe import probe_to_config
    >>> probe_to_config(np.eye(2, dtype="float32")), probe_to_config(None)
    ([[1.0, 0.0], [0.0, 1.0]], None)
    """
    return None if value is None else np.asarray(value).tolist()


def probe_from_config(value):
    """The inverse of `probe_to_config`: a NumPy array, float32 if it holds floats.

    Float32 is what the model computes in by default (nested lists come back as float64);
    integers (labels, token ids) keep their integer type.

    Example:

    >>> from keras_normkit.callbacks._probe import probe_from_config
    >>> probe_from_config([[1.0, 0.0]]).dtype, probe_from_config([3, 1]).dtype.kind
    (dtype('float32'), 'i')
    """
    if value is None:
        return None
    array = np.asarray(value)
    return array.astype("float32") if array.dtype.kind == "f" else array
