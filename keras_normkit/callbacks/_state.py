"""The former home of `StatefulCallback`, kept so that its old import path still works.

`StatefulCallback` and `weights_state` live in `keras_normkit.callbacks.stateful`; import them
from there, or `StatefulCallback` from `keras_normkit.callbacks`.
"""

from keras_normkit.callbacks.stateful import StatefulCallback, weights_state

__all__ = ["StatefulCallback", "weights_state"]
