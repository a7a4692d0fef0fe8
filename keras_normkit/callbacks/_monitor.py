"""Shared helpers of the monitoring callbacks: direction of a metric, warn-once lookup."""

import warnings

from keras_normkit.backend import keras_compat

_MAXIMIZED = ("acc", "auc", "precision", "recall", "f1", "iou")


def _flat_metrics(model):
    found = []
    for metric in getattr(model, "metrics", []) or []:
        inner = getattr(metric, "metrics", None)
        if isinstance(inner, (list, tuple)):
            found.extend(inner)
        found.append(metric)
    return found


def resolve_sign(callback, monitor, mode, model):
    """+1 if smaller values of `monitor` are better, -1 if larger ones are.

    `"auto"` follows Keras: losses are minimized, a compiled metric's own direction is used
    when it declares one, and accuracy-like names are maximized; otherwise it is an error.
    """
    if mode == "min":
        return 1.0
    if mode == "max":
        return -1.0
    name = monitor.removeprefix("val_")
    if name == "loss" or name.endswith("loss"):
        return 1.0
    for metric in _flat_metrics(model):
        direction = keras_compat.metric_direction(metric)
        if getattr(metric, "name", None) == name and direction is not None:
            return -1.0 if direction == "up" else 1.0
    if any(key in name for key in _MAXIMIZED):
        return -1.0
    if any(key in name for key in ("error", "mse", "mae", "crossentropy", "hinge")):
        return 1.0
    raise ValueError(
        f"{type(callback).__name__} received monitor={monitor!r}, whose direction cannot be "
        "inferred. Pass mode='min' or mode='max'."
    )


def get_monitor_value(callback, logs, key):
    """`logs[key]` as a float, or `None` with a warning the first time it is missing."""
    logs = logs or {}
    value = logs.get(key)
    if value is None:
        warned = callback.__dict__.setdefault("_warned_missing", set())
        if key not in warned:
            warned.add(key)
            warnings.warn(
                f"{type(callback).__name__} is conditioned on metric `{key}`, which is not "
                f"available. Available metrics are: {', '.join(logs)}.",
                stacklevel=3,
            )
        return None
    return float(value)
