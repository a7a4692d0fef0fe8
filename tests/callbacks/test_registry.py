"""Which callbacks take part in one `fit`: Keras's guarantees we rely on, and the protocol.

`keras_normkit/callbacks/_registry.py` finds the callbacks of a `fit` on the model, in the
order Keras calls `set_model`, and tells the fits apart by the `params` dict Keras gives
every callback of one `CallbackList`. The first test fails if Keras stops doing either.
"""

import copy
import gc
import json
import os
import warnings
import weakref

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import BackupAndRestore, ReduceLROnPlateau, StatefulCallback
from keras_normkit.callbacks._registry import ATTRIBUTE, BACKUP, MEMBER, fit_callbacks
from tests.callbacks.interrupt import Interrupt

X = np.linspace(-1, 1, 32, dtype="float32").reshape(16, 2)
Y = X[:, :1] * 3.0


def make_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05), loss="mse")
    return model


def plateau():
    """Reduces at every epoch after the first (no decrease beats `min_delta`)."""
    return ReduceLROnPlateau(monitor="loss", patience=0, min_delta=10.0, factor=0.5)


def saved_states(backup_dir, epoch):
    with open(os.path.join(backup_dir, "keras_normkit_callbacks.json")) as f:
        return json.load(f)["epochs"][str(epoch)]


class Recorder(keras.callbacks.Callback):
    """Records, in `events`, the order of `set_model` and hook calls and the `params` seen."""

    def __init__(self, name, events):
        super().__init__()
        self.name, self.events = name, events

    def set_model(self, model):
        super().set_model(model)
        self.events.append(("set_model", self.name))

    def on_train_begin(self, logs=None):
        self.events.append(("on_train_begin", self.name))
        self.train_params = self.params

    def on_test_begin(self, logs=None):
        self.test_params = self.params


def test_keras_gives_the_callbacks_of_one_fit_one_params_dict_in_list_order():
    """The Keras behaviour the registry relies on (it fails if Keras changes it).

    `fit` builds one `CallbackList` per call; it calls `set_model` on the callbacks in list
    order, and gives all of them the same `params` dict, a new one per `fit` (or
    `evaluate`), kept through the validation inside the `fit`.
    """
    model = make_model()
    events = []
    first, second, third = (Recorder(name, events) for name in "abc")
    model.fit(X, Y, epochs=1, verbose=0, validation_data=(X, Y), callbacks=[first, second, third])
    assert [name for event, name in events if event == "set_model"] == ["a", "b", "c"]
    assert first.params is second.params is third.params is not None
    assert first.train_params is first.params and first.test_params is first.params
    fit_params = first.params
    model.fit(X, Y, epochs=1, verbose=0, callbacks=[first, second])
    assert first.params is second.params is not fit_params
    assert third.params is fit_params  # not in the second fit: keeps the first one's
    model.evaluate(X, Y, verbose=0, callbacks=[third])
    assert third.params is not fit_params


def test_registry_matches_fits_not_call_order():
    """Two callback lists of one model built before either runs, then run in turn."""
    model = make_model()
    one = [plateau(), BackupAndRestore("unused_one"), plateau()]
    two = [plateau(), BackupAndRestore("unused_two")]
    lists = [
        keras.callbacks.CallbackList(c, add_history=True, model=model, epochs=1, steps=1, verbose=0)
        for c in (one, two)
    ]
    assert fit_callbacks(one[1], MEMBER) == [one[0], one[2]]
    assert fit_callbacks(two[1], MEMBER) == [two[0]]
    assert fit_callbacks(two[0], BACKUP) == [two[1]]
    assert fit_callbacks(one[1]) == [(MEMBER, one[0]), (BACKUP, one[1]), (MEMBER, one[2])]
    # Registering again (a new fit with the same list) moves a callback last.
    registry = getattr(model, ATTRIBUTE)
    registry.add(two[0], MEMBER)
    assert fit_callbacks(two[1]) == [(BACKUP, two[1]), (MEMBER, two[0])]
    # The registry keeps no callback alive, and a copied model takes part in no fit.
    assert copy.copy(registry).same_fit(two[0]) == []
    gone = weakref.ref(one[0])
    del one, lists
    gc.collect()
    assert gone() is None
    assert fit_callbacks(two[1]) == [(BACKUP, two[1]), (MEMBER, two[0])]


def test_fits_of_the_same_model_with_prebuilt_lists_in_turn(tmp_path):
    """Each backup saves its own list's callbacks, whichever list ran last."""
    model = make_model()
    dirs = [str(tmp_path / name) for name in ("one", "two")]
    one = [plateau(), BackupAndRestore(dirs[0], delete_checkpoint=False)]
    two = [BackupAndRestore(dirs[1], delete_checkpoint=False), plateau(), plateau()]
    lists = [
        keras.callbacks.CallbackList(c, add_history=True, model=model, epochs=2, steps=2, verbose=0)
        for c in (one, two)
    ]
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=lists[0])
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=lists[1])
    assert list(one[1].members().values()) == [one[0]]
    assert list(two[0].members().values()) == [two[1], two[2]]
    assert list(saved_states(dirs[0], 2)) == ["ReduceLROnPlateau/0"]
    assert list(saved_states(dirs[1], 2)) == ["ReduceLROnPlateau/0", "ReduceLROnPlateau/1"]
    # The first list again: its backup resumes it at epoch 2.
    model.fit(X, Y, batch_size=8, epochs=3, verbose=0, callbacks=lists[0])
    assert list(one[1].members().values()) == [one[0]]
    assert [epoch for epoch, _ in one[0].reductions] == [1, 2]


class TrainAnother(keras.callbacks.Callback):
    """At the end of each epoch of its fit, trains another model for one epoch."""

    def __init__(self, model, callbacks):
        super().__init__()
        self.other, self.other_callbacks, self.epochs = model, callbacks, 0

    def on_epoch_end(self, epoch, logs=None):
        self.epochs += 1
        self.other.fit(
            X, Y, batch_size=8, epochs=self.epochs, initial_epoch=self.epochs - 1, verbose=0,
            callbacks=self.other_callbacks,
        )  # fmt: skip


def test_a_fit_inside_another_fit_keeps_its_own_callbacks(tmp_path):
    """Interleaved fits of two models: each backup waits for and saves its own callbacks."""
    outer_dir, inner_dir = str(tmp_path / "outer"), str(tmp_path / "inner")
    inner_plateau, outer_plateau = plateau(), plateau()
    inner_backup = BackupAndRestore(inner_dir, delete_checkpoint=False)
    outer_backup = BackupAndRestore(outer_dir, delete_checkpoint=False)
    inner = make_model()
    outer = make_model()
    outer.fit(
        X, Y, batch_size=8, epochs=3, verbose=0,
        # The inner fit runs between the outer backup's epoch end and the plateau's.
        callbacks=[outer_backup, TrainAnother(inner, [inner_backup, inner_plateau]),
                   outer_plateau],
    )  # fmt: skip
    assert list(outer_backup.members().values()) == [outer_plateau]
    assert list(inner_backup.members().values()) == [inner_plateau]
    for backup_dir in (outer_dir, inner_dir):
        saved = saved_states(backup_dir, 3)["ReduceLROnPlateau/0"]
        assert [epoch for epoch, _ in saved["reductions"]] == [1, 2]


def test_a_custom_training_loop_with_a_callback_list(tmp_path):
    """Hooks called by hand through a `CallbackList` given the training parameters."""
    backup_dir = str(tmp_path / "backup")

    def run(epochs, interrupt_at=None):
        model = make_model()
        given = plateau()
        callbacks = keras.callbacks.CallbackList(
            [given, BackupAndRestore(backup_dir)], model=model, epochs=epochs, steps=1, verbose=0
        )
        metadata = os.path.join(backup_dir, "training_metadata.json")
        start = 0
        if os.path.exists(metadata):  # the epoch to resume from, as Keras's backup wrote it
            with open(metadata) as f:
                start = json.load(f)["epoch"]
        callbacks.on_train_begin()
        for epoch in range(start, epochs):
            if epoch == interrupt_at:
                return given
            callbacks.on_epoch_begin(epoch)
            callbacks.on_epoch_end(epoch, {"loss": 1.0})
        callbacks.on_train_end()
        return given

    run(4, interrupt_at=2)
    assert list(saved_states(backup_dir, 2)) == ["ReduceLROnPlateau/0"]
    resumed = run(4)
    assert [epoch for epoch, _ in resumed.reductions] == [1, 2, 3]


class EpochCounter(StatefulCallback):
    """Counts the epochs it has seen end (its state)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def get_state(self):
        return {"count": self.count}

    def set_state(self, state):
        self.count = state["count"]


class NotifiesNothing(EpochCounter):
    """Overrides both hooks and makes neither call of the protocol."""

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        self.count += 1


class CallsSuper(EpochCounter):
    """Overrides both hooks and follows the protocol through `super()`."""

    def on_epoch_begin(self, epoch, logs=None):
        super().on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self.count += 1
        super().on_epoch_end(epoch, logs)


def test_a_callback_that_skips_the_protocol_is_warned_about(tmp_path):
    backup_dir = str(tmp_path / "backup")
    backup = BackupAndRestore(backup_dir, delete_checkpoint=False)
    model = make_model()
    with pytest.warns(UserWarning, match=r"NotifiesNothing overrides `on_epoch_end`.*late"):
        model.fit(X, Y, epochs=2, verbose=0, callbacks=[backup, NotifiesNothing()])
    # Written late (at the next epoch's beginning, or the end of the fit), but written.
    assert saved_states(backup_dir, 1) == {"NotifiesNothing/0": {"count": 1}}
    assert saved_states(backup_dir, 2) == {"NotifiesNothing/0": {"count": 2}}
    with open(os.path.join(backup_dir, "training_metadata.json")) as f:
        assert json.load(f)["epoch"] == 2
    # Resumed (the metadata says epoch 2 of 3): the state it does not take is reported.
    model = make_model()
    skipping = NotifiesNothing()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(X, Y, epochs=3, verbose=0, callbacks=[backup, skipping])
    messages = [str(w.message) for w in caught]
    assert any("restore_from_backup()`" in m and "not restored" in m for m in messages)
    assert skipping.count == 1


def test_a_callback_that_calls_super_follows_the_protocol(tmp_path):
    backup_dir = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="Interrupting"):
        make_model().fit(
            X, Y, epochs=3, verbose=0,
            callbacks=[BackupAndRestore(backup_dir), CallsSuper(), Interrupt(2)],
        )  # fmt: skip
    assert saved_states(backup_dir, 2) == {"CallsSuper/0": {"count": 2}}
    counter = CallsSuper()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_model().fit(
            X, Y, epochs=3, verbose=0, callbacks=[BackupAndRestore(backup_dir), counter]
        )
    assert not [w for w in caught if "StatefulCallback" in str(w.message)]
    assert counter.count == 3  # 2 restored, 1 resumed
