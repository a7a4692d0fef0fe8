"""Replace the moving statistics of `BatchNormalization` layers by exact population ones.

The moving averages a `BatchNormalization` layer keeps during training lag the weights:
they average batch statistics computed with older parameters. Ioffe & Szegedy (2015,
Section 3.1) prescribe the population statistics of the trained network for inference;
`recompute_batch_norm_statistics` measures them exactly ("precise BN", Wu & Johnson 2021).

Reference: Ioffe & Szegedy, "Batch Normalization", ICML 2015, arXiv:1502.03167.
"""

import keras
import numpy as np

from keras_normkit._validation import check_choice, check_int
from keras_normkit.backend.keras_compat import graph_nodes, nested_layers
from keras_normkit.backend.optional import is_tf_dataset
from keras_normkit.utils.batch_norm_folding import _is_graph_model

__all__ = ["recompute_batch_norm_statistics"]


class _Moments:
    """Count, mean and sum of squared deviations per channel, merged in float64 (Chan et al.)."""

    def __init__(self):
        self.count, self.mean, self.m2, self.examples = 0, None, None, 0

    def add(self, values):  # values: (n, channels), float64
        n = values.shape[0]
        if n == 0:
            return
        mean_b = values.mean(axis=0)
        m2_b = ((values - mean_b) ** 2).sum(axis=0)
        if self.count == 0:
            self.count, self.mean, self.m2 = n, mean_b, m2_b
            return
        total = self.count + n
        delta = mean_b - self.mean
        self.mean = self.mean + delta * (n / total)
        self.m2 = self.m2 + m2_b + delta**2 * (self.count * n / total)
        self.count = total

    @property
    def variance(self):  # population variance (1/n), what Keras's moving_variance tracks
        return self.m2 / self.count


def _contains_bn(layer):
    return any(isinstance(sub, keras.layers.BatchNormalization) for sub in _sublayers(layer))


def has_batch_normalization(model):
    """Whether `model` holds a `BatchNormalization` layer (nested ones included)."""
    return isinstance(model, keras.layers.BatchNormalization) or _contains_bn(model)


def _sublayers(layer):
    if not isinstance(layer, keras.layers.Layer):
        return []
    return nested_layers(layer)


def _walk(model, input_level, levels):
    """Level of every BN of `model` (nested models flattened): the number of BNs before it.

    `levels[id(bn)] = (bn, level)`; returns the level of `model`'s outputs (the largest
    number of BNs on a path from the inputs to an output, counting those before `model`).
    """
    if isinstance(model, keras.Sequential):
        level = input_level
        for layer in model.layers:
            level = _visit(layer, level, levels)
        return level
    level_of = {id(t): input_level for t in keras.tree.flatten(model.inputs)}
    nodes = [n for n in graph_nodes(model) if not isinstance(n.operation, keras.layers.InputLayer)]
    # Levels only grow, so sweeping the nodes until nothing changes needs no topological order.
    for _ in range(len(nodes) + 1):
        changed = False
        for node in nodes:
            level = max(
                (level_of.get(id(t), input_level) for t in node.input_tensors),
                default=input_level,
            )
            out = _visit(node.operation, level, levels)
            for tensor in keras.tree.flatten(node.output_tensors):
                if level_of.get(id(tensor)) != out:
                    level_of[id(tensor)] = out
                    changed = True
        if not changed:
            break
    return max(
        (level_of.get(id(t), input_level) for t in keras.tree.flatten(model.outputs)),
        default=input_level,
    )


def _visit(layer, level, levels):
    if isinstance(layer, keras.layers.BatchNormalization):
        previous = levels.get(id(layer), (layer, -1))[1]
        levels[id(layer)] = (layer, max(previous, level))
        return level + 1
    if _is_graph_model(layer):
        return _walk(layer, level, levels)
    if _contains_bn(layer):
        raise TypeError(
            "recompute_batch_norm_statistics needs the layer graph to order the "
            "BatchNormalization layers; it cannot look inside layer "
            f"{layer.name!r} of class {type(layer).__name__}, which contains BatchNormalization "
            "layers. Build it with the Functional or Sequential API."
        )
    return level


def _unpack_x(element):
    """The model inputs of a data element: `x`, or the first entry of `(x, y[, weights])`."""
    if isinstance(element, tuple) and 1 <= len(element) <= 3:
        return element[0]
    return element


class _Source:
    """Batches of model inputs, one pass per `iter()`."""

    def __init__(self, data, batch_size, steps):
        self.steps = steps
        self.reusable = True
        self.target = steps
        if isinstance(data, (np.ndarray, dict)) or (
            isinstance(data, list) and data and all(isinstance(a, np.ndarray) for a in data)
        ):
            arrays = keras.tree.flatten(data)
            size = arrays[0].shape[0] if arrays else 0
            if size == 0:
                raise ValueError("`data` is empty: it holds 0 examples.")
            starts = range(0, size, batch_size)
            self._make = lambda: (
                keras.tree.map_structure(lambda a, s=s: a[s : s + batch_size], data) for s in starts
            )
            count = len(starts)
            self.target = count if steps is None else min(steps, count)
        elif is_tf_dataset(data):
            self._make = lambda: (_unpack_x(e) for e in data)
            cardinality = int(data.cardinality())
            if cardinality >= 0:
                self.target = cardinality if steps is None else min(steps, cardinality)
            elif steps is None and cardinality == -1:  # INFINITE
                raise ValueError(
                    "`data` is an infinite tf.data.Dataset: pass `steps`, the number of "
                    "batches to use."
                )
        elif callable(data) and not hasattr(data, "__iter__"):
            self._make = lambda: (_unpack_x(e) for e in data())
        elif hasattr(data, "__iter__") or hasattr(data, "__getitem__"):
            self.reusable = iter(data) is not data
            self._make = lambda: (_unpack_x(e) for e in data)
            if hasattr(data, "__len__") and self.reusable:
                count = len(data)
                self.target = count if steps is None else min(steps, count)
        else:
            raise TypeError(
                "`data` must be NumPy arrays, a tf.data.Dataset, an iterable or generator "
                "of batches, or a function returning one. "
                f"Received: data of type {type(data).__name__}"
            )

    def batches(self):
        for i, x in enumerate(self._make()):
            if self.steps is not None and i >= self.steps:
                return
            yield x


def _hook(bn, moments):
    original = bn.call

    def call(inputs, training=None, mask=None, **kwargs):
        if not training:
            values = keras.ops.convert_to_numpy(inputs).astype("float64")
            axis = bn.axis % values.ndim
            values = np.moveaxis(values, axis, -1)
            if mask is not None:
                keep = np.broadcast_to(
                    keras.ops.convert_to_numpy(mask).astype(bool), values.shape[:-1]
                )
                rows = values[keep]
            else:
                rows = values.reshape(-1, values.shape[-1])
            moments.add(rows)
            moments.examples += values.shape[0]
        return original(inputs, training=training, mask=mask, **kwargs)

    bn.call = call


def recompute_batch_norm_statistics(model, data, steps=None, batch_size=32, verbose=1):
    """Set every `BatchNormalization`'s moving mean and variance to exact population ones.

    For every `BatchNormalization` layer of `model` (also in nested Sequential/Functional
    models), `moving_mean` and `moving_variance` become the exact mean and variance, per
    channel, of that layer's inputs over all of `data` with the model in inference mode,
    as Ioffe & Szegedy (2015, Section 3.1) prescribe for inference ("precise BN"). The
    moving averages of training lag the weights (they average the statistics of older
    parameters); recomputed statistics do not. Batch moments are computed on the host in
    float64 and merged with Chan et al.'s parallel algorithm, so the result does not
    depend on the batch size (beyond float rounding).

    Exactness and number of passes: the inputs of a BN that comes after another BN depend
    on the earlier BN's statistics. The BNs are ordered by *level* (the number of BNs on
    the longest path before them, from the layer graph); one pass over `data` measures all
    BNs of one level, with every earlier level already replaced, so each BN gets the
    statistics of its inputs in the final network, exactly. A model whose BNs are not in
    series (e.g. one BN, or BNs side by side) needs one pass; in general the number of
    passes is the number of levels. Several passes need data that can be iterated again
    (arrays, a `tf.data.Dataset`, a list, a `keras.utils.PyDataset`, or a function
    returning a fresh generator); a one-shot generator is accepted for one level only.
    A BN shared in series with itself has no exact answer and gets the statistics of its
    inputs with its previous statistics.

    Variance: the population variance (divided by `n`, the number of values per channel),
    which is what Keras's `BatchNormalization` averages into `moving_variance` (the biased
    batch variance of `ops.moments`); the `m / (m - 1)` correction of the paper is not
    applied. Reduction is over every axis but `axis` (all positions of a convolution);
    masked positions (a `mask` passed to the BN) are left out as the BN does.
    `synchronized=True` BNs are handled like the others (all of `data` is seen here, so
    no cross-replica reduction is needed). Statistics are measured in inference mode: a
    BN called with `training=True` in the graph is measured only in its inference calls.

    Pair with `fold_batch_normalization`: recompute first, then fold, to get linear layers
    carrying the exact statistics.

    Args:
        model: A built Sequential or Functional `keras.Model`. The BNs of a layer the
            graph cannot look into (a subclassed model or layer) raise a `TypeError`.
        data: The inputs: NumPy array(s) (an array, a list of arrays or a dict, split
            into batches of `batch_size`), a `tf.data.Dataset`, an iterable or generator of
            batches, or a function returning a new iterable. Elements may be `x` or
            `(x, y)` / `(x, y, sample_weight)` tuples (only `x` is used).
        steps: Optional integer >= 1, the number of batches per pass (required for an
            infinite dataset or generator). Default: all of `data`.
        batch_size: Integer >= 1, the batch size for NumPy data. Default: 32.
        verbose: 0 (silent) or 1 (a `keras.utils.Progbar` per pass and one line per BN).

    Returns:
        A list of dicts, one per recomputed BN in level order: `"name"`, `"level"`,
        `"examples"` (batch entries seen), `"count"` (values per channel),
        `"max_mean_change"` and `"max_variance_change"` (largest absolute change).

    Raises:
        ValueError: if `model` has no `BatchNormalization` layer, `data` yields no
            batches, or several passes are needed and `data` is a one-shot generator.

    Example:

    >>> import keras, numpy as np
    >>> from keras_normkit.utils import recompute_batch_norm_statistics
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.BatchNormalization()])
    >>> x = np.array([[1.0, 0.0], [3.0, 4.0], [5.0, 8.0]], "float32")
    >>> report = recompute_batch_norm_statistics(model, x, verbose=0)
    >>> bn = model.layers[0]
    >>> print(keras.ops.convert_to_numpy(bn.moving_mean))  # the column means
    [3. 4.]
    >>> print(np.round(keras.ops.convert_to_numpy(bn.moving_variance), 4))  # 8/3, 32/3 (1/n)
    [ 2.6667 10.6667]
    >>> report[0]["count"]
    3

    Reference: Ioffe & Szegedy, "Batch Normalization", ICML 2015, arXiv:1502.03167,
    Section 3.1; Wu & Johnson, "Rethinking 'Batch' in BatchNorm", 2021, arXiv:2105.07576.
    """
    if not isinstance(model, keras.Model) or not _is_graph_model(model):
        raise TypeError(
            "`model` must be a built Sequential or Functional keras.Model. "
            f"Received: model of type {type(model).__name__}"
        )
    steps = None if steps is None else check_int("steps", steps, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    check_choice("verbose", verbose, (0, 1, 2))
    levels = {}
    _walk(model, 0, levels)
    if not levels:
        raise ValueError(
            f"`model` {model.name!r} has no BatchNormalization layer: there are no "
            "statistics to recompute."
        )
    by_level = {}
    for bn, level in levels.values():
        by_level.setdefault(level, []).append(bn)
    source = _Source(data, batch_size, steps)
    if len(by_level) > 1 and not source.reusable:
        raise ValueError(
            f"The BatchNormalization layers of `model` form {len(by_level)} levels in series, "
            "which need one pass over `data` each, but `data` is a one-shot generator. Pass "
            "a re-iterable object instead (arrays, a tf.data.Dataset, a list, a PyDataset, "
            "or a function returning a new generator)."
        )
    report = []
    for number, level in enumerate(sorted(by_level)):
        bns = [bn for bn in by_level[level] if bn.built]
        moments = {id(bn): _Moments() for bn in bns}
        for bn in bns:
            _hook(bn, moments[id(bn)])
        progbar = (
            keras.utils.Progbar(source.target, verbose=1 if verbose else 0, unit_name="batch")
            if verbose
            else None
        )
        if verbose:
            print(f"Pass {number + 1}/{len(by_level)}: {len(bns)} BatchNormalization layer(s)")
        try:
            seen = 0
            for x in source.batches():
                model(x, training=False)
                seen += 1
                if progbar is not None:
                    progbar.update(seen)
        finally:
            for bn in bns:
                del bn.call  # back to the class's method
        if seen == 0:
            raise ValueError("`data` yielded no batches: there is nothing to measure.")
        for bn in bns:
            stats = moments[id(bn)]
            if stats.count == 0:
                raise ValueError(
                    f"BatchNormalization layer {bn.name!r} was not called on `data` in "
                    "inference mode (or all its inputs were masked)."
                )
            old_mean = keras.ops.convert_to_numpy(bn.moving_mean).astype("float64")
            old_var = keras.ops.convert_to_numpy(bn.moving_variance).astype("float64")
            bn.moving_mean.assign(stats.mean.astype(bn.moving_mean.dtype))
            bn.moving_variance.assign(stats.variance.astype(bn.moving_variance.dtype))
            if getattr(bn, "renorm", False):
                bn.moving_stddev.assign(np.sqrt(stats.variance).astype(bn.moving_stddev.dtype))
            entry = {
                "name": bn.name,
                "level": level,
                "examples": stats.examples,
                "count": stats.count,
                "max_mean_change": float(np.max(np.abs(stats.mean - old_mean))),
                "max_variance_change": float(np.max(np.abs(stats.variance - old_var))),
            }
            report.append(entry)
            if verbose:
                print(
                    f"Recomputed {bn.name}: {stats.count} values per channel "
                    f"({stats.examples} examples), max |change| of mean "
                    f"{entry['max_mean_change']:.4g}, of variance "
                    f"{entry['max_variance_change']:.4g}"
                )
    return report
