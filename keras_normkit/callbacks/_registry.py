"""Which keras_normkit callbacks take part in one `fit`: registered on the model, matched by `params`.

Keras gives a callback its model (`set_model`) and the training parameters (`set_params`),
never the other callbacks of the list. So each callback of ours registers itself on its model
in `set_model`, the way Keras's `CallbackList` sets `model.history`: stateful callbacks with
`register(self, MEMBER)`, `BackupAndRestore` with `register(self, BACKUP)`. Keras calls
`set_model` in the order of the callback list, so the registry keeps that order.

Two registered callbacks take part in the same `fit` when Keras gave them the same `params`
dict: a `keras.callbacks.CallbackList` passes its one dict to the `set_params` of each of its
callbacks, and `fit` (like `evaluate` and `predict`) builds a new `CallbackList`, with a new
dict, for every call. A callback left over from an earlier `fit` of the same model holds that
fit's dict and is not matched, whatever the order of the calls. `tests/callbacks/
test_registry.py` fails if Keras stops doing any of this. A `CallbackList` built by hand (a
custom training loop) matches its callbacks in the same way when it is given the training
parameters (`CallbackList(callbacks, model=model, epochs=..., steps=...)`); without them no
callback gets a dict, and all of ours on that model without one count as one `fit`.

The registry lives on the model as `model.keras_normkit_callbacks` and holds weak
references: it keeps no callback alive, and a copied model starts with an empty one.
"""

import weakref

ATTRIBUTE = "keras_normkit_callbacks"
MEMBER = "member"  # a `StatefulCallback`: its state is saved and restored
BACKUP = "backup"  # a `BackupAndRestore`: saves and restores the members' states


class CallbackRegistry:
    """The keras_normkit callbacks given one model, with their roles, in `set_model` order."""

    def __init__(self):
        self._entries = []  # (role, weak reference to the callback)

    def __reduce__(self):
        return (type(self), ())  # a copied or pickled model takes part in no fit

    def add(self, callback, role):
        """Register `callback` last (moving it there if it was registered before)."""
        self._entries = [
            (r, ref) for r, ref in self._entries if ref() is not None and ref() is not callback
        ]
        self._entries.append((role, weakref.ref(callback)))

    def same_fit(self, callback):
        """`(role, callback)` of every registered callback in `callback`'s fit, in list order."""
        found = []
        for role, ref in self._entries:
            other = ref()
            if other is not None and other.params is callback.params:
                found.append((role, other))
        return found


def register(callback, role):
    """Register `callback` (which has just been given its model) on the model, as `role`.

    Args:
        callback: A callback of ours; `callback.model` is its model (`None` does nothing).
        role: `MEMBER` or `BACKUP`.
    """
    model = callback.model
    if model is None:
        return
    registry = getattr(model, ATTRIBUTE, None)
    if registry is None:
        registry = CallbackRegistry()
        setattr(model, ATTRIBUTE, registry)
    registry.add(callback, role)


def fit_callbacks(callback, role=None):
    """The registered callbacks in the same `fit` as `callback` (itself included), in list order.

    Args:
        callback: A registered callback.
        role: `MEMBER` or `BACKUP` for those only (a list of callbacks); `None` for all, as
            `(role, callback)` pairs.
    """
    model = callback.model
    registry = None if model is None else getattr(model, ATTRIBUTE, None)
    found = [] if registry is None else registry.same_fit(callback)
    if role is None:
        return found
    return [other for other_role, other in found if other_role == role]
