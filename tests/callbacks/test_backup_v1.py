"""A backup directory written by keras_normkit 0.x (`data/backup_v1/`) still restores.

The fixture was written by `data/make_backup_v1.py` with the code before the callback-state
refactoring (issue 28): a fit with every stateful callback of ours under `BackupAndRestore`,
interrupted at the beginning of epoch 3. A new fit with new callbacks resumes from a copy of
it: every callback must be given, through `set_state`, exactly the state saved for epoch 3
(`data/backup_v1_expected.json`, arrays from the epoch's `.npz`), then train on.
"""

import copy
import json
import os
import shutil

import numpy as np

from keras_normkit import callbacks
from tests.callbacks.data import make_backup_v1

DATA = os.path.join(os.path.dirname(__file__), "data")


def decode(data, arrays):
    """The saved JSON with `{"__ndarray__": name}` replaced by the array (written here, so
    that the test does not trust the package's own decoder)."""
    if isinstance(data, dict):
        if list(data) == ["__ndarray__"]:
            return arrays[data["__ndarray__"]]
        return {key: decode(value, arrays) for key, value in data.items()}
    if isinstance(data, list):
        return [decode(value, arrays) for value in data]
    return data


def test_a_backup_written_by_version_1_restores_every_callback(tmp_path, monkeypatch):
    backup_dir = str(tmp_path / "backup")
    shutil.copytree(os.path.join(DATA, "backup_v1"), backup_dir)
    with open(os.path.join(DATA, "backup_v1_expected.json")) as f:
        expected = json.load(f)
    with np.load(os.path.join(DATA, "backup_v1", "keras_normkit_callbacks_3.npz")) as saved:
        arrays = {name: saved[name] for name in saved.files}
    expected = decode(expected, arrays)

    restored = {}
    for cls in {type(c) for c in make_backup_v1.make_callbacks(backup_dir)}:
        if not issubclass(cls, callbacks.StatefulCallback):
            continue

        def recording(self, state, original=cls.set_state):
            restored[f"{type(self).__name__}/0"] = copy.deepcopy(state)
            original(self, state)

        monkeypatch.setattr(cls, "set_state", recording)

    model = make_backup_v1.make_model()
    given = make_backup_v1.make_callbacks(backup_dir)
    history = model.fit(
        make_backup_v1.X,
        make_backup_v1.Y,
        epochs=6,
        batch_size=8,
        shuffle=False,
        verbose=0,
        callbacks=given,
    )
    assert history.epoch == [3, 4, 5]  # Keras resumed at epoch 3
    assert sorted(restored) == sorted(expected)
    for key, state in expected.items():
        np.testing.assert_equal(restored[key], state, err_msg=key)
    # The callbacks went on from the restored state.
    by_name = {type(c).__name__: c for c in given}
    assert [row["epoch"] for row in by_name["EarlyStopping"].trace] == [0, 1, 2, 3, 4, 5]
    assert by_name["ActivationStatistics"].epochs == [0, 1, 2, 3, 4, 5, 6]
    assert by_name["GradientStatistics"].epochs == [0, 1, 2, 3, 4, 5, 6]
    assert len(by_name["LearningRateMonitor"].steps) == 12  # 2 batches x 6 epochs
    assert not os.path.exists(backup_dir)  # deleted at the end, as Keras deletes its own
