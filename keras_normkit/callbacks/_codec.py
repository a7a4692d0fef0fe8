"""How `BackupAndRestore` writes callback states to disk: JSON, with the arrays set apart.

A state (what `StatefulCallback.get_state` returns) is a structure of dicts with string keys,
lists, Python scalars, `None` and NumPy arrays. `encode_state` turns it into JSON-compatible
data, moving each array into a dict of named arrays (saved as one `.npz`) and leaving
`{"__ndarray__": name}` in its place; `decode_state` puts the arrays back. The layout is that
of every backup written so far (`tests/callbacks/data/backup_v1/`), so keep it.
"""

import numpy as np


def encode_state(state, arrays):
    """`state` as JSON-compatible data; NumPy arrays are moved into `arrays` (a dict).

    Args:
        state: A callback state (dicts with string keys, lists, tuples, Python or NumPy
            scalars, `None`, NumPy arrays).
        arrays: The dict that receives the arrays, under the names `"a0"`, `"a1"`, ...

    Example:

    >>> import numpy as np
    >>> from keras_normkit.callbacks._codec import encode_state
    >>> arrays = {}
    >>> encode_state({"best": np.float32(0.5), "weights": [np.zeros(2)]}, arrays)
    {'best': 0.5, 'weights': [{'__ndarray__': 'a0'}]}
    >>> list(arrays)
    ['a0']
    """
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
    """The inverse of `encode_state` (tuples come back as lists).

    Args:
        data: What `encode_state` returned (after a JSON round trip).
        arrays: The arrays it set apart, by name.
    """
    if isinstance(data, dict):
        if set(data) == {"__ndarray__"}:
            return np.asarray(arrays[data["__ndarray__"]])
        return {k: decode_state(v, arrays) for k, v in data.items()}
    if isinstance(data, list):
        return [decode_state(v, arrays) for v in data]
    return data
