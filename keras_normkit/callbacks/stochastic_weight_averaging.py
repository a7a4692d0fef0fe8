"""`StochasticWeightAveraging`: the running mean of the weights along the training path."""

import warnings

import keras
import numpy as np

from keras_normkit._validation import check_bool, check_int
from keras_normkit.callbacks.stateful import StatefulCallback, weights_state
from keras_normkit.utils.averaged_weights import (
    assign_all,
    refresh_batch_norm,
    restore,
    stash,
)


@keras.saving.register_keras_serializable(package="keras_normkit")
class StochasticWeightAveraging(StatefulCallback):
    """Average the weights along training (SWA) and swap the average in, with exact BN statistics.

    Stochastic weight averaging (Izmailov et al. 2018) keeps the running mean of the
    trainable weights `w` taken at the end of epochs `start_epoch`, `start_epoch + cycle`,
    `start_epoch + 2·cycle`, ... (0-based), the end of each learning-rate cycle when training
    with a cyclical schedule (or every `cycle` epochs at a constant rate):

        w_swa ← (n·w_swa + w) / (n + 1),   n ← n + 1,

    computed on the host in float64. When `fit` ends (`swap_at_end=True`), or on demand with
    `swap()`, the model's trainable weights become `w_swa`. The moving statistics of
    `BatchNormalization` layers belong to none of the averaged weights: after the swap they
    are recomputed for the averaged weights, exactly, with
    `keras_normkit.utils.recompute_batch_norm_statistics` over `batch_norm_data` (the
    paper's one pass over the training data; the half that Keras's `use_ema` lacks). A model
    with batch normalization and no `batch_norm_data` gets a warning: its statistics would be
    those of the last weights, not of the average. Non-trainable weights other than the BN
    statistics keep their last values.

    `swap()` exchanges the current and the averaged weights (BN statistics included), so a
    second call restores the weights training left. The average and its count are saved and
    restored by `keras_normkit.callbacks.BackupAndRestore`, so an interrupted `fit` resumes
    with the same average. Keras's `use_ema=True` optimizers keep an exponential average
    instead; `keras_normkit.utils.ema_weights` swaps that one in with BN statistics too.

    Args:
        start_epoch: Integer >= 0, the first epoch (0-based) whose final weights are
            averaged. The paper starts after about 75 % of the training budget.
        cycle: Integer >= 1, the number of epochs between two averaged weights (the
            length of a learning-rate cycle). Default: 1.
        batch_norm_data: The inputs to recompute BN statistics with (anything
            `recompute_batch_norm_statistics` accepts: arrays, a `tf.data.Dataset`, a
            `keras.utils.PyDataset`, a function returning an iterable), usually the training
            inputs. `None` leaves them (with a warning if the model has BN layers).
        batch_size: Integer >= 1, the batch size for NumPy `batch_norm_data`. Default: 32.
        swap_at_end: Whether `on_train_end` swaps the average in. Default: `True`.
        verbose: 0 (silent) or 1 (a line when the average is swapped in).

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import StochasticWeightAveraging
    >>> keras.utils.set_random_seed(0)
    >>> x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    >>> y = x @ np.array([[1.0], [-2.0], [0.5], [0.0]], "float32")
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8),
    ...                           keras.layers.BatchNormalization(), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.SGD(0.05), loss="mse")
    >>> swa = StochasticWeightAveraging(start_epoch=2, batch_norm_data=x, verbose=0)
    >>> _ = model.fit(x, y, epochs=6, batch_size=16, callbacks=[swa], verbose=0)
    >>> swa.count, swa.swapped  # epochs 2, 3, 4, 5 averaged; the average is in the model
    (4, True)

    Reference: Izmailov, Podoprikhin, Garipov, Vetrov, Wilson, "Averaging Weights Leads to
    Wider Optima and Better Generalization", UAI 2018, arXiv:1803.05407.
    """

    def __init__(
        self,
        start_epoch,
        cycle=1,
        batch_norm_data=None,
        batch_size=32,
        swap_at_end=True,
        verbose=1,
    ):
        super().__init__()
        self.start_epoch = check_int("start_epoch", start_epoch, minimum=0)
        self.cycle = check_int("cycle", cycle, minimum=1)
        self.batch_norm_data = batch_norm_data
        self.batch_size = check_int("batch_size", batch_size, minimum=1)
        self.swap_at_end = check_bool("swap_at_end", swap_at_end)
        self.verbose = check_int("verbose", verbose, minimum=0, maximum=1)
        self.count = 0
        self._average = None  # float64 arrays, one per trainable variable
        self._stashed = None  # the weights swapped out: (trainable, non-trainable)

    @property
    def swapped(self):
        """Whether the model holds the averaged weights (after `swap()` or the end of `fit`)."""
        return self._stashed is not None

    def averaged_weights(self):
        """The averaged trainable weights (float64 arrays, in `model.trainable_variables`
        order), or `None` before the first averaged epoch."""
        return weights_state(self._average)

    def on_train_begin(self, logs=None):
        if self.swapped:
            raise RuntimeError(
                "StochasticWeightAveraging: the model holds the averaged weights (swap() was "
                "called); call swap() again to restore the training weights before fit."
            )

    def on_epoch_end(self, epoch, logs=None):
        if epoch >= self.start_epoch and (epoch - self.start_epoch) % self.cycle == 0:
            weights = [
                np.asarray(keras.ops.convert_to_numpy(v), np.float64)
                for v in self.model.trainable_variables
            ]
            if self._average is None:
                self._average = weights
            else:
                n = self.count
                self._average = [
                    (n * a + w) / (n + 1) for a, w in zip(self._average, weights, strict=True)
                ]
            self.count += 1
        self.notify_backup(epoch)

    def on_train_end(self, logs=None):
        if not self.swap_at_end or self.swapped:
            return
        if self._average is None:
            warnings.warn(
                f"StochasticWeightAveraging: training ended before epoch {self.start_epoch} "
                "(start_epoch), so no weights were averaged; the model keeps its last weights.",
                stacklevel=2,
            )
            return
        self.swap()

    def swap(self):
        """Exchange the model's weights and the averaged ones (BN statistics recomputed).

        The first call puts `w_swa` in the model and recomputes the BN statistics over
        `batch_norm_data`; the next call puts back the weights (and BN statistics) it took
        out. Returns `self.swapped`.
        """
        model = self.model
        if model is None:
            raise RuntimeError("StochasticWeightAveraging.swap() needs a model: call fit first.")
        if self.swapped:
            restore(model, self._stashed)
            self._stashed = None
            return False
        if self._average is None:
            raise ValueError(
                "StochasticWeightAveraging.swap(): no weights averaged yet (the average starts "
                f"at the end of epoch start_epoch={self.start_epoch})."
            )
        self._stashed = stash(model)
        assign_all(model.trainable_variables, self._average)
        refresh_batch_norm(
            model, self.batch_norm_data, self.batch_size, "StochasticWeightAveraging"
        )
        if self.verbose:
            print(f"StochasticWeightAveraging: the average of {self.count} weights swapped in.")
        return True

    def get_state(self):
        return {"count": self.count, "average": weights_state(self._average)}

    def set_state(self, state):
        self.count = int(state["count"])
        self._average = weights_state(state["average"])

    def get_config(self):
        return {
            "start_epoch": self.start_epoch,
            "cycle": self.cycle,
            "batch_size": self.batch_size,
            "swap_at_end": self.swap_at_end,
            "verbose": self.verbose,
        }
