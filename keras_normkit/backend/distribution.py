"""Which process of a multi-process run this is, for the callbacks that write files.

Keras 3 trains on several machines with JAX: `keras.distribution.initialize(...)` starts one
process per host, `keras.distribution.DataParallel` replicates the weights on every device of
every process, and each process runs the same callbacks on the same (replicated) values. Files
that hold the run's state (`BackupAndRestore`'s backup, `EarlyStopping`'s snapshots) are then
written by process 0 only, into a folder every process reads (a shared file system), so two
processes never write one file at once. TensorFlow multi-worker `fit` does not run in Keras 3
(keras-team/keras#20585) and PyTorch has no multi-process `keras.distribution`: there, and in
any single-process run, this process is process 0 of 1. A PyTorch run that `torch.distributed`
spreads over several processes is refused by `check_supported_processes` (each process would
believe it is process 0 and write the same files), rather than left to fail silently.
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


def _torch_world_size():
    """The number of `torch.distributed` processes, when PyTorch is the backend, else 1."""
    if keras.backend.backend() != "torch":
        return 1
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return 1
    return int(dist.get_world_size())


def check_supported_processes(owner):
    """Raise a clear error if this run spans processes in a way `owner` cannot serve.

    Args:
        owner: The name of the object that asks (for the message), e.g. "BackupAndRestore".

    Raises:
        RuntimeError: PyTorch runs over several `torch.distributed` processes: Keras 3 has no
            multi-process distribution for PyTorch, so every process would act as process 0.
    """
    world = _torch_world_size()
    if world > 1:
        raise RuntimeError(
            f"`{owner}` does not support PyTorch across processes: torch.distributed runs "
            f"{world} processes, and Keras 3 distributes PyTorch over none, so every process "
            "would write the same files as process 0. Train on several processes with the "
            "JAX backend (`keras.distribution`), or use one process."
        )
