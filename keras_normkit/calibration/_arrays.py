"""Reading large arrays in row chunks (NumPy arrays and `numpy.memmap`s alike).

`as_input_shape` returns a fitted map's `(n, c)` result in the shape of its input.

Every pass of a calibration fit over its held-out logits runs over `chunk_slices`, reading
each chunk with `read_rows`, so that a `numpy.memmap` far larger than memory (what
`collect_logits` spills beyond its budget) is never loaded, or kept resident, whole.
"""

import mmap

import numpy as np

#: Rows per chunk are chosen so that one float64 chunk takes about this many bytes.
CHUNK_BYTES = 8 * 2**20


def chunk_slices(num_rows, row_width):
    """Row slices covering `num_rows` rows in chunks of about `CHUNK_BYTES` float64 bytes."""
    step = max(1, CHUNK_BYTES // (8 * max(1, row_width)))
    return [slice(i, min(i + step, num_rows)) for i in range(0, num_rows, step)]


def read_rows(array, rows):
    """`array[rows]` as an in-memory array.

    For a `numpy.memmap` opened on a file, the rows are read with `numpy.fromfile` rather
    than through the mapping: pages touched through a mapping stay in the process's
    resident memory until it is unmapped, so scanning a large memmap would grow the RSS
    with N. Reading them keeps the resident memory at one chunk.
    """
    if (
        isinstance(array, np.memmap)
        and isinstance(array.base, mmap.mmap)
        and array.filename is not None
        and array.flags.c_contiguous
    ):
        row_bytes = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
        start, stop, _ = rows.indices(len(array))
        count = max(0, stop - start) * row_bytes // array.itemsize
        data = np.fromfile(
            array.filename, dtype=array.dtype, count=count, offset=array.offset + start * row_bytes
        )
        return data.reshape((-1, *array.shape[1:]))
    return np.asarray(array[rows])


def map_rows(function, array):
    """`function` applied to `array` chunk by chunk, the results concatenated (float64)."""
    return np.concatenate(
        [
            np.asarray(function(read_rows(array, rows)), np.float64)
            for rows in chunk_slices(*array.shape)
        ]
    )


def as_input_shape(q, inputs):
    """Calibrated `(n, c)` values in the shape of the input (`(n,)` stays `(n,)`)."""
    return q[:, 0] if np.ndim(inputs) == 1 else q
