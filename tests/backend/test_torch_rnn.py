"""The PyTorch-native loops of the layer-normalized RNNs (`keras_normkit.backend.torch_rnn`).

Three kinds of evidence: the hand-written backward passes against autograd
(`torch.autograd.gradcheck`, float64, masks and dropout masks included); each layer's
outputs and gradients against Keras's own loop over the same cell (the path the layers ran
before, still the fallback) over the `keras.layers.RNN` options, in float32; and the launch
count the loops exist for, counted with `torch.profiler`, in a test that also fails if a
layer silently stops taking its native loop.

The options are five booleans per case; the six rows of `PAIRWISE` take every pair of
values of every two options at least once (a covering array), where all 32 combinations
would take five times as long.
"""

import itertools
from unittest import mock

import keras
import numpy as np
import pytest

from keras_normkit import layers

if keras.backend.backend() != "torch":
    pytest.skip("the native loops run on the PyTorch backend", allow_module_level=True)

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from keras_normkit.backend import torch_rnn  # noqa: E402

B, T, F, H = 3, 6, 5, 4

# (mask, dropout, go_backwards, return_sequences, the cell's variant): every pair of values
# of every two options appears in some row.
PAIRWISE = [
    (False, False, False, False, False),
    (False, True, True, True, True),
    (True, False, True, False, True),
    (True, True, False, True, False),
    (True, True, True, False, False),
    (False, False, False, True, True),
]


def test_pairwise_rows_cover_every_pair():
    for i, j in itertools.combinations(range(5), 2):
        pairs = {(row[i], row[j]) for row in PAIRWISE}
        assert pairs == set(itertools.product([False, True], repeat=2)), (i, j)


# --------------------------------------------------------------------------- gradcheck


def _tensor(rng, *shape):
    return torch.tensor(rng.standard_normal(shape), dtype=torch.float64, requires_grad=True)


def _gain(rng, width):
    return torch.tensor(1.0 + 0.3 * rng.standard_normal(width), requires_grad=True)


def _step_masks(rng, with_mask, dropout):
    mask = None
    if with_mask:
        mask = rng.random((B, T)) > 0.3
        mask[:, 0] = False  # starts masked: the output stays zero until the first step
        mask = torch.tensor(mask)

    def dropout_mask(width):
        return torch.tensor(rng.random((B, width)) > 0.3, dtype=torch.float64) / 0.7

    return {
        "mask": mask,
        "input_mask": dropout_mask(F) if dropout else None,
        "recurrent_mask": dropout_mask(H) if dropout else None,
        # zero outputs on masked steps in half of the masked cases
        "zero_output_for_mask": with_mask and dropout,
    }


def _gradcheck(function, names, tensors):
    def run(*values):
        last, outputs, states = function(**dict(zip(names, values, strict=True)))
        return (last, outputs, *states)

    assert torch.autograd.gradcheck(run, tensors, atol=1e-6, rtol=1e-4, fast_mode=True)


def _check(run, rng, options, shapes, verify=None):
    """`verify(function, names, tensors)` (`_gradcheck` by default) of the loop `run` under
    `options`, on tensors of `shapes` (float64, CPU); `function(device=None, **values)` runs
    it, the step and dropout masks moved to `device` where one is given."""
    with_mask, dropout, go_backwards, return_sequences, variant = options
    common = _step_masks(rng, with_mask, dropout)
    names = list(shapes)
    tensors = [
        _gain(rng, shape[0]) if name.startswith("g") else _tensor(rng, *shape)
        for name, shape in shapes.items()
    ]

    def function(device=None, **values):
        masks = {
            k: v.to(device) if device is not None and isinstance(v, torch.Tensor) else v
            for k, v in common.items()
        }
        return run(
            values,
            variant,
            go_backwards=go_backwards,
            return_sequences=return_sequences,
            **masks,
        )

    (verify or _gradcheck)(function, names, tensors)


def _check_lstm(
    options, rng, activation="tanh", bias=True, verify=None, recurrent_activation="sigmoid"
):
    """`_check` of `layer_norm_lstm` with the activations given (a bias among the weights or
    none)."""

    def run(v, carry_normalized_state, **kwargs):
        return torch_rnn.layer_norm_lstm(
            v["x"],
            [v["h0"], v["c0"]],
            kernel=v["kernel"],
            recurrent_kernel=v["recurrent_kernel"],
            bias=v["bias"] if bias else None,
            input_norm=(v["gx"], v["bx"], 1e-3),
            recurrent_norm=(v["gh"], v["bh"], 1e-3),
            state_norm=(v["gc"], v["bc"], 1e-3),
            carry_normalized_state=carry_normalized_state,
            activation=activation,
            recurrent_activation=recurrent_activation,
            **kwargs,
        )

    shapes = {
        "x": (B, T, F),
        "h0": (B, H),
        "c0": (B, H),
        "kernel": (F, 4 * H),
        "recurrent_kernel": (H, 4 * H),
        **({"bias": (4 * H,)} if bias else {}),
        "gx": (4 * H,),
        "bx": (4 * H,),
        "gh": (4 * H,),
        "bh": (4 * H,),
        "gc": (H,),
        "bc": (H,),
    }
    _check(run, rng, options, shapes, verify)


@pytest.mark.parametrize("options", PAIRWISE)
def test_lstm_backward_is_autograds(options):
    _check_lstm(options, np.random.default_rng(0))


@pytest.mark.parametrize("options", PAIRWISE[:3])
def test_lstm_backward_without_the_fused_tanh_is_autograds(options):
    # relu: the loop calls the activations one by one (the default tanh and sigmoid run as
    # one sigmoid, `_fuses_tanh`, in the test above).
    assert not torch_rnn._fuses_tanh("relu", "sigmoid")
    _check_lstm(options, np.random.default_rng(1), activation="relu", bias=False)


@pytest.mark.parametrize("name", sorted(torch_rnn.ACTIVATIONS))
def test_activation_backward_writes_into_out(name):
    # The loops write the activations' adjoints into slices of their preallocated arrays
    # (`out=`, a strided view, or the adjoint's own memory); each equals autograd's.
    function, backward = torch_rnn.ACTIVATIONS[name]
    rng = np.random.default_rng(3)
    z = torch.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    grad = torch.tensor(rng.standard_normal((4, 6)))
    output = function(z)
    (expected,) = torch.autograd.grad(output, z, grad)
    output = output.detach()
    torch.testing.assert_close(backward(grad, output), expected)
    buffer = torch.full((4, 9), 7.0, dtype=torch.float64)
    written = backward(grad, output, out=buffer[:, 2:8])
    torch.testing.assert_close(buffer[:, 2:8], expected)
    assert written.data_ptr() == buffer[:, 2:8].data_ptr()
    assert (buffer[:, :2] == 7).all() and (buffer[:, 8:] == 7).all()
    in_place = grad.clone()
    backward(in_place, output, out=in_place)
    torch.testing.assert_close(in_place, expected)


@pytest.mark.parametrize("layer", ["lstm", "gru", "gru_reset_before"])
@pytest.mark.parametrize(
    ("activation", "recurrent_activation"),
    [("linear", "tanh"), ("sigmoid", "relu")],
)
def test_lstm_and_gru_backward_with_other_activations_are_autograds(
    layer, activation, recurrent_activation
):
    # Every activation as the candidate's and as the gates' (the defaults are above), the
    # adjoints written into the loops' arrays (`test_activation_backward_writes_into_out`):
    # masked steps, dropout and every output, the GRU in both forms.
    options = (True, True, False, True, layer == "gru_reset_before")
    rng = np.random.default_rng(6)
    activations = {"activation": activation, "recurrent_activation": recurrent_activation}
    if layer == "lstm":
        _check_lstm(options, rng, bias=False, **activations)
    else:
        _check_gru(options, rng, **activations)


def test_tanh_from_sigmoid_is_tanh():
    z = torch.linspace(-30.0, 30.0, 20001, dtype=torch.float32)
    fused = torch_rnn._tanh_from_sigmoid(
        torch.sigmoid(2 * z), z.new_tensor(-1.0), z.new_tensor(2.0)
    )
    # float32 round-off of `2 σ - 1` (an ulp of 1), saturating to +-1 as tanh does.
    np.testing.assert_allclose(fused.numpy(), np.tanh(z.double().numpy()), rtol=0, atol=3e-7)
    assert fused[0] == -1.0 and fused[-1] == 1.0
    assert torch_rnn._fuses_tanh("tanh", "sigmoid")
    assert not torch_rnn._fuses_tanh("tanh", "relu")
    assert not torch_rnn._fuses_tanh("linear", "sigmoid")


def test_default_lstm_takes_the_fused_tanh():
    specs = []
    loop = torch_rnn._LayerNormLSTMLoop.loop

    def recorded(spec, *args, **kwargs):
        specs.append(spec["fused_tanh"])
        return loop(spec, *args, **kwargs)

    x = np.random.default_rng(0).standard_normal((B, T, F)).astype("float32")
    with mock.patch.object(torch_rnn._LayerNormLSTMLoop, "loop", staticmethod(recorded)):
        layers.LayerNormLSTM(H)(x)
        layers.LayerNormLSTM(H, activation="relu")(x)
    assert specs == [True, False]


@pytest.mark.parametrize("options", PAIRWISE[1:3])
def test_lstm_without_the_fused_tanh_equals_keras_loop(options, monkeypatch):
    monkeypatch.setitem(LAYERS, "lstm", (layers.LayerNormLSTM, {"activation": "relu"}))
    _compare_with_keras_loop("lstm", options, F)


def _check_gru(options, rng, verify=None, activation="tanh", recurrent_activation="sigmoid"):
    """`_check` of `layer_norm_gru` with the activations given; the variant:
    `reset_after=False`."""
    reset_after = not options[-1]

    def run(v, _, **kwargs):
        return torch_rnn.layer_norm_gru(
            v["x"],
            [v["h0"]],
            kernel=v["kernel"],
            recurrent_kernel=v["recurrent_kernel"],
            bias=v["bias"],
            input_norm=(v["gx"], v["bx"], 1e-3),
            recurrent_norm=(v["gh"], v["bh"], 1e-3),
            candidate_norm=None if reset_after else (v["gc"], v["bc"], 1e-3),
            reset_after=reset_after,
            activation=activation,
            recurrent_activation=recurrent_activation,
            **kwargs,
        )

    shapes = {
        "x": (B, T, F),
        "h0": (B, H),
        "kernel": (F, 3 * H),
        "recurrent_kernel": (H, 3 * H),
        "bias": (2, 3 * H) if reset_after else (3 * H,),
        "gx": (3 * H,),
        "bx": (3 * H,),
        "gh": (3 * H if reset_after else 2 * H,),
        "bh": (3 * H if reset_after else 2 * H,),
    }
    if not reset_after:
        shapes.update({"gc": (H,), "bc": (H,)})
    _check(run, rng, options, shapes, verify)


@pytest.mark.parametrize("options", PAIRWISE)
def test_gru_backward_is_autograds(options):
    _check_gru(options, np.random.default_rng(1))


def _check_simple_rnn(options, rng, verify=None):
    """`_check` of `layer_norm_simple_rnn`; the variant: relu."""

    def run(v, relu, **kwargs):
        return torch_rnn.layer_norm_simple_rnn(
            v["x"],
            [v["h0"]],
            kernel=v["kernel"],
            recurrent_kernel=v["recurrent_kernel"],
            bias=v["bias"],
            norm=(v["g"], v["b"], 1e-3),
            activation="relu" if relu else "tanh",
            **kwargs,
        )

    shapes = {
        "x": (B, T, F),
        "h0": (B, H),
        "kernel": (F, H),
        "recurrent_kernel": (H, H),
        "bias": (H,),
        "g": (H,),
        "b": (H,),
    }
    _check(run, rng, options, shapes, verify)


@pytest.mark.parametrize("options", PAIRWISE)
def test_simple_rnn_backward_is_autograds(options):
    _check_simple_rnn(options, np.random.default_rng(2))


def _fast_weights(v, variant, **kwargs):
    return torch_rnn.fast_weights_rnn(
        v["x"],
        [v["h0"], v.get("a0")],
        kernel=v["kernel"],
        recurrent_kernel=v["recurrent_kernel"],
        bias=v["bias"],
        norm=(v["g"], v["b"], 1e-5) if "g" in v else None,
        inner_steps=2 if variant else 1,
        decay=0.9,
        fast_learning_rate=0.5,
        activation=kwargs.pop("activation", "relu"),
        preliminary_layer_norm=variant,
        **kwargs,
    )


FAST_WEIGHTS_SHAPES = {
    "x": (B, T, F),
    "h0": (B, H),
    "kernel": (F, H),
    "recurrent_kernel": (H, H),
    "bias": (H,),
    "g": (H,),
    "b": (H,),
}


@pytest.mark.parametrize("options", PAIRWISE)
def test_fast_weights_backward_is_autograds(options, monkeypatch):
    """The variant: two inner steps, the preliminary norm, a given `A0`, and `A` kept
    every 4 steps and recomputed between (every step's is kept otherwise)."""
    variant = options[-1]
    shapes = dict(FAST_WEIGHTS_SHAPES)
    if variant:
        shapes["a0"] = (B, H, H)
        monkeypatch.setattr(torch_rnn, "FAST_WEIGHTS_KEEP_BYTES", 0)
        monkeypatch.setattr(torch_rnn, "FAST_WEIGHTS_CHECKPOINT", 4)
    _check(_fast_weights, np.random.default_rng(4), options, shapes)


def test_fast_weights_without_norm_backward_is_autograds():
    shapes = {k: v for k, v in FAST_WEIGHTS_SHAPES.items() if k not in ("g", "b")}

    def run(v, variant, **kwargs):
        return _fast_weights(v, variant, activation="tanh", **kwargs)

    _check(run, np.random.default_rng(5), PAIRWISE[1], shapes)


# ------------------------------------------------------------------ on a CUDA device

CUDA = torch.cuda.is_available()


def _cuda_equals_cpu(function, names, tensors, devices=("cpu", "cuda")):
    """The loop on the GPU gives the CPU's outputs and gradients (float64, to round-off),
    for fixed cotangents of every output (`devices`: the two runs' devices)."""
    results = []
    for device in devices:
        values = [t.detach().to(device).requires_grad_() for t in tensors]
        last, outputs, states = function(device=device, **dict(zip(names, values, strict=True)))
        returned = [last, outputs, *states]
        assert all(x.device.type == device for x in returned)
        generator = torch.Generator().manual_seed(0)
        cotangents = [
            torch.randn(x.shape, generator=generator, dtype=x.dtype).to(device) for x in returned
        ]
        grads = torch.autograd.grad(returned, values, cotangents, allow_unused=True)
        results.append([x.detach().cpu() for x in returned] + [g.cpu() for g in grads])
    for on_cpu, on_cuda in zip(*results, strict=True):
        torch.testing.assert_close(on_cuda, on_cpu, rtol=1e-9, atol=1e-9)


CUDA_CASES = {
    "lstm": lambda options, verify: _check_lstm(options, np.random.default_rng(0), verify=verify),
    "lstm_relu": lambda options, verify: _check_lstm(
        options, np.random.default_rng(1), activation="relu", bias=False, verify=verify
    ),
    "gru": lambda options, verify: _check_gru(options, np.random.default_rng(1), verify),
    "simple_rnn": lambda options, verify: _check_simple_rnn(
        options, np.random.default_rng(2), verify
    ),
    "fast_weights": lambda options, verify: _check(
        _fast_weights,
        np.random.default_rng(4),
        options,
        {**FAST_WEIGHTS_SHAPES, **({"a0": (B, H, H)} if options[-1] else {})},
        verify,
    ),
}


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (torch.cuda.is_available())")
@pytest.mark.parametrize("options", PAIRWISE)
@pytest.mark.parametrize("kind", sorted(CUDA_CASES))
def test_loop_on_cuda_equals_cpu(kind, options):
    # The loops are device-agnostic torch; this runs each on a GPU where there is one (the
    # accelerator check, `benchmarks/gpu_check.sh`), over the options of the tests above.
    CUDA_CASES[kind](options, _cuda_equals_cpu)


def test_device_comparison_catches_a_difference():
    # `_cuda_equals_cpu` itself, without a GPU (the CPU twice): a loop whose second run's
    # outputs differ by 1e-7 fails it, and so does one whose gradient differs.
    def loop(shift=0.0, scale=1.0):
        runs = []

        def function(device=None, **values):
            runs.append(device)
            out = values["x"] * (2.0 if len(runs) == 1 else 2.0 * scale) + (
                shift if len(runs) > 1 else 0.0
            )
            return out[:, -1], out, [out[:, 0] * 3.0]

        return function

    tensors = [_tensor(np.random.default_rng(0), B, T, F)]
    _cuda_equals_cpu(loop(), ["x"], tensors, devices=("cpu", "cpu"))
    with pytest.raises(AssertionError):
        _cuda_equals_cpu(loop(shift=1e-7), ["x"], tensors, devices=("cpu", "cpu"))
    with pytest.raises(AssertionError):
        _cuda_equals_cpu(loop(scale=1.0 + 1e-7), ["x"], tensors, devices=("cpu", "cpu"))


def test_fast_weights_trains_natively_on_the_cpu_up_to_the_crossover():
    cpu = torch.device("cpu")
    limit = torch_rnn.FAST_WEIGHTS_CPU_MAX_VALUES
    assert torch_rnn.fast_weights_native(64, 64, cpu, training=True)  # 64 * 64**2 = 2**18
    assert not torch_rnn.fast_weights_native(64, 128, cpu, training=True)
    assert torch_rnn.fast_weights_native(64, 128, cpu, training=False)
    assert torch_rnn.fast_weights_native(64, 128, torch.device("meta"), training=True)
    x = torch.zeros(limit // 64 + 1, 2, 3)
    with pytest.raises(NotImplementedError, match="slower on the CPU"):
        torch_rnn.fast_weights_rnn(
            x,
            [torch.zeros(x.shape[0], 8), None],
            kernel=torch.zeros(3, 8, requires_grad=True),
            recurrent_kernel=torch.zeros(8, 8),
            bias=None,
            norm=None,
            inner_steps=1,
            decay=0.9,
            fast_learning_rate=0.5,
        )


def test_unknown_activation_is_not_implemented():
    x = torch.zeros(2, 3, 4)
    with pytest.raises(NotImplementedError, match="activation='hard_sigmoid'"):
        torch_rnn.layer_norm_simple_rnn(
            x,
            [torch.zeros(2, 4)],
            kernel=torch.zeros(4, 4),
            recurrent_kernel=torch.zeros(4, 4),
            bias=None,
            norm=(torch.ones(4), torch.zeros(4), 1e-3),
            activation="hard_sigmoid",
        )


# ------------------------------------------------- the normalized input projection


@pytest.mark.parametrize("features, width", [(2, 16), (4, 64), (5, 16), (9, 64)])
def test_normalized_projection_is_layer_norm_of_the_product(features, width):
    rng = np.random.default_rng(features * width)
    x = torch.tensor(rng.standard_normal((T, B, features)))
    kernel = torch.tensor(rng.standard_normal((features, width)))
    gamma = torch.tensor(1.0 + 0.3 * rng.standard_normal(width))
    beta = torch.tensor(rng.standard_normal(width))
    ours = torch_rnn._normalized_projection(x, kernel, gamma, beta, 1e-3)
    # NumPy: the product, its mean and biased variance over the columns.
    product = x.numpy() @ kernel.numpy()
    mean = product.mean(-1, keepdims=True)
    variance = ((product - mean) ** 2).mean(-1, keepdims=True)
    expected = (product - mean) / np.sqrt(variance + 1e-3) * gamma.numpy() + beta.numpy()
    assert ours.shape == (T, B, width)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=0, atol=1e-10)


def test_normalized_projection_one_gemm_form_in_float32_and_its_gradients():
    assert torch_rnn._factorizes(2, 16) and not torch_rnn._factorizes(5, 16)
    rng = np.random.default_rng(0)
    # float32 at a benchmark's size: the two forms agree to round-off.
    x = torch.tensor(rng.standard_normal((50, 64, 32)), dtype=torch.float32)
    kernel = torch.tensor(rng.standard_normal((32, 512)) * 0.2, dtype=torch.float32)
    gamma = torch.tensor(1.0 + 0.1 * rng.standard_normal(512), dtype=torch.float32)
    beta = torch.tensor(0.1 * rng.standard_normal(512), dtype=torch.float32)
    ours = torch_rnn._normalized_projection(x, kernel, gamma, beta, 1e-3)
    direct = torch.nn.functional.layer_norm(x @ kernel, (512,), gamma, beta, 1e-3)
    assert float((ours - direct).abs().max()) <= 1e-5 * float(direct.abs().max())
    # Autograd through the one-GEMM form (float64).
    tensors = [
        _tensor(rng, T, B, 2),
        _tensor(rng, 2, 16),
        _gain(rng, 16),
        _tensor(rng, 16),
    ]
    assert torch.autograd.gradcheck(
        lambda *v: torch_rnn._normalized_projection(*v, 1e-3), tensors, atol=1e-6, rtol=1e-4
    )


def test_normalized_projection_of_equal_columns_is_the_shift():
    # A kernel whose columns are all equal: every product row is constant, its variance 0.
    x = torch.tensor(np.random.default_rng(1).standard_normal((T, B, 2)))
    kernel = torch.ones(2, 16, dtype=torch.float64) * torch.tensor([[0.5], [-2.0]])
    beta = torch.linspace(-1.0, 1.0, 16, dtype=torch.float64)
    ours = torch_rnn._normalized_projection(x, kernel, torch.ones(16), beta, 1e-3)
    assert torch.equal(ours, beta.expand(T, B, 16))


# ------------------------------------------------------ the layers against Keras's loop


# (layer, the variant's arguments)
LAYERS = {
    "lstm": (layers.LayerNormLSTM, {"carry_normalized_state": True}),
    "gru": (layers.LayerNormGRU, {"reset_after": False}),
    "simple_rnn": (layers.LayerNormSimpleRNN, {"activation": "relu"}),
    "fast_weights": (
        layers.FastWeightsRNN,
        {"inner_steps": 2, "preliminary_layer_norm": True, "activation": "tanh"},
    ),
}


def _native_loop(layer):
    """The object and attribute name of `layer`'s native loop (it raises
    `NotImplementedError` where it does not apply)."""
    if isinstance(layer, layers.FastWeightsRNN):
        return layer, "_torch_loop"
    return layer.cell, "torch_loop"


def _keras_loop(layer):
    """A context in which `layer` runs its Keras-ops loop (its path before the native
    loops, and its fallback)."""

    def not_native(*args, **kwargs):
        raise NotImplementedError

    return mock.patch.object(*_native_loop(layer), not_native)


def _outputs_and_gradients(layer, x, mask, initial_state, native):
    """The layer's outputs and the gradients of a fixed random projection of them with
    respect to the inputs, initial states and weights."""
    x = torch.tensor(x, requires_grad=True)
    states = [torch.tensor(s, requires_grad=True) for s in initial_state]
    kwargs = {"mask": torch.tensor(mask)} if mask is not None else {}
    if states:
        kwargs["initial_state"] = states
    if native:
        owner, name = _native_loop(layer)
        loop, finished = getattr(owner, name), []

        def recorded(*args, **loop_kwargs):
            result = loop(*args, **loop_kwargs)
            finished.append(True)
            return result

        with mock.patch.object(owner, name, recorded):
            outputs = layer(x, training=True, **kwargs)
        assert finished, "the native loop declined: the comparison would compare nothing"
    else:
        with _keras_loop(layer):
            outputs = layer(x, training=True, **kwargs)
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    rng = np.random.default_rng(5)
    loss = sum(
        (y * torch.tensor(rng.standard_normal(tuple(y.shape)), dtype=y.dtype)).sum()
        for y in outputs
    )
    weights = [w.value for w in layer.trainable_weights]
    grads = torch.autograd.grad(loss, [x, *states, *weights])
    return [y.detach().numpy() for y in outputs], [g.numpy() for g in grads]


# How close the two loops must come, as a fraction of each array's scale (its largest
# magnitude, at least 1). The outputs: to 1e-5. The gradients are sums over the batch and
# the steps taken in another order, through layer norm's centring (differences of nearly
# equal terms): over 40 initialisations of the weights in every case here, the median
# difference was 1e-6 of the scale and the worst 1.4e-4 (a fast-weights input gradient),
# so to 5e-4, far below what a wrong term makes. (Not in float64: Keras's `ops.mean`
# computes in float32 on PyTorch, so Keras's loop is no exact reference there either.)
OUTPUT_TOLERANCE, GRADIENT_TOLERANCE = 1e-5, 5e-4


@pytest.mark.parametrize("options", PAIRWISE)
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_layer_equals_keras_loop(kind, options):
    _compare_with_keras_loop(kind, options, F)


@pytest.mark.parametrize("options", PAIRWISE[1:3])
@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_layer_with_few_features_equals_keras_loop(kind, options):
    # One feature: the normalized input projection takes its one-GEMM form.
    assert torch_rnn._factorizes(1, 3 * H)
    _compare_with_keras_loop(kind, options, 1)


def _compare_with_keras_loop(kind, options, features):
    with_mask, dropout, go_backwards, return_sequences, variant = options
    layer_class, variant_arguments = LAYERS[kind]
    rng = np.random.default_rng(3)
    # Fast weights: 11 steps (past a step count where the Keras-ops engine chunks).
    steps = 11 if kind == "fast_weights" else T
    x = rng.standard_normal((B, steps, features)).astype("float32")
    mask = None
    if with_mask:
        mask = rng.random((B, steps)) > 0.3
        mask[:, 0] = False
    # Given initial states in the rows with dropout, zeros in the others.
    initial_state = [rng.standard_normal((B, H)).astype("float32")]
    if kind == "lstm":
        initial_state.append(rng.standard_normal((B, H)).astype("float32"))
    if kind == "fast_weights":
        a0 = rng.standard_normal((B, H, H)).astype("float32") * 0.3
        initial_state.append(((a0 + a0.transpose(0, 2, 1)) / 2).reshape(B, H * H))
    layer = layer_class(
        H,
        return_sequences=return_sequences,
        return_state=True,
        go_backwards=go_backwards,
        dropout=0.3 if dropout else 0.0,
        recurrent_dropout=0.3 if dropout else 0.0,
        zero_output_for_mask=with_mask and not dropout,
        seed=7,
        **(variant_arguments if variant else {}),
    )
    layer.build((B, steps, features))
    given = initial_state if dropout else []
    # The dropout masks are drawn from the layer's seed generator: the same for both calls
    # once its state is rewound.
    seed_state = layer.cell.seed_generator.state.value.clone()
    native = _outputs_and_gradients(layer, x, mask, given, native=True)
    layer.cell.seed_generator.state.assign(seed_state)
    reference = _outputs_and_gradients(layer, x, mask, given, native=False)
    for part, tolerance in ((0, OUTPUT_TOLERANCE), (1, GRADIENT_TOLERANCE)):
        for ours, theirs in zip(native[part], reference[part], strict=True):
            scale = max(1.0, float(np.abs(theirs).max()))
            assert np.abs(ours - theirs).max() <= tolerance * scale


def test_a_custom_activation_runs_keras_loop():
    """An activation the native loop does not know falls back to Keras's loop, and both
    compute the same (here: the native loop would refuse `hard_sigmoid`)."""
    layer = layers.LayerNormLSTM(H, recurrent_activation="hard_sigmoid")
    x = np.random.default_rng(0).standard_normal((B, T, F)).astype("float32")
    with mock.patch.object(torch_rnn, "layer_norm_lstm", wraps=torch_rnn.layer_norm_lstm) as spy:
        y = layer(x)
    assert spy.call_count == 1  # asked, and it declined
    with _keras_loop(layer):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(y), layer(x).detach().numpy())


# ------------------------------------------------------------- the fast path, counted


FUNCTIONS = {
    "lstm": (layers.LayerNormLSTM, "layer_norm_lstm"),
    "gru": (layers.LayerNormGRU, "layer_norm_gru"),
    "simple_rnn": (layers.LayerNormSimpleRNN, "layer_norm_simple_rnn"),
    "fast_weights": (layers.FastWeightsRNN, "fast_weights_rnn"),
}


def _top_level_aten_ops(function):
    """ATen operations called by `function()` that no other ATen operation called (each a
    kernel launch on a GPU, views aside)."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        function()
    count = 0
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("aten::"):
            parent = parent.cpu_parent
        count += parent is None
    return count


def _train_ops_per_step(layer_class, steps):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((None, F)), layer_class(8)])
    model.compile("adam", "mse")
    y = np.zeros((B, 8), "float32")
    counts = []
    for t in steps:
        x = np.ones((B, t, F), "float32")
        model.train_on_batch(x, y)
        counts.append(_top_level_aten_ops(lambda x=x: model.train_on_batch(x, y)))
    return (counts[1] - counts[0]) / (steps[1] - steps[0])


# The targets for a train step (forward and backward), per time step; Keras's own
# LSTM loop takes 41.
TRAIN_OPS_PER_STEP = {"lstm": 40, "gru": 40, "simple_rnn": 20, "fast_weights": 80}


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_native_loop_is_taken_and_launches_few_operations(kind):
    """Fails if the layer stops taking its native loop (as Keras's own torch LSTM once lost
    its cuDNN path, keras PR #22874) or if the loop's launches per step grow."""
    layer_class, name = FUNCTIONS[kind]
    with mock.patch.object(torch_rnn, name, wraps=getattr(torch_rnn, name)) as spy:
        per_step = _train_ops_per_step(layer_class, (8, 16))
    assert spy.call_count >= 4
    assert per_step <= TRAIN_OPS_PER_STEP[kind], per_step


def test_mixed_precision_runs_in_float32_and_returns_the_compute_dtype():
    """Under `mixed_float16` the loop runs in float32 from the float16 inputs and weights
    (Keras's autocast): it equals the float32 layer given those values, to float16's
    precision of the output."""
    x = np.random.default_rng(0).standard_normal((B, T, F)).astype("float16")
    keras.config.set_dtype_policy("mixed_float16")
    layer = layers.LayerNormLSTM(H, return_sequences=True)
    y = layer(x)
    assert y.dtype == torch.float16
    keras.config.set_dtype_policy("float32")
    reference = layers.LayerNormLSTM(H, return_sequences=True)
    reference.build((B, T, F))
    reference.set_weights([w.astype("float16").astype("float32") for w in layer.get_weights()])
    expected = reference(x.astype("float32")).detach().numpy()
    np.testing.assert_allclose(y.float().detach().numpy(), expected, atol=2e-3)


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
def test_compiled_train_step_runs_the_native_loop(kind):
    """`jit_compile=True` (Keras compiles the train step with `torch.compile`) traces the
    layer's call into the native loop: it trains and agrees with the eager step."""
    layer_class, name = FUNCTIONS[kind]
    x = np.random.default_rng(0).standard_normal((B, T, F)).astype("float32")
    y = np.random.default_rng(1).standard_normal((B, 4)).astype("float32")
    losses = {}
    for jit in (False, True):
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((T, F)), layer_class(4)])
        model.compile(keras.optimizers.SGD(0.1), "mse", jit_compile=jit)
        with mock.patch.object(torch_rnn, name, wraps=getattr(torch_rnn, name)) as spy:
            losses[jit] = [float(model.train_on_batch(x, y)) for _ in range(3)]
        assert spy.call_count >= 1
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)
