"""`Interrupt`: a callback that raises at the beginning of one epoch, as a crash would."""

import keras


class Interrupt(keras.callbacks.Callback):
    """Raise `RuntimeError("Interrupting!")` when epoch `epoch` (0-based) begins."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("Interrupting!")
