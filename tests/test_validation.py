"""The shared argument checks: TypeError for wrong types, ValueError for wrong values."""

import math

import numpy as np
import pytest

from keras_normkit._validation import (
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_seed,
    check_string_choice,
)


def test_check_number_bounds_and_message():
    assert check_number("x", 0.5, 0.0, 1.0) == 0.5
    assert check_number("x", 0, 0.0) == 0.0 and type(check_number("x", 3)) is float
    assert check_number("x", np.float32(0.25), 0.0, 1.0) == 0.25
    with pytest.raises(
        ValueError, match=r"^`x` must be a number in \(0.0, 1.0\]\. Received: x=0.0$"
    ):
        check_number("x", 0.0, 0.0, 1.0, strict_minimum=True)
    with pytest.raises(ValueError, match=r"`x` must be a number in \[0.0, 1.0\)\. Received: x=1.0"):
        check_number("x", 1.0, 0.0, 1.0, strict_maximum=True)
    with pytest.raises(ValueError, match=r"`x` must be a number >= 2\. Received: x=1.5"):
        check_number("x", 1.5, 2)
    with pytest.raises(ValueError, match=r"`x` must be a number <= 2\. Received: x=3"):
        check_number("x", 3, maximum=2)
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="Received: x="):
            check_number("x", bad)
    for bad in ("1", None, True, [1.0]):
        with pytest.raises(TypeError, match=r"`x` must be a number\. Received: x="):
            check_number("x", bad)


def test_integer_checks():
    assert check_number("steps", 10.0, 0, integer=True) == 10
    assert type(check_number("steps", 10.0, 0, integer=True)) is int
    with pytest.raises(TypeError, match="`steps` must be an integer"):
        check_number("steps", 10.5, integer=True)
    assert check_int("units", np.int64(4), 1) == 4 and type(check_int("units", np.int64(4))) is int
    with pytest.raises(ValueError, match=r"`units` must be an integer >= 1\. Received: units=0"):
        check_int("units", 0, 1)
    with pytest.raises(ValueError, match=r"`k` must be an integer in \[1, 3\]\. Received: k=4"):
        check_int("k", 4, 1, 3)
    for bad in (2.0, True, "4"):  # sizes and counts must be ints, not floats or bools
        with pytest.raises(TypeError, match="`units` must be an integer >= 1.*of type"):
            check_int("units", bad, 1)


def test_bool_choice_seed():
    assert check_bool("flag", False) is False
    with pytest.raises(TypeError, match=r"`flag` must be a Python bool\. Received: flag=1"):
        check_bool("flag", 1)
    assert check_choice("mode", "min", ("min", "max")) == "min"
    with pytest.raises(
        ValueError, match=r"`mode` must be one of 'min', 'max'\. Received: mode='up'"
    ):
        check_choice("mode", "up", ("min", "max"))
    assert check_string_choice("mode", "max", ("min", "max")) == "max"
    with pytest.raises(
        ValueError, match=r"^`mode` must be one of 'min', 'max'\. Received: mode='up'$"
    ):
        check_string_choice("mode", "up", ("min", "max"))
    for bad in (1, None, b"min", ["min"]):  # not a string: a wrong type, not a wrong value
        with pytest.raises(
            TypeError, match=r"^`mode` must be one of 'min', 'max'\. Received: mode=.* of type "
        ):
            check_string_choice("mode", bad, ("min", "max"))
    assert check_seed(None) is None and check_seed(np.int32(3)) == 3
    for bad in (1.5, True, "0"):
        with pytest.raises(TypeError, match="`seed` must be an integer or None"):
            check_seed(bad)
