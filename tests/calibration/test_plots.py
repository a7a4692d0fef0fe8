"""reliability_diagram (`plots.py`): the confidence histogram is drawn, visible and not hidden by the bars."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_normkit.calibration import calibration_bins, reliability_diagram  # noqa: E402


@pytest.fixture
def diagram():
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3) * 0.3, size=2000)
    labels = probabilities.argmax(1)  # accuracy 1 in every bin: full-height blue bars
    figure, axes = plt.subplots(figsize=(4, 4), dpi=100)
    ax = reliability_diagram(probabilities, labels, num_bins=10, ax=axes)
    yield ax, probabilities, labels
    plt.close(figure)


def test_histogram_bars_exist_with_the_bin_fractions(diagram):
    ax, probabilities, labels = diagram
    histogram = ax.histogram_axes
    assert histogram in ax.figure.axes and histogram is not ax
    assert len(histogram.patches) == 10
    bins = calibration_bins(probabilities, labels, 10)
    heights = np.array([p.get_height() for p in histogram.patches])
    np.testing.assert_allclose(heights, bins.counts / bins.counts.sum())
    assert heights.sum() == pytest.approx(1.0)
    assert all(p.get_visible() for p in histogram.patches)
    legend = [t.get_text() for t in histogram.get_legend().get_texts()]
    assert sorted(legend) == sorted(
        [
            "accuracy",
            "gap to confidence",
            "perfect calibration",
            "fraction of examples",
        ]
    )


def test_histogram_is_drawn_above_the_accuracy_bars_and_translucent(diagram):
    ax, _, _ = diagram
    histogram = ax.histogram_axes
    assert histogram.get_visible()
    assert histogram.get_zorder() > ax.get_zorder()  # drawn after (above) the diagram
    assert not histogram.patch.get_visible()  # transparent background: hides nothing
    for patch in histogram.patches:
        assert 0.0 < patch.get_alpha() < 1.0


def test_histogram_is_visible_in_the_rendered_image(diagram):
    ax, probabilities, labels = diagram
    figure = ax.figure
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].astype(int)
    height = image.shape[0]
    bins = calibration_bins(probabilities, labels, 10)
    fullest = int(np.argmax(bins.counts))
    center = (bins.edges[fullest] + bins.edges[fullest + 1]) / 2
    fraction = bins.counts[fullest] / bins.counts.sum()

    def pixel(axes, x, y):
        px, py = axes.transData.transform((x, y))
        return image[height - int(round(py)), int(round(px))]

    # Inside the histogram bar (half its height) and above it, within the same blue bar.
    under = pixel(ax.histogram_axes, center, fraction / 2)
    above = pixel(ax, center, min(0.9, bins.accuracy[fullest] - 0.05))
    assert np.abs(under - above).sum() > 60, (under, above)  # the grey bar shows through
    # ... and the blue accuracy bar still shows through the grey one (not fully covered).
    assert under[2] > under[0] + 20, under


def test_smooth_curve_and_band_are_drawn_and_match_the_functions():
    from matplotlib.collections import PolyCollection

    from keras_normkit.calibration import smooth_calibration_curve, smooth_calibration_error

    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3) * 0.5, size=800)
    labels = (probabilities.cumsum(1) > rng.random((800, 1))).argmax(1)
    figure, axes = plt.subplots(figsize=(4, 4), dpi=60)
    try:
        plain = reliability_diagram(probabilities, labels, num_bins=10, ax=axes)
        assert not hasattr(plain, "smooth_curve")
        assert "smooth" not in plain.get_title()
    finally:
        plt.close(figure)
    figure, axes = plt.subplots(figsize=(4, 4), dpi=60)
    try:
        ax = reliability_diagram(
            probabilities, labels, num_bins=10, ax=axes, smooth=True, bootstrap=30, seed=1
        )
        value, sigma = smooth_calibration_error(probabilities, labels, return_bandwidth=True)
        assert f"smooth ECE = {100 * value:.2f} %" in ax.get_title()
        expected = smooth_calibration_curve(
            probabilities, labels, bandwidth=sigma, bootstrap=30, seed=1
        )
        (line,) = [line for line in ax.lines if line.get_label().startswith("smoothed")]
        shown = np.isfinite(line.get_xdata())
        np.testing.assert_allclose(line.get_ydata()[shown], expected.accuracy[shown])
        np.testing.assert_array_equal(shown, expected.density >= 0.01)
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        assert len(bands) == 1 and bands[0].get_label() == "95 % bootstrap band"
        np.testing.assert_array_equal(ax.smooth_curve.low, expected.low)
        legend = [t.get_text() for t in ax.histogram_axes.get_legend().get_texts()]
        assert "95 % bootstrap band" in legend
        with pytest.raises(TypeError, match="smooth"):
            reliability_diagram(probabilities, labels, ax=axes, smooth="yes")
    finally:
        plt.close(figure)
