"""`keras_normkit.ops.fast_weights_plan.plan`: every rule of the table, on its own.

`plan` is pure (Python values in, a `LoopPlan` out), so these tests run no tensor and are
the same on every backend. Each row names the rule it pins; a wrong threshold, a wrong
order of rules or a wrong chunk fails one of them.
"""

import pytest

from keras_normkit.ops.fast_weights_plan import (
    AUTO_MEMORY_RULE,
    CHUNK,
    LoopPlan,
    chunk_size,
    memory_segments,
    mode_flags,
    plan,
)

PLAIN = {}
CLUSTERS = {"training": True, "clusters": True}
XLA = {"xla": True}

# (rule, (steps, units, implementation), flags, expected LoopPlan fields)
# LoopPlan(steps, mode, form, chunk, segments)
TABLE = [
    # -- mode
    ("plain: inference", (200, 256, "matrix"), {"clusters": True}, (200, "plain", "matrix", 8, ((0, 25),))),
    ("plain: no clusters", (200, 256, "matrix"), {"training": True}, (200, "plain", "matrix", 8, ((0, 25),))),
    ("clusters: training, static T", (200, 256, "matrix"), CLUSTERS, (200, "xla_clusters", "matrix", 8, ((0, 25),))),
    ("clusters: never for unknown T", (None, 256, "matrix"), CLUSTERS, (None, "plain", "matrix", 8, ((0, None),))),
    ("xla: before clusters", (200, 256, "matrix"), {**CLUSTERS, **XLA}, (200, "xla", "matrix", 8, ((0, 25),))),
    # -- form: explicit forms are kept whatever the case
    ("explicit matrix", (4, 999, "matrix"), XLA, (4, "xla", "matrix", 1, ((0, 4),))),
    ("explicit memory, stateful", (999, 1, "memory"), {"stateful": True}, (999, "plain", "memory", 8, ((0, 31), (31, 62), (62, 93), (93, 124)))),
    ("explicit memory, unknown T", (None, 8, "memory"), PLAIN, (None, "plain", "memory", 8, ((0, None),))),
    # -- form: "auto"
    ("auto: stateful -> matrix", (4, 256, "auto"), {"stateful": True}, (4, "plain", "matrix", 4, ((0, 1),))),
    ("auto: unknown T -> matrix", (None, 256, "auto"), XLA, (None, "xla", "matrix", 8, ((0, None),))),
    ("auto plain: T = 0.8 units", (64, 80, "auto"), PLAIN, (64, "plain", "memory", 8, ((0, 4), (4, 8)))),
    ("auto plain: T > 0.8 units", (65, 80, "auto"), PLAIN, (65, "plain", "matrix", 8, ((0, 8),))),
    ("auto plain: units < 64", (8, 63, "auto"), PLAIN, (8, "plain", "matrix", 8, ((0, 1),))),
    ("auto clusters: T = 1.2 units", (60, 50, "auto"), CLUSTERS, (60, "xla_clusters", "memory", 8, ((0, 4), (4, 7)))),
    ("auto clusters: T > 1.2 units", (61, 50, "auto"), CLUSTERS, (61, "xla_clusters", "matrix", 8, ((0, 7),))),
    ("auto clusters: units < 48", (13, 47, "auto"), CLUSTERS, (13, "xla_clusters", "matrix", 8, ((0, 1),))),
    ("auto xla: T = 1.3 units", (65, 50, "auto"), XLA, (65, "xla", "memory", 8, ((0, 4), (4, 8)))),
    ("auto xla: T > 1.3 units", (66, 50, "auto"), XLA, (66, "xla", "matrix", 8, ((0, 8),))),
    # -- chunk
    ("chunk: T = 13 > 12", (13, 8, "matrix"), PLAIN, (13, "plain", "matrix", 8, ((0, 1),))),
    ("chunk: T = 12, one chunk", (12, 8, "matrix"), PLAIN, (12, "plain", "matrix", 12, ((0, 1),))),
    ("chunk: T = 12 under XLA, single steps", (12, 8, "memory"), XLA, (12, "xla", "memory", 1, ((0, 12),))),
    ("chunk: T = 12 as clusters, single steps", (12, 8, "matrix"), CLUSTERS, (12, "xla_clusters", "matrix", 1, ((0, 12),))),
    ("chunk: T = 1", (1, 8, "matrix"), PLAIN, (1, "plain", "matrix", 1, ((0, 1),))),
    # -- segments: the memory form only, only for chunks of 8
    ("segments: 5 chunks, one loop", (47, 8, "memory"), PLAIN, (47, "plain", "memory", 8, ((0, 5),))),
    ("segments: 6 chunks, two loops", (48, 8, "memory"), PLAIN, (48, "plain", "memory", 8, ((0, 3), (3, 6)))),
    ("segments: 9 chunks, three loops", (72, 8, "memory"), PLAIN, (72, "plain", "memory", 8, ((0, 3), (3, 6), (6, 9)))),
    ("segments: T 200, four loops", (200, 256, "auto"), XLA, (200, "xla", "memory", 8, ((0, 6), (6, 12), (12, 19), (19, 25)))),
    ("segments: never the matrix", (200, 8, "matrix"), PLAIN, (200, "plain", "matrix", 8, ((0, 25),))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "flags", "expected"),
    [pytest.param(args, flags, expected, id=rule) for rule, args, flags, expected in TABLE],
)
def test_plan_table(args, flags, expected):
    got = plan(*args, **flags)
    assert isinstance(got, LoopPlan)
    assert got == LoopPlan(*expected)


@pytest.mark.parametrize("mode", sorted(AUTO_MEMORY_RULE))
def test_auto_rule_at_its_edges(mode):
    """Memory iff `units >= min_units` and `T <= ratio·units`, per mode, at both edges."""
    min_units, ratio = AUTO_MEMORY_RULE[mode]
    flags = mode_flags(mode)
    for units in (min_units, 2 * min_units):
        longest = int(ratio * units)
        assert plan(longest, units, **flags).form == "memory"
        assert plan(longest + 1, units, **flags).form == "matrix"
        assert plan(1, units, **flags).form == "memory"
    assert plan(1, min_units - 1, **flags).form == "matrix"
    assert plan(4, 256, stateful=True, **flags).form == "matrix"
    assert plan(None, 256, **flags).form == "matrix"


def test_mode_flags_give_the_mode():
    for mode in ("plain", "xla_clusters", "xla"):
        assert plan(40, 8, **mode_flags(mode)).mode == mode
    with pytest.raises(ValueError, match="`mode`.*Received: mode='jit'"):
        mode_flags("jit")


def test_tail_and_chunk_count():
    assert plan(21, 8, "matrix").tail == 5
    assert plan(21, 8, "matrix").n_chunks == 2
    assert plan(69, 8, "memory").tail == 5
    assert plan(69, 8, "memory").n_chunks == 8
    assert plan(12, 8, "matrix").tail == 0
    assert plan(12, 8, "matrix", xla=True).tail == 0
    assert plan(None, 8, "matrix").tail == 0
    assert plan(None, 8, "matrix").n_chunks is None


def test_plan_checks_its_arguments():
    with pytest.raises(ValueError, match="`implementation`.*Received: implementation='fast'"):
        plan(8, 8, "fast")


def test_chunk_and_segment_columns_agree_with_plan():
    """`chunk_size` and `memory_segments`, the public one-column answers, are plan's."""
    for steps in (1, 5, 12, 13, 21, 48, 96, 200, 1000):
        for xla in (False, True):
            loop_plan = plan(steps, 8, "memory", xla=xla)
            assert loop_plan.chunk == chunk_size(steps, xla)
            if loop_plan.chunk == CHUNK:
                assert list(loop_plan.segments) == memory_segments(steps // CHUNK)
