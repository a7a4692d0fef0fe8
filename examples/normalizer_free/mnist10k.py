"""mnist-10k: the 10,000 MNIST test images (28x28, IDX format, gzip), split 8,000 / 2,000.

    python examples/normalizer_free/mnist10k.py --data DIR

`DIR` (or the environment variable `NORMKIT_MNIST10K_DATA`) holds
`t10k-images-idx3-ubyte.gz` and `t10k-labels-idx1-ubyte.gz`, the original files. Only the
10,000-image test file is used (as a small real image set): a fixed permutation (seed 0)
puts 8,000 images in training and 2,000 in test. Pixels are scaled to [0, 1], the training
images' mean image is subtracted and the result divided by its standard deviation (one
scalar), so the network's input has mean 0 at every pixel and variance 1 overall.
"""

import argparse
import gzip
import os
import pathlib
import struct

import numpy as np

ENV = "NORMKIT_MNIST10K_DATA"
IMAGES = "t10k-images-idx3-ubyte.gz"
LABELS = "t10k-labels-idx1-ubyte.gz"
N_TRAIN = 8000
SPLIT_SEED = 0


def resolve(data=None):
    """The data folder: `data`, else `$NORMKIT_MNIST10K_DATA`; a clear error otherwise."""
    data = data or os.environ.get(ENV)
    if not data:
        raise SystemExit(
            f"mnist-10k not found: pass --data DIR or set {ENV} to the folder holding "
            f"{IMAGES} and {LABELS}."
        )
    path = pathlib.Path(data)
    missing = [name for name in (IMAGES, LABELS) if not (path / name).exists()]
    if missing:
        raise SystemExit(f"{path} lacks {', '.join(missing)} (the MNIST t10k IDX files).")
    return path


def read_idx(path):
    """The array of an IDX file (gzip): magic, dims as big-endian int32, then uint8 data."""
    with gzip.open(path, "rb") as f:
        content = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", content[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path} is not an IDX file of unsigned bytes.")
    shape = struct.unpack(f">{ndim}I", content[4 : 4 + 4 * ndim])
    data = np.frombuffer(content, dtype=np.uint8, offset=4 + 4 * ndim)
    return data.reshape(shape)


def load(data=None):
    """`(x_train, y_train, x_test, y_test)`: float32 images `(n, 28, 28, 1)`, int32 labels."""
    path = resolve(data)
    images = read_idx(path / IMAGES).astype("float32") / 255.0
    labels = read_idx(path / LABELS).astype("int32")
    order = np.random.default_rng(SPLIT_SEED).permutation(len(images))
    train, test = order[:N_TRAIN], order[N_TRAIN:]
    images = images - images[train].mean(axis=0)
    images = (images / images[train].std())[..., None].astype("float32")
    return images[train], labels[train], images[test], labels[test]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", help=f"folder of the IDX files (else ${ENV})")
    args = parser.parse_args(argv)
    x_train, y_train, x_test, y_test = load(args.data)
    print(f"train {x_train.shape} test {x_test.shape}")
    print(f"train mean {x_train.mean():.4f} var {x_train.var():.4f}")
    print(f"train class counts {np.bincount(y_train).tolist()}")


if __name__ == "__main__":
    main()
