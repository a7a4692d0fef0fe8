"""`FastWeightsRNNCell` / `FastWeightsRNN`: NumPy reference, conformance, states, bad input."""

import importlib.util
import inspect
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import keras_normkit.ops.fast_weights_rnn as engine_module
from keras_normkit.layers import FastWeightsRNN, FastWeightsRNNCell
from keras_normkit.ops.fast_weights_loop import CHUNK
from tests.conformance import RNN_SUPPORTS_MASKING, LayerConformanceTestCase
from tests.conftest import requires_tensorflow, requires_xla
from tests.references.fast_weights import numpy_fast_weights

try:  # the tests that use it are marked `requires_tensorflow` (or skip without it)
    import tensorflow as tf
except ImportError:  # a JAX- or PyTorch-only machine (a GPU one) still collects this file
    tf = None

IMPLEMENTATIONS = ("matrix", "memory")


def random_weights(rng, input_dim, units, scale=0.5):
    return [
        rng.normal(scale=scale, size=(input_dim, units)),
        rng.normal(scale=scale, size=(units, units)),
        rng.normal(scale=0.3, size=(units,)),
        1.0 + rng.normal(scale=0.2, size=(units,)),
        rng.normal(scale=0.2, size=(units,)),
    ]


def set_weights(layer, weights):
    layer.set_weights([w.astype("float32") for w in weights[: len(layer.weights)]])


def numpy_out(tensors):
    return [keras.ops.convert_to_numpy(t) for t in tensors]


def ragged_mask(rng, batch, steps):
    mask = rng.random((batch, steps)) > 0.3
    mask[:, 0] = True
    mask[0] = True
    return mask


# --- the math -------------------------------------------------------------------------------


# (use_layer_norm, preliminary_layer_norm): the paper's form, keras_normkit 0.1's, no norm.
NORM_FORMS = [(True, False), (True, True), (False, False)]


@pytest.mark.parametrize("use_layer_norm, preliminary_layer_norm", NORM_FORMS)
@pytest.mark.parametrize("inner_steps", [1, 2, 3])
@pytest.mark.parametrize("implementation", ["matrix", "memory", "cell"])
def test_matches_numpy_reference(
    implementation, inner_steps, use_layer_norm, preliminary_layer_norm
):
    rng = np.random.default_rng(inner_steps + 10 * use_layer_norm + 20 * preliminary_layer_norm)
    batch, steps, dim, units = 3, 7, 4, 5
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    mask = ragged_mask(rng, batch, steps)
    # Without layer norm the recurrence can blow up (the paper's point), so keep it small.
    eta = 0.5 if use_layer_norm else 0.2
    kwargs = dict(
        inner_steps=inner_steps,
        decay=0.9,
        fast_learning_rate=eta,
        use_layer_norm=use_layer_norm,
        preliminary_layer_norm=preliminary_layer_norm,
    )
    if implementation == "cell":
        layer = keras.layers.RNN(
            FastWeightsRNNCell(units, **kwargs), return_sequences=True, return_state=True
        )
    else:
        layer = FastWeightsRNN(
            units,
            return_sequences=True,
            return_state=True,
            implementation=implementation,
            **kwargs,
        )
    layer.build((batch, steps, dim))
    weights = random_weights(rng, dim, units, scale=0.5 if use_layer_norm else 0.25)
    set_weights(layer, weights)
    outputs, h, a = numpy_out(layer(x, mask=mask))
    ref_out, ref_h, ref_a = numpy_fast_weights(
        x,
        weights,
        units,
        inner_steps=inner_steps,
        decay=0.9,
        eta=eta,
        use_layer_norm=use_layer_norm,
        preliminary_layer_norm=preliminary_layer_norm,
        mask=mask,
    )
    assert np.isfinite(ref_out).all()
    tol = {"rtol": 1e-4, "atol": 1e-4}
    np.testing.assert_allclose(outputs, ref_out, **tol)
    np.testing.assert_allclose(h, ref_h, **tol)
    np.testing.assert_allclose(a.reshape(batch, units, units), ref_a, **tol)
    assert np.abs(ref_a).max() > 0.1  # the memory was actually exercised


def _layer_pair(units, **kwargs):
    layers = {}
    for implementation in IMPLEMENTATIONS:
        layers[implementation] = FastWeightsRNN(units, implementation=implementation, **kwargs)
    return layers


@requires_tensorflow  # tf.GradientTape
# One loop chunk; two chunks and a tail; the memory form's two loops (4 + 4 chunks) and a
# tail; its four loops (4 chunks each) and a tail.
@pytest.mark.parametrize("steps", [8, 21, 69, 133])
@pytest.mark.parametrize("with_initial_state", [False, True])
def test_implementations_agree_on_outputs_and_gradients(with_initial_state, steps):
    rng = np.random.default_rng(5)
    batch, dim, units = 3, 4, 6
    # float64: the two orders of computation agree to round-off at every length (in
    # float32 they drift apart by ~1e-4 over 133 steps, with any number of loops).
    x = tf.constant(rng.normal(size=(batch, steps, dim)))
    mask = tf.constant(ragged_mask(rng, batch, steps))
    target = rng.normal(size=(batch, steps, units))
    state = None
    if with_initial_state:
        state = [
            tf.constant(np.abs(rng.normal(size=(batch, units)))),
            tf.constant(rng.normal(scale=0.3, size=(batch, units * units))),
        ]
    weights = random_weights(rng, dim, units)
    results = {}
    for name, layer in _layer_pair(
        units, inner_steps=2, decay=0.9, return_sequences=True, return_state=True, dtype="float64"
    ).items():
        layer.build((batch, steps, dim))
        set_weights(layer, weights)
        with tf.GradientTape() as tape:
            tape.watch(x)
            watched = [x] + ([] if state is None else state)
            for s in watched[1:]:
                tape.watch(s)
            out, h, a = layer(x, mask=mask, initial_state=state)
            loss = tf.reduce_sum((out - target) ** 2) + tf.reduce_sum(a * a[:, ::-1])
        grads = tape.gradient(loss, layer.trainable_weights + watched)
        results[name] = numpy_out([out, h, a]) + numpy_out(grads)
    for m, e in zip(results["memory"], results["matrix"], strict=True):
        scale = max(1.0, np.abs(e).max())
        np.testing.assert_allclose(m / scale, e / scale, atol=1e-9, rtol=0)


def chunk_crossing_mask(rng, batch, steps):
    """A ragged mask with masked runs across the loop's chunk boundaries (chunks of 8)."""
    mask = ragged_mask(rng, batch, steps)
    mask[1, 6:11] = False  # across the first boundary
    mask[2, 8:16] = False  # one whole chunk
    mask[2, 19:] = False  # the tail (T = 21)
    if steps > 64:
        mask[1, 30:34] = False  # across the boundary between the memory form's two loops
    if steps > 128:
        mask[0, 62:66] = False  # across the boundaries between its four loops
        mask[2, 95:98] = False
    return mask


# T = 133 only where it adds a path (the memory form's four loops) and reversed, the
# hardest case: the matrix form runs 16 chunks as it runs 8, and the engine's own tests
# cover four loops forwards (`tests/ops/test_fast_weights_loop.py`). On JAX the eager calls
# compile every loop anew (30-55 s per long case); the layer's code is the same there, and
# the engine's tests run the long loops on JAX too.
_LONG_ON_JAX = pytest.mark.skipif(
    keras.backend.backend() == "jax",
    reason="on JAX the chunked cases only recompile (~20 s each, eagerly); "
    "tests/ops/test_fast_weights_loop.py runs chunked loops there",
)
GO_BACKWARDS_CASES = [
    *(pytest.param(impl, backwards, steps, marks=[_LONG_ON_JAX] if steps > 6 else [])
      for impl in IMPLEMENTATIONS for backwards in (False, True) for steps in (6, 21, 69)),
    pytest.param("memory", True, 133, marks=_LONG_ON_JAX),
]  # fmt: skip


@pytest.mark.parametrize(("implementation", "go_backwards", "steps"), GO_BACKWARDS_CASES)
def test_go_backwards_initial_state_and_masks_match_numpy(implementation, go_backwards, steps):
    """T = 6 runs as one chunk; T = 21 as two chunks of 8 in the loop and a tail of 5; T = 69
    as eight chunks (the memory form: two loops of four) and a tail of 5; T = 133 as 16
    chunks (the memory form: four loops of four) and a tail of 5."""
    rng = np.random.default_rng(13)
    batch, dim, units = 3, 3, 5
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    mask = chunk_crossing_mask(rng, batch, steps) if steps > 16 else ragged_mask(rng, batch, steps)
    h0 = np.abs(rng.normal(size=(batch, units))).astype("float32")
    a0 = rng.normal(scale=0.3, size=(batch, units, units)).astype("float32")
    layer = FastWeightsRNN(
        units,
        inner_steps=2,
        decay=0.85,
        fast_learning_rate=0.4,
        go_backwards=go_backwards,
        return_sequences=True,
        return_state=True,
        implementation=implementation,
    )
    layer.build((batch, steps, dim))
    weights = random_weights(rng, dim, units)
    set_weights(layer, weights)
    kwargs = dict(
        inner_steps=2, decay=0.85, eta=0.4, use_layer_norm=True, go_backwards=go_backwards
    )
    for state in (None, [h0, a0]):
        flat_state = None if state is None else [h0, a0.reshape(batch, -1)]
        for m in (None, mask):
            outputs, h, a = numpy_out(layer(x, initial_state=flat_state, mask=m))
            ref_out, ref_h, ref_a = numpy_fast_weights(
                x,
                weights,
                units,
                mask=m,
                h0=None if state is None else h0,
                a0=None if state is None else a0,
                **kwargs,
            )
            if m is not None:
                # As in Keras's RNN loop: masked steps before the first unmasked one
                # output zeros (later masked steps repeat the previous output).
                seen = np.cumsum(m[:, ::-1] if go_backwards else m, axis=1) > 0
                ref_out = np.where(seen[..., None], ref_out, 0.0)
            np.testing.assert_allclose(outputs, ref_out, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(h, ref_h, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(a.reshape(ref_a.shape), ref_a, rtol=1e-4, atol=1e-4)
    # Bidirectional sets `zero_output_for_mask`: masked steps then output zeros.
    layer.zero_output_for_mask = True
    outputs = numpy_out(layer(x, mask=mask))[0]
    ref_out = numpy_fast_weights(x, weights, units, mask=mask, **kwargs)[0]
    processed_mask = mask[:, ::-1] if go_backwards else mask
    np.testing.assert_allclose(
        outputs, np.where(processed_mask[..., None], ref_out, 0.0), atol=1e-4
    )


@requires_tensorflow  # a `tf.function` with an unknown time axis
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_unknown_sequence_length_matches_numpy(implementation):
    rng = np.random.default_rng(17)
    batch, dim, units = 3, 3, 4
    layer = FastWeightsRNN(
        units, return_sequences=True, return_state=True, implementation=implementation
    )
    layer.build((batch, None, dim))
    weights = random_weights(rng, dim, units)
    set_weights(layer, weights)

    @tf.function(
        input_signature=[tf.TensorSpec((None, None, dim)), tf.TensorSpec((None, None), tf.bool)]
    )
    def run(x, mask):
        return layer(x, mask=mask)

    for steps in (1, 8, 13, 21):
        x = rng.normal(size=(batch, steps, dim)).astype("float32")
        mask = (
            chunk_crossing_mask(rng, batch, steps) if steps > 16 else ragged_mask(rng, batch, steps)
        )
        outputs, h, a = numpy_out(run(x, mask))
        ref_out, ref_h, ref_a = numpy_fast_weights(
            x, weights, units, inner_steps=1, decay=0.95, eta=0.5, use_layer_norm=True, mask=mask
        )
        assert outputs.shape == (batch, steps, units)
        np.testing.assert_allclose(outputs, ref_out, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(h, ref_h, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(a.reshape(ref_a.shape), ref_a, rtol=1e-4, atol=1e-4)


def test_masked_steps_leave_h_and_a_unchanged():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    padded = np.concatenate([x[:, :2], 100 * rng.normal(size=(2, 3, 3)), x[:, 2:]], axis=1)
    mask = np.ones((2, 8), bool)
    mask[:, 2:5] = False
    for implementation in IMPLEMENTATIONS:
        layer = FastWeightsRNN(4, return_state=True, implementation=implementation, seed=1)
        _, h, a = numpy_out(layer(x))
        _, h_pad, a_pad = numpy_out(layer(padded.astype("float32"), mask=mask))
        np.testing.assert_allclose(h_pad, h, atol=1e-5)
        np.testing.assert_allclose(a_pad, a, atol=1e-5)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_long_sequence_stays_finite_and_a_is_bounded(implementation):
    rng = np.random.default_rng(11)
    steps, units, decay, eta = 2000, 6, 0.95, 0.5
    x = (5 * rng.normal(size=(2, steps, 3))).astype("float32")
    layer = FastWeightsRNN(
        units,
        decay=decay,
        fast_learning_rate=eta,
        return_sequences=True,
        return_state=True,
        recurrent_initializer="orthogonal",
        implementation=implementation,
    )
    inputs = keras.Input((steps, 3))
    model = keras.Model(inputs, layer(inputs))  # graph mode: 2000 eager steps would be slow
    out, h, a = model.predict(x, verbose=0)
    assert np.isfinite(out).all() and np.isfinite(a).all()
    # |A_ij| <= eta * max|h|^2 / (1 - decay) since A is a decayed sum of eta * h h^T.
    assert np.abs(a).max() <= eta * np.abs(out).max() ** 2 / (1 - decay) * (1 + 1e-4)
    assert np.abs(a).max() > 1.0


def test_all_zero_state_gives_no_nan():
    layer = FastWeightsRNN(4, use_bias=False, return_sequences=True)
    out = numpy_out([layer(np.zeros((2, 3, 5), "float32"))])[0]
    assert np.isfinite(out).all()


# --- state handling --------------------------------------------------------------------------


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_stateful_streaming_equals_one_pass(implementation):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 8, 3)).astype("float32")
    full = FastWeightsRNN(5, return_sequences=True, implementation=implementation, seed=0)
    expected = numpy_out([full(x)])[0]
    streaming = FastWeightsRNN(
        5, return_sequences=True, stateful=True, implementation=implementation
    )
    streaming.build((2, 4, 3))
    streaming.set_weights(full.get_weights())
    parts = numpy_out([streaming(x[:, :4]), streaming(x[:, 4:])])
    np.testing.assert_allclose(np.concatenate(parts, axis=1), expected, atol=1e-5)
    streaming.reset_state()
    np.testing.assert_allclose(numpy_out([streaming(x[:, :4])])[0], expected[:, :4], atol=1e-6)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_return_state_then_initial_state_continues(implementation):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 9, 3)).astype("float32")
    layer = FastWeightsRNN(4, return_state=True, implementation=implementation)
    y, h, a = layer(x)
    _, h1, a1 = layer(x[:, :5])
    y2, h2, a2 = layer(x[:, 5:], initial_state=[h1, a1])
    for e, g in zip(numpy_out([y, h, a]), numpy_out([y2, h2, a2]), strict=True):
        np.testing.assert_allclose(g, e, atol=1e-5)


def test_cell_inside_bidirectional_matches_layers():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    bi = keras.layers.Bidirectional(
        keras.layers.RNN(FastWeightsRNNCell(4, decay=0.9), return_sequences=True)
    )
    out = numpy_out([bi(x)])[0]
    fwd_w, bwd_w = bi.forward_layer.get_weights(), bi.backward_layer.get_weights()
    fwd = FastWeightsRNN(4, decay=0.9, return_sequences=True)
    bwd = FastWeightsRNN(4, decay=0.9, return_sequences=True, go_backwards=True)
    fwd.build(x.shape)
    bwd.build(x.shape)
    fwd.set_weights(fwd_w)
    bwd.set_weights(bwd_w)
    np.testing.assert_allclose(out[..., :4], numpy_out([fwd(x)])[0], atol=1e-5)
    np.testing.assert_allclose(out[..., 4:], numpy_out([bwd(x)])[0][:, ::-1], atol=1e-5)


def test_layer_inside_bidirectional_round_trip():
    x = np.random.default_rng(12).normal(size=(2, 4, 3)).astype("float32")
    inputs = keras.Input((None, 3))
    bi = keras.layers.Bidirectional(FastWeightsRNN(3, return_sequences=True))
    model = keras.Model(inputs, bi(inputs))
    out = model.predict(x, verbose=0)
    bwd = FastWeightsRNN(3, return_sequences=True, go_backwards=True)
    bwd.build(x.shape)
    bwd.set_weights(bi.backward_layer.get_weights())
    np.testing.assert_allclose(out[..., 3:], numpy_out([bwd(x)])[0][:, ::-1], atol=1e-5)
    LayerConformanceTestCase().assert_keras_round_trip(model, x, atol=1e-5)


# --- the preliminary vector: the paper's h_0 = f(b), and files saved by keras_normkit 0.1 -----

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


def test_preliminary_vector_defaults_to_the_papers_form():
    for obj in (FastWeightsRNN(4), FastWeightsRNNCell(4)):
        assert obj.get_config()["preliminary_layer_norm"] is False
    # One step from h = 0, A = 0: h_1 = f(LN(b + A·h_0)) = f(LN(b)) whatever h_0 is, so the
    # forms differ from the second step on, where A(1)·h_0 uses h_0 = f(b) or f(LN(b)).
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    weights = random_weights(rng, 4, 5)
    outs = {}
    for preliminary in (False, True):
        layer = FastWeightsRNN(5, return_sequences=True, preliminary_layer_norm=preliminary)
        layer.build(x.shape)
        set_weights(layer, weights)
        outs[preliminary] = numpy_out([layer(x)])[0]
    np.testing.assert_allclose(outs[False][:, 0], outs[True][:, 0], atol=1e-6)
    assert np.abs(outs[False][:, 1:] - outs[True][:, 1:]).max() > 1e-2


@pytest.mark.parametrize("cls", [FastWeightsRNN, FastWeightsRNNCell])
def test_config_without_the_key_keeps_the_old_form(cls):
    def form(obj):
        return getattr(obj, "cell", obj).preliminary_layer_norm

    config = cls(4).get_config()
    assert form(cls.from_config(config)) is False
    del config["preliminary_layer_norm"]
    restored = cls.from_config(config)
    assert form(restored) is True
    assert restored.get_config()["preliminary_layer_norm"] is True


@pytest.mark.skipif(
    tuple(int(p) for p in keras.__version__.split(".")[:2]) < (3, 15),
    reason="the fixture was saved by Keras 3.15; an older Keras need not read a newer file",
)
def test_keras_file_saved_by_0_1_predicts_what_it_predicted():
    """`fixtures/fast_weights_v0_1.keras` was saved by keras_normkit 0.1 (no key)."""
    model = keras.models.load_model(FIXTURES / "fast_weights_v0_1.keras")
    saved = np.load(FIXTURES / "fast_weights_v0_1.npz")
    np.testing.assert_allclose(model.predict(saved["x"], verbose=0), saved["y"], atol=2e-6)
    layers = [model.get_layer(name) for name in ("matrix", "memory", "cell_rnn")]
    assert all(layer.cell.preliminary_layer_norm for layer in layers)
    # The same weights in the paper's form predict something else: the fixture would
    # catch a loader that dropped the old form.
    for layer in layers:
        layer.cell.preliminary_layer_norm = False
    changed = keras.ops.convert_to_numpy(model(saved["x"]))  # eager: no cached trace
    assert np.abs(changed - saved["y"]).max() > 1e-3


# --- conformance, precision, XLA -------------------------------------------------------------


class FastWeightsConformanceTest(LayerConformanceTestCase):
    def test_layer_conformance(self):
        for implementation in IMPLEMENTATIONS:
            self.run_conformance_test(
                FastWeightsRNN,
                {"units": 4, "inner_steps": 2, "implementation": implementation},
                input_shape=(2, 3, 5),
                expected_output_shape=(2, 4),
                expected_num_trainable_weights=5,
                supports_masking=True,
                atol=1e-5,
            )

    def test_layer_conformance_sequences_and_state(self):
        self.run_conformance_test(
            FastWeightsRNN,
            {
                "units": 3,
                "return_sequences": True,
                "return_state": True,
                "dropout": 0.1,
                "recurrent_dropout": 0.1,
                "seed": 1,
            },
            input_shape=(2, 4, 5),
            expected_output_shape=((2, 4, 3), (2, 3), (2, 9)),
            supports_masking=True,
            dynamic_axes=(1,),
            atol=1e-5,
        )

    def test_cell_conformance(self):
        self.run_cell_conformance_test(
            FastWeightsRNNCell,
            {"units": 4, "inner_steps": 2, "dropout": 0.1, "seed": 2},
            input_shape=(2, 3, 5),
            expected_output_shape=(2, 4),
            supports_masking=RNN_SUPPORTS_MASKING,
            atol=1e-5,
        )


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_close_to_float32(policy):
    rng = np.random.default_rng(8)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    for implementation in IMPLEMENTATIONS:
        ref = FastWeightsRNN(4, return_sequences=True, implementation=implementation)
        expected = numpy_out([ref(x)])[0]
        layer = FastWeightsRNN(
            4, return_sequences=True, implementation=implementation, dtype=policy
        )
        layer.build(x.shape)
        layer.set_weights(ref.get_weights())
        y = layer(x)
        assert keras.backend.standardize_dtype(y.dtype) == policy.split("_")[1]
        y = numpy_out([y])[0].astype("float32")
        assert np.isfinite(y).all()
        # bfloat16 keeps 8 mantissa bits: matmul rounding alone reaches ~0.1 here.
        atol = 0.15 if policy.endswith("bfloat16") else 0.02
        np.testing.assert_allclose(y, expected, atol=atol)


@requires_xla
def test_xla_training_matches_eager():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(8, 5, 3)).astype("float32")
    y = rng.normal(size=(8, 8)).astype("float32")
    inputs = keras.Input((5, 3))
    branches = [FastWeightsRNN(4, implementation=impl)(inputs) for impl in IMPLEMENTATIONS]
    model = keras.Model(inputs, keras.layers.Concatenate()(branches))  # one XLA compile
    model.compile("sgd", "mse", jit_compile=True)
    history = model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    xla = model.predict(x, verbose=0)
    np.testing.assert_allclose(xla, numpy_out([model(x)])[0], atol=1e-5)


# --- configuration and arguments -------------------------------------------------------------


def _constructor_args(cls):
    return {
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind is not p.VAR_KEYWORD
    }


@pytest.mark.parametrize("cls", [FastWeightsRNN, FastWeightsRNNCell])
def test_get_config_is_exactly_the_constructor(cls):
    obj = cls(3, inner_steps=2, decay=0.7, fast_learning_rate=0.2, seed=3)
    config = obj.get_config()
    base = {"name", "trainable", "dtype"}
    assert set(config) - base == _constructor_args(cls)
    clone = cls.from_config(config)
    assert clone.get_config() == config


def test_auto_rule():
    # Plain graph ops: memory iff units >= 64 and T <= 0.8 units.
    assert FastWeightsRNN(80).resolve_implementation(64, "plain") == "memory"
    assert FastWeightsRNN(80).resolve_implementation(65, "plain") == "matrix"
    assert FastWeightsRNN(63).resolve_implementation(8, "plain") == "matrix"
    # XLA clusters: memory iff units >= 48 and T <= 1.2 units.
    assert FastWeightsRNN(50).resolve_implementation(60, "xla_clusters") == "memory"
    assert FastWeightsRNN(50).resolve_implementation(61, "xla_clusters") == "matrix"
    assert FastWeightsRNN(47).resolve_implementation(4, "xla_clusters") == "matrix"
    # XLA: memory iff units >= 48 and T <= 1.3 units.
    assert FastWeightsRNN(50).resolve_implementation(65, "xla") == "memory"
    assert FastWeightsRNN(50).resolve_implementation(66, "xla") == "matrix"
    assert FastWeightsRNN(47).resolve_implementation(4, "xla") == "matrix"
    for mode in ("plain", "xla_clusters", "xla"):
        assert FastWeightsRNN(256).resolve_implementation(None, mode) == "matrix"
        layer = FastWeightsRNN(256, stateful=True)
        assert layer.resolve_implementation(4, mode) == "matrix"
        layer = FastWeightsRNN(8, implementation="memory")
        assert layer.resolve_implementation(999, mode) == "memory"
    # Eager calls are plain ops on TensorFlow (JAX always compiles).
    expected = "memory" if keras.backend.backend() == "jax" else "matrix"
    assert FastWeightsRNN(48).resolve_implementation(24) == expected


@pytest.mark.skipif(keras.backend.backend() == "torch", reason="PyTorch runs its native loop")
def test_one_call_into_the_engine_with_a0_none_unless_given(monkeypatch):
    """The layer calls `run_fast_weights` once per call, with `a0=None` when `A(0)` is zero
    (no initial state, not stateful), else the given `A(0)`; no state is kept on the layer."""
    import keras_normkit.layers.fast_weights as layer_module

    seen = []
    real = layer_module.run_fast_weights

    def spy(*args, **kwargs):
        seen.append(args[4])  # a0
        return real(*args, **kwargs)

    monkeypatch.setattr(layer_module, "run_fast_weights", spy)
    layer = FastWeightsRNN(4, return_state=True)
    x = np.ones((2, 3, 5), "float32")
    _, h, a = layer(x)
    assert len(seen) == 1 and seen[0] is None
    layer(x, initial_state=[h, a])
    assert len(seen) == 2 and tuple(seen[1].shape) == (2, 4, 4)
    assert not hasattr(layer, "_zero_initial_fast_weights")


class _Traced(Exception):
    """Stops a trace once `"auto"` has chosen (nothing is compiled or run)."""


@requires_tensorflow
@pytest.mark.parametrize("jit_compile", [False, True])
def test_auto_follows_the_compile_mode(monkeypatch, jit_compile):
    chosen = []
    real_plan = engine_module.plan

    def spy(steps, units, *args, **kwargs):  # the layer's one plan per call
        chosen.append((units, real_plan(steps, units, *args, **kwargs).form))
        if len(chosen) == 2:
            raise _Traced
        return real_plan(steps, units, *args, **kwargs)

    inputs = keras.Input((60, 3))
    outputs = [FastWeightsRNN(units)(inputs) for units in (48, 64)]
    model = keras.Model(inputs, keras.layers.Concatenate()(outputs))
    model.compile("sgd", "mse", jit_compile=jit_compile)
    monkeypatch.setattr(engine_module, "plan", spy)
    x = np.zeros((4, 60, 3), "float32")
    # T = 60: memory with XLA for both (60 <= 1.3 * 48); as XLA clusters (training without
    # jit_compile) only for 64 units (48 * 1.2 < 60 <= 64 * 1.2); with plain ops (inference
    # without jit_compile) for neither (60 > 0.8 * 64).
    with pytest.raises(_Traced):
        model.fit(x, np.zeros((4, 112), "float32"), verbose=0)
    assert chosen == [(48, "memory" if jit_compile else "matrix"), (64, "memory")]
    chosen.clear()
    with pytest.raises(_Traced):
        model.predict(x, verbose=0)
    kind = "memory" if jit_compile else "matrix"
    assert chosen == [(48, kind), (64, kind)]


@pytest.fixture
def compiled_loops(monkeypatch):
    """A list that grows by one each time the layer runs its loop as XLA clusters."""
    calls = []
    real = engine_module.xla_compiled
    monkeypatch.setattr(engine_module, "xla_compiled", lambda fn: calls.append(fn) or real(fn))
    return calls


@requires_tensorflow
@pytest.mark.parametrize(
    "implementation, return_sequences, use_layer_norm, recurrent_dropout, steps",
    [
        ("matrix", True, True, 0.3, 17),
        ("memory", False, False, 0.0, 17),
        # T <= 12: as XLA clusters one step per loop iteration, in the plain graph one chunk.
        ("matrix", False, True, 0.3, 12),
        ("memory", True, True, 0.0, 11),
    ],
)
def test_loop_compiled_as_xla_clusters_matches_plain_graph(
    monkeypatch,
    compiled_loops,
    implementation,
    return_sequences,
    use_layer_norm,
    recurrent_dropout,
    steps,
):
    """A training step without jit_compile runs the loop as XLA clusters (forward, and the
    gradient by recomputation): same outputs and gradients as the plain TensorFlow graph
    (in float64, so that the two orders of computation agree to round-off)."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(3, steps, 4))
    mask = ragged_mask(rng, 3, steps)
    h0 = rng.normal(scale=0.3, size=(3, 5))
    a0 = rng.normal(scale=0.1, size=(3, 25))
    coeffs = rng.normal(size=(3, steps if return_sequences else 1, 5))
    weights = random_weights(rng, 4, 5, scale=0.5 if use_layer_norm else 0.15)
    # Without layer norm the Hebbian feedback must stay bounded over 21 steps.
    decay, eta = (0.95, 0.5) if use_layer_norm else (0.8, 0.1)

    def gradients():
        layer = FastWeightsRNN(
            5,
            use_layer_norm=use_layer_norm,
            decay=decay,
            fast_learning_rate=eta,
            recurrent_dropout=recurrent_dropout,
            seed=3,  # the same dropout mask in both runs
            return_sequences=return_sequences,
            return_state=True,
            implementation=implementation,
            dtype="float64",
        )
        layer.build(x.shape)
        layer.set_weights(weights[: len(layer.weights)])

        @tf.function
        def step(x, h0, a0):
            with tf.GradientTape() as tape:
                tape.watch([x, h0, a0])
                out, h, a = layer(x, mask=mask, initial_state=[h0, a0], training=True)
                loss = tf.reduce_sum(tf.reshape(out, coeffs.shape) * coeffs)
                loss += tf.reduce_sum(h) + 0.1 * tf.reduce_sum(a)
            return [loss] + tape.gradient(loss, [x, h0, a0] + layer.trainable_weights)

        return numpy_out(step(x, h0, a0))

    chunks = []
    real_plan = engine_module.plan
    monkeypatch.setattr(
        engine_module,
        "plan",
        lambda *args, **kwargs: (
            chunks.append(real_plan(*args, **kwargs).chunk) or real_plan(*args, **kwargs)
        ),
    )
    compiled = gradients()
    assert compiled_loops  # the loop did run as XLA clusters
    monkeypatch.setattr(engine_module, "can_compile_cluster", lambda: False)
    plain = gradients()
    short = steps <= 12
    assert set(chunks) == ({1, steps} if short else {CHUNK})  # compiled, then plain
    assert len(compiled) == len(plain) == 4 + (5 if use_layer_norm else 3)
    for got, expected in zip(compiled, plain, strict=True):
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


@requires_tensorflow
def test_unknown_length_training_keeps_the_plain_graph(compiled_loops):
    # XLA would compile again for every new sequence length.
    layer = FastWeightsRNN(4)
    spec = tf.TensorSpec((2, None, 3), "float32")
    tf.function(lambda x: layer(x, training=True), input_signature=[spec])(np.ones((2, 5, 3)))
    assert not compiled_loops
    tf.function(lambda x: layer(x, training=True))(np.ones((2, 5, 3), "float32"))
    assert compiled_loops  # static length: compiled


@requires_tensorflow
def test_mixed_precision_training_as_xla_clusters(compiled_loops):
    # Seeded weights and inputs of scale 0.5: with unseeded weights some draws put the
    # 12-step recurrence where float16 round-off grows past the tolerance (it failed for
    # 2-3 of 12 random seeds, before and after the one-step-per-iteration loop of T <= 12).
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(2).normal(scale=0.5, size=(4, 12, 3)).astype("float32")
    ref = FastWeightsRNN(8)
    ref.build(x.shape)
    grads = {}
    for policy in ("float32", "mixed_float16"):
        layer = FastWeightsRNN(8, dtype=policy)
        layer.build(x.shape)
        layer.set_weights(ref.get_weights())

        @tf.function
        def step(x, layer=layer):
            with tf.GradientTape() as tape:
                out = layer(x, training=True)
                loss = tf.reduce_sum(tf.cast(out, "float32") ** 2)
            return [out, *tape.gradient(loss, layer.trainable_weights)]

        grads[policy] = step(x)
    assert len(compiled_loops) == 2  # both ran as XLA clusters
    assert grads["mixed_float16"][0].dtype == "float16"
    for half, full in zip(
        numpy_out(grads["mixed_float16"]), numpy_out(grads["float32"]), strict=True
    ):
        half = half.astype("float32")
        assert np.isfinite(half).all()
        np.testing.assert_allclose(half, full, rtol=0.05, atol=0.02 * np.abs(full).max())


@settings(max_examples=6)
@given(
    batch=st.integers(1, 3),
    steps=st.integers(1, 6),
    dim=st.integers(1, 4),
    units=st.integers(1, 6),
    inner_steps=st.integers(1, 3),
    decay=st.floats(0.0, 1.0),
    eta=st.floats(0.0, 2.0),
)
def test_shapes_and_agreement_property(batch, steps, dim, units, inner_steps, decay, eta):
    rng = np.random.default_rng(steps)
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    weights = random_weights(rng, dim, units)
    outs = {}
    for implementation in IMPLEMENTATIONS:
        layer = FastWeightsRNN(
            units,
            inner_steps=inner_steps,
            decay=decay,
            fast_learning_rate=eta,
            return_sequences=True,
            return_state=True,
            implementation=implementation,
        )
        layer.build(x.shape)
        set_weights(layer, weights)
        out = layer(x)
        expected = layer.compute_output_shape(x.shape)
        assert [tuple(o.shape) for o in out] == [tuple(s) for s in expected]
        outs[implementation] = numpy_out(out)
    ref_out, _, ref_a = numpy_fast_weights(
        x, weights, units, inner_steps=inner_steps, decay=decay, eta=eta, use_layer_norm=True
    )
    for got in outs.values():
        np.testing.assert_allclose(got[0], ref_out, atol=2e-4, rtol=2e-4)
        np.testing.assert_allclose(got[2].reshape(ref_a.shape), ref_a, atol=2e-3, rtol=2e-4)


BAD_ARGS = [
    ({"units": 0}, "units", ValueError),
    ({"units": -3}, "units", ValueError),
    ({"units": 2.5}, "units", TypeError),
    ({"inner_steps": 0}, "inner_steps", ValueError),
    ({"decay": 1.5}, "decay", ValueError),
    ({"decay": -0.1}, "decay", ValueError),
    ({"decay": float("nan")}, "decay", ValueError),
    ({"fast_learning_rate": -0.5}, "fast_learning_rate", ValueError),
    ({"fast_learning_rate": "fast"}, "fast_learning_rate", TypeError),
    ({"layer_norm_epsilon": 0.0}, "layer_norm_epsilon", ValueError),
    ({"dropout": 1.0}, "dropout", ValueError),
    ({"recurrent_dropout": -0.1}, "recurrent_dropout", ValueError),
]


def test_bad_arguments_name_the_argument():
    for cls in (FastWeightsRNN, FastWeightsRNNCell):
        for kwargs, name, error in BAD_ARGS:
            with pytest.raises(error, match=f"`{name}`.*Received: {name}="):
                cls(**{"units": 4, **kwargs})


@settings(max_examples=15)
@given(
    decay=st.one_of(st.floats(max_value=-1e-6), st.floats(min_value=1.000001)),
    inner_steps=st.integers(max_value=0),
    eta=st.floats(max_value=-1e-9),
)
def test_out_of_range_hyperparameters_property(decay, inner_steps, eta):
    with pytest.raises(ValueError, match="`decay`"):
        FastWeightsRNN(4, decay=decay)
    with pytest.raises(ValueError, match="`inner_steps`"):
        FastWeightsRNN(4, inner_steps=inner_steps)
    with pytest.raises(ValueError, match="`fast_learning_rate`"):
        FastWeightsRNN(4, fast_learning_rate=eta)


def test_numpy_scalars_are_accepted():
    layer = FastWeightsRNN(
        np.int64(4), inner_steps=np.int32(2), decay=np.float32(0.5), seed=np.int32(1)
    )
    config = layer.get_config()
    assert (config["units"], config["inner_steps"], config["seed"]) == (4, 2, 1)
    assert all(type(config[k]) is int for k in ("units", "inner_steps", "seed"))
    assert config["decay"] == pytest.approx(0.5)


def test_unknown_implementation():
    with pytest.raises(ValueError, match="`implementation`.*Received: implementation='fast'"):
        FastWeightsRNN(4, implementation="fast")


def test_dropout_only_in_training():
    x = np.random.default_rng(1).normal(size=(4, 5, 6)).astype("float32")
    layer = FastWeightsRNN(8, dropout=0.5, recurrent_dropout=0.5, seed=1)
    plain = FastWeightsRNN(8)
    plain.build(x.shape)
    layer.build(x.shape)
    plain.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        numpy_out([layer(x, training=False)])[0], numpy_out([plain(x)])[0], atol=1e-6
    )
    dropped = numpy_out([layer(x, training=True)])[0]
    assert np.isfinite(dropped).all()
    assert np.abs(dropped - numpy_out([plain(x)])[0]).max() > 1e-3


JAX_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from tests.layers.test_fast_weights import numpy_fast_weights, random_weights, set_weights
    from keras_normkit.layers import FastWeightsRNN
    import keras
    assert keras.backend.backend() == "jax"
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 6, 4)).astype("float32")
    mask = rng.random((3, 6)) > 0.3
    mask[:, 0] = True
    weights = random_weights(rng, 4, 5)
    ref = numpy_fast_weights(x, weights, 5, inner_steps=2, decay=0.9, eta=0.5,
                             use_layer_norm=True, mask=mask, go_backwards=True)
    for impl in ("matrix", "memory"):
        layer = FastWeightsRNN(5, inner_steps=2, decay=0.9, return_sequences=True,
                               return_state=True, go_backwards=True, implementation=impl)
        layer.build(x.shape)
        set_weights(layer, weights)
        out, h, a = (np.asarray(t) for t in layer(x, mask=mask))
        np.testing.assert_allclose(out, ref[0], atol=1e-4)
        np.testing.assert_allclose(a.reshape(ref[2].shape), ref[2], atol=1e-4)
    print("ok")
    """
)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_backend_matches_numpy():
    root = pathlib.Path(__file__).resolve().parents[2]
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT], cwd=root, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX export (jax2tf) test")
@pytest.mark.parametrize("implementation", ["auto", "memory"])
def test_jax_export_with_unknown_time_axis(tmp_path, implementation):
    """JAX: a `None` time axis behind an Embedding exports (symbolic length) and serves any T."""
    pytest.importorskip("jax.experimental.jax2tf")
    tokens = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(20, 8, mask_zero=True)(tokens)
    layer = FastWeightsRNN(8, return_sequences=True, implementation=implementation)
    model = keras.Model(tokens, layer(x))
    model.export(str(tmp_path), format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(str(tmp_path))  # kept: `serve` needs its variables
    rng = np.random.default_rng(0)
    for steps in (1, 9, 20):  # one step, a chunk and a tail, more than one chunk
        t = rng.integers(1, 20, size=(3, steps)).astype("int32")
        t[0, -1] = 0  # a padded step
        np.testing.assert_allclose(
            reloaded.serve(t).numpy(), model.predict(t, verbose=0), atol=1e-5, err_msg=steps
        )
