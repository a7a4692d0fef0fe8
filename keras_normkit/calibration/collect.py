"""Batch-wise collection of a model's logits, spilled to a temporary memmap when large.

`collect_logits` runs a prediction function over NumPy arrays or a `tf.data.Dataset` of
`(x, y)` batches, checks every batch (finite logits, labels in range), and stores the
float32 logits and int32 labels. While they take at most half of `max_memory_bytes` they
stay in memory (so that the final concatenation also fits in the budget); beyond that
everything is written to a temporary file and read back as a `numpy.memmap`, which the
fitting functions read in chunks. The file is deleted by `CollectedLogits.close()` (or on
leaving the `with` block). Peak memory is then bounded by `max_memory_bytes` plus one
batch, whatever the number of examples.

The `tf.data` path is TensorFlow-only and lives in `_dataset_batches` alone.
"""

import os
import tempfile

import keras
import numpy as np

from keras_normkit._validation import check_choice, check_int
from keras_normkit.backend.optional import is_tf_dataset
from keras_normkit.calibration import _validation

__all__ = ["CollectedLogits", "collect_logits"]

DEFAULT_MAX_MEMORY_BYTES = 2**30


class CollectedLogits:
    """Collected `logits` `(n, k)` float32 and `labels` `(n,)` int32 (arrays or memmaps).

    Use as a context manager, or call `close()`, to delete the spill files (if any).
    """

    def __init__(self, logits, labels, paths=()):
        self.logits, self.labels, self._paths = logits, labels, list(paths)

    @property
    def spilled(self):
        """Whether the arrays live in a temporary file rather than in memory."""
        return bool(self._paths)

    def close(self):
        self.logits = self.labels = None
        for path in self._paths:
            if os.path.exists(path):
                os.remove(path)
        self._paths = []

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


class _Store:
    """Append-only storage of (logits, labels) batches with a memory budget."""

    def __init__(self, max_memory_bytes, spill_dir=None):
        self.budget = max_memory_bytes
        self.spill_dir = spill_dir
        self.logit_batches, self.label_batches = [], []
        self.nbytes = 0
        self.num_rows = 0
        self.width = None
        self.files = None  # (logit file, label file, paths) once spilled

    def append(self, logits, labels):
        self.logit_batches.append(logits)
        self.label_batches.append(labels)
        self.nbytes += logits.nbytes + labels.nbytes
        self.num_rows += len(logits)
        if self.files is None and 2 * self.nbytes > self.budget:
            self._open_files()
        if self.files is not None:
            self._flush()

    def _open_files(self):
        paths, handles = [], []
        for suffix in (".logits.f32", ".labels.i32"):
            fd, path = tempfile.mkstemp(prefix="keras_normkit_", suffix=suffix, dir=self.spill_dir)
            paths.append(path)
            handles.append(os.fdopen(fd, "wb"))
        self.files = (handles[0], handles[1], paths)

    def _flush(self):
        logit_file, label_file, _ = self.files
        for logits, labels in zip(self.logit_batches, self.label_batches, strict=True):
            logits.tofile(logit_file)
            labels.tofile(label_file)
        self.logit_batches, self.label_batches, self.nbytes = [], [], 0

    def finish(self):
        if self.num_rows == 0:
            raise ValueError(
                "No examples to calibrate on: the dataset or arrays are empty. Expected at "
                "least one batch of (x, y)."
            )
        if self.files is None:
            logits = np.concatenate(self.logit_batches)
            self.logit_batches = None
            labels = np.concatenate(self.label_batches)
            return CollectedLogits(logits, labels)
        logit_file, label_file, paths = self.files
        logit_file.close()
        label_file.close()
        shape = (self.num_rows, self.width)
        logits = np.memmap(paths[0], dtype=np.float32, mode="r", shape=shape)
        labels = np.memmap(paths[1], dtype=np.int32, mode="r", shape=(self.num_rows,))
        return CollectedLogits(logits, labels, paths)

    def abort(self):
        if self.files is not None:
            self.files[0].close()
            self.files[1].close()
            for path in self.files[2]:
                if os.path.exists(path):
                    os.remove(path)


def _dataset_batches(dataset):
    """(x, y) NumPy batches of a batched `tf.data.Dataset` (TensorFlow only)."""
    import tensorflow as tf

    cardinality = int(dataset.cardinality())
    num_batches = cardinality if cardinality >= 0 else None
    if isinstance(dataset.element_spec, tf.TensorSpec):
        raise ValueError(
            "The dataset must yield (x, y) pairs of batches so that labels are known. "
            f"Received a dataset of single tensors: element_spec={dataset.element_spec}"
        )

    def batches():
        for element in dataset.as_numpy_iterator():
            if not (isinstance(element, tuple) and len(element) == 2):
                raise ValueError(
                    "The dataset must yield (x, y) pairs of batches. Received an element "
                    f"of type {type(element).__name__}"
                    + (f" with {len(element)} parts." if isinstance(element, tuple) else ".")
                )
            yield element

    return batches(), num_batches


def _array_batches(x, y, batch_size):
    if y is None:
        raise ValueError(
            "`y` (the labels) is required when `x` is an array. Received: y=None. Pass "
            "integer or one-hot labels, or a tf.data.Dataset of (x, y) batches."
        )
    x = keras.tree.map_structure(np.asarray, x)
    y = np.asarray(y)
    num_examples = len(keras.tree.flatten(x)[0])
    if len(y) != num_examples:
        raise ValueError(
            f"`x` and `y` must have the same number of examples. Received {num_examples} "
            f"inputs and {len(y)} labels."
        )
    starts = range(0, num_examples, batch_size)

    def batches():
        for start in starts:
            rows = slice(start, start + batch_size)
            yield keras.tree.map_structure(lambda a, rows=rows: a[rows], x), y[rows]

    return batches(), len(starts)


def collect_logits(
    predict_batch,
    x,
    y=None,
    batch_size=None,
    verbose="auto",
    max_memory_bytes=DEFAULT_MAX_MEMORY_BYTES,
    spill_dir=None,
):
    """Run `predict_batch` over the data and collect float32 logits and int32 labels.

    Args:
        predict_batch: A function from a batch of inputs to a `(b, k)` array of logits.
        x: Inputs (NumPy arrays, or nested structures of them) or a batched
            `tf.data.Dataset` of `(x, y)` pairs.
        y: Integer or one-hot labels when `x` is an array; `None` for a dataset.
        batch_size: Batch size for arrays (default 256); ignored for a dataset.
        verbose: `"auto"` or 1 for a progress bar, 0 for silence.
        max_memory_bytes: Memory budget of the collected arrays; beyond it they are
            spilled to a temporary `numpy.memmap` file.
        spill_dir: Directory of the spill files (default: the system temporary directory).

    Returns:
        A `CollectedLogits`; close it (or use it in a `with` block) to delete spill files.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import collect_logits
    >>> x = np.arange(12, dtype="float32").reshape(6, 2)
    >>> with collect_logits(lambda batch: 2 * batch, x, [0, 1, 0, 1, 0, 1],
    ...                     batch_size=4, verbose=0) as collected:
    ...     print(collected.logits.shape, collected.labels.tolist(), collected.spilled)
    ...     print(collected.logits[-1].tolist())  # 2 * x[-1]
    (6, 2) [0, 1, 0, 1, 0, 1] False
    [20.0, 22.0]
    """
    max_memory_bytes = check_int("max_memory_bytes", max_memory_bytes, 1)
    batch_size = 256 if batch_size is None else check_int("batch_size", batch_size, 1)
    check_choice("verbose", verbose, ("auto", 0, 1, 2))
    if is_tf_dataset(x):
        if y is not None:
            raise ValueError("`y` must be None when `x` is a tf.data.Dataset of (x, y) pairs.")
        batches, num_batches = _dataset_batches(x)
    else:
        batches, num_batches = _array_batches(x, y, batch_size)
    progbar = keras.utils.Progbar(num_batches, verbose=1 if verbose == "auto" else int(verbose))
    store = _Store(max_memory_bytes, spill_dir)
    try:
        for step, (x_batch, y_batch) in enumerate(batches):
            logits = np.asarray(predict_batch(x_batch), dtype=np.float32)
            logits, binary = _validation.check_logits(logits, f"logits of batch {step}")
            if store.width is None:
                store.width = logits.shape[1]
            elif logits.shape[1] != store.width:
                raise ValueError(
                    f"Every batch must give {store.width} logits per example. Received "
                    f"{logits.shape[1]} in batch {step}."
                )
            labels = _validation.check_labels(
                y_batch, len(logits), 2 if binary else logits.shape[1], f"labels of batch {step}"
            ).astype(np.int32)
            store.append(np.ascontiguousarray(logits), labels)
            progbar.update(step + 1)
        return store.finish()
    except BaseException:
        store.abort()
        raise
