"""calibration_report (`metrics/report.py`, `_bootstrap.py`): point values equal the functions, intervals equal a loop bootstrap."""

import json

import numpy as np
import pytest

from keras_normkit.calibration import (
    area_under_risk_coverage,
    brier_score,
    calibration_report,
    classwise_expected_calibration_error,
    debiased_calibration_error,
    expected_calibration_error,
    smooth_calibration_error,
)
from keras_normkit.calibration._bootstrap import CHUNK_ENTRIES


def random_problem(seed, n, k=4, shift=0.1):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2.5
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    q = (1 - shift) * p + shift / k
    return p, (q.cumsum(1) > rng.random((n, 1))).argmax(1)


FUNCTIONS = {
    "accuracy": lambda p, y: float(np.mean(p.argmax(1) == y)),
    "ece": expected_calibration_error,
    "ece_equal_mass": lambda p, y: expected_calibration_error(p, y, binning="equal_mass"),
    "debiased_ce": debiased_calibration_error,
    "smooth_ece": smooth_calibration_error,
    "classwise_ece": classwise_expected_calibration_error,
    "brier": brier_score,
    "aurc": area_under_risk_coverage,
}


@pytest.mark.parametrize("ties", [False, True])
def test_values_and_intervals_equal_the_functions_on_explicit_resamples(ties):
    p, y = random_problem(0, 150)
    if ties:
        p = np.round(p * 8) / 8
        p[:, 0] += 1 - p.sum(1)
        p = np.abs(p) / np.abs(p).sum(1, keepdims=True)
    report = calibration_report(p, y, bootstrap=30, seed=7, confidence_level=0.9)
    # The bootstrap draws n indices per resample from default_rng(seed), the examples
    # sorted by confidence (a stable sort).
    order = np.argsort(p.max(1), kind="stable")
    draws = np.random.default_rng(7).integers(0, 150, size=(30, 150))
    for key, function in FUNCTIONS.items():
        assert report[key].value == pytest.approx(function(p, y), abs=1e-12), key
        resampled = [function(p[order][d], y[order][d]) for d in draws]
        low, high = np.percentile(resampled, [5, 95])
        assert report[key].low == pytest.approx(low, abs=1e-9), key
        assert report[key].high == pytest.approx(high, abs=1e-9), key


def test_seeded_chunked_and_printable():
    p, y = random_problem(1, 3000, k=3)
    import keras_normkit.calibration._bootstrap as module

    report = calibration_report(p, y, bootstrap=40, seed=3)
    assert report.as_dict() == calibration_report(p, y, bootstrap=40, seed=3).as_dict()
    assert report.as_dict() != calibration_report(p, y, bootstrap=40, seed=4).as_dict()
    # Drawing the resamples in several chunks gives the same intervals as in one.
    original = module.CHUNK_ENTRIES
    try:
        module.CHUNK_ENTRIES = 3000 * 7
        chunked = calibration_report(p, y, bootstrap=40, seed=3)
    finally:
        module.CHUNK_ENTRIES = original
    assert CHUNK_ENTRIES == original
    for key in FUNCTIONS:
        assert report[key].value == chunked[key].value
    text = str(report)
    assert "smooth ECE" in text and "95 % interval" in text and "n = 3000" in text
    ece = report["ece"]
    assert f"[{ece.low:.4f}, {ece.high:.4f}]" in text
    markdown = report.to_markdown()
    assert markdown.splitlines()[1] == "|---|---:|---:|"
    assert len(markdown.splitlines()) == 2 + len(FUNCTIONS) + 2
    data = json.loads(json.dumps(report.as_dict()))
    assert set(data) == {*FUNCTIONS, "settings"}
    assert data["settings"]["bootstrap"] == 40
    assert all(data[key]["low"] <= data[key]["high"] for key in FUNCTIONS)
    # Without resamples: point values only.
    plain = calibration_report(p, y, bootstrap=0)
    assert np.isnan(plain["ece"].low) and "n/a" in str(plain)


def test_bad_arguments():
    p, y = random_problem(2, 20)
    for kwargs, error in [
        ({"bootstrap": -1}, ValueError),
        ({"bootstrap": 1.5}, TypeError),
        ({"seed": "0"}, TypeError),
        ({"num_bins": 0}, ValueError),
        ({"confidence_level": 1.0}, ValueError),
    ]:
        with pytest.raises(error):
            calibration_report(p, y, **kwargs)
    with pytest.raises(ValueError, match="labels"):
        calibration_report(p, y[:5])
