"""The command that re-runs a recorded result: the environment it needs, then the script.

Every results row (a notebook's data, a guide's table, a benchmark run) records the `command`
that re-runs it, and a command is only that if it carries the environment the run depends
on. `environment_prefix` writes it: the backend always (`KERAS_BACKEND`: Keras's default is
read from `~/.keras/keras.json`, which another machine need not have; the same SNN row gave
70.7 % on TensorFlow where JAX, on which it was made, gives 73.1 %), then, when they are set,
the variables of `RESULT_VARIABLES`, which change what a run computes or how fast it runs:
`PYTHONHASHSEED` (the order of sets and dictionaries of strings), TensorFlow's oneDNN switch
(other kernels, other round-off), and the thread counts (CPU kernels split their reductions
by thread, so the round-off, and a training run that follows it, can change with them).

    >>> environment_prefix({"PYTHONHASHSEED": "0", "HOME": "/root"}, backend="jax")
    'KERAS_BACKEND=jax PYTHONHASHSEED=0'
    >>> command("examples/x.py", ["--seed", 1], {}, backend="tensorflow")
    'KERAS_BACKEND=tensorflow python examples/x.py --seed 1'
    >>> environment_of("KERAS_BACKEND=jax PYTHONHASHSEED=0 python examples/x.py --a=b")
    {'KERAS_BACKEND': 'jax', 'PYTHONHASHSEED': '0'}
"""

import os
import re
import shlex

#: Besides `KERAS_BACKEND`, the variables a command names when they are set, in this order.
RESULT_VARIABLES = (
    "PYTHONHASHSEED",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_DETERMINISTIC_OPS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "XLA_FLAGS",
)

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def environment_prefix(environ=None, backend=None):
    """`KERAS_BACKEND=... [NAME=value ...]`: the environment a result was computed in.

    Args:
        environ: The environment (default `os.environ`).
        backend: The backend's name (default: Keras's, `keras.backend.backend()`).
    """
    if backend is None:
        import keras

        backend = keras.backend.backend()
    return " ".join([f"KERAS_BACKEND={shlex.quote(backend)}", variables_prefix(environ)]).strip()


def variables_prefix(environ=None):
    """`NAME=value ...` of the `RESULT_VARIABLES` set in `environ` (default `os.environ`),
    without the backend: for a script that picks the backend of each of its processes."""
    environ = os.environ if environ is None else environ
    pairs = [(name, environ[name]) for name in RESULT_VARIABLES if environ.get(name)]
    return " ".join(f"{name}={shlex.quote(str(value))}" for name, value in pairs)


def command(script, args=(), environ=None, backend=None):
    """`PREFIX python SCRIPT ARGS...`, the arguments quoted for a POSIX shell."""
    words = [environment_prefix(environ, backend), "python", script]
    return " ".join(words + [shlex.quote(str(arg)) for arg in args])


def environment_of(text):
    """`{name: value}` of the assignments a command starts with (`{}` if none)."""
    environment = {}
    for word in shlex.split(text):
        if not _ASSIGNMENT.match(word):
            break
        name, value = word.split("=", 1)
        environment[name] = value
    return environment
