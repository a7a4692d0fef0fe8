"""`StatefulCallback`: a callback whose state `BackupAndRestore` saves and restores.

The public home of `StatefulCallback` (also exported by `keras_normkit.callbacks`); the
module `keras_normkit.callbacks._state` of earlier versions re-exports it.
"""

import keras
import numpy as np

from keras_normkit.callbacks._registry import BACKUP, MEMBER, fit_callbacks, register

__all__ = ["StatefulCallback"]


def weights_state(values):
    """A list of arrays (e.g. `model.get_weights()`; `None` entries kept) or `None`, copied."""
    return None if values is None else [None if v is None else np.array(v) for v in values]


class StatefulCallback(keras.callbacks.Callback):
    """A callback whose state `keras_normkit.callbacks.BackupAndRestore` saves and restores.

    Subclasses implement `get_state()` (a structure of dicts with string keys, lists, Python
    scalars, `None` and NumPy arrays) and `set_state(state)` (accepts what `get_state`
    returned, with tuples turned into lists). The backup of their `fit` finds them through
    three calls, each in the hook where it happens:

    - `set_model` registers the callback on its model (a subclass that overrides it calls
      `super().set_model(model)`, as every Keras callback must);
    - `on_epoch_begin` starts with `self.restore_from_backup()`: when the `fit` resumes from a
      backup, the first call restores the saved state before the epoch's code runs;
    - `on_epoch_end` ends with `self.notify_backup(epoch)`: the state after `epoch` is
      final, and the backup writes the epoch once every callback of ours placed after it in
      the list has said so (those before it are done when it runs).

    This class's own `on_epoch_begin` and `on_epoch_end` make exactly these calls, so a
    subclass that overrides neither needs nothing more; one that overrides them makes the
    call itself (or calls `super()`). A backup warns about a callback that does not.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.callbacks import StatefulCallback
    >>> class EpochCounter(StatefulCallback):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.count = 0
    ...     def on_epoch_end(self, epoch, logs=None):
    ...         self.count += 1
    ...         self.notify_backup(epoch)  # the state after this epoch is final
    ...     def get_state(self):
    ...         return {"count": self.count}
    ...     def set_state(self, state):
    ...         self.count = state["count"]
    >>> counter = EpochCounter()
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile("sgd", loss="mse")
    >>> _ = model.fit(np.ones((4, 1)), np.ones((4, 1)), epochs=3, verbose=0,
    ...               callbacks=[counter])
    >>> counter.count, counter.get_state()
    (3, {'count': 3})
    """

    def set_model(self, model):
        super().set_model(model)
        register(self, MEMBER)  # the backup of this fit finds this callback on the model

    def get_state(self):
        """The callback's state: JSON-compatible values and NumPy arrays."""
        raise NotImplementedError

    def set_state(self, state):
        """Restore a state returned by `get_state` (tuples may come back as lists)."""
        raise NotImplementedError

    def restore_from_backup(self):
        """Take the saved state from the backup of this `fit`, if it resumes from one.

        Call it first in `on_epoch_begin`. At the first epoch of a `fit` that a
        `BackupAndRestore` resumes, it calls `set_state` with the state saved for this
        callback; otherwise (and at every later call) it does nothing.
        """
        backups = fit_callbacks(self, BACKUP)
        states = [backup.restored_state(self) for backup in backups]  # each hands it out once
        state = next((s for s in states if s is not None), None)
        if state is not None:
            self.set_state(state)

    def notify_backup(self, epoch):
        """Tell the backup of this `fit` that the state after `epoch` is final.

        Call it last in `on_epoch_end`, once the epoch's changes to the state are made.
        """
        for backup in fit_callbacks(self, BACKUP):
            backup.member_finished_epoch(epoch, self)

    def on_epoch_begin(self, epoch, logs=None):
        self.restore_from_backup()

    def on_epoch_end(self, epoch, logs=None):
        self.notify_backup(epoch)
