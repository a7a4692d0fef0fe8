"""`tfa_coverage`: one outcome per object TF-Addons 0.23 registers, and the loader does what
the table says (loads: a fixture written by TF-Addons loads and is compared; loads for
inference: dropped with a warning naming it; error: a `ValueError` naming it and what to use
instead)."""

import json
import pathlib

import h5py
import pytest

from keras_normkit.migration import _config, _coverage, _training, tfa_coverage
from tests.migration import test_migration

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
REGISTRY = json.loads((FIXTURES / "tfa_registry.json").read_text())


def test_every_registered_object_has_one_outcome():
    """The table has exactly the names (and kinds) that TF-Addons 0.23 registers, read from
    the installed package by write_fixtures.py."""
    assert REGISTRY["tensorflow_addons"] == "0.23.0"
    registered = {entry["name"]: entry["kind"] for entry in REGISTRY["objects"]}
    assert len(registered) == 98
    table = {name: entry["kind"] for name, entry in _coverage.COVERAGE.items()}
    assert table == registered
    outcomes = {entry["outcome"] for entry in _coverage.COVERAGE.values()}
    assert outcomes == {_coverage.LOADS, _coverage.INFERENCE, _coverage.ERROR, _coverage.REPLACED}


def test_the_issue_s_objects_load():
    for name in (
        "InstanceNormalization",
        "GroupNormalization",
        "SpectralNormalization",
        "FilterResponseNormalization",
        "TLU",
        "gelu",
        "mish",
        "SigmoidFocalCrossEntropy",
    ):
        assert tfa_coverage(name)["outcome"] == "loads", name
    for name in ("MovingAverage", "SWA", "Lookahead"):
        assert tfa_coverage(name)["outcome"] == "loads for inference", name


def fixture_mentions(fixture, name):
    with h5py.File(FIXTURES / f"{fixture}.h5", "r") as f:
        text = f.attrs["model_config"] + f.attrs.get("training_config", "")
    bare = name.split(">")[1]
    return f'"{name}"' in text or f'"{bare}"' in text


@pytest.mark.parametrize("name", sorted(n for n, e in _coverage.COVERAGE.items() if e["fixtures"]))
def test_each_fixture_holds_the_object_and_is_compared(name):
    """Each fixture named was written by TF-Addons with that object, and is one of the
    models whose prediction test_migration.py compares with TF-Addons'."""
    compared = set(test_migration.MODELS) | {"bidirectional"}
    for fixture in tfa_coverage(name)["fixtures"]:
        assert fixture in compared, fixture
        assert fixture_mentions(fixture, name), (fixture, name)


def test_every_object_that_loads_is_tested_on_a_fixture():
    loads = [e for e in tfa_coverage() if e["outcome"] == "loads"]
    assert all(e["fixtures"] for e in loads), [e["name"] for e in loads if not e["fixtures"]]


def translate(name, kind):
    """The translation of a config holding `name` as a layer, a cell or an activation."""
    state = _config._Translation({})
    if kind == "activation":
        config = {"class_name": "Dense", "config": {"name": "dense", "activation": name}}
    elif kind == "cell":
        cell = {"class_name": name, "config": {"name": "cell", "units": 2}}
        config = {"class_name": "RNN", "config": {"name": "rnn", "cell": cell}}
    else:
        config = {"class_name": name, "config": {"name": "layer"}}
    _config._translate(config, state)
    return state


ERRORS = sorted(n for n, e in _coverage.COVERAGE.items() if e["outcome"] == _coverage.ERROR)


@pytest.mark.parametrize("name", ERRORS)
def test_each_error_names_the_object_and_what_to_use_instead(name):
    kind = _coverage.COVERAGE[name]["kind"]
    state = translate(name, kind)
    assert [entry[0] for entry in state.unsupported] == [name]
    message = str(state.unsupported_error("model.h5"))
    assert f"'{name}'" in message
    assert _coverage.COVERAGE[name]["replacement"] in message
    assert "custom_objects" in message


def test_each_error_is_also_replaceable_with_custom_objects():
    for name in ERRORS:
        state = _config._Translation({name: object})
        _config._translate({"class_name": name, "config": {"name": "layer"}}, state)
        assert state.unsupported == []


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, e in _coverage.COVERAGE.items()
        if e["outcome"] == _coverage.INFERENCE and e["kind"] != "optimizer"
    ),
)
def test_each_training_object_without_equivalent_is_dropped_and_named(name):
    """A TF-Addons loss or metric of the training config: `None` and one note naming it."""
    state = _config._Translation({})
    kind = _coverage.COVERAGE[name]["kind"]
    what = "metric" if kind == "metric" else "loss"
    value = name.split(">")[1] if kind == "loss function" else {"class_name": name, "config": {}}
    assert _training._loss_or_metric(value, state, what) is None
    assert state.notes == [f"the {what} {name} (TF-Addons') is dropped"]


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, e in _coverage.COVERAGE.items()
        if e["outcome"] == _coverage.INFERENCE and e["kind"] == "optimizer"
    ),
)
def test_each_tf_addons_optimizer_is_dropped_and_named(name):
    state = _config._Translation({})
    inner = {"class_name": "Adam", "config": {"learning_rate": 0.5}}
    optimizer = _training._optimizer({"class_name": name, "config": {"optimizer": inner}}, state)
    assert len(state.notes) == 1 and name in state.notes[0]
    if name in _training._WRAPPERS:
        assert type(optimizer).__name__ == "Adam" and float(optimizer.learning_rate) == 0.5
    else:
        assert optimizer is None


def test_tfa_coverage_entries_and_bad_names():
    entry = tfa_coverage("Addons>SpectralNormalization")
    assert entry == tfa_coverage("SpectralNormalization")
    assert set(entry) == {"name", "kind", "outcome", "replacement", "fixtures"}
    assert entry["fixtures"] == ["spectral_norm"]
    entry["fixtures"].append("changed")  # a copy: the table itself is unchanged
    assert tfa_coverage("SpectralNormalization")["fixtures"] == ["spectral_norm"]
    names = [e["name"] for e in tfa_coverage()]
    assert names == sorted(names) and len(names) == 98
    with pytest.raises(ValueError, match="TensorFlow Addons 0.23 registers.*name='Dense'"):
        tfa_coverage("Dense")
    with pytest.raises(TypeError, match="`name` must be None or.*Received: name=3"):
        tfa_coverage(3)
