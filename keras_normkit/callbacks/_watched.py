"""Which layers a statistics callback watches (`ActivationStatistics`, `GradientStatistics`)."""

import keras


def check_layers_argument(layers):
    """`None`, or the `layers` argument as a non-empty list of layer names or layers."""
    if layers is None:
        return None
    if isinstance(layers, (str, keras.layers.Layer)):
        layers = [layers]
    layers = list(layers)
    if not layers or not all(isinstance(x, (str, keras.layers.Layer)) for x in layers):
        raise TypeError(
            "`layers` must be None or a non-empty list of layer names or layers. "
            f"Received: layers={layers!r}"
        )
    return layers


def watched_layers(model, layers):
    """The layers of `model` named (or given) by `layers`; every non-input layer for `None`."""
    if layers is None:
        return [x for x in model.layers if not isinstance(x, keras.layers.InputLayer)]
    found = []
    for layer in layers:
        if isinstance(layer, str):
            try:
                layer = model.get_layer(layer)
            except ValueError:
                names = [x.name for x in model.layers]
                raise ValueError(
                    f"`layers` names a layer the model does not have: {layer!r}. "
                    f"Its layers are: {names}"
                ) from None
        found.append(layer)
    return found
