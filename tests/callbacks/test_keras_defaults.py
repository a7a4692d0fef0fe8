"""Our callbacks named like Keras's keep Keras's arguments and defaults; extras are opt-in."""

import inspect

import keras
import pytest

from keras_normkit.callbacks import EarlyStopping, ReduceLROnPlateau
from tests.callbacks.test_early_stopping import FakeModel

PAIRS = [
    (EarlyStopping, keras.callbacks.EarlyStopping),
    (ReduceLROnPlateau, keras.callbacks.ReduceLROnPlateau),
]


def named_parameters(cls):
    """`{name: default}` of the constructor, without `self`, `*args` and `**kwargs`."""
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name: p.default for p in parameters if p.name != "self" and p.kind not in variadic}


def assert_same_defaults(ours, theirs):
    mine, keras_own = named_parameters(ours), named_parameters(theirs)
    assert keras_own, theirs  # the comparison must compare something
    for name, default in keras_own.items():
        assert name in mine, f"{ours.__name__} lacks Keras's argument {name!r}"
        got = mine[name]
        assert (got, type(got)) == (default, type(default)), (
            f"{ours.__name__}({name}=...) defaults to {got!r}, Keras's to {default!r}"
        )
    extras = {name: default for name, default in mine.items() if name not in keras_own}
    required = [name for name, default in extras.items() if default is inspect.Parameter.empty]
    assert not required, f"{ours.__name__}'s extra arguments {required} must be optional"


@pytest.mark.parametrize(("ours", "theirs"), PAIRS, ids=lambda c: c.__module__.split(".")[0])
def test_every_keras_argument_keeps_keras_default(ours, theirs):
    assert_same_defaults(ours, theirs)


def test_the_check_fails_on_a_drifted_default():
    class Drifted(EarlyStopping):
        def __init__(self, monitor="val_loss", restore_best_weights=True, **kwargs):
            super().__init__(monitor, restore_best_weights=restore_best_weights, **kwargs)

    with pytest.raises(AssertionError, match="restore_best_weights"):
        assert_same_defaults(Drifted, keras.callbacks.EarlyStopping)

    class Missing(EarlyStopping):
        def __init__(self, monitor="val_loss"):
            super().__init__(monitor)

    with pytest.raises(AssertionError, match="lacks"):
        assert_same_defaults(Missing, keras.callbacks.EarlyStopping)

    class Required(ReduceLROnPlateau):
        def __init__(self, extra, monitor="val_loss", factor=0.1, patience=10, verbose=0,
                     mode="auto", min_delta=1e-4, cooldown=0, min_lr=0.0):  # fmt: skip
            super().__init__(monitor, factor, patience, verbose, mode, min_delta, cooldown, min_lr)

    with pytest.raises(AssertionError, match="optional"):
        assert_same_defaults(Required, keras.callbacks.ReduceLROnPlateau)


def drive(callback, val):
    model = FakeModel()
    callback.set_model(model)
    callback.on_train_begin()
    for epoch, value in enumerate(val):
        callback.on_epoch_begin(epoch)
        model.epoch = epoch
        callback.on_epoch_end(epoch, {"val_loss": value})
        if model.stop_training:
            break
    callback.on_train_end()
    return model


@pytest.mark.parametrize(
    "val",
    [[1.0, 0.9, 0.8, 0.7], [1.0, 0.9, 0.95, 0.97, 0.99], [1.0], [2.0, 1.0, 1.0, 1.0]],
    ids=["no-stop", "stop", "one-epoch", "plateau"],
)
def test_early_stopping_defaults_behave_like_keras(val):
    """`EarlyStopping()` against `keras.callbacks.EarlyStopping()`: public attributes after training."""
    ours, theirs = EarlyStopping(), keras.callbacks.EarlyStopping()
    ours_model, theirs_model = drive(ours, val), drive(theirs, val)
    for name in ("stopped_epoch", "best_epoch", "wait", "best", "best_weights"):
        assert getattr(ours, name) == getattr(theirs, name), name
    last = theirs.stopped_epoch or len(val) - 1
    assert ours_model.epoch == theirs_model.epoch == last  # not restored by default
    assert (ours.stop_reason is None) == (theirs.stopped_epoch == 0)


def test_early_stopping_attributes_before_training_are_keras():
    ours = EarlyStopping()
    assert (ours.stopped_epoch, ours.best_epoch, ours.wait, ours.best) == (0, 0, 0, None)
    assert ours.restore_best_weights is False and ours.best_weights is None


def sgd_model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.01), loss="mse")
    return model


@pytest.mark.parametrize(
    "kwargs", [{}, {"patience": 1, "cooldown": 2}], ids=["defaults", "cooldown"]
)
def test_reduce_lr_on_plateau_tracks_keras_attributes_epoch_by_epoch(kwargs):
    values = [1.0] + [0.99995] * 14 + [0.5] + [0.6] * 14  # gains below the default min_delta
    ours, theirs = ReduceLROnPlateau(**kwargs), keras.callbacks.ReduceLROnPlateau(**kwargs)
    rows = {"ours": [], "theirs": []}
    for key, callback in (("ours", ours), ("theirs", theirs)):
        model = sgd_model()
        callback.set_model(model)
        callback.on_train_begin()
        for epoch, value in enumerate(values):
            callback.on_epoch_begin(epoch)
            callback.on_epoch_end(epoch, {"val_loss": value})
            rate = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
            row = (callback.best, callback.wait, callback.cooldown_counter, callback.in_cooldown())
            rows[key].append((*row, round(rate, 12)))
    assert rows["ours"] == rows["theirs"]
    assert rows["ours"][-1][-1] < 0.01  # the rate was reduced, so the comparison bites
