"""BackupAndRestore: our callbacks' state survives an interruption, in a new process too."""

import inspect
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_normkit.callbacks import (
    BackupAndRestore,
    EarlyStopping,
    ReduceLROnPlateau,
    StatefulCallback,
)
from keras_normkit.callbacks._codec import decode_state, encode_state
from keras_normkit.callbacks._registry import MEMBER, fit_callbacks
from tests.callbacks import resume_run
from tests.callbacks.interrupt import Interrupt

HERE = os.path.dirname(__file__)


def jsonable(result):
    """The result as it would come back from a subprocess (tuples as lists, NaN kept)."""
    return json.loads(json.dumps(result))


def assert_same_run(resumed, whole, first_resumed_epoch):
    """Everything the resumed run reports equals the uninterrupted run's."""
    resumed, whole = jsonable(resumed), jsonable(whole)
    assert resumed["epochs"] == whole["epochs"][first_resumed_epoch:]
    for key, values in whole["logs"].items():
        # learning rates, losses, activation statistics (NaN between records): exactly
        np.testing.assert_array_equal(resumed["logs"][key], values[first_resumed_epoch:], key)
    assert set(resumed["logs"]) == set(whole["logs"])
    for key in ("stopped_epoch", "best_epoch", "trace", "reductions", "events", "activations"):
        np.testing.assert_equal(resumed[key], whole[key], err_msg=key)
    if "gradients" in whole:
        np.testing.assert_equal(resumed["gradients"], whole["gradients"])


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    result, weights = resume_run.run(str(tmp_path_factory.mktemp("whole") / "backup"))
    if keras.backend.backend() == "tensorflow":  # other backends draw other initial weights
        # The run exercises every piece of state: reductions at epochs 7-9, a GL stop at 9.
        assert result["stopped_epoch"] == 9 and result["best_epoch"] == 6
        assert [epoch for epoch, _ in result["reductions"]] == [7, 8, 9]
    return result, weights


@pytest.mark.parametrize("cut", [3, 8])
def test_resume_with_new_model_and_callbacks_reproduces_the_run(tmp_path, uninterrupted, cut):
    """As in a new process: a new model and new callback instances resume from the disk."""
    whole, whole_weights = uninterrupted
    backup_dir = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="Interrupting"):
        resume_run.run(backup_dir, interrupt_at=cut)
    assert "keras_normkit_callbacks.json" in os.listdir(backup_dir)
    resumed, weights = resume_run.run(backup_dir)
    assert_same_run(resumed, whole, cut)
    for got, want in zip(weights, whole_weights, strict=True):
        np.testing.assert_array_equal(got, want)  # the best epoch's weights, restored
    assert not os.path.exists(backup_dir)  # deleted at the end, ours with Keras's


def _run_script(*args):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(HERE)))
    return subprocess.run(
        [sys.executable, os.path.join(HERE, "resume_run.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _load(prefix):
    with open(prefix + ".json") as f:
        result = json.load(f)
    with np.load(prefix + ".npz") as arrays:
        weights = [arrays[f"arr_{i}"] for i in range(len(arrays.files))]
    return result, weights


@pytest.mark.slow
def test_resume_in_new_processes_at_several_epochs_reproduces_the_run(tmp_path):
    """Acceptance: interrupted at epochs 3, 6, 8 and resumed in a new process each time."""
    done = _run_script(str(tmp_path / "whole_backup"), str(tmp_path / "whole"))
    assert done.returncode == 0, done.stderr[-3000:]
    whole, whole_weights = _load(str(tmp_path / "whole"))
    if keras.backend.backend() == "tensorflow":
        assert whole["stopped_epoch"] == 9
    for cut in (3, 6, 8):
        backup_dir, out = str(tmp_path / f"backup{cut}"), str(tmp_path / f"out{cut}")
        done = _run_script(backup_dir, out, "--interrupt-at", str(cut))
        assert done.returncode == 3, done.stderr[-3000:]
        done = _run_script(backup_dir, out)
        assert done.returncode == 0, done.stderr[-3000:]
        resumed, weights = _load(out)
        assert_same_run(resumed, whole, cut)
        for got, want in zip(weights, whole_weights, strict=True):
            np.testing.assert_array_equal(got, want)


def small_fit(callbacks, epochs=5):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.05), loss="mse")
    x = np.linspace(-1, 1, 32, dtype="float32").reshape(16, 2)
    model.fit(
        x,
        x[:, :1] * 3.0,
        epochs=epochs,
        batch_size=8,
        shuffle=False,
        verbose=0,
        callbacks=callbacks,
    )
    return model


def test_early_stopping_without_backup_dir_resumes_under_keras_backup(tmp_path):
    """The crash of issue 18: a new EarlyStopping under Keras's BackupAndRestore resumes."""
    backup_dir = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="Interrupting"):
        small_fit(
            [
                keras.callbacks.BackupAndRestore(backup_dir),
                EarlyStopping(monitor="loss", patience=2),
                Interrupt(3),
            ]
        )
    stop = EarlyStopping(monitor="loss", patience=2)
    small_fit([keras.callbacks.BackupAndRestore(backup_dir), stop])  # used to raise TypeError
    assert [row["epoch"] for row in stop.trace] == [3, 4]  # a new instance: no saved state


def test_stale_callbacks_of_an_earlier_fit_are_not_members(tmp_path):
    """Membership of a fit: the callbacks given to it, in order; not an earlier fit's."""
    first, second, third = (ReduceLROnPlateau(monitor="loss") for _ in range(3))
    backup = BackupAndRestore(str(tmp_path / "b"))
    model = small_fit([first, backup, second], epochs=1)
    assert list(backup.members().values()) == [first, second]
    assert list(backup.members()) == ["ReduceLROnPlateau/0", "ReduceLROnPlateau/1"]
    # The same model trained again with another list: `first` and `second` are stale.
    model.fit(np.zeros((4, 2)), np.zeros((4, 1)), epochs=1, verbose=0, callbacks=[third, backup])
    assert list(backup.members().values()) == [third]
    assert fit_callbacks(backup, MEMBER) == [third]


def test_same_instances_resume_and_the_list_order_does_not_matter(tmp_path):
    """The backup first in the list still saves the plateau's state after its epoch end."""
    backup_dir = str(tmp_path / "backup")
    plateau = ReduceLROnPlateau(monitor="loss", patience=0, min_delta=10.0, factor=0.5)
    backup = BackupAndRestore(backup_dir)
    with pytest.raises(RuntimeError, match="Interrupting"):
        small_fit([backup, plateau, Interrupt(3)])
    # Epochs 0-2 ran (the first sets the best, 1 and 2 reduce): the state after epoch 2.
    with open(os.path.join(backup_dir, "keras_normkit_callbacks.json")) as f:
        saved = json.load(f)["epochs"]["3"]["ReduceLROnPlateau/0"]
    assert [epoch for epoch, _ in saved["reductions"]] == [1, 2]
    plateau.reductions.append((99, 0.0))  # the in-memory state is replaced by the saved one
    small_fit([backup, plateau])
    assert [epoch for epoch, _ in plateau.reductions] == [1, 2, 3, 4]
    np.testing.assert_allclose([lr for _, lr in plateau.reductions], 0.05 * 0.5 ** np.arange(1, 5))


class Counter(StatefulCallback):
    """A user-defined stateful callback follows the same protocol."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def on_epoch_end(self, epoch, logs=None):
        self.count += 1

    def get_state(self):
        return {"count": self.count, "array": np.arange(self.count, dtype="float32")}

    def set_state(self, state):
        self.count = state["count"]
        assert state["array"].dtype == np.float32 and len(state["array"]) == self.count


def test_protocol_user_callback_encoding_and_config(tmp_path):
    backup_dir = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="Interrupting"):
        small_fit([Counter(), BackupAndRestore(backup_dir), Interrupt(2)])
    counter = Counter()
    small_fit([counter, BackupAndRestore(backup_dir)])
    assert counter.count == 5  # 2 restored + 3 resumed epochs, none counted twice
    arrays = {}
    state = {"a": [1, 2.5, None, "x", (np.float32(0.5), np.ones(2))], "b": {"c": float("nan")}}
    encoded = json.loads(json.dumps(encode_state(state, arrays)))
    decoded = decode_state(encoded, arrays)
    np.testing.assert_equal(decoded, {"a": [1, 2.5, None, "x", [0.5, np.ones(2)]], "b": state["b"]})
    with pytest.raises(TypeError, match="string keys"):
        encode_state({1: 2}, {})
    with pytest.raises(TypeError, match="object"):
        encode_state({"a": object()}, {})
    backup = BackupAndRestore(backup_dir, save_freq=3, double_checkpoint=True)
    config = backup.get_config()
    assert set(config) == set(inspect.signature(BackupAndRestore).parameters)
    clone = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(backup))
    assert clone.get_config() == config
    with pytest.raises(TypeError, match="backup_dir"):
        BackupAndRestore(None)
    with pytest.raises(ValueError, match="backup_dir"):
        BackupAndRestore("")
    with pytest.raises(ValueError, match="save_freq"):
        BackupAndRestore(backup_dir, save_freq=0)
    with pytest.raises(TypeError, match="double_checkpoint"):
        BackupAndRestore(backup_dir, double_checkpoint=1)


def test_early_stopping_resumes_from_states_saved_before_stopped_epoch_was_0():
    """Older states marked "not stopped" / "no best epoch" with None: resumed as Keras's 0."""
    first = EarlyStopping(monitor="loss", patience=5)
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    first.set_model(model)
    first.on_train_begin()
    for epoch, loss in enumerate([1.0, 0.9]):
        first.on_epoch_begin(epoch)
        first.on_epoch_end(epoch, {"loss": loss})
    state = first.get_state()
    old = {**state, "stopped_epoch": None}
    second = EarlyStopping(monitor="loss", patience=5)
    second.set_model(model)
    second.on_train_begin()
    second.set_state(old)  # as BackupAndRestore does when a fit resumes at epoch 2
    second.on_epoch_begin(2)
    assert (second.stopped_epoch, second.best_epoch, second.best, second.wait) == (0, 1, 0.9, 0)
    second.on_epoch_end(2, {"loss": 0.95})
    assert second.wait == 1 and second.stop_reason is None
    fresh = EarlyStopping(monitor="loss", patience=5)
    fresh.set_state({**state, "best_epoch": None, "_best": None, "best_weights": None})
    assert fresh.best_epoch == 0


def _dropout_run(backup, interrupt=None):
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8),
            keras.layers.Dropout(0.5, seed=1),
            keras.layers.Dense(1),
        ]
    )
    model.compile(keras.optimizers.SGD(0.05), loss="mse")
    x = np.random.default_rng(0).normal(size=(16, 4)).astype("float32")
    extra = [Interrupt(interrupt)] if interrupt is not None else []
    history = model.fit(
        x,
        x[:, :1],
        batch_size=4,
        epochs=4,
        shuffle=False,
        verbose=0,
        callbacks=[BackupAndRestore(backup), *extra],
    )
    return history.history["loss"], model.get_weights()


def test_resume_restores_the_dropout_masks(tmp_path):
    """The random-generator states, which `save_weights` leaves out, are backed up too."""
    losses, weights = _dropout_run(str(tmp_path / "whole"))
    with pytest.raises(RuntimeError, match="Interrupting"):
        _dropout_run(str(tmp_path / "cut"), interrupt=2)
    resumed_losses, resumed_weights = _dropout_run(str(tmp_path / "cut"))
    assert resumed_losses == losses[2:]  # exactly: the same masks were drawn
    for a, b in zip(weights, resumed_weights, strict=True):
        np.testing.assert_array_equal(a, b)


def test_other_processes_than_the_first_write_nothing(tmp_path, monkeypatch):
    """In a multi-process run process 0 writes the backup; the others only take part."""
    from keras_normkit.callbacks import backup as backup_module

    monkeypatch.setattr(backup_module, "is_chief", lambda: False)
    saved = []
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    original = model.save_weights
    model.save_weights = lambda path, **kw: (saved.append(path), original(path, **kw))
    model.fit(
        np.ones((4, 2)),
        np.ones((4, 1)),
        epochs=2,
        verbose=0,
        callbacks=[BackupAndRestore(str(tmp_path / "backup"), delete_checkpoint=False)],
    )
    assert not (tmp_path / "backup").exists()
    # It still saved (elsewhere) at every epoch end: save_weights is collective on JAX.
    assert len(saved) == 2 and all(str(tmp_path) not in p for p in saved)
