"""`load_tfa_model`: reads a tf.keras 2 `.h5` file, translates it, loads it with Keras."""

import json
import os
import tempfile
import warnings

import keras
import numpy as np

from keras_normkit._validation import check_bool
from keras_normkit.migration._config import _translate, _Translation
from keras_normkit.migration._training import _compile
from keras_normkit.migration._weights import (
    _strings,
    _tfa_data_init,
    _variables_by_name,
    _write_translated,
)


def _check_path(path):
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            "`path` must be the path (a str or os.PathLike) of a `.h5` file written by "
            f"tf.keras 2. Received: path={path!r} of type {type(path).__name__}"
        )
    return os.fspath(path)


def _check_custom_objects(custom_objects):
    if custom_objects is None:
        return {}
    if not isinstance(custom_objects, dict) or not all(
        isinstance(key, str) for key in custom_objects
    ):
        raise TypeError(
            "`custom_objects` must be None or a dict mapping names (str) to objects. "
            f"Received: custom_objects={custom_objects!r} of type "
            f"{type(custom_objects).__name__}"
        )
    return custom_objects


def _read_source(path):
    """The `model_config` and `training_config` (dicts or `None`) and the optimizer's
    weights `{name: array}` of a tf.keras 2 `.h5` model file; a clear error otherwise."""
    import h5py

    if os.path.isdir(path):
        raise ValueError(
            f"{path} is a directory (a SavedModel?): load_tfa_model reads tf.keras 2 `.h5` "
            "files. Load a tf.keras 2 SavedModel for inference with "
            "`keras.layers.TFSMLayer(path, call_endpoint='serving_default')` (TensorFlow "
            "backend)."
        )
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such file: {path}")
    if not h5py.is_hdf5(path):
        raise ValueError(
            f"{path} is not an HDF5 file: load_tfa_model reads `.h5` models written by "
            "tf.keras 2 (`model.save('model.h5')`). A Keras 3 `.keras` file loads with "
            "`keras.models.load_model`."
        )
    with h5py.File(path, "r") as source:
        raw = source.attrs.get("model_config")
        if raw is None or "model_weights" not in source:
            raise ValueError(
                f"{path} holds no model (no `model_config` attribute and `model_weights` "
                "group): load_tfa_model reads files written by tf.keras 2's "
                "`model.save('model.h5')`, not weights-only files (`save_weights`) or other "
                "HDF5 files."
            )
        version = source.attrs.get("keras_version", b"")
        version = version.decode("utf8") if isinstance(version, bytes) else str(version)
        if not version.startswith("2."):
            raise ValueError(
                f"{path} was not written by tf.keras 2 (its keras_version is "
                f"{version or 'missing'!r}): load_tfa_model translates the TensorFlow "
                "Addons objects of tf.keras 2 files. A file written by Keras 3 loads with "
                "`keras.models.load_model`."
            )

        def parse(value):
            if value is None:
                return None
            return json.loads(value.decode("utf8") if isinstance(value, bytes) else value)

        optimizer_weights = {}
        if "optimizer_weights" in source:
            group = source["optimizer_weights"]
            for name in _strings(group.attrs.get("weight_names", [])):
                optimizer_weights[name] = np.asarray(group[name])
        return parse(raw), parse(source.attrs.get("training_config")), optimizer_weights


def load_tfa_model(path, compile=True, custom_objects=None, data_init_batch=None):
    """Loads a tf.keras 2 `.h5` model that uses TensorFlow Addons objects into Keras 3.

    Every TF-Addons object is replaced by the keras_normkit or Keras 3 object that computes
    the same function, with its arguments translated one by one and its weights mapped
    (`tfa_coverage()` gives the outcome for each of the 98 objects TF-Addons 0.23
    registers; docs/migration.md has the table and what differs, measured against
    TF-Addons 0.23). Among them:

    - `Addons>WeightNormalization` around `Dense`/`Conv1D`/`Conv2D`/`Conv3D` ->
      `keras_normkit.layers.WeightNormalization` (same `data_init`; `g`, `v` and the bias
      mapped, TF-Addons' `initialized` flag kept);
    - `Addons>LayerNormLSTMCell` -> `keras_normkit.layers.LayerNormLSTMCell(...,
      carry_normalized_state=True)`; `Addons>LayerNormSimpleRNNCell` ->
      `keras_normkit.layers.LayerNormSimpleRNNCell`;
    - `Addons>FilterResponseNormalization` and `Addons>TLU` -> keras_normkit's;
      `Addons>GroupNormalization`, `Addons>InstanceNormalization` -> Keras's
      `GroupNormalization` (`groups=-1` for instance normalization);
      `Addons>SpectralNormalization` -> Keras's (the power-iteration vector kept);
      TF-Addons' adaptive poolings -> Keras's;
    - the activations `Addons>gelu` (`tfa_gelu`), `sparsemax` (`tfa_sparsemax`), `mish`,
      `hardshrink`, `softshrink`, `tanhshrink`, and the layers `Addons>GELU`,
      `Addons>Sparsemax`;
    - in the training config, the `Addons>*CyclicalLearningRate` schedules ->
      `keras_normkit.schedules.CyclicalLearningRate`; the sigmoid focal cross-entropy ->
      Keras's `BinaryFocalCrossentropy`; the optimizer wrappers `Addons>Lookahead`,
      `MovingAverage` and `SWA` -> the optimizer they wrap.

    Any other `Addons>` object in the model raises a `ValueError` naming it, unless
    `custom_objects` maps its name to a Keras 3 replacement. With `compile=True` the model
    is compiled from the file's training config with what can be translated (the optimizer
    and its settings, its learning-rate schedule, Keras's losses and metrics) and the
    optimizer's step count and moments are restored, so training continues as in
    tf.keras 2; whatever cannot be translated (a TF-Addons loss, metric or optimizer, an
    optimizer wrapper, a `scale_fn` that is not a constant) is named in one `UserWarning`
    and never stops the load: the model loads for inference. With `compile=False` the training config is not read.

    A `WeightNormalization` with `data_init=True` saved before its first call is not
    initialized yet: TF-Addons initializes it on the first batch it is called on (in
    `predict` too); keras_normkit's initializes on its first training batch, with the
    paper's formula. Pass that first batch as `data_init_batch` to run TF-Addons'
    initialization (its formula) at load time instead.

    A SavedModel directory is not read here: load it for inference with
    `keras.layers.TFSMLayer(path, call_endpoint="serving_default")` (TensorFlow backend).

    Args:
        path: Path of a `.h5` file written by tf.keras 2 (`model.save("model.h5")`).
        compile: Boolean, whether to compile the model from the file's training config.
            Default: `True`.
        custom_objects: Optional dict mapping names to objects: `Addons>` names to a Keras 3
            replacement (a layer class, a function, a `LearningRateSchedule` instance, a
            loss or metric), other names as in `keras.models.load_model`.
        data_init_batch: Optional input batch (what `model.predict` takes) on which to run
            TF-Addons' data-dependent initialization of the `WeightNormalization` layers
            saved before it ran, as TF-Addons' first call would have. Default: `None`
            (they initialize on their first training batch, keras_normkit's way).

    Returns:
        A Keras 3 model.

    Raises:
        TypeError: if an argument has the wrong type.
        FileNotFoundError: if `path` does not exist.
        ValueError: if `path` is not a tf.keras 2 `.h5` model file, or if it uses a
            TF-Addons object with no equivalent (all of them are named).

    Example:

    >>> import pathlib, keras_normkit
    >>> from keras_normkit.migration import load_tfa_model
    >>> root = pathlib.Path(keras_normkit.__file__).parents[1]
    >>> path = root / "tests" / "migration" / "fixtures" / "layer_norm_lstm.h5"
    >>> model = load_tfa_model(path, compile=False)
    >>> cell = model.layers[0].cell
    >>> type(cell).__name__, cell.carry_normalized_state, cell.norm_epsilon
    ('LayerNormLSTMCell', True, 0.001)
    """
    path = _check_path(path)
    compile = check_bool("compile", compile)
    custom_objects = _check_custom_objects(custom_objects)
    model_config, training_config, optimizer_weights = _read_source(path)
    state = _Translation(custom_objects)
    model_config = _translate(model_config, state)
    if state.unsupported:
        raise state.unsupported_error(path)

    import h5py

    handle, temporary = tempfile.mkstemp(suffix=".h5")
    os.close(handle)
    try:
        with h5py.File(path, "r") as source:
            _write_translated(source, temporary, model_config, state)
        model = keras.models.load_model(
            temporary, custom_objects=state.custom_objects, compile=False
        )
    finally:
        os.remove(temporary)
    variables = _variables_by_name(model, state)
    for name in state.frozen:  # TF-Addons' norm has no shift: it stays zero
        if name in variables:
            variables[name].trainable = False
    if state.pending_init:
        if data_init_batch is None:
            names = ", ".join(f"'{name}'" for name in sorted(state.pending_init))
            state.notes.append(
                f"the Addons>WeightNormalization {names} were saved before their "
                "data-dependent initialization ran: TF-Addons would initialize them on the "
                "first batch they see, even in predict(); keras_normkit's "
                "WeightNormalization initializes on its first training batch, with the "
                "paper's formula. Pass that batch as `data_init_batch` to run TF-Addons' "
                "initialization instead"
            )
        else:
            _tfa_data_init(model, state, data_init_batch)
    elif data_init_batch is not None:
        state.notes.append(
            "`data_init_batch` is not used: no Addons>WeightNormalization of the file awaits "
            "its data-dependent initialization"
        )
    if compile and training_config:
        _compile(model, training_config, optimizer_weights, variables, state)
    if state.notes:
        warnings.warn(
            f"load_tfa_model({os.path.basename(path)!r}): " + "; ".join(state.notes) + ".",
            UserWarning,
            stacklevel=2,
        )
    return model
