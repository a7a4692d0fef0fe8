"""PyTorch-native time loops of the layer-normalized RNNs and of fast weights, hand-differentiated.

On the PyTorch backend, `keras.layers.RNN` runs a Python loop whose every step calls the cell
through `keras.ops` (each call converts, dispatches and casts), so a step of a
layer-normalized LSTM is about 85 ATen operations in training, each a kernel launch on a GPU.
The functions here run the same recurrences in plain `torch`:

* the state-free part of every step (input projection, its layer norm and bias) for all time
  steps at once, as one GEMM over `batch * timesteps` (with few input features the norm folded
  into it: `_normalized_projection`), with PyTorch's autograd;
* the recurrence itself as one `torch.autograd.Function` over the whole sequence, whose
  forward loop calls `torch` directly (`torch.native_layer_norm` for the norms, the gates'
  pre-activations as one GEMM per step) and whose backward loop is written by hand
  (`native_layer_norm_backward`, `sigmoid_backward`, ...): autograd would record and replay
  every small operation of every step. What the backward pass reduces over all steps (the
  recurrent products, the cell states, the adjoints) is written straight into arrays made
  once per call (`out=` of a step's view; no stacked copy), the recurrent kernel's gradient
  is summed step by step (one accumulating GEMM a step, while the step's adjoint is in
  cache), and the norms' gains and shifts are summed after the loop in one pass each.

Each function takes the layer's tensors (never a layer) and returns what Keras's
`backend.rnn` returns, `(last_output, outputs, states)`, with Keras's semantics: masked steps
keep the states and repeat the previous output (zeros with `zero_output_for_mask`, and
before the first unmasked step), `go_backwards` processes the reversed sequence and returns
the outputs in processing order, and without `return_sequences` `outputs` holds only the last
output. A function raises `NotImplementedError` for what it does not run (an activation
outside `ACTIVATIONS`; fast weights trained on a CPU past `FAST_WEIGHTS_CPU_MAX_VALUES`), and
the layer then falls back to its Keras-ops loop, as Keras's `LSTM` falls back from
`backend.lstm`. Half-precision inputs run in float32 (the caller casts the
results back to its compute dtype).

The formulas are the cells' (`keras_normkit.layers.LayerNormLSTMCell`, `LayerNormGRUCell`,
`LayerNormSimpleRNNCell`, `FastWeightsRNN`); the loops are tested against Keras's loop over
those cells, outputs and gradients, and their backward passes against autograd with
`torch.autograd.gradcheck`. Why the backward passes are written by hand:
benchmarks/DECISIONS.md#torch-native-loops.
"""

import torch

__all__ = [
    "ACTIVATIONS",
    "FAST_WEIGHTS_CHECKPOINT",
    "FAST_WEIGHTS_CPU_MAX_VALUES",
    "FAST_WEIGHTS_KEEP_BYTES",
    "fast_weights_native",
    "fast_weights_rnn",
    "layer_norm_gru",
    "layer_norm_lstm",
    "layer_norm_simple_rnn",
]

aten = torch.ops.aten


def _output_backward(op, *arguments):
    """`backward(grad, output, out=None)` of the ATen activation backward `op(grad, output,
    *arguments)`, written into `out` (its `grad_input` form) where one is given."""

    def backward(grad, output, out=None):
        if out is None:
            return op(grad, output, *arguments)
        return op.grad_input(grad, output, *arguments, grad_input=out)

    return backward


def _identity(x):
    return x


def _identity_backward(grad, output, out=None):
    return grad if out is None else out.copy_(grad)


# The activations the loops run: name -> (function, backward from the output).
ACTIVATIONS = {
    "tanh": (torch.tanh, _output_backward(aten.tanh_backward)),
    "sigmoid": (torch.sigmoid, _output_backward(aten.sigmoid_backward)),
    # relu's backward from its output: the output is positive where the input is.
    "relu": (torch.relu, _output_backward(aten.threshold_backward, 0)),
    "linear": (_identity, _identity_backward),
}


def _activation(name, argument):
    """`ACTIVATIONS[name]`, or `NotImplementedError` (the caller falls back to Keras's loop)."""
    if name not in ACTIVATIONS:
        raise NotImplementedError(f"No native loop for {argument}={name!r}.")
    return ACTIVATIONS[name]


def _compute_dtype(tensor):
    return torch.float32 if tensor.dtype in (torch.float16, torch.bfloat16) else tensor.dtype


def _time_major(x, go_backwards):
    """`(B, T, ...)` -> `(T, B, ...)`, reversed along time with `go_backwards`."""
    x = x.transpose(0, 1)
    return torch.flip(x, (0,)) if go_backwards else x


def _step_masks(mask, go_backwards):
    """The `(B, 1)` boolean mask of every step, in processing order, or `None`."""
    if mask is None:
        return None
    return _time_major(mask.to(torch.bool), go_backwards).unsqueeze(-1).unbind(0)


def _loop_spec(mask, go_backwards, zero_output_for_mask, return_sequences, **cell):
    """What a loop reads besides tensors: the cell's settings `cell` and the `RNN` options."""
    return {
        **cell,
        "masks": _step_masks(mask, go_backwards),
        "zero_output": bool(zero_output_for_mask),
        "all_outputs": bool(return_sequences),
    }


def _loop_inputs(sequences, input_mask, go_backwards, dtype):
    """The inputs `(T, B, F)` in processing order, in `dtype`, dropout mask applied."""
    x = _time_major(sequences.to(dtype), go_backwards)
    return x if input_mask is None else x * input_mask.to(dtype)


def _transposed(matrix):
    """`matrix.t()` as a contiguous copy, for the GEMMs of a backward loop: a step's GEMM with
    a transposed view as its second operand takes 1.5x as long on the CPU (one thread,
    64x512 by 512x128)."""
    return matrix.t().contiguous()


def _fuses_tanh(activation, recurrent_activation):
    """Whether an LSTM loop runs tanh as `2 σ(2 z) - 1`: with tanh and sigmoid (Keras's
    defaults), one sigmoid call covers all four gates once the candidate's pre-activation is
    doubled, and a sigmoid with an affine step costs less than `torch.tanh` on the CPU
    (64 x 128 on one thread: 4 + 3 against 23 µs)."""
    return activation == "tanh" and recurrent_activation == "sigmoid"


def _tanh_from_sigmoid(s, minus_one, two):
    """`tanh(z) = 2 σ(2 z) - 1` from `s = σ(2 z)`, in one operation (`minus_one` and `two`:
    0-d tensors of the loop's dtype)."""
    return torch.addcmul(minus_one, s, two)


def _norm_param_grads(grad, x, mean, rstd, gamma, beta):
    """`(d_gamma, d_beta)` of a layer norm over the last axis of `x` (every step's input
    stacked), summed over the steps and the batch: `native_layer_norm_backward` with only the
    weights' gradients asked, one pass over `grad` and `x` (no normalized copy of `x`).

    `mean` and `rstd` are `native_layer_norm`'s, stacked like `x`.
    """
    _, d_gamma, d_beta = aten.native_layer_norm_backward(
        grad, x, (x.shape[-1],), mean, rstd, gamma, beta, (False, True, True)
    )
    return d_gamma, d_beta


def _add_product(total, a, b):
    """`total + aᵀ b`, summed in place into `total` (`aᵀ b` where `total` is `None`): a
    weight's gradient summed step by step in a backward loop."""
    if total is None:
        return torch.mm(a.t(), b)
    return total.addmm_(a.t(), b)


def _factorizes(features, width):
    """Whether `_normalized_projection` takes its one-GEMM form: with few features, where the
    `F x F` quadratic form costs less than the norm's pass over the product."""
    return 8 * features <= width


def _normalized_projection(x, kernel, gamma, beta, epsilon):
    """`LN(x W) * gamma + beta` (the norm over the last axis) of the inputs `x` `(T, B, F)`:
    every step's normalized input projection at once, `(T, B, width)`.

    With few features (`8 F <= width`, the usual case: 32 features into 4 x 128 gates) the
    norm takes no pass of its own over the `T·B x width` product, nor a second array of that
    size. The product's mean over its columns is `x · mean_j(W)`, so with the column-centred
    kernel `W_c = W - mean_j(W)` the centred product is `x W_c`, its variance the quadratic
    form `x (W_c W_cᵀ / width) xᵀ` of the `F x F` matrix, and the result one GEMM,
    `[x · rstd, 1] @ [W_c * gamma; beta]` (exact algebra; in float32 it agrees with the
    two-pass norm to round-off). Autograd differentiates either form.
    """
    steps, batch, features = x.shape
    width = kernel.shape[-1]
    if not _factorizes(features, width):
        return torch.nn.functional.layer_norm(
            torch.matmul(x, kernel), (width,), gamma, beta, epsilon
        )
    x = x.reshape(steps * batch, features)
    centred = kernel - kernel.mean(1, keepdim=True)
    gram = torch.mm(centred, centred.t()) / width
    variance = (torch.mm(x, gram) * x).sum(1, keepdim=True).clamp_min(0.0)
    scaled = torch.cat((x * torch.rsqrt(variance + epsilon), x.new_ones(steps * batch, 1)), 1)
    weights = torch.cat((centred * gamma, beta.unsqueeze(0)), 0)
    return torch.mm(scaled, weights).view(steps, batch, width)


class _Masking:
    """Keras's masked-step rule in both directions, for a loop whose output is its state `h`.

    Forward: `h_t = where(m, h_new, h_{t-1})` (every state likewise) and the output
    `y_t = where(m, h_new, y_{t-1})` (`y_{-1} = 0`; zeros with `zero_output_for_mask`).
    Backward: the adjoints of `h_new` and of the previous states and outputs.
    """

    def __init__(self, masks, zero_output):
        self.masks = masks
        self.zero_output = zero_output

    def forward(self, t, new_states, states, h_new, y_prev):
        if self.masks is None:
            return new_states, h_new
        m = self.masks[t]
        states = tuple(
            torch.where(m, new, old) for new, old in zip(new_states, states, strict=True)
        )
        return states, torch.where(m, h_new, 0.0 if self.zero_output else y_prev)

    def backward(self, t, d_states, d_y):
        """`(adjoints of the step's new states, adjoints passed to t-1's states, dy_{t-1})`.

        `d_states`: the adjoints of the states after step `t` (the first is `h`'s, which the
        output adjoint `d_y` joins for the step's new `h`).
        """
        if self.masks is None:
            d_new = (d_states[0] + d_y if d_y is not None else d_states[0], *d_states[1:])
            return d_new, None, None
        m = self.masks[t]
        d_h = d_states[0] + d_y if d_y is not None else d_states[0]
        d_new = (torch.where(m, d_h, 0.0), *(torch.where(m, d, 0.0) for d in d_states[1:]))
        d_old = tuple(torch.where(m, 0.0, d) for d in d_states)
        d_y_prev = None
        if d_y is not None and not self.zero_output:
            d_y_prev = torch.where(m, 0.0, d_y)
        return d_new, d_old, d_y_prev


def _output_grads(d_outputs, steps, all_outputs):
    """The adjoint of each step's output `y_t` from the adjoint of the returned outputs.

    With `all_outputs`, `d_outputs` is `(T, B, H)`; else it is the last output's adjoint
    `(B, H)`, which reaches earlier steps only through the masked-output chain.
    """
    if all_outputs:
        return list(d_outputs.unbind(0))
    grads = [None] * steps
    grads[-1] = d_outputs
    return grads


def _add(a, b):
    if a is None:
        return b
    return a if b is None else a + b


def _run(function, *args):
    """`function.apply(*args)` when a gradient is needed, else its forward loop alone."""
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in args
    )
    if needs_grad:
        return function.apply(*args)
    return function.loop(*args, record=False)[0]


def _distinct(result):
    """`result` with no tensor twice (a Function's outputs must be distinct tensors: without
    a mask, the last output of a one-state loop is its final state)."""
    seen = []
    out = []
    for value in result:
        if any(value is other for other in seen):
            value = value.clone()
        seen.append(value)
        out.append(value)
    return tuple(out)


def _finish(result, all_outputs):
    """`(last_output, outputs, states)` in Keras's layout from the loop's time-major result."""
    outputs, *states = result
    if all_outputs:
        last, outputs = outputs[-1], outputs.transpose(0, 1)
    else:
        last, outputs = outputs, outputs[:, None]
    return last, outputs, list(states)


# --------------------------------------------------------------------------------------
# LSTM
# --------------------------------------------------------------------------------------


# The LSTM loop's saved columns: the norms' statistics (`(B, 1)` a step, stacked after the
# loop) come first; those the backward pass reads step by step only follow, kept as they are.
# (What it reduces over all steps is written into arrays of its own as the loop runs.)
_LSTM_STACKED = 4


class _LayerNormLSTMLoop(torch.autograd.Function):
    """The recurrence of the layer-normalized LSTM over `(T, B, 4H)` projected inputs.

    Gates in the order `[i, f, o, g]` (the caller permutes Keras's `[i, f, g, o]`), so that
    one call of the recurrent activation covers `i, f, o`:
    `z = xp_t + LN_h(h U)`, `c = σ(f) c + σ(i) act(g)`, `h = σ(o) act(LN_c(c))`.

    With `spec["fused_tanh"]` (`_fuses_tanh`) the candidate's columns of `xp`, `gamma_h` and
    `beta_h` hold twice the pre-activation, one sigmoid covers all four gates and
    `g = 2 σ(2 z_g) - 1`; `LN_c` runs with `2 gamma_c`, `2 beta_c` and `act(LN_c(c))` as
    `2 σ(2 LN_c(c)) - 1`. The adjoints returned are those of the inputs as given.
    """

    @staticmethod
    def loop(spec, xp, h0, c0, kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, *, record):
        n = kernel.shape[0]
        act, _ = spec["activation"]
        gate_act, _ = spec["recurrent_activation"]
        eps_h, eps_c, carry_normalized = spec["eps_h"], spec["eps_c"], spec["carry_normalized"]
        fused = spec["fused_tanh"]
        masking = _Masking(spec["masks"], spec["zero_output"])
        all_outputs = spec["all_outputs"]
        if fused:
            minus_one, two = h0.new_tensor(-1.0), h0.new_tensor(2.0)
            gamma_c, beta_c = gamma_c * 2, beta_c * 2
        steps, batch = xp.shape[0], h0.shape[0]
        # Recording, the recurrent products and the cell states are written straight into
        # the arrays the backward pass reduces over all steps (no stacked copy).
        # (Each array unbound once: a view per step, not an indexing operation per step.)
        u_all = c_all = None
        u_steps = c_steps = [None] * steps  # `out=None`: fresh tensors
        if record:
            u_all = xp.new_empty((steps, batch, 4 * n))
            c_all = xp.new_empty((steps, batch, n))
            u_steps, c_steps = u_all.unbind(0), c_all.unbind(0)
        h, c = h0, c0
        y = torch.zeros_like(h0) if spec["masks"] is not None else None
        ys, saved = [], []
        for t, x_t in enumerate(xp.unbind(0)):
            h_in = h if r_mask is None else h * r_mask
            u = torch.mm(h_in, kernel, out=u_steps[t])
            a, mean_h, rstd_h = torch.native_layer_norm(u, (4 * n,), gamma_h, beta_h, eps_h)
            # In place: `a` is the norm's fresh output, not kept. (`tensor_split` costs less
            # Python per call than `split`: it runs once per step.)
            if fused:
                s = torch.sigmoid(a.add_(x_t))
                i, f, o, s_g = s.tensor_split(4, 1)
                g = _tanh_from_sigmoid(s_g, minus_one, two)
            else:
                z_s, z_g = a.add_(x_t).tensor_split((3 * n,), 1)
                s = gate_act(z_s)
                g = act(z_g)
                i, f, o = s.tensor_split(3, 1)
            c_new = torch.mul(f, c, out=c_steps[t]).addcmul_(i, g)
            cn, mean_c, rstd_c = torch.native_layer_norm(c_new, (n,), gamma_c, beta_c, eps_c)
            tc = _tanh_from_sigmoid(torch.sigmoid(cn), minus_one, two) if fused else act(cn)
            h_new = o * tc
            if record:
                saved.append((mean_h, rstd_h, mean_c, rstd_c, h_in, s, g, c, tc))
            if carry_normalized:
                carried = cn * 0.5 if fused else cn
            else:
                carried = c_new
            (h, c), y = masking.forward(t, (h_new, carried), (h, c), h_new, y)
            if all_outputs:
                ys.append(y)
        outputs = torch.stack(ys) if all_outputs else y
        return (outputs, h, c), (u_all, c_all, saved)

    @staticmethod
    def forward(ctx, spec, xp, h0, c0, kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask):
        result, (u_all, c_all, saved) = _LayerNormLSTMLoop.loop(
            spec, xp, h0, c0, kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, record=True
        )
        ctx.spec = spec
        columns = list(zip(*saved, strict=True))
        # The norms' statistics (`(B, 1)` a step) stacked; the columns the backward loop
        # reads step by step only kept as they are.
        stats = [torch.stack(c) for c in columns[:_LSTM_STACKED]]
        stepwise = [x for c in columns[_LSTM_STACKED:] for x in c]
        ctx.save_for_backward(
            kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, u_all, c_all, *stats, *stepwise
        )
        return _distinct(result)

    @staticmethod
    def backward(ctx, d_outputs, d_h, d_c):
        spec = ctx.spec
        kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, u, c_new, *saved = ctx.saved_tensors
        mean_h, rstd_h, mean_c, rstd_c = saved[:_LSTM_STACKED]
        stepwise = saved[_LSTM_STACKED:]
        steps = u.shape[0]
        h_in, s, g, c_prev, tc = (stepwise[k * steps : (k + 1) * steps] for k in range(5))
        n = kernel.shape[0]
        _, act_grad = spec["activation"]
        _, gate_grad = spec["recurrent_activation"]
        carry_normalized, fused = spec["carry_normalized"], spec["fused_tanh"]
        masking = _Masking(spec["masks"], spec["zero_output"])
        d_ys = _output_grads(d_outputs, steps, spec["all_outputs"])
        kernel_t = _transposed(kernel)
        per_step = [
            *(x.unbind(0) for x in (u, mean_h, rstd_h)),
            s,
            g,
            c_prev,
            *(x.unbind(0) for x in (c_new, mean_c, rstd_c)),
            tc,
            h_in,
        ]
        d_states, d_y = (d_h, d_c), None
        # The adjoints of the projected inputs and of the cell norm's output, written in
        # place step by step (no stacking); the recurrent kernel's summed step by step.
        d_z_all = u.new_empty(u.shape)
        d_cn_all = c_new.new_empty(c_new.shape)
        d_z_steps, d_cn_steps = d_z_all.unbind(0), d_cn_all.unbind(0)
        d_gate_steps = [x.unbind(0) for x in d_z_all.tensor_split(4, 2)]
        d_kernel = None
        for t in range(steps - 1, -1, -1):
            u_t, mean_h_t, rstd_h_t, s_t, g_t, c_prev_t, c_t, mean_c_t, rstd_c_t, tc_t, h_in_t = (
                x[t] for x in per_step
            )
            (d_h_new, d_carry), d_old, d_y = masking.backward(t, d_states, _add(d_ys[t], d_y))
            i, f, o = s_t.tensor_split((n, 2 * n, 3 * n), 1)[:3]
            d_z = d_z_steps[t]
            d_i, d_f, d_o, d_g = (x[t] for x in d_gate_steps)
            torch.mul(d_h_new, tc_t, out=d_o)
            d_cn = act_grad(d_h_new * o, tc_t, out=d_cn_steps[t])
            if carry_normalized:
                d_cn.add_(d_carry)
            d_c_new = aten.native_layer_norm_backward(
                d_cn, c_t, (n,), mean_c_t, rstd_c_t, gamma_c, beta_c, (True, False, False)
            )[0]
            if not carry_normalized:
                d_c_new.add_(d_carry)
            torch.mul(d_c_new, g_t, out=d_i)
            torch.mul(d_c_new, c_prev_t, out=d_f)
            if fused:
                # σ(2 z_g)'s adjoint is twice g's: d g = 2 d σ(2 z_g), and the columns hold 2 z_g.
                torch.mul(d_c_new, i, out=d_g).mul_(2)
                aten.sigmoid_backward.grad_input(d_z, s_t, grad_input=d_z)
            else:
                d_s = d_z[:, : 3 * n]
                gate_grad(d_s, s_t, out=d_s)
                act_grad(d_c_new * i, g_t, out=d_g)
            d_u = aten.native_layer_norm_backward(
                d_z, u_t, (4 * n,), mean_h_t, rstd_h_t, gamma_h, beta_h, (True, False, False)
            )[0]
            d_kernel = _add_product(d_kernel, h_in_t, d_u)
            d_h_prev = torch.mm(d_u, kernel_t)
            if r_mask is not None:
                d_h_prev = d_h_prev * r_mask
            d_c_prev = d_c_new * f
            if d_old is not None:
                d_h_prev, d_c_prev = d_h_prev + d_old[0], d_c_prev + d_old[1]
            d_states = (d_h_prev, d_c_prev)
        d_gamma_h, d_beta_h = _norm_param_grads(d_z_all, u, mean_h, rstd_h, gamma_h, beta_h)
        d_gamma_c, d_beta_c = _norm_param_grads(d_cn_all, c_new, mean_c, rstd_c, gamma_c, beta_c)
        d_h0, d_c0 = d_states
        return (None, d_z_all, d_h0, d_c0, d_kernel, d_gamma_h, d_beta_h, d_gamma_c, d_beta_c, None)


def _norm_args(norm):
    """`(gamma, beta, epsilon)` of a norm, as given."""
    gamma, beta, epsilon = norm
    return gamma, beta, float(epsilon)


def layer_norm_lstm(
    sequences,
    initial_state,
    *,
    kernel,
    recurrent_kernel,
    bias,
    input_norm,
    recurrent_norm,
    state_norm,
    activation="tanh",
    recurrent_activation="sigmoid",
    carry_normalized_state=False,
    mask=None,
    input_mask=None,
    recurrent_mask=None,
    go_backwards=False,
    return_sequences=False,
    zero_output_for_mask=False,
):
    """The layer-normalized LSTM (`keras_normkit.layers.LayerNormLSTMCell`) over a sequence.

    Args:
        sequences: `(B, T, F)` tensor.
        initial_state: `[h0, c0]`, each `(B, H)`.
        kernel: `(F, 4H)` input kernel in Keras's gate order `[i, f, g, o]`.
        recurrent_kernel: `(H, 4H)` recurrent kernel.
        bias: `(4H,)` bias, or `None`.
        input_norm, recurrent_norm, state_norm: `(gamma, beta, epsilon)` of `LN_x`, `LN_h`
            and `LN_c`.
        activation, recurrent_activation: names in `ACTIVATIONS`.
        carry_normalized_state: carry `LN_c(c)` instead of `c`.
        mask: optional `(B, T)` boolean mask.
        input_mask, recurrent_mask: optional dropout masks of `x` `(B, F)` and `h` `(B, H)`.
        go_backwards, return_sequences, zero_output_for_mask: as `keras.layers.RNN`.

    Returns:
        `(last_output, outputs, [h, c])` as Keras's `backend.rnn` returns them.
    """
    spec = _loop_spec(
        mask,
        go_backwards,
        zero_output_for_mask,
        return_sequences,
        activation=_activation(activation, "activation"),
        recurrent_activation=_activation(recurrent_activation, "recurrent_activation"),
        carry_normalized=bool(carry_normalized_state),
        fused_tanh=_fuses_tanh(activation, recurrent_activation),
    )
    dtype = _compute_dtype(sequences)
    n = recurrent_kernel.shape[0]
    # [i, f, g, o] -> [i, f, o, g]: one recurrent activation for the first 3H columns.
    order = torch.cat(
        (torch.arange(2 * n), torch.arange(3 * n, 4 * n), torch.arange(2 * n, 3 * n))
    ).to(kernel.device)

    def gates(x):
        return x.to(dtype).index_select(-1, order)

    # With the fused tanh, the candidate's pre-activation doubled: `xp`'s g columns through
    # the input norm's gain and shift, the recurrent norm's through its own.
    if spec["fused_tanh"]:
        doubled = torch.ones(4 * n, dtype=dtype, device=kernel.device)
        doubled[3 * n :] = 2.0
    else:
        doubled = None

    def scaled(x):
        return x if doubled is None else x * doubled

    gamma_x, beta_x, eps_x = _norm_args(input_norm)
    gamma_h, beta_h, spec["eps_h"] = _norm_args(recurrent_norm)
    gamma_c, beta_c, spec["eps_c"] = _norm_args(state_norm)
    x = _loop_inputs(sequences, input_mask, go_backwards, dtype)
    shift = gates(beta_x) if bias is None else gates(beta_x) + gates(bias)
    xp = _normalized_projection(x, gates(kernel), scaled(gates(gamma_x)), scaled(shift), eps_x)
    h0, c0 = (state.to(dtype) for state in initial_state)
    result = _run(
        _LayerNormLSTMLoop,
        spec,
        xp,
        h0,
        c0,
        gates(recurrent_kernel),
        scaled(gates(gamma_h)),
        scaled(gates(beta_h)),
        gamma_c.to(dtype),
        beta_c.to(dtype),
        None if recurrent_mask is None else recurrent_mask.to(dtype),
    )
    return _finish(result, spec["all_outputs"])


# --------------------------------------------------------------------------------------
# GRU
# --------------------------------------------------------------------------------------


def _gru_statistics(reset_after):
    """How many of the GRU loop's saved columns, first, are norms' statistics (stacked):
    `LN_h`'s mean and rstd, and `LN_c`'s without `reset_after`."""
    return 2 if reset_after else 4


class _LayerNormGRULoop(torch.autograd.Function):
    """The recurrence of the layer-normalized GRU over `(T, B, 3H)` projected inputs.

    `reset_after=True`: `[u_z, u_r, u_h] = LN_h(h U) + b_u`, `z, r = σ(x_zr + u_zr)`,
    `h~ = act(x_h + r u_h)`; `reset_after=False`: `z, r = σ(x_zr + LN_h(h U_zr))`,
    `h~ = act(x_h + LN_c((r h) U_h))`; then `h = z h_{t-1} + (1 - z) h~`.
    `kernel` is `U` (`(H, 3H)`); `gamma_c`, `beta_c` are `None` with `reset_after`.
    """

    @staticmethod
    def loop(spec, xp, h0, kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, *, record):
        n = kernel.shape[0]
        act, _ = spec["activation"]
        gate_act, _ = spec["recurrent_activation"]
        eps_h, eps_c, reset_after = spec["eps_h"], spec["eps_c"], spec["reset_after"]
        masking = _Masking(spec["masks"], spec["zero_output"])
        all_outputs = spec["all_outputs"]
        gate_kernel, candidate_kernel = (None, None) if reset_after else kernel.split(2 * n, 1)
        steps, batch = xp.shape[0], h0.shape[0]
        # Recording, the recurrent products are written straight into the arrays the
        # backward pass reduces over all steps (no stacked copy). (Each array unbound or
        # split once: a view per step, not an indexing operation per step.)
        u_all = v_all = None
        u_steps = v_steps = [None] * steps  # `out=None`: fresh tensors
        if record:
            u_all = xp.new_empty((steps, batch, (3 if reset_after else 2) * n))
            u_steps = u_all.unbind(0)
            if not reset_after:
                v_all = xp.new_empty((steps, batch, n))
                v_steps = v_all.unbind(0)
        x_zr_steps, x_h_steps = (x.unbind(0) for x in xp.split(2 * n, 2))
        h = h0
        y = torch.zeros_like(h0) if spec["masks"] is not None else None
        ys, saved = [], []
        for t in range(steps):
            x_zr, x_h = x_zr_steps[t], x_h_steps[t]
            h_in = h if r_mask is None else h * r_mask
            if reset_after:
                u = torch.mm(h_in, kernel, out=u_steps[t])
                a, mean_h, rstd_h = torch.native_layer_norm(u, (3 * n,), gamma_h, beta_h, eps_h)
                a_zr, a_h = a.split(2 * n, 1)
                # In place: `a` is the norm's fresh output; only its `a_h` columns are kept.
                zr = gate_act(a_zr.add_(x_zr))
                z, r = zr.split(n, 1)
                candidate = act(torch.addcmul(x_h, r, a_h))
                step = (mean_h, rstd_h, h_in, a_h, zr, candidate, h)
            else:
                u = torch.mm(h_in, gate_kernel, out=u_steps[t])
                a, mean_h, rstd_h = torch.native_layer_norm(u, (2 * n,), gamma_h, beta_h, eps_h)
                zr = gate_act(a.add_(x_zr))
                z, r = zr.split(n, 1)
                rh = r * h_in
                v = torch.mm(rh, candidate_kernel, out=v_steps[t])
                cn, mean_c, rstd_c = torch.native_layer_norm(v, (n,), gamma_c, beta_c, eps_c)
                candidate = act(cn.add_(x_h))
                step = (mean_h, rstd_h, mean_c, rstd_c, h_in, rh, zr, candidate, h)
            h_new = torch.lerp(candidate, h, z)
            if record:
                saved.append(step)
            (h,), y = masking.forward(t, (h_new,), (h,), h_new, y)
            if all_outputs:
                ys.append(y)
        outputs = torch.stack(ys) if all_outputs else y
        return (outputs, h), (u_all, v_all, saved)

    @staticmethod
    def forward(ctx, spec, xp, h0, kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask):
        result, (u_all, v_all, saved) = _LayerNormGRULoop.loop(
            spec, xp, h0, kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, record=True
        )
        ctx.spec = spec
        columns = list(zip(*saved, strict=True))
        # The norms' statistics (`(B, 1)` a step) stacked; the columns the backward loop
        # reads step by step only kept as they are.
        count = _gru_statistics(spec["reset_after"])
        stats = [torch.stack(c) for c in columns[:count]]
        stepwise = [x for c in columns[count:] for x in c]
        ctx.save_for_backward(
            kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, u_all, v_all, *stats, *stepwise
        )
        return _distinct(result)

    @staticmethod
    def backward(ctx, d_outputs, d_h):
        spec = ctx.spec
        kernel, gamma_h, beta_h, gamma_c, beta_c, r_mask, u, v, *saved = ctx.saved_tensors
        n = kernel.shape[0]
        _, act_grad = spec["activation"]
        _, gate_grad = spec["recurrent_activation"]
        reset_after = spec["reset_after"]
        masking = _Masking(spec["masks"], spec["zero_output"])
        steps = u.shape[0]
        d_ys = _output_grads(d_outputs, steps, spec["all_outputs"])
        count = _gru_statistics(reset_after)
        stats = [x.unbind(0) for x in saved[:count]]
        stepwise = saved[count:]
        per_step = [u.unbind(0), *([] if reset_after else [v.unbind(0)]), *stats]
        per_step += [stepwise[k * steps : (k + 1) * steps] for k in range(5)]
        if reset_after:
            kernel_t = _transposed(kernel)
        else:
            gate_kernel, candidate_kernel = kernel.split(2 * n, 1)
            gate_kernel_t, candidate_kernel_t = (
                _transposed(gate_kernel),
                _transposed(candidate_kernel),
            )
        # Written in place step by step (no stacking): the adjoint of the projected inputs
        # `[x_zr, x_h]` and that of the recurrent norm's output (whose first 2H columns, the
        # gates' pre-activations, `d_xp` takes after the loop); the kernel's adjoint summed
        # step by step.
        d_xp = u.new_empty((steps, *u.shape[1:-1], 3 * n))
        d_a_all = u.new_empty(u.shape)
        d_a_steps, d_zr_steps = d_a_all.unbind(0), d_a_all[..., : 2 * n].unbind(0)
        d_z_steps, d_r_steps = (x.unbind(0) for x in d_a_all[..., : 2 * n].split(n, 2))
        d_x_h_steps = d_xp[..., 2 * n :].unbind(0)
        d_a_h_steps = d_a_all[..., 2 * n :].unbind(0) if reset_after else None
        d_kernel = d_candidate_kernel = None
        d_states, d_y = (d_h,), None
        for t in range(steps - 1, -1, -1):
            (d_h_new,), d_old, d_y = masking.backward(t, d_states, _add(d_ys[t], d_y))
            if reset_after:
                u_t, mean_h_t, rstd_h_t, h_in_t, a_h_t, zr_t, cand_t, h_prev_t = (
                    x[t] for x in per_step
                )
            else:
                (
                    u_t,
                    v_t,
                    mean_h_t,
                    rstd_h_t,
                    mean_c_t,
                    rstd_c_t,
                    h_in_t,
                    rh_t,
                    zr_t,
                    cand_t,
                    h_prev_t,
                ) = (x[t] for x in per_step)
            z, r = zr_t.split(n, 1)
            d_a, d_zr, d_z, d_r = d_a_steps[t], d_zr_steps[t], d_z_steps[t], d_r_steps[t]
            d_x_h = d_x_h_steps[t]
            torch.mul(d_h_new, h_prev_t - cand_t, out=d_z)
            d_h_prev = d_h_new * z
            act_grad(d_h_new - d_h_prev, cand_t, out=d_x_h)
            if reset_after:
                torch.mul(d_x_h, a_h_t, out=d_r)
                gate_grad(d_zr, zr_t, out=d_zr)
                torch.mul(d_x_h, r, out=d_a_h_steps[t])
                d_u = aten.native_layer_norm_backward(
                    d_a, u_t, (3 * n,), mean_h_t, rstd_h_t, gamma_h, beta_h, (True, False, False)
                )[0]
                d_h_in = torch.mm(d_u, kernel_t)
            else:
                d_v = aten.native_layer_norm_backward(
                    d_x_h, v_t, (n,), mean_c_t, rstd_c_t, gamma_c, beta_c, (True, False, False)
                )[0]
                d_candidate_kernel = _add_product(d_candidate_kernel, rh_t, d_v)
                d_rh = torch.mm(d_v, candidate_kernel_t)
                torch.mul(d_rh, h_in_t, out=d_r)
                gate_grad(d_zr, zr_t, out=d_zr)
                d_u = aten.native_layer_norm_backward(
                    d_a, u_t, (2 * n,), mean_h_t, rstd_h_t, gamma_h, beta_h, (True, False, False)
                )[0]
                d_h_in = torch.addmm(d_rh * r, d_u, gate_kernel_t)
            d_kernel = _add_product(d_kernel, h_in_t, d_u)
            if r_mask is not None:
                d_h_in = d_h_in * r_mask
            d_h_prev = d_h_prev + d_h_in
            if d_old is not None:
                d_h_prev = d_h_prev + d_old[0]
            d_states = (d_h_prev,)
        d_xp[..., : 2 * n] = d_a_all[..., : 2 * n]
        mean_h, rstd_h = saved[:2]
        d_gamma_h, d_beta_h = _norm_param_grads(d_a_all, u, mean_h, rstd_h, gamma_h, beta_h)
        d_gamma_c = d_beta_c = None
        if not reset_after:
            d_kernel = torch.cat((d_kernel, d_candidate_kernel), 1)
            mean_c, rstd_c = saved[2:4]
            d_cn = d_xp[..., 2 * n :]
            d_gamma_c, d_beta_c = _norm_param_grads(d_cn, v, mean_c, rstd_c, gamma_c, beta_c)
        (d_h0,) = d_states
        return (None, d_xp, d_h0, d_kernel, d_gamma_h, d_beta_h, d_gamma_c, d_beta_c, None)


def layer_norm_gru(
    sequences,
    initial_state,
    *,
    kernel,
    recurrent_kernel,
    bias,
    input_norm,
    recurrent_norm,
    candidate_norm=None,
    activation="tanh",
    recurrent_activation="sigmoid",
    reset_after=True,
    mask=None,
    input_mask=None,
    recurrent_mask=None,
    go_backwards=False,
    return_sequences=False,
    zero_output_for_mask=False,
):
    """The layer-normalized GRU (`keras_normkit.layers.LayerNormGRUCell`) over a sequence.

    Args:
        sequences: `(B, T, F)` tensor.
        initial_state: `[h0]`, `(B, H)`.
        kernel: `(F, 3H)` input kernel in Keras's gate order `[z, r, h]`.
        recurrent_kernel: `(H, 3H)` recurrent kernel.
        bias: `(2, 3H)` (input and recurrent biases) with `reset_after`, else `(3H,)`; or
            `None`.
        input_norm, recurrent_norm: `(gamma, beta, epsilon)` of `LN_x` and `LN_h`.
        candidate_norm: `LN_c`'s, without `reset_after`.
        activation, recurrent_activation: names in `ACTIVATIONS`.
        reset_after: the GRU form (see the cell).
        mask: optional `(B, T)` boolean mask.
        input_mask, recurrent_mask: optional dropout masks of `x` `(B, F)` and `h` `(B, H)`.
        go_backwards, return_sequences, zero_output_for_mask: as `keras.layers.RNN`.

    Returns:
        `(last_output, outputs, [h])` as Keras's `backend.rnn` returns them.
    """
    spec = _loop_spec(
        mask,
        go_backwards,
        zero_output_for_mask,
        return_sequences,
        activation=_activation(activation, "activation"),
        recurrent_activation=_activation(recurrent_activation, "recurrent_activation"),
        reset_after=bool(reset_after),
    )
    dtype = _compute_dtype(sequences)
    gamma_x, beta_x, eps_x = _norm_args(input_norm)
    gamma_h, beta_h, spec["eps_h"] = _norm_args(recurrent_norm)
    gamma_c = beta_c = None
    spec["eps_c"] = None
    if not reset_after:
        gamma_c, beta_c, spec["eps_c"] = _norm_args(candidate_norm)
        gamma_c, beta_c = gamma_c.to(dtype), beta_c.to(dtype)
    beta_x, beta_h = beta_x.to(dtype), beta_h.to(dtype)
    if bias is not None:
        bias = bias.to(dtype)
        if reset_after:
            beta_x, beta_h = beta_x + bias[0], beta_h + bias[1]
        else:
            beta_x = beta_x + bias
    x = _loop_inputs(sequences, input_mask, go_backwards, dtype)
    xp = _normalized_projection(x, kernel.to(dtype), gamma_x.to(dtype), beta_x, eps_x)
    result = _run(
        _LayerNormGRULoop,
        spec,
        xp,
        initial_state[0].to(dtype),
        recurrent_kernel.to(dtype),
        gamma_h.to(dtype),
        beta_h,
        gamma_c,
        beta_c,
        None if recurrent_mask is None else recurrent_mask.to(dtype),
    )
    return _finish(result, spec["all_outputs"])


# --------------------------------------------------------------------------------------
# SimpleRNN
# --------------------------------------------------------------------------------------


class _LayerNormSimpleRNNLoop(torch.autograd.Function):
    """The recurrence `h = act(LN(xp_t + h U) + b)` over `(T, B, H)` projected inputs
    (`b` folded into the norm's shift)."""

    @staticmethod
    def loop(spec, xp, h0, kernel, gamma, beta, r_mask, *, record):
        n = kernel.shape[0]
        act, _ = spec["activation"]
        eps = spec["eps"]
        masking = _Masking(spec["masks"], spec["zero_output"])
        all_outputs = spec["all_outputs"]
        # Recording, the norm's inputs are written straight into the array the backward
        # pass reduces over all steps (no stacked copy).
        s_all = xp.new_empty(xp.shape) if record else None
        s_steps = s_all.unbind(0) if record else [None] * xp.shape[0]  # `out=None`: fresh
        h = h0
        y = torch.zeros_like(h0) if spec["masks"] is not None else None
        ys, saved = [], []
        for t, x_t in enumerate(xp.unbind(0)):
            h_in = h if r_mask is None else h * r_mask
            s = torch.addmm(x_t, h_in, kernel, out=s_steps[t])
            a, mean, rstd = torch.native_layer_norm(s, (n,), gamma, beta, eps)
            h_new = act(a)
            if record:
                saved.append((mean, rstd, h_in, h_new))
            (h,), y = masking.forward(t, (h_new,), (h,), h_new, y)
            if all_outputs:
                ys.append(y)
        outputs = torch.stack(ys) if all_outputs else y
        return (outputs, h), (s_all, saved)

    @staticmethod
    def forward(ctx, spec, xp, h0, kernel, gamma, beta, r_mask):
        result, (s_all, saved) = _LayerNormSimpleRNNLoop.loop(
            spec, xp, h0, kernel, gamma, beta, r_mask, record=True
        )
        ctx.spec = spec
        mean, rstd, h_in, h_new = zip(*saved, strict=True)
        # The norm's statistics stacked; the other columns kept as they are.
        ctx.save_for_backward(
            kernel, gamma, beta, r_mask, s_all, torch.stack(mean), torch.stack(rstd), *h_in, *h_new
        )
        return _distinct(result)

    @staticmethod
    def backward(ctx, d_outputs, d_h):
        spec = ctx.spec
        kernel, gamma, beta, r_mask, s, mean, rstd, *stepwise = ctx.saved_tensors
        n = kernel.shape[0]
        _, act_grad = spec["activation"]
        masking = _Masking(spec["masks"], spec["zero_output"])
        steps = s.shape[0]
        d_ys = _output_grads(d_outputs, steps, spec["all_outputs"])
        kernel_t = _transposed(kernel)
        per_step = [*(x.unbind(0) for x in (s, mean, rstd)), stepwise[:steps], stepwise[steps:]]
        d_states, d_y = (d_h,), None
        # The norm's output adjoint written in place step by step; the kernel's summed.
        d_a_all = s.new_empty(s.shape)
        d_a_steps = d_a_all.unbind(0)
        d_s_all, d_kernel = [None] * steps, None
        for t in range(steps - 1, -1, -1):
            s_t, mean_t, rstd_t, h_in_t, h_t = (x[t] for x in per_step)
            (d_h_new,), d_old, d_y = masking.backward(t, d_states, _add(d_ys[t], d_y))
            d_a = act_grad(d_h_new, h_t, out=d_a_steps[t])
            d_s = aten.native_layer_norm_backward(
                d_a, s_t, (n,), mean_t, rstd_t, gamma, beta, (True, False, False)
            )[0]
            d_kernel = _add_product(d_kernel, h_in_t, d_s)
            d_h_prev = torch.mm(d_s, kernel_t)
            if r_mask is not None:
                d_h_prev = d_h_prev * r_mask
            if d_old is not None:
                d_h_prev = d_h_prev + d_old[0]
            d_states = (d_h_prev,)
            d_s_all[t] = d_s
        d_gamma, d_beta = _norm_param_grads(d_a_all, s, mean, rstd, gamma, beta)
        (d_h0,) = d_states
        return (None, torch.stack(d_s_all), d_h0, d_kernel, d_gamma, d_beta, None)


def layer_norm_simple_rnn(
    sequences,
    initial_state,
    *,
    kernel,
    recurrent_kernel,
    bias,
    norm,
    activation="tanh",
    mask=None,
    input_mask=None,
    recurrent_mask=None,
    go_backwards=False,
    return_sequences=False,
    zero_output_for_mask=False,
):
    """The layer-normalized SimpleRNN (`keras_normkit.layers.LayerNormSimpleRNNCell`).

    Args:
        sequences: `(B, T, F)` tensor.
        initial_state: `[h0]`, `(B, H)`.
        kernel: `(F, H)`; recurrent_kernel: `(H, H)`; bias: `(H,)` or `None`.
        norm: `(gamma, beta, epsilon)` of the norm.
        activation: a name in `ACTIVATIONS`.
        mask: optional `(B, T)` boolean mask.
        input_mask, recurrent_mask: optional dropout masks of `x` `(B, F)` and `h` `(B, H)`.
        go_backwards, return_sequences, zero_output_for_mask: as `keras.layers.RNN`.

    Returns:
        `(last_output, outputs, [h])` as Keras's `backend.rnn` returns them.
    """
    spec = _loop_spec(
        mask,
        go_backwards,
        zero_output_for_mask,
        return_sequences,
        activation=_activation(activation, "activation"),
    )
    dtype = _compute_dtype(sequences)
    gamma, beta, spec["eps"] = _norm_args(norm)
    beta = beta.to(dtype) if bias is None else beta.to(dtype) + bias.to(dtype)
    x = _loop_inputs(sequences, input_mask, go_backwards, dtype)
    result = _run(
        _LayerNormSimpleRNNLoop,
        spec,
        torch.matmul(x, kernel.to(dtype)),
        initial_state[0].to(dtype),
        recurrent_kernel.to(dtype),
        gamma.to(dtype),
        beta,
        None if recurrent_mask is None else recurrent_mask.to(dtype),
    )
    return _finish(result, spec["all_outputs"])


# --------------------------------------------------------------------------------------
# Fast weights
# --------------------------------------------------------------------------------------

# The fast-weights loop keeps every step's `A` (`(B, H, H)`) for back-propagation when they
# take at most `FAST_WEIGHTS_KEEP_BYTES` in all; beyond, one every `FAST_WEIGHTS_CHECKPOINT`
# steps, and the backward pass recomputes the steps' `A` between two kept ones (memory
# `T·B·H²/8` instead of `T·B·H²`, one more `B·H²` pass per step).
FAST_WEIGHTS_KEEP_BYTES = 1 << 28
FAST_WEIGHTS_CHECKPOINT = 8


# On a CPU the native fast-weights loop trains bandwidth-bound: each step of its backward
# pass reads and writes `A` and its adjoint (`B·H²` values) several times, where the chunked
# Keras-ops engine (`keras_normkit.ops.fast_weights_loop`) writes `A` once per 8 steps. It
# trains there only up to `B·H²` of this many values (the crossover:
# benchmarks/DECISIONS.md#torch-fast-weights-cpu); inference (no gradient) and accelerators,
# where the launches cost and the passes do not, always run it.
FAST_WEIGHTS_CPU_MAX_VALUES = 1 << 18


def fast_weights_native(batch, units, device, training):
    """Whether `fast_weights_rnn` runs for `batch` x `units` on `device`; `training`: a
    gradient will be taken."""
    small = batch * units * units <= FAST_WEIGHTS_CPU_MAX_VALUES
    return device.type != "cpu" or not training or small


def _fast_weights_interval(steps, a):
    """Steps between two `A` kept for back-propagation (1: every step)."""
    size = steps * a.numel() * a.element_size()
    return 1 if size <= FAST_WEIGHTS_KEEP_BYTES else FAST_WEIGHTS_CHECKPOINT


def _column(v):
    return v.unsqueeze(2)


def _row(v):
    return v.unsqueeze(1)


def _hebbian_write(spec, a, h_new, m):
    """`A <- λ A + η h hᵀ`, where the step's mask `m` (`(B, 1)` or `None`) is on."""
    written = torch.baddbmm(
        a, _column(h_new), _row(h_new), beta=spec["decay"], alpha=spec["learning_rate"]
    )
    return written if m is None else torch.where(m.unsqueeze(-1), written, a)


class _FastWeightsLoop(torch.autograd.Function):
    """The fast-weights recurrence over `(T, B, H)` projected inputs `xp_t = C x_t + bias`.

    `b = xp_t + h W`, `v_0 = f(b)` (`f(LN(b))` with the preliminary norm), `S` times
    `v_{s+1} = f(LN(b + A v_s))`, `h = v_S`, then `A <- λ A + η h hᵀ`; masked steps keep `h`
    and `A`. `gamma`, `beta` are `None` without layer norm. The backward pass carries the
    adjoint of `A` and recomputes `A` from copies kept every `FAST_WEIGHTS_CHECKPOINT` steps.
    """

    @staticmethod
    def loop(spec, xp, h0, a0, kernel, gamma, beta, r_mask, *, record):
        n = kernel.shape[0]
        act, _ = spec["activation"]
        eps, inner_steps, preliminary = spec["eps"], spec["inner_steps"], spec["preliminary"]
        masks = spec["masks"]
        masking = _Masking(masks, spec["zero_output"])
        normalized = gamma is not None

        def norm(x):
            if not normalized:
                return x, None, None
            return torch.native_layer_norm(x, (n,), gamma, beta, eps)

        h, a = h0, a0
        y = torch.zeros_like(h0) if masks is not None else None
        ys, saved, checkpoints = [], [], []
        interval = _fast_weights_interval(xp.shape[0], a0)
        for t, x_t in enumerate(xp.unbind(0)):
            if record and t % interval == 0:
                checkpoints.append(a)
            h_in = h if r_mask is None else h * r_mask
            b = torch.addmm(x_t, h_in, kernel)
            p, mean_p, rstd_p = norm(b) if preliminary else (b, None, None)
            v = act(p)
            step = [h_in, b, mean_p, rstd_p, v]
            for _ in range(inner_steps):
                q = torch.baddbmm(_column(b), a, _column(v)).squeeze(2)
                o, mean, rstd = norm(q)
                v = act(o)
                step += [q, mean, rstd, v]
            if record:
                saved.append(step)
            m = None if masks is None else masks[t]
            a = _hebbian_write(spec, a, v, m)
            (h,), y = masking.forward(t, (v,), (h,), v, y)
            if spec["all_outputs"]:
                ys.append(y)
        outputs = torch.stack(ys) if spec["all_outputs"] else y
        return (outputs, h, a), (saved, checkpoints)

    @staticmethod
    def forward(ctx, spec, xp, h0, a0, kernel, gamma, beta, r_mask):
        result, (saved, checkpoints) = _FastWeightsLoop.loop(
            spec, xp, h0, a0, kernel, gamma, beta, r_mask, record=True
        )
        ctx.spec = spec
        # Stacked by kind (`5 + 4 S` columns): `None` where a step has no such value (no
        # norm, no preliminary norm); then the kept `A` as they are (no stacked copy: one
        # `B·H²` pass per step). No other state on `ctx`: `torch.compile` traces this.
        columns = [
            torch.stack(column) if column[0] is not None else None
            for column in zip(*saved, strict=True)
        ]
        ctx.save_for_backward(kernel, gamma, beta, r_mask, *columns, *checkpoints)
        return _distinct(result)

    @staticmethod
    def backward(ctx, d_outputs, d_h, d_a):
        spec = ctx.spec
        kernel, gamma, beta, r_mask, *saved = ctx.saved_tensors
        width = 5 + 4 * spec["inner_steps"]
        columns, checkpoints = saved[:width], saved[width:]
        h_in, b, mean_p, rstd_p, v0, *inner = columns
        n = kernel.shape[0]
        _, act_grad = spec["activation"]
        inner_steps, preliminary = spec["inner_steps"], spec["preliminary"]
        decay, rate = spec["decay"], spec["learning_rate"]
        masks = spec["masks"]
        masking = _Masking(masks, spec["zero_output"])
        normalized = gamma is not None
        steps = b.shape[0]
        d_ys = _output_grads(d_outputs, steps, spec["all_outputs"])
        kernel_t = _transposed(kernel)

        def per_step(x):
            return None if x is None else x.unbind(0)

        vs = [per_step(v0)] + [per_step(inner[4 * s + 3]) for s in range(inner_steps)]
        qs = [per_step(inner[4 * s]) for s in range(inner_steps)]
        stats = [
            (per_step(inner[4 * s + 1]), per_step(inner[4 * s + 2])) for s in range(inner_steps)
        ]
        mean_p_s, rstd_p_s = per_step(mean_p), per_step(rstd_p)

        def norm_grad(d, x, mean, rstd, t):
            if not normalized:
                return d
            return aten.native_layer_norm_backward(
                d, x, (n,), mean[t], rstd[t], gamma, beta, (True, False, False)
            )[0]

        d_b_all = [None] * steps
        d_o_all = [[None] * steps for _ in range(inner_steps)]
        d_p_all = [None] * steps
        d_h_state, d_y = d_h, None
        interval = _fast_weights_interval(steps, checkpoints[0])
        decays = None
        if masks is not None:  # the adjoint of `A` decays on the unmasked steps only
            decays = [torch.where(m, decay, 1.0).unsqueeze(-1).to(b.dtype) for m in masks]
        for chunk in range(len(checkpoints) - 1, -1, -1):
            start = chunk * interval
            stop = min(steps, start + interval)
            # `A` before each step of the chunk, recomputed from the chunk's copy.
            a_before = [checkpoints[chunk]]
            for t in range(start, stop - 1):
                m = None if masks is None else masks[t]
                a_before.append(_hebbian_write(spec, a_before[-1], vs[-1][t], m))
            for t in range(stop - 1, start - 1, -1):
                a_t = a_before[t - start]
                (d_v,), d_old, d_y = masking.backward(t, (d_h_state,), _add(d_ys[t], d_y))
                # The write `A <- λ A + η h hᵀ` (skipped on masked steps): `h` gets
                # `η (dA + dAᵀ) h`, two products that read `dA` (a sum would write it).
                h_new = _column(vs[-1][t])
                written = torch.baddbmm(torch.bmm(d_a, h_new), d_a.transpose(1, 2), h_new).squeeze(
                    2
                )
                if masks is None:
                    # Not `torch.add(d_v, written, alpha=rate)`: Inductor (torch 2.13, CPU)
                    # compiles that one wrong (a `jit_compile=True` test catches it).
                    d_v = d_v + written * rate
                    scale = decay
                else:
                    d_v = d_v + torch.where(masks[t], written * rate, 0.0)
                    d_a, scale = d_a * decays[t], 1.0
                # The inner iterations, last first; the decay of `dA` joins the first
                # product.
                d_b = None
                a_t_t = a_t.transpose(1, 2)
                for s in range(inner_steps - 1, -1, -1):
                    d_o = act_grad(d_v, vs[s + 1][t])
                    d_q = norm_grad(d_o, qs[s][t], *stats[s], t)
                    d_o_all[s][t] = d_o
                    d_b = _add(d_b, d_q)
                    d_a = torch.baddbmm(d_a, _column(d_q), _row(vs[s][t]), beta=scale)
                    scale = 1.0
                    d_v = torch.bmm(a_t_t, _column(d_q)).squeeze(2)
                d_p = act_grad(d_v, vs[0][t])
                if preliminary:
                    d_p_all[t] = d_p
                    d_p = norm_grad(d_p, b[t], mean_p_s, rstd_p_s, t)
                d_b = d_b + d_p
                d_h_in = torch.mm(d_b, kernel_t)
                if r_mask is not None:
                    d_h_in = d_h_in * r_mask
                d_h_state = d_h_in if d_old is None else d_h_in + d_old[0]
                d_b_all[t] = d_b
        d_b = torch.stack(d_b_all)
        d_kernel = torch.mm(h_in.reshape(-1, n).t(), d_b.reshape(-1, n))
        d_gamma = d_beta = None
        if normalized:
            d_gamma = torch.zeros_like(gamma)
            d_beta = torch.zeros_like(beta)
            for s in range(inner_steps):
                g, sh = _norm_param_grads(
                    torch.stack(d_o_all[s]),
                    inner[4 * s],
                    inner[4 * s + 1],
                    inner[4 * s + 2],
                    gamma,
                    beta,
                )
                d_gamma, d_beta = d_gamma + g, d_beta + sh
            if preliminary:
                g, sh = _norm_param_grads(torch.stack(d_p_all), b, mean_p, rstd_p, gamma, beta)
                d_gamma, d_beta = d_gamma + g, d_beta + sh
        return (None, d_b, d_h_state, d_a, d_kernel, d_gamma, d_beta, None)


def fast_weights_rnn(
    sequences,
    initial_state,
    *,
    kernel,
    recurrent_kernel,
    bias,
    norm,
    inner_steps,
    decay,
    fast_learning_rate,
    activation="relu",
    preliminary_layer_norm=False,
    mask=None,
    input_mask=None,
    recurrent_mask=None,
    go_backwards=False,
    return_sequences=False,
    zero_output_for_mask=False,
):
    """The fast-weights RNN (`keras_normkit.layers.FastWeightsRNN`) over a sequence.

    Args:
        sequences: `(B, T, F)` tensor.
        initial_state: `[h0, A0]`, `(B, H)` and `(B, H, H)`; `A0` may be `None` (zeros).
        kernel: `(F, H)` input kernel `C`; recurrent_kernel: `(H, H)` `W`; bias: `(H,)` or
            `None`.
        norm: `(gamma, beta, epsilon)` of the layer norm, or `None` without it.
        inner_steps: `S >= 1`; decay: `λ`; fast_learning_rate: `η`.
        activation: a name in `ACTIVATIONS`.
        preliminary_layer_norm: `v_0 = f(LN(b))` instead of `f(b)`.
        mask: optional `(B, T)` boolean mask.
        input_mask, recurrent_mask: optional dropout masks of `x` `(B, F)` and `h` `(B, H)`.
        go_backwards, return_sequences, zero_output_for_mask: as `keras.layers.RNN`.

    Returns:
        `(last_output, outputs, [h, A])`, `A` of shape `(B, H, H)`.
    """
    batch, units = sequences.shape[0], recurrent_kernel.shape[0]
    training = torch.is_grad_enabled()
    if not fast_weights_native(batch, units, sequences.device, training):
        raise NotImplementedError(
            f"The native fast-weights loop trains slower on the CPU at batch {batch} x "
            f"{units} units ({batch * units * units} > {FAST_WEIGHTS_CPU_MAX_VALUES} values)."
        )
    spec = _loop_spec(
        mask,
        go_backwards,
        zero_output_for_mask,
        return_sequences,
        activation=_activation(activation, "activation"),
        inner_steps=int(inner_steps),
        decay=float(decay),
        learning_rate=float(fast_learning_rate),
        preliminary=bool(preliminary_layer_norm) and norm is not None,
    )
    dtype = _compute_dtype(sequences)
    n = recurrent_kernel.shape[0]
    gamma = beta = None
    spec["eps"] = None
    if norm is not None:
        gamma, beta, spec["eps"] = _norm_args(norm)
        gamma, beta = gamma.to(dtype), beta.to(dtype)
    x = _loop_inputs(sequences, input_mask, go_backwards, dtype)
    xp = torch.matmul(x, kernel.to(dtype))
    if bias is not None:
        xp = xp + bias.to(dtype)
    h0, a0 = initial_state
    a0 = xp.new_zeros((batch, n, n)) if a0 is None else a0.to(dtype)
    result = _run(
        _FastWeightsLoop,
        spec,
        xp,
        h0.to(dtype),
        a0,
        recurrent_kernel.to(dtype),
        gamma,
        beta,
        None if recurrent_mask is None else recurrent_mask.to(dtype),
    )
    return _finish(result, spec["all_outputs"])
