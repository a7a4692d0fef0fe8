"""The three ResNets of the experiments, built from Keras layers and keras_normkit's.

All three are pre-activation ResNets for 28x28x1 images with the same stages: a 3x3 stem
convolution to `widths[0]` channels (a plain convolution with orthogonal rows, `_stem`), then for each stage `depths[s]` basic blocks (two 3x3
convolutions) of `widths[s]` channels, the first block of every stage after the first
halving the resolution (a 1x1 convolution on its skip path, as on the first block of a
stage whose width differs from its input's), then activation, global average pooling and a
`Dense` classifier named `classifier`.

* `nf_resnet`: the NF-ResNet of Brock et al. (2021a): every convolution is a
  `WeightStandardization` with the gain of the activation before it, every block an
  `NFResidual` `h + alpha * f(h / beta)` with `beta` its input's analytic standard deviation.
* `plain_resnet`: the same net without weight standardization (plain convolutions,
  He-normal initialization): "neither" normalization.
* `bn_resnet`: the batch-norm ResNet (He et al. 2016, pre-activation): BN before every
  activation, identity skips, no alpha or beta.

`block_outputs(model)` lists the outputs of the residual blocks, for signal propagation.
"""

import math

import keras

from keras_normkit.layers import NFResidual, SkipInit, WeightStandardization

layers = keras.layers


def _stem(filters):
    """The stem: a plain 3x3 convolution whose 9 x `filters` kernel has orthogonal rows of
    squared norm `filters / 9`, so that the variance of its output, averaged over the
    channels, is the input's (for any correlation between neighbouring pixels)."""
    return layers.Conv2D(
        filters,
        3,
        padding="same",
        kernel_initializer=keras.initializers.Orthogonal(gain=math.sqrt(filters / 9)),
        name="stem",
    )


def _conv(filters, kernel_size, strides, activation, standardize):
    if standardize:
        return WeightStandardization(
            layers.Conv2D(filters, kernel_size, strides, padding="same"), activation=activation
        )
    return layers.Conv2D(
        filters, kernel_size, strides, padding="same", kernel_initializer="he_normal"
    )


def _stages(widths, depths):
    """`(filters, strides, transition)` for every block; `transition` whether the skip
    path needs a projection."""
    plan, channels = [], widths[0]
    for stage, (filters, depth) in enumerate(zip(widths, depths, strict=True)):
        for block in range(depth):
            strides = 2 if stage > 0 and block == 0 else 1
            plan.append((filters, strides, strides != 1 or filters != channels))
            channels = filters
    return plan


def _head(h, activation, num_classes):
    h = layers.Activation(activation, name="head_activation")(h)
    h = layers.GlobalAveragePooling2D()(h)
    return layers.Dense(num_classes, name="classifier")(h)


def nf_resnet(
    widths=(8, 16, 32),
    depths=(7, 7, 7),
    alpha=0.2,
    activation="relu",
    standardize=True,
    skip_init=False,
    num_classes=10,
    name=None,
):
    """An NF-ResNet (`standardize=True`) or the same net with plain convolutions."""
    inputs = keras.Input((28, 28, 1))
    h = _stem(widths[0])(inputs)
    variance = 1.0
    for index, (filters, strides, transition) in enumerate(_stages(widths, depths)):
        branch = [
            layers.Activation(activation),
            _conv(filters, 3, strides, activation, standardize),
            layers.Activation(activation),
            _conv(filters, 3, 1, activation, standardize),
        ]
        if skip_init:
            branch.append(SkipInit())
        shortcut = None
        if transition:
            shortcut = keras.Sequential(
                [layers.Activation(activation), _conv(filters, 1, strides, activation, standardize)]
            )
        block = NFResidual(
            keras.Sequential(branch),
            shortcut,
            alpha=alpha,
            beta=math.sqrt(variance),
            name=f"block_{index}",
        )
        h, variance = block(h), block.output_variance
    default = "nf_resnet" if standardize else "plain_resnet"
    return keras.Model(inputs, _head(h, activation, num_classes), name=name or default)


def plain_resnet(**kwargs):
    """The NF-ResNet's architecture with plain (not standardized) convolutions."""
    return nf_resnet(standardize=False, **kwargs)


def bn_resnet(widths=(8, 16, 32), depths=(7, 7, 7), activation="relu", num_classes=10):
    """A pre-activation batch-norm ResNet with the NF-ResNet's stages."""

    def conv(filters, kernel_size, strides):
        return layers.Conv2D(
            filters,
            kernel_size,
            strides,
            padding="same",
            use_bias=False,
            kernel_initializer="he_normal",
        )

    inputs = keras.Input((28, 28, 1))
    h = _stem(widths[0])(inputs)
    for index, (filters, strides, transition) in enumerate(_stages(widths, depths)):
        pre = layers.Activation(activation)(layers.BatchNormalization()(h))
        r = conv(filters, 3, strides)(pre)
        r = layers.Activation(activation)(layers.BatchNormalization()(r))
        r = conv(filters, 3, 1)(r)
        skip = conv(filters, 1, strides)(pre) if transition else h
        h = layers.Add(name=f"block_{index}")([skip, r])
    h = layers.BatchNormalization()(h)
    return keras.Model(inputs, _head(h, activation, num_classes), name="bn_resnet")


def expected_variances(widths, depths, alpha=0.2):
    """The analytic variance at the end of every block of an NF-ResNet: `1 + k alpha^2`
    after the `k`-th block of a stage (a transition block resets it to `1 + alpha^2`)."""
    variances, variance = [], 1.0
    for _, _, transition in _stages(widths, depths):
        variance = (1.0 if transition else variance) + alpha**2
        variances.append(variance)
    return variances


def block_outputs(model):
    """The outputs of the model's residual blocks (the layers named `block_<i>`), in order."""
    blocks = [layer for layer in model.layers if layer.name.startswith("block_")]
    blocks.sort(key=lambda layer: int(layer.name.split("_")[1]))
    return [layer.output for layer in blocks]


BUILDERS = {"nf_resnet": nf_resnet, "plain_resnet": plain_resnet, "bn_resnet": bn_resnet}
