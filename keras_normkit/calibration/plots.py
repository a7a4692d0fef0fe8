"""Plots of calibration: the reliability diagram (matplotlib is imported only when one is drawn)."""

import numpy as np

from keras_normkit._validation import check_bool
from keras_normkit.calibration.metrics import binned, smooth

__all__ = ["reliability_diagram"]

#: The smoothed curve is drawn where the smoothed density of the confidences is at least
#: this (1 is the density of confidences spread uniformly over [0, 1]).
MIN_DENSITY = 0.01


def _draw_smooth(ax, probabilities, labels, bootstrap, seed):
    """The smoothed reliability curve and its bootstrap band; returns the smooth ECE."""
    value, sigma = smooth.smooth_calibration_error(probabilities, labels, return_bandwidth=True)
    curve = smooth.smooth_calibration_curve(
        probabilities, labels, bandwidth=sigma, bootstrap=bootstrap, seed=seed
    )
    shown = curve.density >= MIN_DENSITY
    x = np.where(shown, curve.confidence, np.nan)
    if curve.low is not None:
        ax.fill_between(
            x,
            curve.low,
            curve.high,
            color="tab:orange",
            alpha=0.3,
            linewidth=0,
            label="95 % bootstrap band",
        )
    ax.plot(
        x,
        curve.accuracy,
        color="tab:orange",
        linewidth=2,
        label=f"smoothed (\N{GREEK SMALL LETTER SIGMA} = {sigma:.3f})",
    )
    ax.smooth_curve = curve
    return value


def reliability_diagram(
    probabilities, labels, num_bins=15, ax=None, title=None, smooth=False, bootstrap=200, seed=0
):
    """Draw a reliability diagram: accuracy vs confidence in M bins, with ECE in the title.

    For each confidence bin B_m = ((m-1)/M, m/M] (see `calibration_bins`) a blue bar
    shows acc(B_m) and a hatched red bar the gap up (or down) to conf(B_m); a perfectly
    calibrated classifier follows the dashed diagonal. Translucent grey bars, drawn on top
    on a secondary axis (`ax.histogram_axes`, its scale on the right), show the fraction of
    examples per bin (the confidence histogram), since a large gap in an almost empty bin
    matters little; they fill at most the lower quarter of the plot, and the accuracy bars
    stay visible through them. The title reports ECE (see `expected_calibration_error`,
    same bins).

    With `smooth=True` the kernel-smoothed reliability curve of Błasiok and Nakkiran
    (2023) is drawn on top (orange, where the smoothed density of the confidences is at
    least 0.01; see `smooth_calibration_curve`, bandwidth sigma* of
    `smooth_calibration_error`), with its pointwise 95 % percentile-bootstrap band at the
    same bandwidth (`bootstrap` resamples, seeded), and the title adds the smooth ECE. The
    curve is stored as `ax.smooth_curve` (a `SmoothCalibrationCurve`).

    Args:
        probabilities: `(n, k)` predicted probabilities, or `(n,)`/`(n, 1)` probabilities of
            class 1 for a binary classifier.
        labels: Integer labels `(n,)`/`(n, 1)` or one-hot `(n, k)`.
        num_bins: Number of bins M (15 in Guo et al.).
        ax: A matplotlib `Axes` to draw on (default: a new 4 x 4 inch figure).
        title: Optional text put before the ECE in the title.
        smooth: Also draw the smoothed reliability curve and its bootstrap band.
        bootstrap: Resamples of the band (`smooth=True` only; 0: no band).
        seed: Seed of the resampling.

    Returns:
        The matplotlib `Axes` of the diagram.

    Example:

    >>> import numpy as np
    >>> from keras_normkit.calibration import reliability_diagram
    >>> p = np.random.default_rng(0).dirichlet(np.ones(3), size=200)
    >>> ax = reliability_diagram(p, p.argmax(1), num_bins=10, title="argmax labels")
    >>> ax.get_title()
    'argmax labels: ECE = ...'

    >>> ax = reliability_diagram(p, p.argmax(1), smooth=True, bootstrap=20)
    >>> ax.get_title()
    'ECE = ... %, smooth ECE = ... %'

    References: Guo et al., "On Calibration of Modern Neural Networks", ICML 2017,
    arXiv:1706.04599, Figure 1 and Section 2; Błasiok & Nakkiran, "Smooth ECE", ICLR 2024,
    arXiv:2309.12236 (the smoothed curve).
    """
    import matplotlib.pyplot as plt

    smooth = check_bool("smooth", smooth)

    bins = binned.calibration_bins(probabilities, labels, num_bins)
    ece = binned.expected_calibration_error(probabilities, labels, num_bins)
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 4))
    width = 1.0 / num_bins
    centers = bins.edges[:-1] + width / 2
    full = bins.counts > 0
    accuracy = np.where(full, bins.accuracy, 0.0)
    gap = np.where(full, bins.confidence - accuracy, 0.0)
    ax.bar(
        centers, accuracy, width, color="tab:blue", edgecolor="k", linewidth=0.5, label="accuracy"
    )
    ax.bar(
        centers,
        gap,
        width,
        bottom=accuracy,
        color="tab:red",
        alpha=0.3,
        hatch="//",
        edgecolor="tab:red",
        linewidth=0.5,
        label="gap to confidence",
    )
    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
    smooth_ece = _draw_smooth(ax, probabilities, labels, bootstrap, seed) if smooth else None
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("accuracy")
    # The confidence histogram on a twin axis drawn above the diagram (its background is
    # transparent), so the accuracy bars cannot hide it; translucent, so it hides nothing.
    histogram = ax.twinx()
    histogram.set_zorder(ax.get_zorder() + 1)
    histogram.patch.set_visible(False)
    histogram.bar(
        centers,
        bins.counts / bins.counts.sum(),
        width * 0.6,
        color="0.35",
        alpha=0.45,
        edgecolor="0.15",
        linewidth=0.5,
        label="fraction of examples",
    )
    histogram.set_ylim(0, 4)  # a bin holding every example reaches a quarter of the height
    histogram.set_yticks([0, 0.5, 1])  # the legend names the scale
    histogram.tick_params(axis="y", labelsize="x-small", colors="0.35")
    ax.histogram_axes = histogram
    handles, labels = ax.get_legend_handles_labels()
    more_handles, more_labels = histogram.get_legend_handles_labels()
    # The legend goes on the top axes, so the histogram does not cover it.
    histogram.legend(
        handles + more_handles, labels + more_labels, loc="upper left", fontsize="small"
    )
    prefix = f"{title}: " if title else ""
    suffix = "" if smooth_ece is None else f", smooth ECE = {100 * smooth_ece:.2f} %"
    ax.set_title(f"{prefix}ECE = {100 * ece:.2f} %{suffix}")
    return ax
