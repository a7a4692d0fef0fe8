"""keras_normkit.schedules: values against NumPy formulas, composition, serialization, errors."""

import inspect
import math

import keras
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keras_normkit import schedules
from keras_normkit.schedules import (
    CyclicalLearningRate,
    Join,
    NaturalExpDecay,
    OneCycle,
    Scaled,
    Warmup,
)
from tests.conftest import requires_xla

STEPS = np.arange(10_000)


def values(schedule, steps=STEPS):
    return keras.ops.convert_to_numpy(schedule(steps.astype("float32"))).astype("float64")


# --------------------------------------------------------------------------- NumPy references


def natural_exp_reference(lr, rate, decay_steps, staircase, step):
    p = step / decay_steps
    if staircase:
        p = np.floor(p)
    return lr * np.exp(-rate * p)


def tfa_cyclical(initial, maximal, step_size, mode, gamma, step):
    """TF-Addons' published `CyclicalLearningRate.__call__` (tfa.optimizers), in NumPy."""
    scale_fn = {
        "triangular": (lambda x: 1.0, "cycle"),
        "triangular2": (lambda x: 1.0 / (2.0 ** (x - 1)), "cycle"),
        "exp_range": (lambda x: gamma**x, "iterations"),
    }[mode]
    cycle = np.floor(1 + step / (2 * step_size))
    x = np.abs(step / step_size - 2 * cycle + 1)
    mode_step = cycle if scale_fn[1] == "cycle" else step
    return initial + (maximal - initial) * np.maximum(0, 1 - x) * scale_fn[0](mode_step)


def triangle_wave(initial, maximal, step_size, mode, gamma, step):
    """Smith's triangle built geometrically: position in the cycle, rising then falling."""
    period = 2 * step_size
    position = np.mod(step, period)
    height = np.where(position < step_size, position / step_size, 2 - position / step_size)
    index = np.floor_divide(step, period)  # 0 for the first cycle
    amplitude = (maximal - initial) * {
        "triangular": np.ones_like(step, dtype="float64"),
        "triangular2": 0.5**index,
        "exp_range": gamma ** step.astype("float64"),
    }[mode]
    return initial + amplitude * height


def one_cycle_reference(peak, total, fraction, div0, div1, annealing, step):
    initial = peak / div0
    final = initial / div1
    warm = fraction * total
    out = np.empty_like(step, dtype="float64")
    for i, s in enumerate(np.minimum(step, total)):
        if s <= warm:
            a, b, f = initial, peak, s / warm
        else:
            a, b, f = peak, final, (s - warm) / (total - warm)
        if annealing == "cosine":
            out[i] = b + (a - b) * (1 + math.cos(math.pi * f)) / 2
        else:
            out[i] = a + (b - a) * f
    return out


# --------------------------------------------------------------------------- values


def _natural_exp_decay_matches_formula():
    for decay_steps, rate in ((1, 3e-4), (700, 0.4)):
        for staircase in (False, True):
            schedule = NaturalExpDecay(0.1, rate, decay_steps=decay_steps, staircase=staircase)
            expected = natural_exp_reference(0.1, rate, decay_steps, staircase, STEPS)
            np.testing.assert_allclose(values(schedule), expected, rtol=2e-5, atol=1e-9)


CYCLICAL_CASES = [
    ("triangular", 1.0, 250),
    ("triangular2", 1.0, 400),
    ("exp_range", 0.9997, 333),
]


def _cyclical_matches_tf_addons_and_geometric_formulas():
    for mode, gamma, step_size in CYCLICAL_CASES:
        schedule = CyclicalLearningRate(1e-3, 1e-2, step_size=step_size, mode=mode, gamma=gamma)
        got = values(schedule)
        args = (1e-3, 1e-2, step_size, mode, gamma, STEPS)
        # float32 steps: |error| <= ~2e-6 of the amplitude, far below any formula mistake.
        np.testing.assert_allclose(got, tfa_cyclical(*args), rtol=1e-5, atol=5e-8, err_msg=mode)
        np.testing.assert_allclose(got, triangle_wave(*args), rtol=1e-5, atol=5e-8, err_msg=mode)


def _cyclical_hand_values():
    tri2 = CyclicalLearningRate(0.0, 1.0, step_size=10, mode="triangular2")
    # Peaks at 10, 30, 50 with heights 1, 1/2, 1/4; valleys at 0, 20, 40.
    got = values(tri2, np.array([0, 5, 10, 15, 20, 30, 40, 50]))
    np.testing.assert_allclose(got, [0, 0.5, 1, 0.5, 0, 0.5, 0, 0.25], atol=1e-7)
    exp = CyclicalLearningRate(0.0, 1.0, step_size=10, mode="exp_range", gamma=0.9)
    np.testing.assert_allclose(values(exp, np.array([10, 30])), [0.9**10, 0.9**30], rtol=1e-5)


def _one_cycle_matches_formula():
    for annealing in ("cosine", "linear"):
        for fraction in (0.3, 0.45):
            schedule = OneCycle(0.2, 9000, warmup_fraction=fraction, annealing=annealing)
            expected = one_cycle_reference(0.2, 9000, fraction, 25.0, 1e4, annealing, STEPS)
            # atol: float32 rounding relative to the peak (0.2 * 2.5e-7).
            np.testing.assert_allclose(values(schedule), expected, rtol=1e-4, atol=5e-8)
            got = values(schedule, np.array([0, int(fraction * 9000), 9000, 9999]))
            final = 0.2 / 25 / 1e4
            np.testing.assert_allclose(got, [0.2 / 25, 0.2, final, final], rtol=1e-4)


def _warmup_matches_formula():
    decay = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1000, decay_rate=0.5)
    for shape in ("linear", "exponential"):
        schedule = Warmup(decay, warmup_steps=800, initial_learning_rate=1e-4, shape=shape)
        f = np.minimum(STEPS / 800, 1.0)
        ramp = 1e-4 + (0.1 - 1e-4) * f if shape == "linear" else 1e-4 * (0.1 / 1e-4) ** f
        after = 0.1 * 0.5 ** (np.maximum(STEPS - 800, 0) / 1000)
        expected = np.where(STEPS < 800, ramp, after)
        np.testing.assert_allclose(values(schedule), expected, rtol=1e-4, atol=1e-9)


def _join_matches_piecewise_formula():
    cosine = keras.optimizers.schedules.CosineDecay(0.1, decay_steps=5000, alpha=0.1)
    schedule = Join([Warmup(0.1, 1000), cosine, 0.01], boundaries=[1000, 6000])
    s = STEPS.astype("float64")
    warm = 0.1 * s / 1000
    cos = 0.1 * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * np.minimum(s - 1000, 5000) / 5000)))
    expected = np.where(s < 1000, warm, np.where(s < 6000, cos, 0.01))
    np.testing.assert_allclose(values(schedule), expected, rtol=1e-4, atol=1e-9)


def _join_restarts_each_piece_at_its_boundary():
    piece = NaturalExpDecay(1.0, 0.01)
    schedule = Join([piece, piece, piece], boundaries=[100, 300])
    got = values(schedule, np.array([0, 99, 100, 299, 300, 350]))
    expected = np.exp(-0.01 * np.array([0, 99, 0, 199, 0, 50]))
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def _scalar_integer_step_matches_vector_evaluation():
    schedule = Join(
        [Warmup(0.05, 37), CyclicalLearningRate(0.01, 0.05, 20, mode="triangular2")], [37]
    )
    steps = np.array([0, 5, 36, 37, 38, 80, 999])
    vector = values(schedule, steps)
    iterations = keras.Variable(0, dtype="int64", trainable=False)
    for step, expected in zip(steps, vector, strict=True):
        iterations.assign(int(step))
        assert float(schedule(iterations)) == pytest.approx(expected, rel=1e-6)


# --------------------------------------------------------------------------- properties


@given(
    initial=st.floats(1e-5, 1e-2),
    ratio=st.floats(1.0, 100.0),
    step_size=st.integers(1, 500),
    mode=st.sampled_from(CyclicalLearningRate.MODES),
    gamma=st.floats(0.99, 1.0),
    step=st.integers(0, 100_000),
)
def test_cyclical_stays_between_its_bounds(initial, ratio, step_size, mode, gamma, step):
    schedule = CyclicalLearningRate(initial, initial * ratio, step_size, mode=mode, gamma=gamma)
    value = float(schedule(step))
    assert initial * (1 - 1e-5) <= value <= initial * ratio * (1 + 1e-5)


@given(
    peak=st.floats(1e-4, 1.0),
    total=st.integers(10, 100_000),
    fraction=st.floats(0.05, 0.95),
    step=st.integers(0, 200_000),
)
def test_one_cycle_positive_and_below_its_peak(peak, total, fraction, step):
    value = float(OneCycle(peak, total, warmup_fraction=fraction)(step))
    assert 0 < value <= peak * (1 + 1e-5)


@given(
    peak=st.floats(1e-4, 1.0),
    warmup=st.integers(1, 5000),
    decay=st.integers(1, 50_000),
    shape=st.sampled_from(["linear", "exponential"]),
)
def test_join_of_warmup_and_cosine_is_continuous(peak, warmup, decay, shape):
    initial = peak / 100
    cosine = keras.optimizers.schedules.CosineDecay(peak, decay_steps=decay)
    schedule = Join([Warmup(peak, warmup, initial, shape=shape), cosine], boundaries=[warmup])
    before, at, after = values(schedule, np.array([warmup - 1, warmup, warmup + 1]))
    assert at == pytest.approx(peak, rel=1e-5)
    # One step of the ramp (at most the whole ramp's height over its last step) and of the
    # cosine (at most pi/2 * peak / decay): no jump at the boundary.
    ramp_step = peak - (initial + (peak - initial) * (warmup - 1) / warmup)
    if shape == "exponential":
        ramp_step = peak * (1 - (initial / peak) ** (1 / warmup))
    assert at - before == pytest.approx(ramp_step, rel=1e-3, abs=1e-7)
    assert 0 <= at - after <= math.pi / 2 * peak / decay + 1e-7


@given(
    multiplier=st.floats(0.0, 2.0),
    step=st.integers(0, 10_000),
)
def test_scaled_multiplies(multiplier, step):
    base = CyclicalLearningRate(0.01, 0.1, 50)
    assert float(Scaled(base, multiplier)(step)) == pytest.approx(
        multiplier * float(base(step)), rel=1e-6, abs=1e-9
    )


# --------------------------------------------------------------------------- serialization

ALL_SCHEDULES = {
    "natural_exp": lambda: NaturalExpDecay(0.05, 0.02, decay_steps=3, staircase=True),
    "cyclical": lambda: CyclicalLearningRate(0.01, 0.1, 7, mode="exp_range", gamma=0.99),
    "one_cycle": lambda: OneCycle(0.1, 40, warmup_fraction=0.25, annealing="linear"),
    "warmup": lambda: Warmup(
        keras.optimizers.schedules.CosineDecay(0.05, 30), 10, 0.001, shape="exponential"
    ),
    "join": lambda: Join(
        [Warmup(0.05, 5), CyclicalLearningRate(0.01, 0.05, 4, mode="triangular2"), 0.01],
        [5, 25],
    ),
    "scaled": lambda: Scaled(OneCycle(0.1, 40), multiplier=0.3),
}


def _config_is_constructor_arguments_and_round_trips():
    for name, make in ALL_SCHEDULES.items():
        schedule = make()
        config = schedule.get_config()
        assert set(config) == set(inspect.signature(type(schedule)).parameters), name
        serialized = keras.saving.serialize_keras_object(schedule)
        assert serialized["registered_name"] == f"keras_normkit>{type(schedule).__name__}"
        clone = keras.saving.deserialize_keras_object(serialized)
        assert type(clone) is type(schedule)
        assert clone.get_config() == config
        steps = np.arange(60)
        np.testing.assert_allclose(values(clone, steps), values(schedule, steps), err_msg=name)


def _tiny_model(schedule):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(schedule, momentum=0.5), loss="mse")
    return model


def check_save_and_continue(name, tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(48, 3)).astype("float32"), rng.normal(size=(48, 2)).astype("float32")
    model = _tiny_model(ALL_SCHEDULES[name]())
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)  # 12 steps
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)  # no custom_objects
    assert type(loaded.optimizer._learning_rate) is type(model.optimizer._learning_rate)
    assert int(loaded.optimizer.iterations) == 12
    expected_rate = float(model.optimizer._learning_rate(12))
    assert float(loaded.optimizer.learning_rate) == pytest.approx(expected_rate, rel=1e-6)
    for m in (model, loaded):
        m.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    assert int(loaded.optimizer.iterations) == 24
    for a, b in zip(model.get_weights(), loaded.get_weights(), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_saved_model_with_nested_schedules_continues_at_the_right_step(tmp_path):
    check_save_and_continue("join", tmp_path)  # Join of Warmup, CyclicalLearningRate, float


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(ALL_SCHEDULES) - {"join"}))
def test_saved_model_continues_at_the_right_step_and_rate(name, tmp_path):
    check_save_and_continue(name, tmp_path)


# --------------------------------------------------------------------------- bad input

BAD_INPUTS = [
    (NaturalExpDecay, dict(initial_learning_rate=-0.1, decay_rate=1.0), ValueError),
    (NaturalExpDecay, dict(initial_learning_rate=0.1, decay_rate=1.0, decay_steps=0), ValueError),
    (NaturalExpDecay, dict(initial_learning_rate=0.1, decay_rate=1.0, staircase="yes"), TypeError),
    (
        CyclicalLearningRate,
        dict(initial_learning_rate=0.1, maximal_learning_rate=0.01, step_size=10),
        ValueError,
    ),
    (
        CyclicalLearningRate,
        dict(initial_learning_rate=0.01, maximal_learning_rate=0.1, step_size=0),
        ValueError,
    ),
    (
        CyclicalLearningRate,
        dict(initial_learning_rate=0.01, maximal_learning_rate=0.1, step_size=2.5),
        TypeError,
    ),
    (
        CyclicalLearningRate,
        dict(initial_learning_rate=0.01, maximal_learning_rate=0.1, step_size=10, mode="sawtooth"),
        ValueError,
    ),
    (
        CyclicalLearningRate,
        dict(initial_learning_rate=0.01, maximal_learning_rate=0.1, step_size=10, gamma=1.5),
        ValueError,
    ),
    (NaturalExpDecay, dict(initial_learning_rate=0.1, decay_rate=0.5, staircase=1), TypeError),
    (
        CyclicalLearningRate,
        dict(initial_learning_rate=0.01, maximal_learning_rate=0.1, step_size=10, mode=2),
        TypeError,
    ),
    (OneCycle, dict(maximal_learning_rate=0.1, total_steps=-5), ValueError),
    (OneCycle, dict(maximal_learning_rate=0.1, total_steps=100, annealing=None), TypeError),
    (OneCycle, dict(maximal_learning_rate=0.1, total_steps=100, warmup_fraction=1.0), ValueError),
    (OneCycle, dict(maximal_learning_rate=0.1, total_steps=100, annealing="step"), ValueError),
    (OneCycle, dict(maximal_learning_rate=0.1, total_steps=100, initial_divisor=0.5), ValueError),
    (Warmup, dict(schedule_or_value="fast", warmup_steps=10), TypeError),
    (Warmup, dict(schedule_or_value=0.1, warmup_steps=0), ValueError),
    (Warmup, dict(schedule_or_value=0.1, warmup_steps=10, shape="exponential"), ValueError),
    (Warmup, dict(schedule_or_value=0.1, warmup_steps=10, shape="cubic"), ValueError),
    (Join, dict(schedules=[], boundaries=[]), ValueError),
    (Join, dict(schedules=[0.1, 0.2], boundaries=[]), ValueError),
    (Join, dict(schedules=[0.1, 0.2, 0.3], boundaries=[10, 10]), ValueError),
    (Join, dict(schedules=[0.1, 0.2], boundaries=[-3]), ValueError),
    (Scaled, dict(schedule=0.1, multiplier=-1.0), ValueError),
]


def _bad_input_names_the_argument_and_value():
    for cls, kwargs, error in BAD_INPUTS:
        with pytest.raises(error) as info:
            cls(**kwargs)
        message = str(info.value)
        assert "Received" in message, message
        assert any(name in message for name in kwargs), message


def _module_exports_only_schedules():
    for name in ("NaturalExpDecay", "CyclicalLearningRate", "OneCycle", "Warmup", "Join"):
        assert issubclass(getattr(schedules, name), keras.optimizers.schedules.LearningRateSchedule)


def test_cyclical_learning_rate():
    """Against TF-Addons' formula, a geometric one and hand values."""
    _cyclical_matches_tf_addons_and_geometric_formulas()
    _cyclical_hand_values()


def test_join():
    """Join against a piecewise NumPy formula; each piece restarts at its boundary."""
    _join_matches_piecewise_formula()
    _join_restarts_each_piece_at_its_boundary()


def test_decays_warmup_and_step_types():
    """NaturalExpDecay, OneCycle, Warmup formulas; int steps."""
    _natural_exp_decay_matches_formula()
    _one_cycle_matches_formula()
    _warmup_matches_formula()
    _scalar_integer_step_matches_vector_evaluation()


def test_api():
    """Config round trips, exports and bad input."""
    _config_is_constructor_arguments_and_round_trips()
    _module_exports_only_schedules()
    _bad_input_names_the_argument_and_value()


# Every schedule class, with a shape that would go below its step-0 value (or negative)
# if it extrapolated to negative steps.
NEGATIVE_STEP_SCHEDULES = {
    "NaturalExpDecay": NaturalExpDecay(0.1, decay_rate=0.5, decay_steps=10),
    "CyclicalLearningRate": CyclicalLearningRate(
        0.01, 0.1, step_size=10, mode="exp_range", gamma=0.9
    ),
    "OneCycle": OneCycle(0.1, total_steps=100),
    "Warmup": Warmup(0.1, 10),
    "Join": Join([Warmup(0.1, 10), 0.05], boundaries=[10]),
    "Scaled": Scaled(Warmup(0.1, 10), multiplier=0.5),
}


def test_every_schedule_class_is_covered_by_the_negative_step_test():
    classes = {
        name
        for name, obj in vars(schedules).items()
        if inspect.isclass(obj)
        and issubclass(obj, keras.optimizers.schedules.LearningRateSchedule)
        and obj.__module__ == schedules.__name__
    }
    assert classes == set(NEGATIVE_STEP_SCHEDULES)


@pytest.mark.parametrize("name", sorted(NEGATIVE_STEP_SCHEDULES))
def test_negative_steps_are_treated_as_zero(name):
    schedule = NEGATIVE_STEP_SCHEDULES[name]
    at_zero = float(schedule(0))
    assert at_zero >= 0.0
    # Python ints, a vector and the optimizer's int64 counter all clamp.
    for step in (-1, -5, -1000):
        assert float(schedule(step)) == pytest.approx(at_zero, rel=1e-6, abs=0.0)
    np.testing.assert_allclose(
        values(schedule, np.array([-50, -1, 0])), [at_zero] * 3, rtol=1e-6, atol=0.0
    )
    counter = keras.Variable(-7, dtype="int64", trainable=False)
    assert float(schedule(counter)) == pytest.approx(at_zero, rel=1e-6, abs=0.0)
    assert "Steps below 0 are treated as 0." in type(schedule).__doc__


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=requires_xla)])
def test_negative_optimizer_step_is_clamped_inside_the_compiled_train_step(jit_compile):
    """The clamp is in-graph: the optimizer's counter at -5 applies each rate at step 0.

    One SGD step on `loss = (w - 1)^2` from `w = 0` moves `w` by exactly `2 * lr`, so the
    kernel after the step is the learning rate the compiled step used (times 2).
    """
    x, y = np.ones((1, 1), "float32"), np.ones((1, 1), "float32")
    for name, schedule in NEGATIVE_STEP_SCHEDULES.items():
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1, use_bias=False)])
        model.layers[0].set_weights([np.zeros((1, 1), "float32")])
        model.compile(keras.optimizers.SGD(schedule), "mse", jit_compile=jit_compile)
        model.optimizer.build(model.trainable_variables)
        model.optimizer.iterations.assign(-5)
        model.train_on_batch(x, y)
        used = float(model.layers[0].get_weights()[0][0, 0]) / 2
        assert used == pytest.approx(float(schedule(0)), rel=1e-5, abs=0.0), name


def test_warmup_at_a_negative_step_is_its_initial_rate_not_negative():
    # The reported case: a linear ramp from 0 would give 0.1 * (-5 / 10) = -0.05.
    assert float(Warmup(0.1, 10)(-5)) == 0.0
    assert float(Warmup(0.1, 10, initial_learning_rate=0.02)(-5)) == pytest.approx(0.02)


# --------------------------------------------------------------------------- cyclical momentum


def torch_one_cycle_rule(step, phase_ends, lrs, momenta, annealing):
    """PyTorch's `OneCycleLR.get_lr` (two phases, `cycle_momentum=True`) in NumPy: the first
    phase whose end is >= step (else the last), `pct = (step - start) / (end - start)`, the
    rate annealed `lrs[i] -> lrs[i + 1]` and the momentum `momenta[i] -> momenta[i + 1]`.
    `phase_ends` are PyTorch's `(pct_start * total - 1, total - 1)` or our `(w, total)`."""

    def anneal(start, end, pct):
        if annealing == "cosine":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    out_lr, out_momentum = [], []
    for s in np.asarray(step, dtype="float64"):
        start = 0.0
        for i, end in enumerate(phase_ends):
            if s <= end or i == len(phase_ends) - 1:
                pct = (s - start) / (end - start)
                out_lr.append(anneal(lrs[i], lrs[i + 1], pct))
                out_momentum.append(anneal(momenta[i], momenta[i + 1], pct))
                break
            start = end
    return np.array(out_lr), np.array(out_momentum)


@pytest.mark.parametrize("annealing", ["cosine", "linear"])
def test_one_cycle_rule_transcription_is_torchs(annealing):
    torch = pytest.importorskip("torch")
    total, peak, fraction = 50, 0.2, 0.3
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=peak, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer,
        max_lr=peak,
        total_steps=total,
        pct_start=fraction,
        anneal_strategy="cos" if annealing == "cosine" else "linear",
        cycle_momentum=True,
        base_momentum=0.8,
        max_momentum=0.97,
        div_factor=20.0,
        final_div_factor=50.0,
    )
    lrs, momenta = [], []
    for _ in range(total):
        lrs.append(optimizer.param_groups[0]["lr"])
        momenta.append(optimizer.param_groups[0]["momentum"])
        optimizer.step()
        scheduler.step()
    initial = peak / 20.0
    ends = (fraction * total - 1, total - 1)
    lr, momentum = torch_one_cycle_rule(
        np.arange(total), ends, (initial, peak, initial / 50.0), (0.97, 0.8, 0.97), annealing
    )
    np.testing.assert_allclose(lrs, lr, rtol=1e-12)
    np.testing.assert_allclose(momenta, momentum, rtol=1e-12)


@pytest.mark.parametrize("annealing", ["cosine", "linear"])
@pytest.mark.parametrize("total,fraction", [(100, 0.3), (37, 0.25), (9, 0.5)])
def test_one_cycle_momentum_is_torchs_rule_in_our_phases(annealing, total, fraction):
    schedule = OneCycle(
        0.1, total, warmup_fraction=fraction, annealing=annealing, base_momentum=0.8,
        max_momentum=0.97,
    )  # fmt: skip
    steps = np.arange(total + 1)
    warm = fraction * total
    lr, momentum = torch_one_cycle_rule(
        steps, (warm, total), (0.1 / 25.0, 0.1, 0.1 / 25.0 / 1e4), (0.97, 0.8, 0.97), annealing
    )
    np.testing.assert_allclose(schedule.momentum(steps), momentum, atol=1e-7, rtol=0)
    np.testing.assert_allclose(values(schedule, steps), lr, rtol=1e-5)  # the rate, float32
    # Scalars, and the ends: max at 0, base at the peak, max again at the end and after.
    assert schedule.momentum(0) == pytest.approx(0.97, abs=1e-12)
    assert schedule.momentum(warm) == pytest.approx(0.8, abs=1e-12)
    assert schedule.momentum(total) == schedule.momentum(total + 50) == pytest.approx(0.97)
    assert schedule.momentum(-3) == schedule.momentum(0)


@given(
    total=st.integers(2, 500),
    fraction=st.floats(0.05, 0.95),
    base=st.floats(0.0, 0.95),
    spread=st.floats(0.0, 0.05),
    step=st.integers(0, 600),
)
def test_one_cycle_momentum_moves_against_the_rate(total, fraction, base, spread, step):
    schedule = OneCycle(0.1, total, warmup_fraction=fraction, base_momentum=base,
                        max_momentum=base + spread)  # fmt: skip
    m = schedule.momentum(step)
    assert base - 1e-12 <= m <= base + spread + 1e-12
    # Linear in the rate within a phase: (m - base) / spread = (peak - lr) / (peak - end).
    if spread > 1e-3 and 0 < step < total:
        lr = float(schedule(step))
        end = 0.1 / 25.0 if step <= fraction * total else 0.1 / 25.0 / 1e4
        assert (m - base) / spread == pytest.approx((0.1 - lr) / (0.1 - end), abs=1e-5)


def test_one_cycle_momentum_arguments():
    config = OneCycle(0.1, 10, base_momentum=0.5, max_momentum=0.6).get_config()
    assert config["base_momentum"] == 0.5 and config["max_momentum"] == 0.6
    old = {k: v for k, v in config.items() if k not in ("base_momentum", "max_momentum")}
    assert OneCycle(**old).max_momentum == 0.95  # configs saved before the momentum load
    with pytest.raises(ValueError, match="`max_momentum` must be >= `base_momentum`"):
        OneCycle(0.1, 10, base_momentum=0.9, max_momentum=0.8)
    with pytest.raises(ValueError, match="`base_momentum` must be a number in"):
        OneCycle(0.1, 10, base_momentum=-0.1)
    with pytest.raises(ValueError, match="`max_momentum` must be a number in"):
        OneCycle(0.1, 10, max_momentum=1.5)
