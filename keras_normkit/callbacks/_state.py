"""The state protocol of keras_normkit's callbacks, and how a backup finds its callbacks.

Every stateful callback of the package subclasses `StatefulCallback` and implements
`get_state()` (a structure of dicts with string keys, lists, Python scalars, `None` and NumPy
arrays) and `set_state(state)` (accepts what `get_state` returned, with tuples turned into
lists). `keras_normkit.callbacks.BackupAndRestore` saves those states with the model and
restores them when a `fit` resumes, including in a new process.

How a backup knows the other callbacks of its `fit` call without a Keras API for it: every
callback of ours stamps a global clock in `set_model` and again in `on_train_begin`. Within one
`fit`, Keras calls `set_model` on every callback before any `on_train_begin`, so two callbacks
took part in the same (latest) `fit` exactly when both `set_model` stamps precede both
`on_train_begin` stamps. A callback left over from an earlier `fit` of the same model fails
that test. Everything that depends on the membership is computed at `on_epoch_begin` or
later, when every `on_train_begin` of the call has run.
"""

import functools
import itertools
import weakref

import keras
import numpy as np

_clock = itertools.count(1)
_tracked = weakref.WeakSet()  # our callbacks and backups that have been given a model


def stamp_set_model(callback):
    callback._nk_set_stamp = next(_clock)
    callback._nk_begin_stamp = 0
    _tracked.add(callback)


def stamp_train_begin(callback):
    callback._nk_begin_stamp = next(_clock)


def same_fit(a, b):
    """Whether callbacks `a` and `b` take part in the same, latest `fit` of one model."""
    stamps = [getattr(c, name, 0) for c in (a, b) for name in ("_nk_set_stamp", "_nk_begin_stamp")]
    set_a, begin_a, set_b, begin_b = stamps
    return a.model is b.model and max(set_a, set_b) < min(begin_a, begin_b)


def fit_members(backup):
    """Our stateful callbacks in the same `fit` as `backup`, in callback-list order."""
    members = [
        c
        for c in list(_tracked)
        if isinstance(c, StatefulCallback) and c.model is not None and same_fit(backup, c)
    ]
    return sorted(members, key=lambda c: c._nk_set_stamp)


def find_backup(callback):
    """The `keras_normkit.callbacks.BackupAndRestore` of `callback`'s `fit`, or `None`."""
    from keras_normkit.callbacks.backup import BackupAndRestore

    found = [
        c
        for c in list(_tracked)
        if isinstance(c, BackupAndRestore) and c.model is not None and same_fit(callback, c)
    ]
    return min(found, key=lambda c: c._nk_set_stamp) if found else None


# --------------------------------------------------------------------------- encoding


def encode_state(state, arrays):
    """`state` as JSON-compatible data; NumPy arrays are moved into `arrays` (a dict)."""
    if isinstance(state, dict):
        if not all(isinstance(k, str) for k in state):
            raise TypeError(f"Callback states must have string keys. Received: {list(state)}")
        return {k: encode_state(v, arrays) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [encode_state(v, arrays) for v in state]
    if isinstance(state, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = state
        return {"__ndarray__": name}
    if isinstance(state, np.generic):
        return state.item()
    if state is None or isinstance(state, (bool, int, float, str)):
        return state
    raise TypeError(
        "Callback states must hold dicts, lists, Python scalars, None or NumPy arrays. "
        f"Received: {state!r} of type {type(state).__name__}"
    )


def decode_state(data, arrays):
    """The inverse of `encode_state` (tuples come back as lists)."""
    if isinstance(data, dict):
        if set(data) == {"__ndarray__"}:
            return np.asarray(arrays[data["__ndarray__"]])
        return {k: decode_state(v, arrays) for k, v in data.items()}
    if isinstance(data, list):
        return [decode_state(v, arrays) for v in data]
    return data


def weights_state(values):
    """A list of arrays (e.g. `model.get_weights()`; `None` entries kept) or `None`, copied."""
    return None if values is None else [None if v is None else np.array(v) for v in values]


# --------------------------------------------------------------------------- the base class


def _wrap(hook, before=None, after=None):
    @functools.wraps(hook)
    def wrapped(self, *args, **kwargs):
        depth = self.__dict__.get("_nk_depth", {})
        self._nk_depth = depth
        outer = depth.get(hook.__name__, 0) == 0
        depth[hook.__name__] = depth.get(hook.__name__, 0) + 1
        try:
            if outer and before is not None:
                before(self, *args)
            result = hook(self, *args, **kwargs)
        finally:
            depth[hook.__name__] -= 1
        if outer and after is not None:
            after(self, *args)
        return result

    wrapped._nk_wrapped = True
    return wrapped


def _before_train_begin(self, *args):
    stamp_train_begin(self)
    self._nk_resume_pending = True


def _before_epoch_begin(self, epoch, *args):
    self._nk_epoch_done = None
    if not self.__dict__.get("_nk_resume_pending", False):
        return
    self._nk_resume_pending = False
    backup = find_backup(self)
    state = None if backup is None else backup.restored_state(self)
    if state is not None:
        self.set_state(state)


def _after_epoch_end(self, epoch, *args):
    self._nk_epoch_done = epoch
    backup = find_backup(self)
    if backup is not None:
        backup.member_finished_epoch(epoch)


_HOOKS = {
    "on_train_begin": (_before_train_begin, None),
    "on_epoch_begin": (_before_epoch_begin, None),
    "on_epoch_end": (None, _after_epoch_end),
}


class StatefulCallback(keras.callbacks.Callback):
    """A callback whose state `keras_normkit.callbacks.BackupAndRestore` saves and restores.

    Subclasses implement `get_state()` and `set_state(state)`. Their `on_train_begin`,
    `on_epoch_begin` and `on_epoch_end` are wrapped so that a resumed `fit` calls
    `set_state` with the saved state before the subclass's first `on_epoch_begin` runs, and
    the backup is written once every callback of ours has finished the epoch's
    `on_epoch_end` (whatever the order of the callback list).
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, (before, after) in _HOOKS.items():
            hook = cls.__dict__.get(name)
            if hook is not None and not getattr(hook, "_nk_wrapped", False):
                setattr(cls, name, _wrap(hook, before, after))

    def set_model(self, model):
        super().set_model(model)
        stamp_set_model(self)

    def get_state(self):
        """The callback's state: JSON-compatible values and NumPy arrays."""
        raise NotImplementedError

    def set_state(self, state):
        """Restore a state returned by `get_state` (tuples may come back as lists)."""
        raise NotImplementedError


for _name, (_before, _after) in _HOOKS.items():

    def _noop(self, *args, **kwargs):
        pass

    _noop.__name__ = _name
    setattr(StatefulCallback, _name, _wrap(_noop, _before, _after))
