"""Shape arithmetic shared by the engines, valid for static and unknown lengths alike."""


def padding_to_multiple(steps, size):
    """How many steps to append to `steps` to reach a multiple of `size`.

    `steps` is an int, a scalar tensor (an unknown length in a TensorFlow graph) or a JAX
    symbolic dimension (an export with a polymorphic shape). Written as
    `ceil(steps / size) * size - steps` rather than `(-steps) % size`, so that the padded
    length is visibly a multiple of `size` to JAX's symbolic shapes (`reshape` to chunks).
    """
    if isinstance(steps, int):
        return (-steps) % size
    return (steps + size - 1) // size * size - steps
