"""Deployment helpers: SavedModel with a named serving signature, and TFLite conversion.

TensorFlow backend only (`KERAS_BACKEND=tensorflow`): on JAX and PyTorch both functions
raise a `RuntimeError` saying so (use `model.export()` there). The exported artifacts are standalone: they are served by plain
TensorFlow (`tf.saved_model.load`, TF Serving, the TFLite interpreter) without
keras_normkit installed, because every keras_normkit layer is traced into TensorFlow ops.
"""

import os
import re
import tempfile

import keras

from keras_normkit._validation import check_bool
from keras_normkit.backend import keras_compat
from keras_normkit.backend.optional import import_tensorflow

__all__ = ["export_saved_model", "convert_to_tflite"]


def _require_tensorflow(function_name):
    tf = import_tensorflow(f"`{function_name}`")
    if keras.backend.backend() != "tensorflow":
        raise RuntimeError(
            f"`{function_name}` needs the TensorFlow backend (KERAS_BACKEND=tensorflow). "
            f"Received backend: {keras.backend.backend()}. On other backends use "
            "`model.export()` directly."
        )
    return tf


def _validate_model(model, function_name):
    if not isinstance(model, keras.Model):
        raise TypeError(
            f"`{function_name}` expects a `keras.Model`. Received: {type(model).__name__}"
        )
    if not model.built:
        raise ValueError(
            f"`{function_name}` needs a built model (call it on data or give it an Input "
            f"first). Received an unbuilt model: {model.name!r}"
        )


def export_saved_model(model, path, input_signature=None, signature_name="serving_default"):
    """Export `model`'s inference function as a SavedModel with a named serving signature.

    Wraps `model.export()` (through `keras.export.ExportArchive`) so the forward pass is
    available both as the `serve` endpoint and as the signature `signature_name` (what TF
    Serving's `signature_name` selects; `"serving_default"` is what it uses when none is
    given). Inputs keep the model's input names and unknown dimensions (batch, time) stay
    dynamic.

    Args:
        model: A built `keras.Model`.
        path: Directory to write the SavedModel to.
        input_signature: Optional structure of `keras.InputSpec`/`tf.TensorSpec` for the
            inputs; inferred from the model when `None`.
        signature_name: Name of the serving signature, a Python identifier.

    Returns:
        `path`.

    Example:

    ```python
    export_saved_model(model, "/tmp/snn", signature_name="predict")
    served = tf.saved_model.load("/tmp/snn")
    outputs = served.signatures["predict"](**inputs)  # or served.serve(x)
    ```
    """
    _require_tensorflow("export_saved_model")
    _validate_model(model, "export_saved_model")
    if not isinstance(signature_name, str) or not re.fullmatch(r"[A-Za-z_]\w*", signature_name):
        raise ValueError(
            "`signature_name` must be a Python identifier. "
            f"Received: signature_name={signature_name!r}"
        )
    if input_signature is None:
        input_signature = keras_compat.export_input_signature(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    function = archive.add_endpoint("serve", model.__call__, input_signature)
    if signature_name != "serve":
        archive.add_endpoint(signature_name, function)
    archive.write_out(str(path), verbose=False)
    return path


def convert_to_tflite(model, path, optimizations=None, allow_select_tf_ops=False):
    """Convert `model` to a TFLite flatbuffer written to `path`.

    The model is first exported as a SavedModel (so its inference graph is what gets
    converted), then converted with `tf.lite.TFLiteConverter` using TFLite built-in ops
    only, unless `allow_select_tf_ops=True`. When an op cannot be converted, the error
    names the op and the Keras layer(s) that produce it, instead of the converter's raw log.

    Args:
        model: A built `keras.Model`.
        path: File to write the `.tflite` model to.
        optimizations: Optional list of `tf.lite.Optimize` values (e.g.
            `[tf.lite.Optimize.DEFAULT]` for dynamic-range quantization).
        allow_select_tf_ops: If `True`, ops without a TFLite built-in kernel are kept as
            TensorFlow ops (`tf.lite.OpsSet.SELECT_TF_OPS`, next to the built-in ops), e.g.
            the TensorList ops of a recurrent loop. The flatbuffer then needs a TFLite
            runtime with the Flex delegate (`tensorflow-lite-select-tf-ops` on Android);
            the default `False` keeps it runnable by every TFLite interpreter.

    Returns:
        The flatbuffer as `bytes` (also written to `path`).

    Example:

    ```python
    flatbuffer = convert_to_tflite(model, "/tmp/model.tflite")
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    ```
    """
    tf = _require_tensorflow("convert_to_tflite")
    _validate_model(model, "convert_to_tflite")
    allow_select_tf_ops = check_bool("allow_select_tf_ops", allow_select_tf_ops)

    def convert(saved, select_tf_ops):
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if select_tf_ops:
            converter.target_spec.supported_ops.append(tf.lite.OpsSet.SELECT_TF_OPS)
        if optimizations:
            converter.optimizations = list(optimizations)
        return converter.convert()

    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "saved_model")
        model.export(saved, verbose=False)
        try:
            flatbuffer = convert(saved, allow_select_tf_ops)
        except Exception as error:  # the converter raises ConverterError with a long log
            # Only on failure: find out whether the option would help, so the message can say.
            select_would_convert = None
            if not allow_select_tf_ops:
                try:
                    convert(saved, True)
                    select_would_convert = True
                except Exception:
                    select_would_convert = False
            raise ValueError(
                _describe_conversion_failure(
                    model, str(error), allow_select_tf_ops, select_would_convert
                )
            ) from error
    with open(path, "wb") as f:
        f.write(flatbuffer)
    return flatbuffer


def _batch_is_dynamic(model):
    """True/False when the model's inputs say whether the batch dimension is dynamic, else None."""
    try:
        inputs = keras.tree.flatten(model.inputs)
    except (AttributeError, ValueError):
        return None
    if not inputs:
        return None
    return any(len(x.shape) == 0 or x.shape[0] is None for x in inputs)


def _describe_conversion_failure(
    model, message, allow_select_tf_ops=False, select_would_convert=None
):
    """Name the unconvertible ops and the layers they come from, from the converter's log."""
    ops = sorted(set(re.findall(r"'tf\.([A-Za-z0-9]+)' op (?:is neither|requires)", message)))
    ops = ops or sorted(set(re.findall(r"\btf\.([A-Z][A-Za-z0-9]+)\(", message)))
    layer_names = {layer.name for layer in keras_compat.nested_layers(model)}
    layers = set()
    # Locations look like fused["Erfinv:", "sequential_1/my_layer_1/erfinv/Erfinv@..."].
    for op, location in re.findall(r'fused\["(\w+):", "([^"@]+)', message):
        if ops and op not in ops:
            continue
        for part in location.split("/"):
            for candidate in (part, re.sub(r"_\d+$", "", part)):
                if candidate in layer_names:
                    layers.add(candidate)
    op_text = ", ".join(ops) if ops else "an op"
    layer_text = ", ".join(sorted(layers)) if layers else "unknown (see the converter log)"
    first_line = message.strip().splitlines()[0] if message.strip() else ""
    hint = ""
    if any(op.startswith("TensorList") for op in ops):
        batch = ""
        if _batch_is_dynamic(model):
            batch = " (here the batch dimension is dynamic, so neither is the element shape)"
        hint = (
            " TensorList ops come from a recurrent loop stepping over time: it keeps its "
            "per-step values in a TensorList without a static element shape"
            f"{batch}, which TFLite's built-in ops cannot lower (Keras's own LSTM fails the "
            "same way)."
        )
        alternative = ", or use QRN's parallel implementation (no loop)"
    else:
        alternative = ""
    if allow_select_tf_ops or select_would_convert is False:
        given = "was given" if allow_select_tf_ops else "would not help either"
        remedy = (
            " It is not among the TensorFlow ops TFLite can select (allow_select_tf_ops=True "
            f"{given}): replace the op in the layer{alternative}, or register a TFLite "
            "custom op."
        )
    else:
        checked = " (checked: the model converts that way)" if select_would_convert else ""
        remedy = (
            " Pass `allow_select_tf_ops=True` to `convert_to_tflite` to keep it as a "
            f"TensorFlow op{checked}; the TFLite runtime then needs the Flex delegate"
            f"{alternative}."
        )
    return (
        f"TFLite cannot convert model {model.name!r}: op {op_text} (from layer {layer_text}) "
        f"has no TFLite built-in kernel.{hint}{remedy} Converter said: {first_line[:300]}"
    )
