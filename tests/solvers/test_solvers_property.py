"""The solver against an exhaustive search on small random instances (hypothesis).

The optimal objective must match exactly, and every plan must pass an independent evaluator;
infeasible instances must be infeasible for both, and the diagnosis (most images by the deadline,
shortest deadline, GPUs to add) must match the exhaustive search too.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from solver_reference import (
    Column,
    Instance,
    Kind,
    evaluate,
    feasible_with_unlimited,
    finish_values,
    first_true,
    relaxed_optimum,
    soft_optimum,
)

from solvers import InfeasibleProblem, solve

SIZES = (32, 64)


@st.composite
def columns(draw):
    batches = draw(st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True))
    return tuple(Column(b, draw(st.integers(5, 60)), draw(st.integers(0, 120))) for b in batches)


@st.composite
def instances(draw, mode=None, objective=None):
    sizes = draw(st.lists(st.sampled_from(SIZES), min_size=1, max_size=2, unique=True))
    kinds = []
    for i in range(draw(st.integers(1, 3))):
        served = draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=len(sizes), unique=True))
        kinds.append(
            Kind(
                name=f"g{i}",
                count=draw(st.integers(0, 3)),
                columns={s: draw(columns()) for s in served},
                load_ms=draw(st.sampled_from([0, 0, 10, 35])),
                price=draw(st.integers(1, 5)),
                max_batches=draw(st.sampled_from([None, None, 1, 2, 4])),
            )
        )
    mode = mode or draw(st.sampled_from(["soft", "relaxed"]))
    return Instance(
        kinds=tuple(kinds),
        images={s: draw(st.integers(0, 40)) for s in sizes},
        deadline_ms=draw(st.integers(1, 300)),
        mode=mode,
        objective=objective or draw(st.sampled_from(["gpus", "cost"])),
        margin_pct=draw(st.sampled_from([0, 0, 10])),
    )


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def weight_of(plan, inst) -> float:
    """The plan's GPUs (objective gpus) or price sum (objective cost), as the exhaustive search counts it."""
    if inst.objective == "gpus":
        return plan.total_gpus
    prices = {k.name: k.price for k in inst.kinds}
    return sum(n * prices[name] for name, n in plan.gpus_by_type.items())


@SETTINGS
@given(instances(mode="soft"))
def test_soft_matches_exhaustive_search(inst):
    best = soft_optimum(inst)
    try:
        plan = solve(inst.problem())
    except InfeasibleProblem:
        assert best is None, f"the solver found no plan, the exhaustive search one of weight {best}"
        return
    evaluate(plan, inst)
    assert best is not None, "the solver found a plan the exhaustive search says cannot exist"
    assert plan.status == "optimal"
    assert weight_of(plan, inst) == best
    expected = best if inst.objective == "gpus" else best * inst.deadline_ms / 1000 / 3600
    assert math.isclose(plan.objective_value, expected, rel_tol=1e-12)


@SETTINGS
@given(instances(mode="soft", objective="gpus"))
def test_the_fewest_gpus_finish_as_early_as_that_many_can(inst):
    """Ties among the fewest GPUs go to the earliest finish: the plan ends at most one step of the tie
    search (1/4096 of the window) after the earliest time at which that many GPUs can do the images."""
    best = soft_optimum(inst)
    if not best:
        return
    plan = solve(inst.problem())
    earliest = first_true(finish_values(inst, inst.usable), lambda t: soft_optimum(inst, usable=t) == best)
    assert plan.total_gpus == best and earliest is not None
    assert float(earliest) - 1e-9 <= plan.makespan_s <= float(earliest) + float(inst.usable) / 4096 + 1e-9


@SETTINGS
@given(instances(mode="relaxed"), st.booleans())
def test_relaxed_matches_exhaustive_search(inst, unlimited_images):
    if unlimited_images:  # 'as many as possible': no image count
        inst = Instance(
            inst.kinds, {s: None for s in inst.images}, inst.deadline_ms, "relaxed", inst.objective, inst.margin_pct
        )
    most, weight = relaxed_optimum(inst)
    try:
        plan = solve(inst.problem())
    except InfeasibleProblem:
        assert most == 0 and any(v is None or v > 0 for v in inst.images.values())
        return
    evaluate(plan, inst)
    assert plan.status == "optimal"
    assert plan.total_images == plan.objective_value == most
    assert weight_of(plan, inst) == weight


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances(mode="soft", objective="gpus"))
def test_diagnosis_matches_exhaustive_search(inst):
    if soft_optimum(inst) is not None:
        return
    with pytest.raises(InfeasibleProblem) as raised:
        solve(inst.problem())
    d = raised.value.diagnosis
    assert d.exact  # tiny models: every hint proven
    relaxed = Instance(inst.kinds, inst.images, inst.deadline_ms, "relaxed", margin_pct=inst.margin_pct)
    assert d.max_images == relaxed_optimum(relaxed)[0]
    assert d.max_images < sum(inst.images.values())

    # Shortest deadline: the first time at which some GPU finishes a batch and the pool can do it all.
    # Every image takes at most 40 batches of 60 ms after a 155 ms start: 20 s is past any answer.
    first = first_true(finish_values(inst, Fraction(20)), lambda t: soft_optimum(inst, usable=t) is not None)
    if d.min_deadline_s is None:
        assert first is None
    else:
        assert first is not None, "the solver names a deadline, the exhaustive search finds none"
        assert math.isclose(d.min_deadline_s, float(first / (1 - Fraction(inst.margin_pct, 100))), rel_tol=1e-9)

    # More GPUs of one type: the fewest that make it feasible, the others as given.
    for kind in inst.kinds:
        extra = d.extra_gpus[kind.name]
        if extra is None:
            assert not feasible_with_unlimited(inst, kind.name)
        else:
            assert extra >= 1
            assert soft_optimum(inst, counts={kind.name: kind.count + extra}) is not None
            assert soft_optimum(inst, counts={kind.name: kind.count + extra - 1}) is None
