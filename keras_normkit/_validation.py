"""Argument checks shared by the whole package: one convention for every error message.

A value of the wrong type raises `TypeError`, a value of the right type outside its range
(or not finite) raises `ValueError`; both name the argument, say what was expected and
show what was received, e.g. "`units` must be an integer >= 1. Received: units=0".
"""

import math
import numbers


def _interval(minimum, maximum, strict_minimum, strict_maximum):
    if minimum is not None and maximum is not None:
        left, right = "(" if strict_minimum else "[", ")" if strict_maximum else "]"
        return f" in {left}{minimum}, {maximum}{right}"
    if minimum is not None:
        return f" {'>' if strict_minimum else '>='} {minimum}"
    if maximum is not None:
        return f" {'<' if strict_maximum else '<='} {maximum}"
    return ""


def check_number(
    name,
    value,
    minimum=None,
    maximum=None,
    *,
    strict_minimum=False,
    strict_maximum=False,
    integer=False,
):
    """`value` as a finite `float` (or `int` with `integer=True`) within the given bounds.

    Bools are rejected (they are ints in Python but never meant as numbers here). With
    `integer=True`, integral floats such as `10.0` are accepted and returned as `int`.
    """
    expected = ("an integer" if integer else "a number") + _interval(
        minimum, maximum, strict_minimum, strict_maximum
    )
    message = f"`{name}` must be {expected}. Received: {name}={value!r}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{message} of type {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(message)
    if integer and not float(value).is_integer():
        raise TypeError(message)
    too_small = minimum is not None and (value <= minimum if strict_minimum else value < minimum)
    too_large = maximum is not None and (value >= maximum if strict_maximum else value > maximum)
    if too_small or too_large:
        raise ValueError(message)
    return int(value) if integer else float(value)


def check_int(name, value, minimum=None, maximum=None):
    """`value`, an `int` (not a float, not a bool), in `[minimum, maximum]` (bounds optional).

    For sizes and counts, where `2.0` is more likely a bug than a choice.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        expected = "an integer" + _interval(minimum, maximum, False, False)
        raise TypeError(
            f"`{name}` must be {expected}. Received: {name}={value!r} "
            f"of type {type(value).__name__}"
        )
    return check_number(name, value, minimum, maximum, integer=True)


def check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be a Python bool. Received: {name}={value!r}")
    return value


def check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"`{name}` must be one of {', '.join(repr(c) for c in choices)}. "
            f"Received: {name}={value!r}"
        )
    return value


def check_string_choice(name, value, choices):
    """`value`, one of the strings `choices`: `TypeError` for a non-string, else `check_choice`.

    For options named by a string (`mode="min"`), where `mode=1` is a wrong type rather
    than a wrong value.
    """
    if not isinstance(value, str):
        raise TypeError(
            f"`{name}` must be one of {', '.join(repr(c) for c in choices)}. "
            f"Received: {name}={value!r} of type {type(value).__name__}"
        )
    return check_choice(name, value, choices)


def check_seed(seed, name="seed"):
    """An optional integer seed (`None` or an `int`)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise TypeError(f"`{name}` must be an integer or None. Received: {name}={seed!r}")
    return None if seed is None else int(seed)


def check_fixed_point(name, value):
    """A SELU fixed point `(mean, variance)`: any length-2 sequence of finite numbers.

    Tuples, lists and NumPy arrays are accepted (what `SELU(fixed_point=...)` takes); the
    variance must be > 0. Returns `(mean, variance)` as Python floats.
    """
    expected = "a pair of numbers (mean, variance), e.g. (0.0, 1.0)"
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(
            f"`{name}` must be {expected}. Received: {name}={value!r} "
            f"of type {type(value).__name__}"
        )
    try:
        items = list(value)
    except TypeError:  # a 0-d array has __iter__ but cannot be iterated
        raise TypeError(
            f"`{name}` must be {expected}. Received: {name}={value!r} "
            f"of type {type(value).__name__}"
        ) from None
    if len(items) != 2:
        raise ValueError(
            f"`{name}` must be {expected}. Received: {name}={value!r} "
            f"({len(items)} entr{'y' if len(items) == 1 else 'ies'})"
        )
    for item in items:
        if isinstance(item, bool) or not isinstance(item, numbers.Real):
            raise TypeError(
                f"`{name}` must be {expected}. Received: {name}={value!r} with an entry "
                f"of type {type(item).__name__}"
            )
    mean, variance = float(items[0]), float(items[1])
    if not (math.isfinite(mean) and math.isfinite(variance)) or variance <= 0:
        raise ValueError(
            f"`{name}` must be (mean, variance) with finite values and variance > 0. "
            f"Received: {name}={value!r}"
        )
    return mean, variance
