"""SavedModel / TFLite helpers: named signatures, standalone serving, clear conversion errors."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_normkit.layers import SELU, AlphaDropout
from tests.conftest import requires_tensorflow


def snn_model():
    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input((8,), name="features"),
            keras.layers.Dense(16, kernel_initializer="lecun_normal"),
            SELU(fixed_point=(0.1, 1.2)),
            AlphaDropout(0.1, fixed_point=(0.1, 1.2)),
            keras.layers.Dense(3),
        ]
    )


SERVE_SCRIPT = """
import json, sys
sys.modules["keras_normkit"] = None  # any attempt to import the library now fails
import numpy as np
import tensorflow as tf
served = tf.saved_model.load(sys.argv[1])
x = np.load(sys.argv[2])
out = served.signatures[sys.argv[3]](tf.constant(x))
(value,) = out.values()
np.save(sys.argv[4], value.numpy())
loaded = [m for m, mod in sys.modules.items() if m.startswith("keras_normkit") and mod]
print(json.dumps({"keras_normkit_imported": bool(loaded)}))
"""


def run_in_fresh_process(script, *args, cwd):
    """Run `script` in a new interpreter whose path cannot reach keras_normkit's sources."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run(
        [sys.executable, "-I", "-c", script, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@requires_tensorflow
def test_export_saved_model_named_signature_served_without_library(tmp_path):
    from keras_normkit.export import export_saved_model

    model = snn_model()
    x = np.random.default_rng(0).normal(size=(5, 8)).astype("float32")
    export_saved_model(model, tmp_path / "sm", signature_name="predict")
    np.save(tmp_path / "x.npy", x)
    info = run_in_fresh_process(
        SERVE_SCRIPT,
        str(tmp_path / "sm"),
        str(tmp_path / "x.npy"),
        "predict",
        str(tmp_path / "y.npy"),
        cwd=tmp_path,
    )
    assert info == {"keras_normkit_imported": False}
    expected = keras.ops.convert_to_numpy(model(x, training=False))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, atol=1e-6)


@requires_tensorflow
def test_export_default_signature_and_dynamic_batch(tmp_path):
    import tensorflow as tf

    from keras_normkit.export import export_saved_model

    model = snn_model()
    export_saved_model(model, tmp_path / "sm")
    served = tf.saved_model.load(str(tmp_path / "sm"))
    assert "serving_default" in served.signatures
    for batch in (1, 7):
        x = np.ones((batch, 8), "float32")
        (value,) = served.signatures["serving_default"](tf.constant(x)).values()
        np.testing.assert_allclose(value.numpy(), keras.ops.convert_to_numpy(model(x)), atol=1e-6)


@requires_tensorflow
def test_convert_to_tflite_matches_keras(tmp_path):
    import tensorflow as tf

    from keras_normkit.export import convert_to_tflite

    model = snn_model()
    x = np.random.default_rng(1).normal(size=(4, 8)).astype("float32")
    flatbuffer = convert_to_tflite(model, tmp_path / "m.tflite")
    assert (tmp_path / "m.tflite").read_bytes() == flatbuffer
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    index = interpreter.get_input_details()[0]["index"]
    interpreter.resize_tensor_input(index, x.shape)
    interpreter.allocate_tensors()
    interpreter.set_tensor(index, x)
    interpreter.invoke()
    out = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    np.testing.assert_allclose(out, keras.ops.convert_to_numpy(model(x)), atol=1e-5)


@keras.saving.register_keras_serializable(package="keras_normkit_tests")
class InverseErf(keras.layers.Layer):
    def call(self, x):
        return keras.ops.erfinv(keras.ops.tanh(x))


@requires_tensorflow
def test_tflite_error_names_op_and_layer(tmp_path):
    from keras_normkit.export import convert_to_tflite

    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(4), InverseErf(name="inverse_erf")]
    )
    with pytest.raises(ValueError, match=r"Erfinv.*inverse_erf"):
        convert_to_tflite(model, tmp_path / "m.tflite")


@requires_tensorflow
def test_bad_arguments(tmp_path):
    from keras_normkit.export import convert_to_tflite, export_saved_model

    with pytest.raises(TypeError, match="keras.Model"):
        export_saved_model(SELU(), tmp_path / "a")
    with pytest.raises(ValueError, match="signature_name"):
        export_saved_model(snn_model(), tmp_path / "b", signature_name="not valid")
    with pytest.raises(ValueError, match="built"):
        convert_to_tflite(keras.Sequential([keras.layers.Dense(2)]), tmp_path / "c")


@requires_tensorflow
def test_tflite_error_for_an_op_select_tf_ops_cannot_keep_either(tmp_path):
    from keras_normkit.export import convert_to_tflite

    # Erfinv has neither a TFLite kernel nor a Flex (select TF ops) kernel.
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(4), InverseErf(name="inverse_erf")]
    )
    for allow, given in [(False, "would not help either"), (True, "was given")]:
        with pytest.raises(ValueError) as info:
            convert_to_tflite(model, tmp_path / "m.tflite", allow_select_tf_ops=allow)
        message = str(info.value)
        assert "op Erfinv (from layer inverse_erf)" in message
        assert (
            f"not among the TensorFlow ops TFLite can select (allow_select_tf_ops=True {given})"
            in message
        )
        assert "batch" not in message.split("Converter said:")[0]  # no loop: nothing on batches
        assert not (tmp_path / "m.tflite").exists()


def _recurrent_model(batch_size):
    from keras_normkit.layers import LayerNormSimpleRNN

    keras.utils.set_random_seed(0)
    story = keras.Input((5, 3), batch_size=batch_size, name="story")
    return keras.Model(story, LayerNormSimpleRNN(4, name="recurrent")(story))


@requires_tensorflow
@pytest.mark.parametrize("batch_size", [None, 1])
def test_tflite_recurrent_error_mentions_a_dynamic_batch_only_when_there_is_one(
    batch_size, tmp_path
):
    from keras_normkit.export import convert_to_tflite

    with pytest.raises(ValueError) as info:
        convert_to_tflite(_recurrent_model(batch_size), tmp_path / "m.tflite")
    message = str(info.value)
    assert "TensorListReserve (from layer recurrent)" in message
    assert "recurrent loop stepping over time" in message
    assert (
        "Pass `allow_select_tf_ops=True` to `convert_to_tflite` to keep it as a TensorFlow op "
        "(checked: the model converts that way)" in message
    )
    assert "SELECT_TF_OPS" not in message.split("Converter said:")[0]  # names our option
    assert ("batch dimension is dynamic" in message) == (batch_size is None)
    if batch_size == 1:
        assert "dynamic" not in message.split("Converter said:")[0]


@requires_tensorflow
def test_tflite_allow_select_tf_ops_converts_a_recurrent_loop(tmp_path):
    from keras_normkit.export import convert_to_tflite

    flatbuffer = convert_to_tflite(
        _recurrent_model(None), tmp_path / "m.tflite", allow_select_tf_ops=True
    )
    assert b"FlexTensorListReserve" in flatbuffer  # the loop's ops kept as TensorFlow ops
    with pytest.raises(TypeError, match=r"`allow_select_tf_ops` must be a Python bool.*'yes'"):
        convert_to_tflite(_recurrent_model(None), tmp_path / "n.tflite", allow_select_tf_ops="yes")


def test_other_backends_get_a_clear_error(tmp_path):
    """Both helpers need TensorFlow's SavedModel/TFLite: elsewhere they say so up front."""
    if keras.backend.backend() == "tensorflow":
        pytest.skip("the TensorFlow backend exports (the tests above)")
    from keras_normkit.export import convert_to_tflite, export_saved_model

    for function in (export_saved_model, convert_to_tflite):
        with pytest.raises(RuntimeError, match="needs the TensorFlow backend.*model.export"):
            function(snn_model(), tmp_path / function.__name__)
