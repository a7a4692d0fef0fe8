"""`keras_normkit.backend.distribution`: which process this is, and runs we refuse."""

import types

import keras
import numpy as np
import pytest

from keras_normkit.backend import distribution
from keras_normkit.callbacks import BackupAndRestore


def test_a_single_process_is_process_0_of_1():
    assert distribution.process_count() == 1
    assert distribution.process_index() == 0
    assert distribution.is_chief()
    distribution.check_supported_processes("BackupAndRestore")  # no error


def _fake_torch_distributed(world_size, initialized=True):
    return types.SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: initialized,
        get_world_size=lambda: world_size,
    )


@pytest.mark.parametrize(
    ("world_size", "initialized", "refused"),
    [(2, True, True), (4, True, True), (1, True, False), (2, False, False)],
)
def test_pytorch_over_several_processes_is_refused(monkeypatch, world_size, initialized, refused):
    monkeypatch.setattr(keras.backend, "backend", lambda: "torch")
    monkeypatch.setitem(
        __import__("sys").modules,
        "torch.distributed",
        _fake_torch_distributed(world_size, initialized),
    )
    if refused:
        with pytest.raises(RuntimeError, match=rf"torch.distributed runs {world_size} processes"):
            distribution.check_supported_processes("BackupAndRestore")
    else:
        distribution.check_supported_processes("BackupAndRestore")


def test_backup_and_restore_refuses_pytorch_over_several_processes(tmp_path, monkeypatch):
    """The backup would be written by every process as process 0: a clear error instead."""
    monkeypatch.setattr(distribution, "_torch_world_size", lambda: 2)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    with pytest.raises(RuntimeError, match="BackupAndRestore.*PyTorch across processes"):
        model.fit(
            np.ones((4, 2)),
            np.ones((4, 1)),
            verbose=0,
            callbacks=[BackupAndRestore(str(tmp_path / "backup"))],
        )
    assert not (tmp_path / "backup").exists()
