"""Monte-Carlo dropout and deep ensembles as Keras models (mean probabilities out)."""

from keras_normkit.uncertainty.ensembles.deep_ensemble import DeepEnsemble
from keras_normkit.uncertainty.ensembles.mc_dropout import MonteCarloDropout

__all__ = ["DeepEnsemble", "MonteCarloDropout"]
