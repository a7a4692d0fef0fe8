"""coverage, average_set_size and classwise_coverage against plain loops."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit.uncertainty import average_set_size, classwise_coverage, coverage


@given(st.integers(0, 10_000))
def test_against_loops(seed):
    rng = np.random.default_rng(seed)
    sets = rng.random((40, 5)) < 0.4
    y = rng.integers(0, 5, 40)
    assert coverage(sets, y) == pytest.approx(np.mean([sets[i, y[i]] for i in range(40)]))
    assert average_set_size(sets) == pytest.approx(np.mean([sets[i].sum() for i in range(40)]))
    per_class = classwise_coverage(sets, y)
    for c in range(5):
        rows = [i for i in range(40) if y[i] == c]
        if rows:
            assert per_class[c] == pytest.approx(np.mean([sets[i, c] for i in rows]))
        else:
            assert np.isnan(per_class[c])
    assert coverage(sets.astype(int), y) == coverage(sets, y)


def test_errors():
    with pytest.raises(ValueError, match="boolean mask"):
        coverage(np.full((2, 3), 0.5), [0, 1])
    with pytest.raises(ValueError, match=r"in \[0, 2\]"):
        coverage(np.ones((2, 3), bool), [0, 3])
    with pytest.raises(ValueError, match="shape"):
        average_set_size(np.ones(3, bool))
