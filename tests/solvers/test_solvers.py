"""solvers/: edge cases, each checked by the independent evaluator in solver_reference.py."""

from __future__ import annotations

import math
import warnings

import pytest
from solver_reference import Column, Instance, Kind, evaluate, soft_optimum

from solvers import Candidates, GpuType, InfeasibleProblem, Problem, ProblemError, solve


def one_type(columns, count=4, images=100, deadline_ms=1000, **kind) -> Instance:
    return Instance((Kind("gpu", count, {224: tuple(columns)}, **kind),), {224: images}, deadline_ms)


def solved(inst: Instance, **changes):
    plan = solve(inst.problem(**changes))
    evaluate(plan, inst)
    return plan


def test_deadline_shorter_than_the_warm_up_is_infeasible_and_says_so():
    inst = one_type([Column(8, 10, 500)], deadline_ms=400)
    with pytest.raises(InfeasibleProblem) as raised:
        solve(inst.problem())
    d = raised.value.diagnosis
    assert d.unservable == (224,)
    assert "first batch" in d.reason and "500 ms" in d.reason
    assert d.max_images == 0
    assert d.extra_gpus == {"gpu": None}  # no number of GPUs helps
    assert d.min_deadline_s == pytest.approx(0.5 + 3 * 0.01)  # 4 GPUs x 4 batches of 8 >= 100 images


def test_one_image_takes_one_gpu_and_one_batch():
    plan = solved(one_type([Column(1, 10, 20), Column(8, 30, 60)], images=1))
    (a,) = plan.assignments
    assert (plan.total_gpus, a.batches, a.images, a.last_batch) == (1, 1, 1, 1)
    assert a.batch_size == 1  # the candidate that finishes one image first
    assert plan.makespan_s == pytest.approx(0.02)


def test_fewer_images_than_one_batch_run_as_one_partial_batch():
    plan = solved(one_type([Column(64, 100, 300)], images=5))
    (a,) = plan.assignments
    assert (a.batch_size, a.batches, a.images, a.last_batch) == (64, 1, 5, 5)


def test_remainder_batch_is_smaller_than_the_others():
    # 10 images, batches of 4 every 100 ms after a 100 ms first batch: 3 batches, the last of 2 images.
    plan = solved(one_type([Column(4, 100, 100)], count=1, images=10, deadline_ms=300))
    (a,) = plan.assignments
    assert (a.batches, a.images, a.last_batch) == (3, 10, 2)
    assert a.finish_s == pytest.approx(0.3)


def test_floor_at_the_deadline_keeps_the_batch_that_ends_exactly_on_time():
    # (1.7 - 1.0) / 0.1 is 6.999... in floating point; 1 + 7 batches end exactly at 1.7 s.
    inst = one_type([Column(1, 100, 1000)], count=1, images=8, deadline_ms=1700)
    (a,) = solved(inst).assignments
    assert a.batches == 8


def test_max_batches_limits_each_gpu_and_counts_the_first_batch():
    # Time would allow 10 batches per GPU; at most 2 (the first and one more) means 4 GPUs for 64 images.
    inst = one_type([Column(8, 10, 10)], count=10, images=64, max_batches=2)
    plan = solved(inst)
    assert plan.total_gpus == 4 == soft_optimum(inst)
    assert all(a.batches <= 2 for a in plan.assignments)
    # ... and the problem-wide limit means the same.
    plain = one_type([Column(8, 10, 10)], count=10, images=64)
    assert solved(plain, max_batches=2).total_gpus == 4


def test_a_type_with_zero_gpus_is_never_used():
    inst = Instance(
        (Kind("fast", 0, {224: (Column(64, 1, 1),)}), Kind("slow", 5, {224: (Column(4, 100, 100),)})), {224: 20}, 1000
    )
    plan = solved(inst)
    assert plan.gpus_by_type == {"slow": 1}


def test_only_zero_gpus_is_infeasible_and_names_how_many_to_add():
    inst = Instance((Kind("gpu", 0, {224: (Column(4, 100, 100),)}),), {224: 100}, 1000)
    with pytest.raises(InfeasibleProblem) as raised:
        solve(inst.problem())
    d = raised.value.diagnosis
    assert "no GPUs" in d.reason
    assert d.extra_gpus == {"gpu": 3}  # 40 images per GPU by 1 s
    assert d.min_deadline_s is None


def test_ties_between_types_are_broken_within_the_counts():
    same = (Column(8, 50, 50),)
    inst = Instance((Kind("a", 2, {224: same}), Kind("b", 2, {224: same})), {224: 500}, 1000)
    plan = solved(inst)  # 160 images per GPU: 4 GPUs, and only 2 of each exist
    assert plan.total_gpus == 4 and plan.gpus_by_type == {"a": 2, "b": 2}


def test_unlimited_count_answers_how_many_are_needed():
    plan = solve(
        one_type([Column(8, 50, 50)], images=1000).problem(
            gpu_types=[GpuType("gpu", None, [Candidates(224, [8], [0.05], [0.05])])]
        )
    )
    assert plan.total_gpus == math.ceil(1000 / 160)


def test_cost_objective_prefers_the_cheaper_pool_and_bills_the_window():
    inst = Instance(
        (
            Kind("fast", 9, {224: (Column(8, 10, 10),)}, price=10),  # 800 images/s for 10/h
            Kind("slow", 9, {224: (Column(8, 40, 40),)}, price=2),
        ),  # 200 images/s for 2/h
        {224: 1600},
        1000,
        objective="cost",
    )
    plan = solved(inst)
    assert plan.gpus_by_type == {"slow": 8}
    assert plan.objective_value == pytest.approx(8 * 2 * 1 / 3600)
    assert solved(inst, objective="gpus").gpus_by_type == {"fast": 2}


def test_load_time_and_margin_shorten_the_usable_time():
    inst = one_type([Column(1, 10, 10)], count=1, images=50, deadline_ms=1000)
    assert solved(inst).assignments[0].finish_s == pytest.approx(0.5)
    loaded = one_type([Column(1, 10, 10)], count=1, images=50, deadline_ms=1000, load_ms=600)
    with pytest.raises(InfeasibleProblem):  # 600 ms load + 500 ms of batches
        solve(loaded.problem())
    assert solved(one_type([Column(1, 10, 10)], count=2, images=50, load_ms=600)).total_gpus == 2
    with pytest.raises(InfeasibleProblem):  # 10% margin: 0.9 s
        solve(one_type([Column(1, 10, 10)], count=1, images=95).problem(margin=0.1))


def test_mix_of_input_sizes_shares_the_pool():
    inst = Instance((Kind("gpu", 3, {64: (Column(8, 10, 10),), 224: (Column(8, 40, 40),)}),), {64: 800, 224: 400}, 1000)
    plan = solved(inst)
    assert plan.total_gpus == 3 == soft_optimum(inst)  # 1 on 64 px (800/s), 2 on 224 px (200/s each)
    assert plan.images_planned == {64: 800, 224: 400}


def test_makespan_is_balanced_over_the_gpus_chosen():
    plan = solved(one_type([Column(10, 100, 100)], count=3, images=100, deadline_ms=5000))
    assert plan.total_gpus == 1 and plan.makespan_s == pytest.approx(1.0)
    plan = solved(one_type([Column(10, 100, 100)], count=3, images=100, deadline_ms=500))
    assert plan.total_gpus == 2 and plan.makespan_s == pytest.approx(0.5)  # 50 + 50, not 50 + 10 + ...


def test_relaxed_does_what_it_can_with_the_fewest_gpus():
    inst = Instance((Kind("gpu", 2, {224: (Column(10, 100, 100),)}),), {224: 1000}, 1000, mode="relaxed")
    plan = solved(inst)
    assert plan.total_images == plan.objective_value == 200 and plan.total_gpus == 2
    inst = Instance((Kind("gpu", 5, {224: (Column(10, 100, 100),)}),), {224: 150}, 1000, mode="relaxed")
    plan = solved(inst)
    assert plan.total_images == 150 and plan.total_gpus == 2


def test_relaxed_with_no_image_count_fills_the_pool():
    inst = Instance((Kind("gpu", 2, {224: (Column(10, 100, 100),)}),), {224: None}, 1000, mode="relaxed")
    plan = solved(inst)
    assert plan.total_images == 200 and plan.to_dict()["images"] is None


def test_no_images_is_an_empty_plan():
    plan = solved(one_type([Column(8, 10, 10)], images=0))
    assert plan.total_gpus == 0 and plan.assignments == () and plan.status == "optimal"
    assert plan.cost is None  # no prices: no cost, not a cost of 0 (it read 'cost 0')


def test_max_batch_drops_larger_candidates():
    c = Candidates(224, [8, 64], [0.01, 0.05], [0.01, 0.05], max_batch=32)
    assert list(c.batch_size) == [8]


def test_plan_json_has_groups_and_per_gpu_detail():
    d = solved(one_type([Column(10, 100, 100)], count=3, images=95, deadline_ms=500)).to_dict()
    for key in (
        "status",
        "mode",
        "images",
        "deadline_s",
        "total_gpus",
        "images_planned",
        "makespan_s",
        "solve_time_s",
        "assignments",
        "gpus",
    ):
        assert key in d
    assert sum(a["count"] * a["images"] for a in d["assignments"]) == 95
    assert len(d["gpus"]) == d["total_gpus"] == 2
    assert {"hardware", "input_size", "batch_size", "batches", "images", "finish_s"} <= set(d["gpus"][0])


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(deadline_s=0), "deadline"),
        (dict(deadline_s=math.nan), "deadline"),
        (dict(margin=1.0), "margin"),
        (dict(mode="fast"), "mode"),
        (dict(objective="cost"), "price"),
        (dict(images={224: -1}), "whole number"),
        (dict(images={224: 2.5}), "whole number"),
        (dict(images={224: None}), "soft mode"),
        (dict(images={}), "images"),
        (dict(max_batches=0), "max_batches"),
    ],
)
def test_malformed_problems_are_refused(bad, match):
    inst = one_type([Column(8, 10, 10)])
    with pytest.raises(ProblemError, match=match):
        inst.problem(**bad)


@pytest.mark.parametrize(
    "args, match",
    [
        (dict(batch_size=[0], latency_s=[1], warmup_s=[1]), "batch size"),
        (dict(batch_size=[1.5], latency_s=[1], warmup_s=[1]), "batch size"),
        (dict(batch_size=[1], latency_s=[0], warmup_s=[1]), "latency"),
        (dict(batch_size=[1], latency_s=[math.inf], warmup_s=[1]), "latency"),
        (dict(batch_size=[1], latency_s=[1], warmup_s=[-1]), "warm-up"),
        (dict(batch_size=[1, 2], latency_s=[1], warmup_s=[1]), "same length"),
    ],
)
def test_malformed_candidates_are_refused(args, match):
    with pytest.raises(ProblemError, match=match):
        Candidates(224, **args)


def test_relaxed_without_counts_needs_a_finite_pool():
    with pytest.raises(ProblemError, match="GPU count"):
        Problem([GpuType("gpu", None, [Candidates(224, [1], [1.0], [1.0])])], {224: None}, 10.0, mode="relaxed")


@pytest.mark.integration
def test_solvers_imports_neither_perfmodel_nor_torch_nor_pyomo_until_it_solves():
    import subprocess
    import sys

    code = "import sys, solvers; print(sorted(m for m in ('perfmodel', 'torch', 'pyomo') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("order", [("slow", "fast"), ("fast", "slow")])
def test_a_tie_in_gpus_goes_to_the_type_that_finishes_earliest(order):
    speed = {"slow": 0.2, "fast": 0.1}  # seconds per batch of 10: either one does 100 images in 60 s alone
    types = [GpuType(name, None, [Candidates(224, [10], [speed[name]], [speed[name]])]) for name in order]
    plan = solve(Problem(types, {224: 100}, 60.0))
    assert plan.gpus_by_type == {"fast": 1}
    assert plan.makespan_s == pytest.approx(1.0)


def test_a_plan_without_a_tie_asks_highs_once_more_at_most(monkeypatch):
    """The tie search takes its last step first: where the count no longer holds one step before the window
    (1/4096 of it), nothing finishes earlier, and HiGHS is not asked a dozen times to find that out (an
    8-type, 4-size plan took 6.7 s instead of 0.12 s)."""
    from solvers import milp

    calls = []
    real = milp.min_gpus
    monkeypatch.setattr(milp, "min_gpus", lambda *a, **k: calls.append(1) or real(*a, **k))
    one_batch = [Candidates(size, [10], [1.0], [1.0]) for size in (224, 448)]  # one batch of 10 by 1 s, no sooner
    plan = solve(Problem([GpuType("g", None, one_batch), GpuType("h", 4, one_batch)], {224: 10, 448: 10}, 1.5))
    assert plan.total_gpus == 2 and plan.makespan_s == 1.0 and len(calls) <= 2  # the plan, one step down


def test_a_tie_of_one_input_size_asks_highs_once_more_at_most(monkeypatch):
    from solvers import milp

    calls = []
    real = milp.min_gpus
    monkeypatch.setattr(milp, "min_gpus", lambda *a, **k: calls.append(1) or real(*a, **k))
    slow, fast = Candidates(224, [10], [0.2], [5.0]), Candidates(224, [10], [0.1], [0.1])  # slow starts at 5 s
    types = [GpuType("slow", None, [slow]), GpuType("fast", None, [fast])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # unlimited GPUs of a type that does nothing yet: no inf x 0
        plan = solve(Problem(types, {224: 100}, 60.0))
    assert plan.gpus_by_type == {"fast": 1} and len(calls) == 1  # the plan; one class needs HiGHS no more
