"""keras_normkit/callbacks/stateful.py: `StatefulCallback`'s public module, and its old path.

Its behaviour with `BackupAndRestore` is tested in test_registry.py and test_backup.py.
"""

import importlib

import pytest

from keras_normkit import callbacks
from keras_normkit.callbacks import stateful


def test_public_module_and_old_import_path_name_the_same_class():
    old = importlib.import_module("keras_normkit.callbacks._state")
    assert old.StatefulCallback is stateful.StatefulCallback is callbacks.StatefulCallback
    assert old.weights_state is stateful.weights_state
    assert stateful.__all__ == ["StatefulCallback"]
    assert stateful.StatefulCallback.__module__ == "keras_normkit.callbacks.stateful"


def test_a_subclass_must_implement_its_state():
    callback = stateful.StatefulCallback()
    with pytest.raises(NotImplementedError):
        callback.get_state()
    with pytest.raises(NotImplementedError):
        callback.set_state({})
