"""The seven fully connected networks the SNN paper compares, as Keras model builders.

`build(method, n_inputs, n_outputs, layers, units, dropout, output)` returns an uncompiled
`keras.Model`. `layers` is the number of hidden layers (for ResNet: two per residual block;
for Highway: one per highway layer, after a projection to `units`):

* `snn`: `Dense` (LeCun normal) -> `keras_normkit.layers.SELU` -> `keras_normkit.layers.AlphaDropout`;
* `msra`: `Dense` (He normal) -> ReLU -> `Dropout` ("MSRAinit");
* `batchnorm`: `Dense` (He normal) -> `BatchNormalization` -> ReLU -> `Dropout`;
* `layernorm`: `Dense` (He normal) -> `LayerNormalization` -> ReLU -> `Dropout`;
* `weightnorm`: `keras_normkit.layers.WeightNormalization(Dense)` (data-dependent
  initialization) -> ReLU -> `Dropout`;
* `highway`: a `Dense` projection, then `layers` highway layers
  `y = x + T(x) * (H(x) - x)`, `H = relu(W_H x + b_H)`, `T = sigmoid(W_T x + b_T)`,
  `b_T` initialized to -2 (Srivastava et al. 2015: a negative gate bias carries the input
  through at first), `Dropout` after each;
* `resnet`: a `Dense` projection, then `layers // 2` blocks
  `y = relu(x + Dense(relu(Dense(x))))` (He normal), `Dropout` after each block.

`output` is `"softmax"` (classes) or `"sigmoid"` (binary or multi-task binary).
"""

import keras

from keras_normkit.layers import SELU, AlphaDropout, WeightNormalization

METHODS = ("snn", "msra", "batchnorm", "layernorm", "weightnorm", "highway", "resnet")


def _dense(units, init, name):
    return keras.layers.Dense(units, kernel_initializer=init, name=name)


def _plain(method, x, layers, units, dropout):
    for i in range(layers):
        if method == "snn":
            x = _dense(units, "lecun_normal", f"dense_{i}")(x)
            x = SELU(name=f"selu_{i}")(x)
            if dropout:
                x = AlphaDropout(dropout, name=f"alpha_dropout_{i}")(x)
            continue
        if method == "weightnorm":
            x = WeightNormalization(_dense(units, "he_normal", f"dense_{i}"), name=f"wn_{i}")(x)
        else:
            x = _dense(units, "he_normal", f"dense_{i}")(x)
        if method == "batchnorm":
            x = keras.layers.BatchNormalization(name=f"batchnorm_{i}")(x)
        elif method == "layernorm":
            x = keras.layers.LayerNormalization(name=f"layernorm_{i}")(x)
        x = keras.layers.ReLU(name=f"relu_{i}")(x)
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"dropout_{i}")(x)
    return x


def _highway(x, layers, units, dropout):
    x = _dense(units, "he_normal", "projection")(x)
    for i in range(layers):
        h = keras.layers.Dense(
            units, activation="relu", kernel_initializer="he_normal", name=f"highway_h_{i}"
        )(x)
        t = keras.layers.Dense(
            units,
            activation="sigmoid",
            bias_initializer=keras.initializers.Constant(-2.0),
            name=f"highway_t_{i}",
        )(x)
        carry = keras.layers.Subtract(name=f"highway_delta_{i}")([h, x])
        x = keras.layers.Add(name=f"highway_{i}")(
            [x, keras.layers.Multiply(name=f"highway_gate_{i}")([t, carry])]
        )
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"dropout_{i}")(x)
    return x


def _resnet(x, layers, units, dropout):
    x = _dense(units, "he_normal", "projection")(x)
    for i in range(max(1, layers // 2)):
        h = keras.layers.Dense(
            units, activation="relu", kernel_initializer="he_normal", name=f"block_{i}_a"
        )(x)
        h = _dense(units, "he_normal", f"block_{i}_b")(h)
        x = keras.layers.ReLU(name=f"block_{i}")(keras.layers.Add(name=f"block_{i}_add")([x, h]))
        if dropout:
            x = keras.layers.Dropout(dropout, name=f"dropout_{i}")(x)
    return x


def build(method, n_inputs, n_outputs, layers, units, dropout=0.0, output="softmax"):
    """An uncompiled fully connected `keras.Model` of the given method (see the module)."""
    if method not in METHODS:
        raise ValueError(f"`method` must be one of {METHODS}. Received: method={method!r}")
    if layers < 1 or units < 1:
        raise ValueError(f"`layers` and `units` must be >= 1. Received: {layers}, {units}")
    inputs = keras.Input((n_inputs,), name="features")
    if method == "highway":
        x = _highway(inputs, layers, units, dropout)
    elif method == "resnet":
        x = _resnet(inputs, layers, units, dropout)
    else:
        x = _plain(method, inputs, layers, units, dropout)
    init = "lecun_normal" if method == "snn" else "glorot_uniform"
    outputs = keras.layers.Dense(
        n_outputs, activation=output, kernel_initializer=init, name="output"
    )(x)
    return keras.Model(inputs, outputs, name=f"{method}_{layers}")


def hidden_layer_names(model):
    """The names of the layers whose outputs are the hidden activations (after the nonlinearity)."""
    kinds = ("selu_", "relu_", "highway_", "block_")
    return [
        layer.name
        for layer in model.layers
        if layer.name.startswith(kinds)
        and not layer.name.startswith(
            ("highway_h_", "highway_t_", "highway_delta_", "highway_gate_")
        )
        and not layer.name.endswith(("_a", "_b", "_add"))
    ]
