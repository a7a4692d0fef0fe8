"""Loading tf.keras 2 models that use TensorFlow Addons (TF-Addons) objects into Keras 3.

TF-Addons reached end of life, and Keras 3 cannot read its objects: `keras.models.load_model`
on a `.h5` file written by tf.keras 2 with `Addons>WeightNormalization`,
`Addons>LayerNormLSTMCell` or `Addons>LayerNormSimpleRNNCell` fails ("Unknown layer",
"Could not locate class"), and the training config of a tf.keras 2 file (its metrics, an
`Addons>CyclicalLearningRate`) stops the load of even a plain model. `load_tfa_model` reads
the file with h5py (its `model_config` and `training_config` JSON attributes and its weight
groups, the public parts of the HDF5 format), translates every TF-Addons object into the
keras_normkit or Keras 3 object that computes the same function (argument by argument,
weights mapped), writes the translated model to a temporary `.h5` and loads that with the
public `keras.models.load_model`; it then compiles the model from the translated training
config and restores the optimizer's step count and moments. Nothing here needs TensorFlow:
it runs on every backend. `docs/migration.md` lists each translation and every behaviour that
differs, measured against TF-Addons 0.23.

`tfa_coverage()` says what happens to each of the 98 objects TF-Addons 0.23 registers: it
loads, it loads for inference (training-only objects dropped with a warning), or it raises a
`ValueError` naming it and what to use instead (or pass your own Keras 3 object for it in
`custom_objects`). The package holds one module per step: `_config` (model config),
`_weights` (weights), `_training` (training config), `_loader` (the file), `_coverage` (the
outcome table), `_functions` (the activations). A SavedModel written by tf.keras 2 is not read here: it
loads for inference as `keras.layers.TFSMLayer(path, call_endpoint="serving_default")`
(TensorFlow backend).
"""

from keras_normkit.migration._coverage import tfa_coverage
from keras_normkit.migration._functions import tfa_gelu, tfa_sparsemax
from keras_normkit.migration._loader import load_tfa_model

__all__ = ["load_tfa_model", "tfa_coverage", "tfa_gelu", "tfa_sparsemax"]
