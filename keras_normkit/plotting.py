"""Plots of schedules and training monitors (matplotlib is imported only when plotting)."""

import numpy as np

from keras_normkit._validation import check_int

__all__ = ["plot_activation_statistics", "plot_gradient_statistics", "plot_schedules"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "keras_normkit.plotting needs matplotlib: `pip install matplotlib`."
        ) from error
    return plt


def _recorded(statistics, layers):
    """`(epochs, history, names)` of a statistics callback (or its dict), `layers` checked."""
    if isinstance(statistics, dict):
        epochs, history = statistics["epochs"], statistics["history"]
    else:
        epochs, history = statistics.epochs, statistics.history
    if not history:
        raise ValueError("`statistics` holds no recorded statistics; train with the callback.")
    names = list(history) if layers is None else list(layers)
    unknown = [name for name in names if name not in history]
    if unknown:
        raise ValueError(f"Unknown layers {unknown}; recorded layers are {list(history)}.")
    return epochs, history, names


def plot_schedules(schedules, total_steps, ax=None, log_scale=False):
    """Plot learning-rate schedules over `total_steps` steps.

    Each schedule is evaluated in one call on the vector `[0, 1, ..., total_steps - 1]`.

    Args:
        schedules: A dict `{label: schedule}` of `LearningRateSchedule`s (or one schedule).
        total_steps: Positive integer, the number of steps to draw.
        ax: Optional matplotlib axes to draw into (a new figure otherwise).
        log_scale: Use a logarithmic y axis.

    Returns:
        The matplotlib `Figure`.

    Example:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from keras_normkit.plotting import plot_schedules
    >>> from keras_normkit.schedules import OneCycle
    >>> figure = plot_schedules({"one-cycle": OneCycle(0.1, 1000)}, total_steps=1000)
    >>> figure.axes[0].get_ylabel()
    'learning rate'
    """
    import keras

    total_steps = check_int("total_steps", total_steps, 1)
    if not isinstance(schedules, dict):
        schedules = {type(schedules).__name__: schedules}
    plt = _pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    steps = np.arange(total_steps, dtype="float32")
    for label, schedule in schedules.items():
        values = keras.ops.convert_to_numpy(schedule(steps))
        ax.plot(steps, np.broadcast_to(values, steps.shape), label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("learning rate")
    if log_scale:
        ax.set_yscale("log")
    if len(schedules) > 1:
        ax.legend(fontsize="small")
    return ax.figure


def plot_activation_statistics(statistics, layers=None, ncols=3, figsize=None):
    """Draw per-layer activation statistics over epochs (Ioffe & Szegedy 2015, Figure 1).

    For each layer: the median (solid), the other percentiles (dashed) with the band between
    the lowest and highest percentile shaded, and the mean plus/minus one standard deviation
    (dotted).

    Args:
        statistics: A `keras_normkit.callbacks.ActivationStatistics` after training, or a
            dict `{"epochs": [...], "history": {layer: {stat: [...]}}}`.
        layers: Layer names to draw (default: all recorded).
        ncols: Positive integer, the number of subplot columns (at most one per layer).
        figsize: Optional figure size; by default 3.2 x 2.4 inches per subplot.

    Returns:
        The matplotlib `Figure`.

    Reference: S. Ioffe and C. Szegedy, "Batch Normalization", ICML 2015.
    """
    epochs, history, names = _recorded(statistics, layers)
    ncols = max(1, min(check_int("ncols", ncols, 1), len(names)))
    plt = _pyplot()
    nrows = -(-len(names) // ncols)
    figsize = figsize or (3.2 * ncols, 2.4 * nrows)
    figure, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False, sharex=True)
    epochs = np.asarray(epochs)
    for ax, name in zip(axes.ravel(), names, strict=False):
        stats = history[name]
        keys = sorted((k for k in stats if k.startswith("p")), key=lambda k: float(k[1:]))
        if keys:
            low, high = np.asarray(stats[keys[0]]), np.asarray(stats[keys[-1]])
            ax.fill_between(epochs, low, high, alpha=0.2, color="C0")
        for key in keys:
            style = "-" if key == "p50" else "--"
            ax.plot(epochs, stats[key], style, color="C0", linewidth=1, label=key)
        mean, std = np.asarray(stats["mean"]), np.sqrt(np.asarray(stats["variance"]))
        ax.plot(epochs, mean, ":", color="C3", label="mean")
        ax.plot(epochs, mean + std, ":", color="C3", linewidth=0.7)
        ax.plot(epochs, mean - std, ":", color="C3", linewidth=0.7)
        ax.set_title(name, fontsize="small")
    for ax in axes.ravel()[len(names) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("epoch")
    axes[0, 0].legend(fontsize="x-small")
    figure.tight_layout()
    return figure


def plot_gradient_statistics(statistics, stats=None, layers=None, figsize=None):
    """Per-layer gradient statistics vs depth and vs epoch (Glorot & Bengio 2010, Fig. 6-7).

    One row per statistic: on the left its value for each layer (in depth order) with one
    line per recorded epoch (lighter = earlier); on the right its value over the epochs with
    one line per layer. Gradient scales use a logarithmic axis; `"saturation"` a linear one.

    Args:
        statistics: A `keras_normkit.callbacks.GradientStatistics` after training, or a dict
            `{"epochs": [...], "history": {layer: {stat: [...]}}}`.
        stats: Statistics to draw (default: `"output_grad_std"`, `"grad_norm"` and, when
            recorded, `"saturation"`).
        layers: Layer names, in depth order (default: all recorded).
        figsize: Optional figure size.

    Returns:
        The matplotlib `Figure`.

    Example:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from keras_normkit.plotting import plot_gradient_statistics
    >>> history = {"a": {"output_grad_std": [1e-3, 2e-3]}, "b": {"output_grad_std": [1e-2, 1e-2]}}
    >>> figure = plot_gradient_statistics({"epochs": [0, 1], "history": history})
    >>> [ax.get_xlabel() for ax in figure.axes]
    ['layer (depth)', 'epoch']

    Reference: X. Glorot and Y. Bengio, "Understanding the difficulty of training deep
    feedforward neural networks", AISTATS 2010.
    """
    epochs, history, names = _recorded(statistics, layers)
    recorded = {stat for name in names for stat in history[name]}
    if stats is None:
        stats = [s for s in ("output_grad_std", "grad_norm", "saturation") if s in recorded]
    stats = list(stats)
    missing = [s for s in stats if s not in recorded]
    if missing or not stats:
        raise ValueError(f"Unknown statistics {missing or stats}; recorded: {sorted(recorded)}.")
    plt = _pyplot()
    figure, axes = plt.subplots(
        len(stats), 2, figsize=figsize or (9, 2.8 * len(stats)), squeeze=False
    )
    epochs = np.asarray(epochs)
    cmap = plt.get_cmap("viridis")
    for row, stat in zip(axes, stats, strict=True):
        table = np.array(
            [history[name].get(stat, [np.nan] * len(epochs)) for name in names], dtype="float64"
        )
        depth = np.arange(len(names))
        for j, epoch in enumerate(epochs):
            color = cmap(j / max(1, len(epochs) - 1))
            row[0].plot(depth, table[:, j], "o-", color=color, markersize=3, label=f"epoch {epoch}")
        for i, name in enumerate(names):
            row[1].plot(epochs, table[i], label=name)
        row[0].set_xticks(depth, names, rotation=45, fontsize="x-small")
        for ax in row:
            ax.set_ylabel(stat)
            if stat != "saturation" and np.nanmin(np.abs(table), initial=np.inf) > 0:
                ax.set_yscale("log")
    axes[-1, 0].set_xlabel("layer (depth)")
    axes[-1, 1].set_xlabel("epoch")
    axes[0, 0].legend(fontsize="x-small")
    axes[0, 1].legend(fontsize="x-small", ncol=2)
    figure.tight_layout()
    return figure
