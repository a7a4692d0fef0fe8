"""Math engines of keras_normkit: backend-agnostic `keras.ops` code that layers call.

A layer file holds a formula, its weights and its config; the algorithm that evaluates the
formula fast (a parallel scan, a chunked loop) lives here, usable and tested on its own.

* `linear_scan`: the linear recurrence `h_t = a_t * h_{t-1} + b_t` over a whole sequence,
  in parallel (used by `keras_normkit.layers.QRN`).
* `layer_norm`: layer normalization over the last axis (Keras's `LayerNormalization`
  formula) with a hand-derived gradient (used by the layer-normalized RNN cells).
* The engine of `keras_normkit.layers.FastWeightsRNN`, three public modules (their names
  are imported from them, not from here): `keras_normkit.ops.fast_weights_plan`, every
  rule of how a call runs as one pure function (`plan` -> `LoopPlan`);
  `keras_normkit.ops.fast_weights_loop`, the chunked time loop (`MatrixForm`, `MemoryForm`);
  `keras_normkit.ops.fast_weights_rnn`, the one call the layer makes (`run_fast_weights`:
  plan, input projection, XLA clusters, the loop). Their private helpers start with `_`.
"""

from keras_normkit.ops.layer_norm import layer_norm
from keras_normkit.ops.linear_scan import linear_scan

__all__ = ["layer_norm", "linear_scan"]
