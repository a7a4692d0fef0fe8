"""keras_normkit.plotting: the plotted data are the schedule values and recorded statistics."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from keras_normkit.plotting import plot_activation_statistics, plot_schedules  # noqa: E402
from keras_normkit.schedules import CyclicalLearningRate, OneCycle  # noqa: E402


def test_plot_schedules_draws_the_schedule_values():
    schedules = {"clr": CyclicalLearningRate(0.01, 0.1, 10), "one": OneCycle(0.1, 50)}
    figure = plot_schedules(schedules, total_steps=50, log_scale=True)
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["clr", "one"]
    steps = np.arange(50, dtype="float32")
    for line, schedule in zip(lines, schedules.values(), strict=True):
        np.testing.assert_allclose(line.get_ydata(), np.asarray(schedule(steps)), rtol=1e-6)
    assert figure.axes[0].get_yscale() == "log"
    plt.close(figure)
    with pytest.raises(ValueError, match=r"`total_steps` must be an integer >= 1\. Received"):
        plot_schedules(schedules, total_steps=0)
    with pytest.raises(TypeError, match=r"total_steps=50\.0 of type float"):
        plot_schedules(schedules, total_steps=50.0)
    plt.close(plot_schedules(schedules, total_steps=np.int64(5)))  # NumPy integers are ints


def test_plot_activation_statistics_draws_each_layer():
    stats = {
        "epochs": [0, 1, 2],
        "history": {
            name: {
                "mean": [0.0, 0.1, 0.2],
                "variance": [1.0, 1.0, 4.0],
                "p15": [-1.0, -1.0, -1.0],
                "p50": [0.0, 0.1, 0.2],
                "p85": [1.0, 1.2, 1.4],
            }
            for name in ("a", "b", "c", "d")
        },
    }
    figure = plot_activation_statistics(stats, layers=["a", "c"], ncols=2)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["a", "c"]
    lines = {line.get_label(): line for line in visible[0].get_lines()}
    np.testing.assert_allclose(lines["p85"].get_ydata(), [1.0, 1.2, 1.4])
    np.testing.assert_allclose(lines["mean"].get_ydata(), [0.0, 0.1, 0.2])
    plt.close(figure)
    with pytest.raises(ValueError, match="'x'"):
        plot_activation_statistics(stats, layers=["x"])
    with pytest.raises(ValueError, match="no recorded"):
        plot_activation_statistics({"epochs": [], "history": {}})
    with pytest.raises(ValueError, match=r"`ncols` must be an integer >= 1\. Received: ncols=0"):
        plot_activation_statistics(stats, ncols=0)
    with pytest.raises(TypeError, match="ncols"):
        plot_activation_statistics(stats, ncols=1.5)


def test_plot_gradient_statistics_draws_depth_and_epoch_profiles():
    from keras_normkit.plotting import plot_gradient_statistics

    history = {
        "h0": {"output_grad_std": [1e-4, 2e-4, 3e-4], "saturation": [0.5, 0.4, 0.3]},
        "h1": {"output_grad_std": [1e-3, 1e-3, 2e-3], "saturation": [0.1, 0.2, 0.2]},
    }
    figure = plot_gradient_statistics({"epochs": [0, 1, 2], "history": history})
    by_depth, by_epoch, sat_depth, _ = figure.axes
    assert len(figure.axes) == 4 and by_depth.get_yscale() == "log"
    assert sat_depth.get_yscale() == "linear"
    np.testing.assert_allclose(by_depth.lines[2].get_ydata(), [3e-4, 2e-3])  # epoch 2
    np.testing.assert_allclose(by_epoch.lines[1].get_ydata(), [1e-3, 1e-3, 2e-3])  # h1
    with pytest.raises(ValueError, match="Unknown statistics"):
        plot_gradient_statistics({"epochs": [0], "history": history}, stats=["grad_norm"])
    with pytest.raises(ValueError, match="Unknown layers"):
        plot_gradient_statistics({"epochs": [0], "history": history}, layers=["x"])
    plt.close("all")
