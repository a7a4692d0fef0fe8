"""Composable learning-rate schedules, evaluated in-graph from the optimizer's step.

Every schedule is a `keras.optimizers.schedules.LearningRateSchedule` written with `keras.ops`
only, so it runs inside the compiled train step on every backend and also accepts a vector of
steps (handy for plotting). Configs hold plain values and nested schedule configs, so a model
compiled with any of them saves to `.keras` and reloads without `custom_objects`.

`Join` composes schedules sequentially (warm-up, then decay, then restarts...), the way optax's
`join_schedules` does; it accepts Keras's own schedules too.

Every schedule treats a step below 0 as step 0 (one `maximum` in the graph), where Keras's own
schedules extrapolate (a linear warm-up would return a negative rate). Clamping rather than
raising: inside the compiled train step the step is the optimizer's counter, a tensor, which a
Python check cannot see and an in-graph assertion would cost a host round trip (and not run
under XLA); a concrete negative number gets the same answer as a traced one; and composed
schedules evaluate every branch of an `ops.where`, including branches at negative offsets.
"""

import math
import numbers

import keras
import numpy as np
from keras import ops

from keras_normkit._validation import check_bool, check_number, check_string_choice

__all__ = ["CyclicalLearningRate", "Join", "NaturalExpDecay", "OneCycle", "Scaled", "Warmup"]

LearningRateSchedule = keras.optimizers.schedules.LearningRateSchedule

_PACKAGE = "keras_normkit"


# --------------------------------------------------------------------------- validation


def _check_schedule_or_value(name, value):
    """A `LearningRateSchedule`, a positive float, or a serialized schedule (a dict)."""
    if isinstance(value, dict):
        value = keras.saving.deserialize_keras_object(value)
    if isinstance(value, LearningRateSchedule):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"`{name}` must be a LearningRateSchedule or a float. Received: {name}={value!r}"
        )
    return check_number(name, value, minimum=0.0)


def _serialize_schedule_or_value(value):
    if isinstance(value, LearningRateSchedule):
        return keras.saving.serialize_keras_object(value)
    return value


def _evaluate(schedule_or_value, step):
    """The value of a schedule (or a constant) at a float `step` tensor, as float32."""
    if isinstance(schedule_or_value, LearningRateSchedule):
        return ops.cast(schedule_or_value(step), "float32")
    return ops.full_like(step, schedule_or_value, dtype="float32")


def _as_step(step):
    """`step` as a float32 tensor, with steps below 0 treated as 0 (see the module docstring).

    No schedule ever extrapolates below its value at step 0 (a linear warm-up would
    otherwise return a negative rate).
    """
    return ops.maximum(ops.cast(ops.convert_to_tensor(step), "float32"), 0.0)


# --------------------------------------------------------------------------- decays


@keras.saving.register_keras_serializable(package=_PACKAGE)
class NaturalExpDecay(LearningRateSchedule):
    """Natural exponential decay: `lr(step) = initial_learning_rate * exp(-decay_rate * p)`.

    `p = step / decay_steps`, rounded down to an integer when `staircase=True` (the rate then
    drops once every `decay_steps` steps). With `decay_steps=1` this is `lr * e^(-r * step)`.

    Steps below 0 are treated as 0.

    Args:
        initial_learning_rate: The learning rate at step 0, a float >= 0.
        decay_rate: The rate `r >= 0` of the exponential.
        decay_steps: Positive integer, the number of steps one unit of `p` lasts.
        staircase: Whether `p` is rounded down to an integer.

    Example:

    >>> from keras_normkit.schedules import NaturalExpDecay
    >>> schedule = NaturalExpDecay(0.1, decay_rate=0.5, decay_steps=10)
    >>> round(float(schedule(20)), 6)  # 0.1 * exp(-1)
    0.036788

    Reference: the decay schedules of TensorFlow 1 (`tf.train.natural_exp_decay`).
    """

    def __init__(self, initial_learning_rate, decay_rate, decay_steps=1, staircase=False):
        self.initial_learning_rate = check_number(
            "initial_learning_rate", initial_learning_rate, minimum=0.0
        )
        self.decay_rate = check_number("decay_rate", decay_rate, minimum=0.0)
        self.decay_steps = check_number(
            "decay_steps", decay_steps, minimum=0, integer=True, strict_minimum=True
        )
        self.staircase = check_bool("staircase", staircase)

    def __call__(self, step):
        p = _as_step(step) / float(self.decay_steps)
        if self.staircase:
            p = ops.floor(p)
        return self.initial_learning_rate * ops.exp(-self.decay_rate * p)

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_rate": self.decay_rate,
            "decay_steps": self.decay_steps,
            "staircase": self.staircase,
        }


# --------------------------------------------------------------------------- cycles


@keras.saving.register_keras_serializable(package=_PACKAGE)
class CyclicalLearningRate(LearningRateSchedule):
    """Cyclical learning rate (Smith 2017): a triangle wave between two bounds.

    With `cycle = floor(1 + step / (2 * step_size))` and
    `x = |step / step_size - 2 * cycle + 1|`,
    `lr = initial + (maximal - initial) * max(0, 1 - x) * scale`, where `scale` is `1`
    (`"triangular"`), `1 / 2^(cycle - 1)` (`"triangular2"`, the amplitude halves every cycle)
    or `gamma^step` (`"exp_range"`). The rate rises from `initial_learning_rate` to
    `maximal_learning_rate` over `step_size` steps and falls back over the next `step_size`.

    Steps below 0 are treated as 0.

    Args:
        initial_learning_rate: Lower bound of the cycle, a float >= 0.
        maximal_learning_rate: Upper bound of the cycle, a float >= `initial_learning_rate`.
        step_size: Positive integer, half a cycle in steps (Smith suggests 2-10 epochs).
        mode: `"triangular"`, `"triangular2"` or `"exp_range"`.
        gamma: Float in (0, 1], the per-step decay of the amplitude in `"exp_range"` mode
            (ignored by the other modes).

    Example:

    >>> from keras_normkit.schedules import CyclicalLearningRate
    >>> clr = CyclicalLearningRate(1e-3, 1e-2, step_size=100, mode="triangular2")
    >>> [round(float(clr(s)), 6) for s in (0, 100, 200, 300)]
    [0.001, 0.01, 0.001, 0.0055]

    Reference: L. N. Smith, "Cyclical Learning Rates for Training Neural Networks",
    WACV 2017, arXiv:1506.01186.
    """

    MODES = ("triangular", "triangular2", "exp_range")

    def __init__(
        self,
        initial_learning_rate,
        maximal_learning_rate,
        step_size,
        mode="triangular",
        gamma=1.0,
    ):
        self.initial_learning_rate = check_number(
            "initial_learning_rate", initial_learning_rate, minimum=0.0
        )
        self.maximal_learning_rate = check_number(
            "maximal_learning_rate", maximal_learning_rate, minimum=0.0
        )
        if self.maximal_learning_rate < self.initial_learning_rate:
            raise ValueError(
                "`maximal_learning_rate` must be >= `initial_learning_rate`. Received: "
                f"maximal_learning_rate={maximal_learning_rate}, "
                f"initial_learning_rate={initial_learning_rate}"
            )
        self.step_size = check_number(
            "step_size", step_size, minimum=0, integer=True, strict_minimum=True
        )
        self.mode = check_string_choice("mode", mode, self.MODES)
        self.gamma = check_number("gamma", gamma, minimum=0.0, maximum=1.0, strict_minimum=True)

    def __call__(self, step):
        step = _as_step(step)
        cycle = ops.floor(1.0 + step / (2.0 * self.step_size))
        x = ops.abs(step / self.step_size - 2.0 * cycle + 1.0)
        amplitude = self.maximal_learning_rate - self.initial_learning_rate
        if self.mode == "triangular":
            scale = 1.0
        elif self.mode == "triangular2":
            scale = ops.power(2.0, 1.0 - cycle)
        else:
            scale = ops.exp(step * math.log(self.gamma))  # gamma^step, log in float64
        return self.initial_learning_rate + amplitude * ops.maximum(0.0, 1.0 - x) * scale

    def get_config(self):
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "maximal_learning_rate": self.maximal_learning_rate,
            "step_size": self.step_size,
            "mode": self.mode,
            "gamma": self.gamma,
        }


@keras.saving.register_keras_serializable(package=_PACKAGE)
class OneCycle(LearningRateSchedule):
    """One-cycle policy: anneal up to `maximal_learning_rate`, then far below the start.

    With `initial = maximal / initial_divisor`, `final = initial / final_divisor` and
    `w = warmup_fraction * total_steps`, the rate anneals from `initial` to `maximal` over
    steps `[0, w]` and from `maximal` to `final` over `[w, total_steps]`; it stays at `final`
    afterwards. Annealing from `a` to `b` over a fraction `f` of a phase is
    `b + (a - b) * (1 + cos(pi * f)) / 2` (`"cosine"`) or `a + (b - a) * f` (`"linear"`).
    The divisors follow PyTorch's `OneCycleLR` (`div_factor`, `final_div_factor`).

    Cyclical momentum: `momentum(step)` anneals against the rate, as PyTorch's
    `OneCycleLR(cycle_momentum=True)` does, in this schedule's phases and annealing: from
    `max_momentum` down to `base_momentum` over `[0, w]` (while the rate rises), back up to
    `max_momentum` over `[w, total_steps]`, and `max_momentum` afterwards. (PyTorch ends its
    phases at steps `w - 1` and `total_steps - 1`; this schedule at `w` and `total_steps`,
    for the rate and the momentum alike.) The rate is the schedule's value in the compiled
    train step; the momentum reaches the optimizer through the callback
    `keras_normkit.callbacks.MomentumSchedule(schedule)`, which writes it into SGD's
    `momentum` or an Adam-family `beta_1` before every step.

    Steps below 0 are treated as 0.

    Args:
        maximal_learning_rate: The peak rate, a float > 0.
        total_steps: Positive integer, the length of the cycle in steps.
        warmup_fraction: Float in (0, 1), the fraction of `total_steps` spent rising.
        initial_divisor: Float >= 1, `maximal / initial`.
        final_divisor: Float >= 1, `initial / final`.
        annealing: `"cosine"` or `"linear"`.
        base_momentum: Float in [0, 1], the momentum at the peak rate. Default: `0.85`
            (PyTorch's).
        max_momentum: Float in [`base_momentum`, 1], the momentum at the ends of the
            cycle. Default: `0.95` (PyTorch's).

    Example:

    >>> from keras_normkit.schedules import OneCycle
    >>> schedule = OneCycle(0.1, total_steps=1000)
    >>> [round(float(schedule(s)), 7) for s in (0, 300, 1000)]
    [0.004, 0.1, 4e-07]
    >>> [round(schedule.momentum(s), 4) for s in (0, 150, 300, 650, 1000)]
    [0.95, 0.9, 0.85, 0.9, 0.95]

    Reference: L. N. Smith, "A disciplined approach to neural network hyper-parameters",
    arXiv:1803.09820, 2018; Smith & Topin, "Super-Convergence", arXiv:1708.07120.
    """

    ANNEALINGS = ("cosine", "linear")

    def __init__(
        self,
        maximal_learning_rate,
        total_steps,
        warmup_fraction=0.3,
        initial_divisor=25.0,
        final_divisor=1e4,
        annealing="cosine",
        base_momentum=0.85,
        max_momentum=0.95,
    ):
        self.maximal_learning_rate = check_number(
            "maximal_learning_rate", maximal_learning_rate, minimum=0.0, strict_minimum=True
        )
        self.total_steps = check_number(
            "total_steps", total_steps, minimum=0, integer=True, strict_minimum=True
        )
        self.warmup_fraction = check_number(
            "warmup_fraction", warmup_fraction, 0.0, 1.0, strict_minimum=True, strict_maximum=True
        )
        self.initial_divisor = check_number("initial_divisor", initial_divisor, minimum=1.0)
        self.final_divisor = check_number("final_divisor", final_divisor, minimum=1.0)
        self.annealing = check_string_choice("annealing", annealing, self.ANNEALINGS)
        self.base_momentum = check_number("base_momentum", base_momentum, 0.0, 1.0)
        self.max_momentum = check_number("max_momentum", max_momentum, 0.0, 1.0)
        if self.max_momentum < self.base_momentum:
            raise ValueError(
                "`max_momentum` must be >= `base_momentum` (the momentum falls while the "
                f"rate rises). Received: base_momentum={base_momentum}, "
                f"max_momentum={max_momentum}"
            )

    def _anneal(self, start, end, fraction):
        # Both forms are exact at fraction 0 and 1 in float32: (1 + cos(pi f)) / 2 is written
        # cos(pi f / 2)^2 and the linear blend weights the two ends.
        if self.annealing == "cosine":
            weight = ops.square(ops.cos(0.5 * math.pi * fraction))
        else:
            weight = 1.0 - fraction
        return start * weight + end * (1.0 - weight)

    def __call__(self, step):
        step = ops.clip(_as_step(step), 0.0, float(self.total_steps))
        peak = self.maximal_learning_rate
        initial = peak / self.initial_divisor
        final = initial / self.final_divisor
        warmup = self.warmup_fraction * self.total_steps
        rising = self._anneal(initial, peak, ops.minimum(step / warmup, 1.0))
        falling = self._anneal(
            peak, final, ops.maximum(step - warmup, 0.0) / (self.total_steps - warmup)
        )
        value = ops.where(step <= warmup, rising, falling)
        # Exactly `final` from `total_steps` on (XLA may divide through a reciprocal).
        return ops.where(step >= self.total_steps, final, value)

    def get_config(self):
        return {
            "maximal_learning_rate": self.maximal_learning_rate,
            "total_steps": self.total_steps,
            "warmup_fraction": self.warmup_fraction,
            "initial_divisor": self.initial_divisor,
            "final_divisor": self.final_divisor,
            "annealing": self.annealing,
            "base_momentum": self.base_momentum,
            "max_momentum": self.max_momentum,
        }

    def momentum(self, step):
        """The cyclical momentum at `step` (a number or an array of steps), in float64.

        `max_momentum -> base_momentum` over the rising phase `[0, w]`,
        `base_momentum -> max_momentum` over `[w, total_steps]`, with this schedule's
        annealing; `max_momentum` from `total_steps` on; steps below 0 as 0. Evaluated on
        the host (NumPy): `MomentumSchedule` writes it into the optimizer before each step.
        """
        step = np.clip(np.asarray(step, dtype="float64"), 0.0, float(self.total_steps))
        warmup = self.warmup_fraction * self.total_steps
        high, low = self.max_momentum, self.base_momentum

        def anneal(start, end, fraction):
            if self.annealing == "cosine":
                weight = np.cos(0.5 * math.pi * fraction) ** 2
            else:
                weight = 1.0 - fraction
            return start * weight + end * (1.0 - weight)

        falling = anneal(high, low, np.minimum(step / warmup, 1.0))
        rising = anneal(low, high, np.maximum(step - warmup, 0.0) / (self.total_steps - warmup))
        value = np.where(step <= warmup, falling, rising)
        value = np.where(step >= self.total_steps, high, value)
        return float(value) if value.ndim == 0 else value


# --------------------------------------------------------------------------- composition


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Warmup(LearningRateSchedule):
    """Warm-up: ramp from `initial_learning_rate` to a schedule's start, then follow it.

    Let `target` be `schedule_or_value` at step 0 (or the value itself). For
    `step < warmup_steps`, with `f = step / warmup_steps`, the rate is
    `initial + (target - initial) * f` (`"linear"`) or `initial * (target / initial)^f`
    (`"exponential"`, needs `initial_learning_rate > 0`); from `warmup_steps` on it is
    `schedule(step - warmup_steps)`: the wrapped schedule starts when the warm-up ends, so
    the rate is continuous.

    Steps below 0 are treated as 0.

    Args:
        schedule_or_value: A `LearningRateSchedule` (ours or Keras's) or a float.
        warmup_steps: Positive integer, the length of the ramp.
        initial_learning_rate: The rate at step 0, a float >= 0.
        shape: `"linear"` or `"exponential"`.

    Example:

    >>> import keras
    >>> from keras_normkit.schedules import Warmup
    >>> decay = keras.optimizers.schedules.CosineDecay(0.1, decay_steps=1000)
    >>> schedule = Warmup(decay, warmup_steps=100)
    >>> [round(float(schedule(s)), 4) for s in (0, 50, 100, 1100)]
    [0.0, 0.05, 0.1, 0.0]

    Reference: Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
    arXiv:1706.02677, 2017 (gradual warm-up).
    """

    SHAPES = ("linear", "exponential")

    def __init__(self, schedule_or_value, warmup_steps, initial_learning_rate=0.0, shape="linear"):
        self.schedule_or_value = _check_schedule_or_value("schedule_or_value", schedule_or_value)
        self.warmup_steps = check_number(
            "warmup_steps", warmup_steps, minimum=0, integer=True, strict_minimum=True
        )
        self.initial_learning_rate = check_number(
            "initial_learning_rate", initial_learning_rate, minimum=0.0
        )
        self.shape = check_string_choice("shape", shape, self.SHAPES)
        if self.shape == "exponential" and self.initial_learning_rate <= 0.0:
            raise ValueError(
                "`shape='exponential'` needs `initial_learning_rate > 0`. "
                f"Received: initial_learning_rate={initial_learning_rate}"
            )

    def __call__(self, step):
        step = _as_step(step)
        after = _evaluate(self.schedule_or_value, ops.maximum(step - self.warmup_steps, 0.0))
        target = _evaluate(self.schedule_or_value, ops.zeros_like(step))
        fraction = ops.minimum(step / self.warmup_steps, 1.0)
        initial = self.initial_learning_rate
        if self.shape == "linear":
            ramp = initial + (target - initial) * fraction
        else:
            ramp = initial * ops.power(target / initial, fraction)
        return ops.where(step < self.warmup_steps, ramp, after)

    def get_config(self):
        return {
            "schedule_or_value": _serialize_schedule_or_value(self.schedule_or_value),
            "warmup_steps": self.warmup_steps,
            "initial_learning_rate": self.initial_learning_rate,
            "shape": self.shape,
        }


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Join(LearningRateSchedule):
    """Sequential composition: `schedules[i]` runs from `boundaries[i - 1]` on.

    `lr(step) = schedules[i](step - boundaries[i - 1])` for
    `boundaries[i - 1] <= step < boundaries[i]` (with `boundaries[-1] = 0`): each schedule
    sees the steps since its own boundary, as in optax's `join_schedules`. Floats stand for
    constant rates, and Keras's schedules (`CosineDecay`, `ExponentialDecay`, ...) compose
    as well as ours. Continuity at a boundary is up to the pieces (e.g. `Warmup` to a value
    followed by a decay that starts at that value).

    Steps below 0 are treated as 0.

    Args:
        schedules: A list of `LearningRateSchedule`s or floats, at least one.
        boundaries: Strictly increasing positive integers, one fewer than `schedules`.

    Example:

    >>> import keras
    >>> from keras_normkit.schedules import Join, Warmup
    >>> schedule = Join(
    ...     [Warmup(0.1, warmup_steps=100),
    ...      keras.optimizers.schedules.CosineDecay(0.1, decay_steps=900)],
    ...     boundaries=[100],
    ... )
    >>> [round(float(schedule(s)), 4) for s in (50, 100, 550, 1000)]
    [0.05, 0.1, 0.05, 0.0]

    Reference: optax `join_schedules` (google-deepmind/optax); SGDR restarts are a `Join` of
    cosine decays (Loshchilov & Hutter, arXiv:1608.03983).
    """

    def __init__(self, schedules, boundaries):
        if not isinstance(schedules, (list, tuple)) or not schedules:
            raise ValueError(
                f"`schedules` must be a non-empty list. Received: schedules={schedules!r}"
            )
        self.schedules = [
            _check_schedule_or_value(f"schedules[{i}]", s) for i, s in enumerate(schedules)
        ]
        if not isinstance(boundaries, (list, tuple)):
            raise TypeError(f"`boundaries` must be a list. Received: boundaries={boundaries!r}")
        if len(boundaries) != len(schedules) - 1:
            raise ValueError(
                "`boundaries` must have one entry fewer than `schedules`. Received: "
                f"{len(schedules)} schedules and boundaries={list(boundaries)}"
            )
        self.boundaries = [
            check_number(f"boundaries[{i}]", b, minimum=0, integer=True, strict_minimum=True)
            for i, b in enumerate(boundaries)
        ]
        if any(b >= c for b, c in zip(self.boundaries[:-1], self.boundaries[1:], strict=True)):
            raise ValueError(
                f"`boundaries` must be strictly increasing. Received: boundaries={boundaries!r}"
            )

    def __call__(self, step):
        step = _as_step(step)
        value = _evaluate(self.schedules[0], step)
        for boundary, schedule in zip(self.boundaries, self.schedules[1:], strict=True):
            later = _evaluate(schedule, ops.maximum(step - boundary, 0.0))
            value = ops.where(step >= boundary, later, value)
        return value

    def get_config(self):
        return {
            "schedules": [_serialize_schedule_or_value(s) for s in self.schedules],
            "boundaries": list(self.boundaries),
        }


@keras.saving.register_keras_serializable(package=_PACKAGE)
class Scaled(LearningRateSchedule):
    """A schedule times a multiplier held in a variable: `lr(step) = multiplier * schedule(step)`.

    `keras_normkit.callbacks.ReduceLROnPlateau` and `DivergenceGuard` wrap an optimizer's
    schedule in `Scaled` to lower its rate: they change the multiplier variable, which the
    compiled train step reads at every step, so no retracing is needed. The config stores
    the multiplier's current value, so a saved model reloads with the reduced rate.

    Steps below 0 are treated as 0.

    Args:
        schedule: A `LearningRateSchedule` (or a float, for a constant rate).
        multiplier: The initial multiplier, a float >= 0.

    Example:

    >>> from keras_normkit.schedules import CyclicalLearningRate, Scaled
    >>> schedule = Scaled(CyclicalLearningRate(0.01, 0.1, step_size=10), multiplier=0.5)
    >>> round(float(schedule(10)), 6)
    0.05
    """

    def __init__(self, schedule, multiplier=1.0):
        self.schedule = _check_schedule_or_value("schedule", schedule)
        multiplier = check_number("multiplier", multiplier, minimum=0.0)
        self.multiplier = keras.Variable(
            multiplier, dtype="float32", trainable=False, name="learning_rate_multiplier"
        )

    def __call__(self, step):
        step = _as_step(step)
        return ops.cast(self.multiplier, "float32") * _evaluate(self.schedule, step)

    def get_config(self):
        return {
            "schedule": _serialize_schedule_or_value(self.schedule),
            "multiplier": float(ops.convert_to_numpy(self.multiplier)),
        }
