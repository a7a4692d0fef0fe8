"""What `load_tfa_model` does with each object TensorFlow Addons 0.23 registers under `Addons>`.

One entry per registered name (98, enumerated from the installed package by
tests/migration/write_fixtures.py into tests/migration/fixtures/tfa_registry.json; a test
checks that this table has exactly those names and kinds). Four outcomes:

- `LOADS`: translated into the keras_normkit or Keras 3 object named; the fixtures listed
  (written by TF-Addons 0.23) predict (for a loss: compute the loss) as TF-Addons did, to
  1e-6;
- `INFERENCE`: an object of the training config only (an optimizer, a metric, a loss, a
  schedule with no equivalent): dropped, named in the one warning of the load, and the model
  loads for inference (compiled with what remains, as `compile=False` leaves it otherwise);
- `ERROR`: a `ValueError` naming the object, the layer it is in and what to use instead;
- `REPLACED`: a training-time object that model files never hold (a callback), for which
  keras_normkit has the same object, named (with what differs).

The table of docs/migration.md is generated from here (`coverage_markdown`).
"""

LOADS = "loads"
INFERENCE = "loads for inference"
ERROR = "error"
REPLACED = "replaced"

_KIND_ORDER = (
    "layer",
    "cell",
    "activation",
    "loss",
    "loss function",
    "metric",
    "optimizer",
    "schedule",
    "callback",
    "model",
)


def _entry(kind, outcome, replacement, fixtures=()):
    return {"kind": kind, "outcome": outcome, "replacement": replacement, "fixtures": fixtures}


def _layer_error(replacement):
    return _entry("layer", ERROR, replacement)


def _dropped(kind, replacement):
    return _entry(kind, INFERENCE, replacement)


_ADAPTIVE = (
    "Keras's `keras.layers.{name}` (same `output_size`, `data_format`); TF-Addons splits the "
    "input evenly, so only sizes that are multiples of `output_size` existed"
)
_ADAPTIVE_3D = (
    ". On TensorFlow, Keras 3.15's 3-D adaptive poolings fail inside a model (a Keras bug: "
    "the pooling window exceeds the input); JAX and PyTorch run them"
)
_TFA_OPTIMIZER = "dropped; the model is compiled with Keras's default optimizer, `rmsprop`"
_WRAPPER = (
    "dropped (it only averages or synchronizes weights during training); the model is "
    "compiled with the optimizer it wraps, translated"
)
_METRIC = "dropped"
_LOSS = "dropped; compile again with a loss before training"

COVERAGE = {
    # ------------------------------------------------------------------ layers
    "Addons>AdaptiveAveragePooling1D": _entry(
        "layer", LOADS, _ADAPTIVE.format(name="AdaptiveAveragePooling1D"), ("adaptive_pooling",)
    ),
    "Addons>AdaptiveAveragePooling2D": _entry(
        "layer", LOADS, _ADAPTIVE.format(name="AdaptiveAveragePooling2D"), ("adaptive_pooling",)
    ),
    "Addons>AdaptiveAveragePooling3D": _entry(
        "layer",
        LOADS,
        _ADAPTIVE.format(name="AdaptiveAveragePooling3D") + _ADAPTIVE_3D,
        ("adaptive_pooling_3d",),
    ),
    "Addons>AdaptiveMaxPooling1D": _entry(
        "layer", LOADS, _ADAPTIVE.format(name="AdaptiveMaxPooling1D"), ("adaptive_pooling",)
    ),
    "Addons>AdaptiveMaxPooling2D": _entry(
        "layer", LOADS, _ADAPTIVE.format(name="AdaptiveMaxPooling2D"), ("adaptive_pooling",)
    ),
    "Addons>AdaptiveMaxPooling3D": _entry(
        "layer",
        LOADS,
        _ADAPTIVE.format(name="AdaptiveMaxPooling3D") + _ADAPTIVE_3D,
        ("adaptive_pooling_3d",),
    ),
    "Addons>CRF": _layer_error(
        "no Keras 3 equivalent: a `Dense` for the unary scores and your own Viterbi decoding, "
        "passed as `custom_objects={'Addons>CRF': ...}`"
    ),
    "Addons>CorrelationCost": _layer_error(
        "no Keras 3 equivalent (a custom CUDA op of FlowNet): pass your own layer in "
        "`custom_objects`"
    ),
    "Addons>ESN": _layer_error(
        "no Keras 3 equivalent: `keras.layers.RNN` around your own echo-state cell, in "
        "`custom_objects`"
    ),
    "Addons>EmbeddingBag": _layer_error(
        "`keras.layers.Embedding` followed by a sum or mean over the bag axis "
        "(`keras.ops.sum`/`keras.ops.mean`), in `custom_objects`"
    ),
    "Addons>FilterResponseNormalization": _entry(
        "layer",
        LOADS,
        "`keras_normkit.layers.FilterResponseNormalization` (channel `axis=-1`; `gamma`, "
        "`beta` reshaped from `(1, 1, 1, C)` to `(C,)`)",
        ("filter_response_norm",),
    ),
    "Addons>GELU": _entry(
        "layer",
        LOADS,
        "`keras.layers.Activation(tfa_gelu)` (`approximate=True`) or "
        "`keras.layers.Activation('gelu')` (`approximate=False`)",
        ("activation_layers",),
    ),
    "Addons>GroupNormalization": _entry(
        "layer",
        LOADS,
        "Keras's `keras.layers.GroupNormalization` (same `groups`, `axis`, `epsilon`, "
        "`center`, `scale`)",
        ("group_norm",),
    ),
    "Addons>InstanceNormalization": _entry(
        "layer",
        LOADS,
        "Keras's `keras.layers.GroupNormalization(groups=-1)`",
        ("group_norm",),
    ),
    "Addons>MaxUnpooling2D": _layer_error(
        "no Keras 3 equivalent: scatter with `keras.ops.scatter` on the argmax indices, in "
        "`custom_objects`"
    ),
    "Addons>MaxUnpooling2DV2": _layer_error(
        "no Keras 3 equivalent: scatter with `keras.ops.scatter` on the argmax indices, in "
        "`custom_objects`"
    ),
    "Addons>Maxout": _layer_error(
        "a `keras.layers.Reshape` to `(..., C // num_units, num_units)` and a max over the "
        "next-to-last axis, in `custom_objects`"
    ),
    "Addons>MultiHeadAttention": _layer_error(
        "`keras.layers.MultiHeadAttention` (other arguments and weight layout: rebuild it "
        "and copy the projections by hand)"
    ),
    "Addons>NetVLAD": _layer_error(
        "no Keras 3 equivalent: pass your own layer in `custom_objects`"
    ),
    "Addons>NoisyDense": _layer_error(
        "`keras.layers.Dense` with the mean weights `mu_kernel`, `mu_bias` (what NoisyDense "
        "computes without noise), in `custom_objects`"
    ),
    "Addons>PoincareNormalize": _layer_error(
        "`keras.ops` code: `x * min(1 - epsilon, 1 / ||x||) ` over `axis`, in `custom_objects`"
    ),
    "Addons>PolynomialCrossing": _layer_error(
        "keras-rs's `FeatureCross` (DCN cross layer), in `custom_objects`"
    ),
    "Addons>Snake": _layer_error(
        "no Keras 3 equivalent: `x + sin(f x)^2 / f` with a trainable `f`, your own layer in "
        "`custom_objects`"
    ),
    "Addons>Sparsemax": _entry(
        "layer",
        LOADS,
        "`keras.layers.Activation(tfa_sparsemax)` (`axis=-1`; another axis: an error)",
        ("activation_layers",),
    ),
    "Addons>SpatialPyramidPooling2D": _layer_error(
        "Keras's `AdaptiveMaxPooling2D` per level, flattened and concatenated, in `custom_objects`"
    ),
    "Addons>SpectralNormalization": _entry(
        "layer",
        LOADS,
        "Keras's `keras.layers.SpectralNormalization` (same `power_iterations`; the "
        "power-iteration vector `sn_u` becomes `vector_u`)",
        ("spectral_norm",),
    ),
    "Addons>StochasticDepth": _layer_error(
        "at inference `shortcut + survival_probability * residual`: a `keras.layers.Add` "
        "after scaling, or your own layer in `custom_objects`"
    ),
    "Addons>TLU": _entry(
        "layer",
        LOADS,
        "`keras_normkit.layers.TLU(axis=None)` (TF-Addons' `tau` has one value per element)",
        ("filter_response_norm",),
    ),
    "Addons>WeightNormalization": _entry(
        "layer",
        LOADS,
        "`keras_normkit.layers.WeightNormalization` around `Dense`, `Conv1D/2D/3D` (around "
        "another layer: an error)",
        (
            "weight_norm_dense",
            "weight_norm_dense_no_data_init",
            "weight_norm_conv2d",
        ),
    ),
    # ------------------------------------------------------------------ RNN cells
    "Addons>ESNCell": _entry(
        "cell",
        ERROR,
        "no Keras 3 equivalent: your own cell (`h = (1 - leaky) h + leaky * activation(x W + "
        "h U + b)`) in `custom_objects`",
    ),
    "Addons>LayerNormLSTMCell": _entry(
        "cell",
        LOADS,
        "`keras_normkit.layers.LayerNormLSTMCell(..., carry_normalized_state=True)`",
        ("layer_norm_lstm", "bidirectional"),
    ),
    "Addons>LayerNormSimpleRNNCell": _entry(
        "cell",
        LOADS,
        "`keras_normkit.layers.LayerNormSimpleRNNCell` (`layernorm_epsilon` -> `norm_epsilon`)",
        ("layer_norm_simple_rnn", "bidirectional"),
    ),
    "Addons>NASCell": _entry(
        "cell", ERROR, "no Keras 3 equivalent: your own cell in `custom_objects`"
    ),
    "Addons>PeepholeLSTMCell": _entry(
        "cell",
        LOADS,
        "`keras_normkit.layers.PeepholeLSTMCell` (`implementation` dropped: the same function)",
        ("peephole_lstm",),
    ),
    # ------------------------------------------------------------------ activations
    "Addons>gelu": _entry(
        "activation",
        LOADS,
        "`keras_normkit.migration.tfa_gelu` (the tanh approximation, TF-Addons' default)",
        ("activations",),
    ),
    "Addons>hardshrink": _entry("activation", LOADS, "Keras's `hard_shrink`", ("activations",)),
    "Addons>lisht": _entry(
        "activation",
        ERROR,
        "`lambda x: x * keras.ops.tanh(x)` in `custom_objects`",
    ),
    "Addons>mish": _entry("activation", LOADS, "Keras's `mish`", ("activations",)),
    "Addons>rrelu": _entry(
        "activation",
        ERROR,
        "at inference a leaky ReLU of slope `(lower + upper) / 2`: `lambda x: "
        "keras.ops.leaky_relu(x, 0.2292)` for the defaults, in `custom_objects`",
    ),
    "Addons>snake": _entry(
        "activation",
        ERROR,
        "`lambda x: x + keras.ops.sin(x) ** 2` (frequency 1) in `custom_objects`",
    ),
    "Addons>softshrink": _entry("activation", LOADS, "Keras's `soft_shrink`", ("activations",)),
    "Addons>sparsemax": _entry(
        "activation",
        LOADS,
        "`keras_normkit.migration.tfa_sparsemax` (not Keras's `sparsemax`)",
        ("activations",),
    ),
    "Addons>tanhshrink": _entry("activation", LOADS, "Keras's `tanh_shrink`", ("activations",)),
    # ------------------------------------------------------------------ losses
    "Addons>ContrastiveLoss": _dropped("loss", _LOSS),
    "Addons>GIoULoss": _dropped("loss", _LOSS),
    "Addons>LiftedStructLoss": _dropped("loss", _LOSS),
    "Addons>NpairsLoss": _dropped("loss", _LOSS),
    "Addons>NpairsMultilabelLoss": _dropped("loss", _LOSS),
    "Addons>PinballLoss": _dropped("loss", _LOSS),
    "Addons>SigmoidFocalCrossEntropy": _entry(
        "loss",
        LOADS,
        "Keras's `keras.losses.BinaryFocalCrossentropy(apply_class_balancing=True, alpha, "
        "gamma, from_logits, reduction='sum')` for outputs of one unit (TF-Addons sums over "
        "the last axis, Keras averages: wider outputs are dropped, with the warning)",
        ("focal_loss", "focal_loss_logits"),
    ),
    "Addons>SparsemaxLoss": _dropped("loss", _LOSS),
    "Addons>TripletHardLoss": _dropped("loss", _LOSS),
    "Addons>TripletSemiHardLoss": _dropped("loss", _LOSS),
    "Addons>WeightedKappaLoss": _dropped("loss", _LOSS),
    "Addons>contrastive_loss": _dropped("loss function", _LOSS),
    "Addons>giou_loss": _dropped("loss function", _LOSS),
    "Addons>lifted_struct_loss": _dropped("loss function", _LOSS),
    "Addons>npairs_loss": _dropped("loss function", _LOSS),
    "Addons>npairs_multilabel_loss": _dropped("loss function", _LOSS),
    "Addons>pinball_loss": _dropped("loss function", _LOSS),
    "Addons>sigmoid_focal_crossentropy": _entry(
        "loss function",
        LOADS,
        "as `Addons>SigmoidFocalCrossEntropy` (alpha 0.25, gamma 2)",
        ("focal_loss_function",),
    ),
    "Addons>sparsemax_loss": _dropped("loss function", _LOSS),
    "Addons>sparsemax_loss_from_logits": _dropped("loss function", _LOSS),
    "Addons>triplet_hard_loss": _dropped("loss function", _LOSS),
    "Addons>triplet_semihard_loss": _dropped("loss function", _LOSS),
    # ------------------------------------------------------------------ metrics
    "Addons>CohenKappa": _dropped("metric", _METRIC),
    "Addons>F1Score": _dropped("metric", f"{_METRIC} (Keras has `keras.metrics.F1Score`)"),
    "Addons>FBetaScore": _dropped("metric", f"{_METRIC} (Keras has `keras.metrics.FBetaScore`)"),
    "Addons>GeometricMean": _dropped("metric", _METRIC),
    "Addons>HarmonicMean": _dropped("metric", _METRIC),
    "Addons>KendallsTauB": _dropped("metric", _METRIC),
    "Addons>KendallsTauC": _dropped("metric", _METRIC),
    "Addons>MatthewsCorrelationCoefficient": _dropped("metric", _METRIC),
    "Addons>PearsonsCorrelation": _dropped(
        "metric", f"{_METRIC} (Keras has `keras.metrics.PearsonCorrelation`)"
    ),
    "Addons>RSquare": _dropped("metric", f"{_METRIC} (Keras has `keras.metrics.R2Score`)"),
    "Addons>SpearmansRank": _dropped("metric", _METRIC),
    # ------------------------------------------------------------------ optimizers
    "Addons>AdaBelief": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>AdamW": _dropped(
        "optimizer", f"{_TFA_OPTIMIZER} (Keras's `AdamW` scales the decay otherwise)"
    ),
    "Addons>COCOB": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>ConditionalGradient": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>LAMB": _dropped("optimizer", f"{_TFA_OPTIMIZER} (Keras has `keras.optimizers.Lamb`)"),
    "Addons>LazyAdam": _dropped(
        "optimizer", f"{_TFA_OPTIMIZER} (on dense gradients it is `keras.optimizers.Adam`)"
    ),
    "Addons>Lookahead": _entry("optimizer", INFERENCE, _WRAPPER, ("optimizer_lookahead",)),
    "Addons>MovingAverage": _entry("optimizer", INFERENCE, _WRAPPER, ("optimizer_moving_average",)),
    "Addons>MultiOptimizer": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>NovoGrad": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>ProximalAdagrad": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>RectifiedAdam": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>SGDW": _dropped("optimizer", _TFA_OPTIMIZER),
    "Addons>SWA": _entry("optimizer", INFERENCE, _WRAPPER, ("optimizer_swa",)),
    "Addons>Yogi": _dropped("optimizer", _TFA_OPTIMIZER),
    # ------------------------------------------------------------------ schedules
    "Addons>CyclicalLearningRate": _entry(
        "schedule",
        LOADS,
        "`keras_normkit.schedules.CyclicalLearningRate` for a constant `scale_fn` (another: "
        "dropped, its `initial_learning_rate` kept)",
        ("cyclical_lr",),
    ),
    "Addons>ExponentialCyclicalLearningRate": _entry(
        "schedule",
        LOADS,
        "`CyclicalLearningRate(mode='exp_range')` (`scale_mode='iterations'`)",
        ("legacy_adam_exponential_cyclical_lr",),
    ),
    "Addons>Triangular2CyclicalLearningRate": _entry(
        "schedule",
        LOADS,
        "`CyclicalLearningRate(mode='triangular2')` (`scale_mode='cycle'`)",
        ("triangular2_cyclical_lr",),
    ),
    "Addons>TriangularCyclicalLearningRate": _entry(
        "schedule",
        LOADS,
        "`CyclicalLearningRate(mode='triangular')`",
        ("triangular_cyclical_lr",),
    ),
    # ------------------------------------------------------------------ callbacks, models
    "Addons>TQDMProgressBar": _entry(
        "callback",
        ERROR,
        "never in a model file; Keras's progress bar (`verbose=1`) or `tqdm` in a "
        "`keras.callbacks.Callback`",
    ),
    "Addons>TimeStopping": _entry(
        "callback",
        REPLACED,
        "`keras_normkit.callbacks.TimeStopping(seconds, verbose)` (same arguments and "
        "defaults; it checks the time after every batch, where TF-Addons checked after every "
        "epoch, and resumes with the remaining budget under `BackupAndRestore`)",
    ),
    "Addons>CRFModelWrapper": _entry(
        "model",
        ERROR,
        "no Keras 3 equivalent: rebuild the model around your own CRF layer",
    ),
}


def tfa_coverage(name=None):
    """What `load_tfa_model` does with each object TensorFlow Addons 0.23 registers.

    TF-Addons 0.23 registers 98 objects under `Addons>` (layers, RNN cells, activations,
    losses, metrics, optimizers, learning-rate schedules, callbacks, a model). Each has one
    outcome:

    - `"loads"`: translated into the keras_normkit or Keras 3 object named in
      `replacement`; models written by TF-Addons 0.23 (the test fixtures named in
      `fixtures`) predict, or compute their loss, as TF-Addons did, to 1e-6;
    - `"loads for inference"`: an object of the training config only (an optimizer, an
      optimizer wrapper, a metric, a loss) with no equivalent: dropped and named in the
      load's one warning; the model loads, compiled with what remains;
    - `"error"`: `load_tfa_model` raises a `ValueError` naming the object, the layer it is
      in and what to use instead (`replacement`), unless `custom_objects` gives one;
    - `"replaced"`: a training-time object never held by model files (a callback), for
      which keras_normkit has the same object, named in `replacement`.

    Args:
        name: Optional registered name (`"Addons>GroupNormalization"`; the `Addons>`
            prefix may be left out). Default: `None`, every object.

    Returns:
        With `name`, a dict with keys `"name"`, `"kind"`, `"outcome"`, `"replacement"` and
        `"fixtures"`; without, the list of those dicts, sorted by name.

    Raises:
        TypeError: if `name` is not a string or `None`.
        ValueError: if `name` is not an object TF-Addons 0.23 registers.

    Example:

    >>> from keras_normkit.migration import tfa_coverage
    >>> entry = tfa_coverage("GroupNormalization")
    >>> entry["outcome"], entry["kind"]
    ('loads', 'layer')
    >>> len(tfa_coverage()), tfa_coverage("Addons>Maxout")["outcome"]
    (98, 'error')
    """
    if name is None:
        return [tfa_coverage(key) for key in sorted(COVERAGE)]
    if not isinstance(name, str):
        raise TypeError(
            "`name` must be None or the registered name (a str) of a TF-Addons object. "
            f"Received: name={name!r} of type {type(name).__name__}"
        )
    key = name if name.startswith("Addons>") else "Addons>" + name
    if key not in COVERAGE:
        raise ValueError(
            f"`name` must be an object TensorFlow Addons 0.23 registers (such as "
            f"'Addons>GroupNormalization'). Received: name={name!r}"
        )
    entry = COVERAGE[key]
    return {"name": key, **entry, "fixtures": list(entry["fixtures"])}


def _cell(text):
    return text.replace("|", "\\|")


def coverage_markdown():
    """The coverage table of docs/migration.md (between its `tfa-coverage` markers)."""
    lines = [
        "| TF-Addons 0.23 (registered name) | Kind | Outcome | keras_normkit / Keras 3, or "
        "what to use instead | Tested on (fixtures) |",
        "| --- | --- | --- | --- | --- |",
    ]
    rank = {kind: i for i, kind in enumerate(_KIND_ORDER)}
    order = sorted(COVERAGE, key=lambda n: (rank[COVERAGE[n]["kind"]], n.lower()))
    for name in order:
        entry = COVERAGE[name]
        outcome = {
            LOADS: "**loads**",
            INFERENCE: "loads for inference",
            ERROR: "error",
            REPLACED: "**replaced**",
        }
        fixtures = ", ".join(f"`{f}`" for f in entry["fixtures"])
        lines.append(
            f"| `{name}` | {entry['kind']} | {outcome[entry['outcome']]} | "
            f"{_cell(entry['replacement'])} | {fixtures} |"
        )
    counts = {
        o: sum(e["outcome"] == o for e in COVERAGE.values())
        for o in (LOADS, INFERENCE, ERROR, REPLACED)
    }
    lines.append("")
    lines.append(
        f"{len(COVERAGE)} objects: {counts[LOADS]} load, {counts[INFERENCE]} load for "
        f"inference, {counts[ERROR]} raise an error, {counts[REPLACED]} replaced by "
        "keras_normkit's own."
    )
    return "\n".join(lines) + "\n"
