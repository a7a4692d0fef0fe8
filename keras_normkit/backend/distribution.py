"""Which process of a multi-process run this is, for the callbacks that write files.

Keras 3 trains on several machines with JAX: `keras.distribution.initialize(...)` starts one
process per host, `keras.distribution.DataParallel` replicates the weights on every device of
every process, and each process runs the same callbacks on the same (replicated) values. Files
that hold the run's state (`BackupAndRestore`'s backup, `EarlyStopping`'s snapshots) are then
written by process 0 only, into a folder every process reads (a shared file system), so two
processes never write one file at once. TensorFlow multi-worker `fit` does not run in Keras 3
(keras-team/keras#20585) and PyTorch has no multi-process `keras.distribution`: there, and in
any single-process run, this process is process 0 of 1.
"""

import sys

import keras


def _jax():
    """The JAX module when it is the backend (it is then already imported), else `None`."""
    return sys.modules.get("jax") if keras.backend.backend() == "jax" else None


def process_count():
    """The number of processes of the run (1 unless a multi-process JAX run)."""
    jax = _jax()
    return int(jax.process_count()) if jax is not None else 1


def process_index():
    """This process's index in the run, `0 ... process_count() - 1`."""
    jax = _jax()
    return int(jax.process_index()) if jax is not None else 0


def is_chief():
    """Whether this process writes the run's files (process 0)."""
    return process_index() == 0
