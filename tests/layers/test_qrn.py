"""`QRN` and `QRNCell`: NumPy reference, parallel == sequential, stability, conformance, bad input."""

import pathlib

import keras
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keras_normkit.layers import QRN, QRNCell
from tests.conformance import LayerConformanceTestCase
from tests.conftest import max_examples, requires_tensorflow, requires_xla
from tests.references.qrn import numpy_gates, numpy_qrn, reset_gate_count

try:  # the tests that use it are marked `requires_tensorflow` (or skip without it)
    import tensorflow as tf
except ImportError:  # a JAX- or PyTorch-only machine (a GPU one) still collects this file
    tf = None


def random_weights(dim, units, reset_gates=1, vector_gates=False, seed=0, gate_scale=1.0):
    """Weights of a `QRN` whose `gate_kernel` holds `reset_gates` (0, 1, 2) reset gates."""
    rng = np.random.default_rng(seed)
    size = (units if vector_gates else 1) * (1 + reset_gates)
    return [
        rng.normal(size=(dim, size)) * gate_scale,
        rng.normal(size=(size,)),
        rng.normal(size=(2 * dim, units)) * 0.7,
        rng.normal(size=(units,)) * 0.3,
    ]


def make_layer(units, dim, weights, dtype="float32", **kwargs):
    layer = QRN(units, dtype=dtype, **kwargs)
    layer.build([(None, None, dim), (None, dim)])
    layer.set_weights([w.astype(layer.variable_dtype) for w in weights])
    return layer


def random_mask(rng, batch, steps):
    mask = rng.random((batch, steps)) < 0.7
    mask[0, -2:] = False  # post-padding
    mask[0, 0] = True
    if batch > 1:
        mask[1, 0] = False  # pre-padding / holes
    return mask


def to_numpy(tensor):
    return keras.ops.convert_to_numpy(tensor)


# ---------------------------------------------------------------------------------------------
# Outputs: both implementations equal the reference.

CONFIGS = [
    {"use_reset_gate": True, "vector_gates": False, "bidirectional": False},
    {"use_reset_gate": False, "vector_gates": False, "bidirectional": False},
    {"use_reset_gate": True, "vector_gates": True, "bidirectional": False},
    {"use_reset_gate": True, "vector_gates": False, "bidirectional": True},
    {"use_reset_gate": True, "vector_gates": True, "bidirectional": True},
    {
        "use_reset_gate": True,
        "vector_gates": False,
        "bidirectional": True,
        "share_reset_gate": True,
    },
    {"use_reset_gate": False, "vector_gates": True, "bidirectional": True},
]


def config_weights(config, dim, units, seed, gate_scale=1.0):
    """`random_weights` of the shapes a `QRN` of `config` builds."""
    reset_gates = reset_gate_count(
        config["use_reset_gate"], config["bidirectional"], config.get("share_reset_gate", False)
    )
    return random_weights(dim, units, reset_gates, config["vector_gates"], seed, gate_scale)


@pytest.mark.parametrize("implementation", ["parallel", "sequential"])
def test_matches_numpy_reference(implementation):
    rng = np.random.default_rng(1)
    batch, steps, dim, units = 3, 7, 4, 5
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    q = rng.normal(size=(batch, dim)).astype("float32")
    cases = [(c, m, r) for c in CONFIGS for m in (False, True) for r in (True, False)]
    for config, masked, return_sequences in cases:
        mask = random_mask(rng, batch, steps) if masked else None
        weights = config_weights(config, dim, units, 2)
        layer = make_layer(
            units,
            dim,
            weights,
            implementation=implementation,
            return_sequences=return_sequences,
            **config,
        )
        out = layer([x, q], mask=None if mask is None else [mask, None])
        expected = numpy_qrn(
            x, q, weights, units, return_sequences=return_sequences, mask=mask, **config
        )
        np.testing.assert_allclose(
            to_numpy(out), expected, atol=1e-5, rtol=0, err_msg=f"{config} {masked}"
        )


@settings(max_examples=max_examples(12))
@given(
    batch=st.integers(1, 3),
    steps=st.integers(1, 40),
    dim=st.integers(1, 4),
    units=st.integers(1, 4),
    use_reset_gate=st.booleans(),
    vector_gates=st.booleans(),
    bidirectional=st.booleans(),
    share_reset_gate=st.booleans(),
    query_over_time=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_property_parallel_matches_reference(
    batch,
    steps,
    dim,
    units,
    use_reset_gate,
    vector_gates,
    bidirectional,
    share_reset_gate,
    query_over_time,
    seed,
):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    q_shape = (batch, steps, dim) if query_over_time else (batch, dim)
    q = rng.normal(size=q_shape).astype("float32")
    config = {
        "use_reset_gate": use_reset_gate,
        "vector_gates": vector_gates,
        "bidirectional": bidirectional,
        "share_reset_gate": share_reset_gate,
    }
    weights = config_weights(config, dim, units, seed, gate_scale=2.0)
    layer = make_layer(units, dim, weights, **config)
    np.testing.assert_allclose(
        to_numpy(layer([x, q])), numpy_qrn(x, q, weights, units, **config), atol=1e-5, rtol=0
    )


# ---------------------------------------------------------------------------------------------
# Gradients: TensorFlow's gradient of both implementations equals central finite differences
# of the NumPy reference (float64), for every weight and input entry.


def numpy_gradients(x, q, weights, units, upstream, mask, config, eps=1e-6):
    def loss(params):
        return np.sum(
            numpy_qrn(params[0], params[1], params[2:], units, mask=mask, **config) * upstream
        )

    params = [np.array(p, np.float64) for p in (x, q, *weights)]
    grads = []
    for p in params:
        g = np.zeros_like(p)
        for idx in np.ndindex(p.shape):
            old = p[idx]
            p[idx] = old + eps
            up = loss(params)
            p[idx] = old - eps
            down = loss(params)
            p[idx] = old
            g[idx] = (up - down) / (2 * eps)
        grads.append(g)
    return grads


@requires_tensorflow  # tf.GradientTape
@pytest.mark.parametrize("implementation", ["parallel", "sequential"])
def test_gradients_match_numpy_reference(implementation):
    rng = np.random.default_rng(3)
    batch, steps, dim, units = 2, 6, 3, 4
    for config in CONFIGS:
        x = rng.normal(size=(batch, steps, dim))
        q = rng.normal(size=(batch, dim))
        mask = random_mask(rng, batch, steps)
        weights = config_weights(config, dim, units, 4)
        upstream = rng.normal(size=(batch, steps, units))
        expected = numpy_gradients(x, q, weights, units, upstream, mask, config)

        layer = make_layer(units, dim, weights, implementation=implementation, **config)
        xt, qt = tf.constant(x, tf.float32), tf.constant(q, tf.float32)
        with tf.GradientTape() as tape:
            tape.watch([xt, qt])
            loss = tf.reduce_sum(layer([xt, qt], mask=[tf.constant(mask), None]) * upstream)
        actual = tape.gradient(loss, [xt, qt, *layer.trainable_weights])
        names = ["x", "q", "Wzr", "bzr", "Wh", "bh"]
        for name, a, e in zip(names, actual, expected, strict=True):
            np.testing.assert_allclose(
                to_numpy(a), e, atol=1e-5, rtol=1e-5, err_msg=f"{name} {config}"
            )


# ---------------------------------------------------------------------------------------------
# Stability and long sequences (the scan itself: tests/ops/test_linear_scan.py).


def stability_weights(regime, vector_gates, dim=2, units=2):
    weights = random_weights(dim, units, 2, vector_gates, 6)
    if regime == "mixed":  # |logit| up to ~100: z is 0 or 1 to float precision, switching
        weights[0] = weights[0] * 40.0
    else:  # open: z = 1 - 1e-13 at every step; closed: z = 6e-6, memory over all 5000 steps
        weights[0] = weights[0] * 0.01
        weights[1][: units if vector_gates else 1] = 30.0 if regime == "open" else -12.0
    return weights


def test_stability_t5000():
    """T=5000 with z ~ 1, z ~ 0 or switching: parallel == sequential == reference, finite."""
    rng = np.random.default_rng(5)
    batch, steps, dim, units = 2, 5000, 2, 2
    x = rng.normal(size=(batch, steps, dim)).astype("float32")
    q = rng.normal(size=(batch, dim)).astype("float32")
    inputs = [keras.Input((None, dim)), keras.Input((dim,))]
    models = {}
    for implementation in ("parallel", "sequential"):
        layer = QRN(units, bidirectional=True, implementation=implementation)
        models[implementation] = (keras.Model(inputs, layer(inputs)), layer)
    for regime in ("open", "closed", "mixed"):
        weights = stability_weights(regime, vector_gates=False)
        expected = numpy_qrn(x, q, weights, units, bidirectional=True)
        outputs = []
        for model, layer in models.values():
            layer.set_weights([w.astype("float32") for w in weights])
            outputs.append(model.predict([x, q], batch_size=batch, verbose=0))
            assert np.isfinite(outputs[-1]).all()
            np.testing.assert_allclose(outputs[-1], expected, atol=1e-5, rtol=0, err_msg=regime)
        np.testing.assert_allclose(outputs[0], outputs[1], atol=1e-5, rtol=0, err_msg=regime)
        if regime == "closed":  # the state is carried (not reset) over thousands of steps
            assert np.abs(expected[:, steps // 2]).max() > 1e-3
    # vector gates, switching
    weights = stability_weights("mixed", vector_gates=True)
    layer = make_layer(units, dim, weights, vector_gates=True, bidirectional=True)
    out = to_numpy(layer([x, q]))
    expected = numpy_qrn(x, q, weights, units, vector_gates=True, bidirectional=True)
    np.testing.assert_allclose(out, expected, atol=1e-5, rtol=0)


@requires_tensorflow  # tf.GradientTape
def test_stability_t5000_gradients_finite():
    rng = np.random.default_rng(7)
    dim, units = 2, 2
    weights = random_weights(dim, units, 2, seed=8)
    weights[0] = weights[0] * 40.0
    layer = make_layer(units, dim, weights, bidirectional=True)
    x = tf.constant(rng.normal(size=(1, 5000, dim)).astype("float32"))
    q = tf.constant(rng.normal(size=(1, dim)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch([x, q])
        loss = tf.reduce_sum(layer([x, q]))
    grads = tape.gradient(loss, [x, q, *layer.trainable_weights])
    assert all(np.isfinite(to_numpy(g)).all() for g in grads)


# ---------------------------------------------------------------------------------------------
# Masking, dynamic time axis, XLA, mixed precision.


def test_padding_equals_shorter_sequence():
    for implementation in ("parallel", "sequential"):
        check_padding_equals_shorter_sequence(implementation)


def check_padding_equals_shorter_sequence(implementation):
    """Post-padded + masked == the unpadded sequence: the backward pass starts at the real end."""
    rng = np.random.default_rng(9)
    dim, units, lengths, steps = 3, 3, [4, 7, 2], 7
    x = rng.normal(size=(3, steps, dim)).astype("float32")
    q = rng.normal(size=(3, steps, dim)).astype("float32")
    mask = np.arange(steps)[None] < np.array(lengths)[:, None]
    x_padded = np.where(mask[..., None], x, 0.0).astype("float32")
    layer = QRN(units, bidirectional=True, implementation=implementation)
    masked = keras.layers.Masking(0.0)
    x_in, q_in = keras.Input((None, dim)), keras.Input((None, dim))
    h = layer([masked(x_in), q_in])
    model = keras.Model([x_in, q_in], [h, QRN(units, return_sequences=False)([x_in, h])])
    seqs, last = model([x_padded, q])
    assert model.layers[-1].compute_mask([x_in, q_in], [None, None]) is None
    for i, n in enumerate(lengths):
        alone = layer([x[i : i + 1, :n], q[i : i + 1, :n]])
        np.testing.assert_allclose(to_numpy(seqs)[i, :n], to_numpy(alone)[0], atol=1e-5)
        # padded steps carry the forward state; the backward state there is 0
        weights = layer.get_weights()
        fwd_last = numpy_qrn(x[i : i + 1, :n], q[i : i + 1, :n], weights, units)[0, -1]
        np.testing.assert_allclose(
            to_numpy(seqs)[i, n:], np.broadcast_to(fwd_last, (steps - n, units)), atol=1e-5
        )
    assert np.isfinite(to_numpy(last)).all()


def test_mask_propagates_from_embedding():
    tokens = keras.Input((None,), dtype="int32")
    question = keras.Input((4,))
    x = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    layer = QRN(4, bidirectional=True)
    h = layer([x, question])
    assert layer.compute_mask([x, question], [x._keras_mask, None]) is x._keras_mask
    model = keras.Model([tokens, question], h)
    ids = np.array([[3, 4, 0, 0], [1, 2, 3, 5]])
    q = np.ones((2, 4), "float32")
    out = to_numpy(model([ids, q]))
    weights = layer.get_weights()
    emb = model.layers[1].get_weights()[0]
    expected = numpy_qrn(emb[ids], q, weights, 4, bidirectional=True, mask=ids > 0)
    np.testing.assert_allclose(out, expected, atol=1e-5)


def test_update_gate_values_and_mask():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    q = rng.normal(size=(2, 3)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], bool)
    for vector_gates in (False, True):
        weights = random_weights(3, 4, vector_gates=vector_gates, seed=11)
        layer = make_layer(4, 3, weights, vector_gates=vector_gates)
        z, _, _, _ = numpy_gates(x, q, weights, 4, vector_gates=vector_gates)
        out = to_numpy(layer.update_gate([x, q], mask=mask))
        np.testing.assert_allclose(out, z * mask[..., None], atol=1e-6)


@requires_xla
def test_dynamic_time_axis_and_xla_training():
    """Unknown T, jit_compile=True: trains, and predicts like the eager layer at another T."""
    rng = np.random.default_rng(12)
    x = rng.normal(size=(8, 9, 4)).astype("float32")
    q = rng.normal(size=(8, 4)).astype("float32")
    y = rng.integers(0, 3, size=8)
    x_in, q_in = keras.Input((None, 4)), keras.Input((4,))
    layer = QRN(4, bidirectional=True, return_sequences=False)
    model = keras.Model([x_in, q_in], keras.layers.Dense(3)(layer([x_in, q_in])))
    model.compile(
        keras.optimizers.SGD(0.5),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    history = model.fit([x, q], y, epochs=3, batch_size=8, verbose=0).history["loss"]
    assert np.all(np.isfinite(history)) and history[-1] < history[0]
    h = numpy_qrn(x[:, :5], q, layer.get_weights(), 4, bidirectional=True, return_sequences=False)
    dense_kernel, dense_bias = model.layers[-1].get_weights()
    np.testing.assert_allclose(
        model.predict([x[:, :5], q], verbose=0), h @ dense_kernel + dense_bias, atol=1e-5
    )


def test_mixed_precision():
    for policy in ("mixed_float16", "mixed_bfloat16"):
        for implementation in ("parallel", "sequential"):
            check_mixed_precision(policy, implementation)


def check_mixed_precision(policy, implementation):
    rng = np.random.default_rng(13)
    x = rng.normal(size=(2, 6, 4)).astype("float32")
    q = rng.normal(size=(2, 4)).astype("float32")
    weights = random_weights(4, 4, 2, seed=14)
    layer = make_layer(
        4,
        4,
        [w.astype("float32") for w in weights],
        dtype=policy,
        implementation=implementation,
        bidirectional=True,
    )
    out = layer([x, q])
    assert keras.backend.standardize_dtype(out.dtype) == policy.split("_")[1]
    assert all(w.dtype == "float32" for w in layer.weights)
    expected = numpy_qrn(x, q, weights, 4, bidirectional=True)
    atol = 0.05 if policy == "mixed_bfloat16" else 0.01
    np.testing.assert_allclose(to_numpy(out).astype("float32"), expected, atol=atol)


# ---------------------------------------------------------------------------------------------
# The cell inside keras.layers.RNN.


def test_cell_in_rnn_matches_reference():
    for vector_gates in (False, True):
        for use_reset_gate in (False, True):
            check_cell_in_rnn(vector_gates, use_reset_gate)


def check_cell_in_rnn(vector_gates, use_reset_gate):
    rng = np.random.default_rng(15)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    q = rng.normal(size=(2, 6, 3)).astype("float32")
    weights = random_weights(3, 4, int(use_reset_gate), vector_gates, seed=16)
    rnn = keras.layers.RNN(
        QRNCell(4, use_reset_gate=use_reset_gate, vector_gates=vector_gates),
        return_sequences=True,
    )
    rnn.build((None, None, 6))
    rnn.set_weights([w.astype("float32") for w in weights])
    out = rnn(np.concatenate([x, q], axis=-1))
    expected = numpy_qrn(x, q, weights, 4, use_reset_gate, vector_gates)
    np.testing.assert_allclose(to_numpy(out), expected, atol=1e-5)


@pytest.mark.parametrize("vector_gates", [False, True])
def test_recurrence_coefficients_of_each_direction(vector_gates):
    """`a = 1 - z`, `b = z r h~`, with the backward reset gate where the weights hold two."""
    rng = np.random.default_rng(17)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    q = rng.normal(size=(2, 3)).astype("float32")  # broadcast over the steps
    for reset_gates in (1, 2):
        weights = random_weights(3, 4, reset_gates, vector_gates, seed=18)
        cell = QRNCell(4, use_reset_gate=True, vector_gates=vector_gates)
        cell.build_weights(3, reset_gates=reset_gates)
        cell.set_weights([w.astype("float32") for w in weights])
        z, r_fwd, r_bwd, candidate = numpy_gates(x, q, weights, 4, True, vector_gates, reset_gates)
        for backward, r in ((False, r_fwd), (True, r_bwd)):
            a, b = cell.recurrence_coefficients(
                keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(q), backward=backward
            )
            np.testing.assert_allclose(to_numpy(a), np.broadcast_to(1 - z, a.shape), atol=1e-6)
            np.testing.assert_allclose(to_numpy(b), z * r * candidate, atol=1e-5)
        tensors = (keras.ops.convert_to_tensor(t) for t in (x, q))
        a, (b_fwd, b_bwd) = cell.directional_coefficients(*tensors)
        np.testing.assert_allclose(to_numpy(b_fwd), z * r_fwd * candidate, atol=1e-5)
        np.testing.assert_allclose(to_numpy(b_bwd), z * r_bwd * candidate, atol=1e-5)
    assert np.abs(r_fwd - r_bwd).max() > 0.1  # the two reset gates differ


def test_recurrence_coefficients_keep_the_state_at_masked_steps():
    """A masked step gets `a = 1`, `b = 0` (`h_t = h_{t-1}`); the other steps are unchanged."""
    rng = np.random.default_rng(19)
    x = rng.normal(size=(2, 5, 3)).astype("float32")
    q = rng.normal(size=(2, 5, 3)).astype("float32")
    mask = np.array([[1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], dtype=bool)
    cell = QRNCell(4, use_reset_gate=True)
    cell.build((None, 6))
    cell.set_weights([w.astype("float32") for w in random_weights(3, 4, 1, False, seed=20)])
    a, b = (to_numpy(t) for t in cell.recurrence_coefficients(x, q))
    a_masked, b_masked = (to_numpy(t) for t in cell.recurrence_coefficients(x, q, mask=mask))
    np.testing.assert_array_equal(a_masked[~mask], np.ones_like(a[~mask]))
    np.testing.assert_array_equal(b_masked[~mask], np.zeros_like(b[~mask]))
    np.testing.assert_array_equal(a_masked[mask], a[mask])
    np.testing.assert_array_equal(b_masked[mask], b[mask])
    assert not np.allclose(a[~mask], 1.0) and not np.allclose(b[~mask], 0.0)


# ---------------------------------------------------------------------------------------------
# One reset gate per direction (the paper's), and the shared one of keras_normkit 0.1.

FIXTURES = pathlib.Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("vector_gates", [False, True])
def test_gate_kernel_columns_per_direction(vector_gates):
    """`[z | r_fwd | r_bwd]`: `(d, 3 g)` by default, `(d, 2 g)` shared or one direction."""
    g = 5 if vector_gates else 1
    shapes = {
        (True, False): (3 * g,),
        (True, True): (2 * g,),
        (False, False): (2 * g,),
        (False, True): (2 * g,),
    }
    for (bidirectional, share), columns in shapes.items():
        layer = QRN(
            5, vector_gates=vector_gates, bidirectional=bidirectional, share_reset_gate=share
        )
        layer.build([(None, None, 4), (None, 4)])
        assert tuple(layer.cell.gate_kernel.shape) == (4, *columns)
        assert tuple(layer.cell.gate_bias.shape) == columns
    layer = QRN(5, use_reset_gate=False, vector_gates=vector_gates, bidirectional=True)
    layer.build([(None, None, 4), (None, 4)])
    assert tuple(layer.cell.gate_kernel.shape) == (4, g)


@pytest.mark.parametrize("implementation", ["parallel", "sequential"])
def test_each_direction_resets_with_its_own_gate(implementation):
    """Closing only the backward reset gate (r_bwd = 0) removes the backward pass alone: the
    output is then the forward pass; with a shared gate that cannot happen."""
    rng = np.random.default_rng(21)
    x = rng.normal(size=(2, 6, 3)).astype("float32")
    q = rng.normal(size=(2, 3)).astype("float32")
    weights = random_weights(3, 4, 2, seed=22)
    weights[0][:, 2] = 0.0
    weights[1][2] = -60.0  # r_bwd = sigmoid(-60) = 0: the backward candidate never enters
    layer = make_layer(4, 3, weights, implementation=implementation, bidirectional=True)
    forward_only = numpy_qrn(x, q, [weights[0][:, :2], weights[1][:2], *weights[2:]], 4)
    np.testing.assert_allclose(to_numpy(layer([x, q])), forward_only, atol=1e-5)
    shared = make_layer(
        4,
        3,
        [weights[0][:, :2], weights[1][:2], *weights[2:]],
        implementation=implementation,
        bidirectional=True,
        share_reset_gate=True,
    )
    assert np.abs(to_numpy(shared([x, q])) - forward_only).max() > 1e-2


def test_config_without_the_key_shares_the_reset_gate():
    config = QRN(4, bidirectional=True).get_config()
    assert config["share_reset_gate"] is False
    assert QRN.from_config(config).share_reset_gate is False
    del config["share_reset_gate"]
    restored = QRN.from_config(config)
    assert restored.share_reset_gate is True
    assert restored.get_config()["share_reset_gate"] is True


@pytest.mark.skipif(
    tuple(int(p) for p in keras.__version__.split(".")[:2]) < (3, 15),
    reason="the fixture was saved by Keras 3.15; an older Keras need not read a newer file",
)
def test_keras_file_saved_by_0_1_predicts_what_it_predicted():
    """`fixtures/qrn_v0_1.keras` was saved by keras_normkit 0.1 (one shared reset gate)."""
    model = keras.models.load_model(FIXTURES / "qrn_v0_1.keras")
    saved = np.load(FIXTURES / "qrn_v0_1.npz")
    inputs = [saved["x"], saved["q"]]
    np.testing.assert_allclose(model.predict(inputs, verbose=0), saved["y"], atol=2e-6)
    names = ("parallel", "sequential", "vector")
    assert all(model.get_layer(name).share_reset_gate for name in names)
    # Read per direction with the forward gate's columns copied into the backward ones, the
    # same weights predict the same; with a backward gate of its own, something else.
    for name in names:
        layer = model.get_layer(name)
        x = inputs[0]
        q = inputs[1] if name == "parallel" else np.repeat(inputs[1][:, None], 6, axis=1)
        clone = QRN.from_config(layer.get_config() | {"share_reset_gate": False})
        clone.build([x.shape, q.shape])
        kernel, bias, *rest = layer.get_weights()
        g = kernel.shape[1] // 2
        columns = np.r_[0 : 2 * g, g : 2 * g]
        clone.set_weights([kernel[:, columns], bias[columns], *rest])
        expected = to_numpy(layer([x, q]))
        np.testing.assert_allclose(to_numpy(clone([x, q])), expected, atol=1e-5)
        kernel = kernel[:, columns]
        kernel[:, 2 * g :] *= -1.0
        clone.set_weights([kernel, bias[columns], *rest])
        assert np.abs(to_numpy(clone([x, q])) - expected).max() > 1e-3


# ---------------------------------------------------------------------------------------------
# Conformance (Keras run_layer_test, .keras round trip, SavedModel export with T = None).


def random_inputs(*shapes):
    # A tuple (not a list): tf.data, used by run_layer_test's training step, rejects lists.
    rng = np.random.default_rng(0)
    return tuple(rng.normal(size=s).astype("float32") for s in shapes)


class QRNConformanceTest(LayerConformanceTestCase):
    def test_conformance_default(self):
        self.run_conformance_test(
            QRN,
            {"units": 4},
            input_data=random_inputs((3, 5, 4), (3, 4)),
            expected_output_shape=(3, 5, 4),
            supports_masking=True,
            expected_num_trainable_weights=4,
            dynamic_axes=(1,),
            atol=1e-5,
        )

    def test_conformance_bidirectional_vector_gates_last_step(self):
        self.run_conformance_test(
            QRN,
            {
                "units": 3,
                "vector_gates": True,
                "use_reset_gate": False,
                "bidirectional": True,
                "return_sequences": False,
                "kernel_regularizer": "l2",
            },
            input_data=random_inputs((2, 6, 3), (2, 6, 3)),
            expected_output_shape=(2, 3),
            supports_masking=True,
            expected_num_losses=2,
            run_training_check=False,  # XLA training: test_dynamic_time_axis_and_xla_training
            dynamic_axes=(1,),
            atol=1e-5,
        )

    def test_conformance_sequential(self):
        self.run_conformance_test(
            QRN,
            {"units": 4, "bidirectional": True, "implementation": "sequential"},
            input_data=random_inputs((2, 5, 4), (2, 4)),
            expected_output_shape=(2, 5, 4),
            supports_masking=True,
            dynamic_axes=(1,),
            atol=1e-5,
        )

    def test_cell_conformance(self):
        self.run_cell_conformance_test(
            QRNCell,
            {"units": 3, "vector_gates": True},
            input_shape=(2, 4, 6),
            expected_output_shape=(2, 3),
            dynamic_axes=(1,),
            atol=1e-5,
        )


def test_config_is_the_constructor_arguments():
    layer = QRN(
        5,
        use_reset_gate=False,
        vector_gates=True,
        bidirectional=True,
        return_sequences=False,
        implementation="sequential",
        kernel_regularizer="l2",
        name="reducer",
    )
    config = layer.get_config()
    base = set(keras.layers.Layer(name="x").get_config())
    assert set(config) - base == {
        "units",
        "use_reset_gate",
        "vector_gates",
        "bidirectional",
        "share_reset_gate",
        "return_sequences",
        "implementation",
        "activation",
        "kernel_initializer",
        "bias_initializer",
        "kernel_regularizer",
        "bias_regularizer",
        "kernel_constraint",
        "bias_constraint",
    }
    clone = QRN.from_config(config)
    assert clone.get_config() == config
    # The cell is built from the layer's arguments, and only from the cell's own.
    assert (layer.cell.use_reset_gate, layer.cell.vector_gates) == (False, True)
    assert isinstance(layer.cell.kernel_regularizer, keras.regularizers.L2)
    assert layer.cell.name == "cell" and layer.name == "reducer"
    cell_config = QRNCell(3, vector_gates=True).get_config()
    assert QRNCell.from_config(cell_config).get_config() == cell_config


# ---------------------------------------------------------------------------------------------
# Bad input.


@given(units=st.one_of(st.integers(-5, 0), st.floats(0.5, 3.5), st.just(True), st.just("4")))
def test_bad_units(units):
    error = ValueError if isinstance(units, int) and not isinstance(units, bool) else TypeError
    for cls in (QRN, QRNCell):
        with pytest.raises(error, match=r"`units`.*Received: units="):
            cls(units)


BAD_ARGUMENTS = [
    ({"implementation": "fast"}, "implementation", ValueError),
    ({"bidirectional": 1}, "bidirectional", TypeError),
    ({"share_reset_gate": "no"}, "share_reset_gate", TypeError),
    ({"return_sequences": "yes"}, "return_sequences", TypeError),
    ({"use_reset_gate": None}, "use_reset_gate", TypeError),
    ({"vector_gates": 0}, "vector_gates", TypeError),
]
BAD_SHAPES = [
    ([(2, 5, 4), (3, 4)], r"same batch size.*x of shape \(2, 5, 4\), q of shape \(3, 4\)"),
    ([(2, 5, 4), (2, 3)], r"same feature size d"),
    ([(2, 4), (2, 4)], r"`x` must have rank 3.*\(2, 4\)"),
    ([(2, 5, 4), (2, 1, 5, 4)], r"`q` must have rank 2.*or 3"),
    ([(2, 5, 4), (2, 6, 4)], r"same number of steps T"),
]


def test_bad_arguments_and_shapes():
    for kwargs, name, error in BAD_ARGUMENTS:
        with pytest.raises(error, match=rf"`{name}`.*Received: {name}="):
            QRN(4, **kwargs)
    for shapes, pattern in BAD_SHAPES:
        x, q = (np.zeros(s, "float32") for s in shapes)
        with pytest.raises(ValueError, match=pattern):
            QRN(4)([x, q])
    with pytest.raises(ValueError, match=r"list \[x, q\]"):
        QRN(4)(np.zeros((2, 5, 4), "float32"))
    # a batch mismatch is caught at every call, also after the layer is built
    layer = QRN(4)
    layer([np.zeros((2, 5, 4), "float32"), np.zeros((2, 4), "float32")])
    with pytest.raises(ValueError, match="same batch size"):
        layer([np.zeros((2, 5, 4), "float32"), np.zeros((5, 4), "float32")])
    with pytest.raises(ValueError, match=r"\[x_t, q_t\].*input_shape=\(None, 5\)"):
        keras.layers.RNN(QRNCell(3))(keras.Input((None, 5)))


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX export (jax2tf) test")
def test_jax_export_with_unknown_time_axis(tmp_path):
    """JAX: a `None` time axis behind an Embedding exports (symbolic length) and serves any T."""
    pytest.importorskip("jax.experimental.jax2tf")
    tokens, q_in = keras.Input((None,), dtype="int32"), keras.Input((8,))
    x = keras.layers.Embedding(20, 8, mask_zero=True)(tokens)
    h = QRN(8, bidirectional=True)([x, q_in])
    model = keras.Model([tokens, q_in], QRN(8, vector_gates=True, return_sequences=False)([x, h]))
    model.export(str(tmp_path), format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(str(tmp_path))  # kept: `serve` needs its variables
    rng = np.random.default_rng(0)
    for steps in (1, 9, 40):  # one step, across a chunk boundary, across a block boundary
        t = rng.integers(1, 20, size=(3, steps)).astype("int32")
        t[0, -1] = 0  # a padded step
        q = rng.normal(size=(3, 8)).astype("float32")
        np.testing.assert_allclose(
            reloaded.serve([t, q]).numpy(),
            model.predict([t, q], verbose=0),
            atol=1e-5,
            err_msg=steps,
        )
