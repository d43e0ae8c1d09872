"""solve(problem) -> Plan: the optimal GPU counts (milp.py), then which GPU does what, then a re-check."""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter

import numpy as np

from solvers import milp
from solvers.batch_diagnose import diagnose
from solvers.batch_problem import MAX_COUNT, Problem
from solvers.batch_solution import Assignment, Plan
from solvers.capacity import Columns, availability, clip, fits, needs
from solvers.errors import InfeasibleProblem, SolverFailure

_BISECTION_STEPS = 60
_TIE_STEPS = 12  # the earliest finish among fewest-GPU plans, to 1/4096 of the window


def solve(problem: Problem) -> Plan:
    """The optimal plan for `problem`; raises InfeasibleProblem (with a Diagnosis) when there is none.

    soft: every image by the deadline with the fewest GPUs (or the lowest cost).
    relaxed: the most images by the deadline, then the fewest GPUs (or lowest cost) doing that many.
    Given the GPU counts, images are spread so that the makespan is as short as those GPUs allow.
    """
    milp.load_pyomo()  # imported once per process (most of a second); not part of any one solve
    started = time.perf_counter()
    columns = Columns(problem)
    limit = problem.usable_s
    cap = columns.capacity(limit)
    need = np.minimum(needs(problem), MAX_COUNT)  # 'as many as possible' is at most MAX_COUNT images per size
    avail = availability(problem)
    weight = (
        np.array([t.cost_per_hour or 0.0 for t in problem.gpu_types])
        if problem.objective == "cost"
        else np.ones(len(problem.gpu_types))
    )

    runs = []
    if problem.mode == "relaxed":
        most = milp.max_images(clip(cap, need), need, avail, rel_gap=problem.rel_gap, time_limit=problem.time_limit_s)
        if most.objective == 0 and need.sum() > 0:
            raise InfeasibleProblem(diagnose(problem, columns))
        fewest = milp.fewest_for_images(
            clip(cap, need),
            need,
            avail,
            weight,
            int(most.objective),
            most,
            rel_gap=problem.rel_gap,
            time_limit=problem.time_limit_s,
        )
        if fewest.images.sum() < most.objective:
            raise SolverFailure(
                f"the GPUs found do fewer than the {most.objective:.0f} images the max-images model reached."
            )
        runs += [most, fewest]
        targets = fewest.images
    else:
        fewest = milp.min_gpus(
            clip(cap, need), need, avail, weight, rel_gap=problem.rel_gap, time_limit=problem.time_limit_s
        )
        if fewest is None:
            raise InfeasibleProblem(diagnose(problem, columns))
        if problem.objective == "gpus":
            fewest = _earliest(problem, columns, need, avail, weight, fewest)
        runs.append(fewest)
        targets = need.astype(np.int64)

    assignments = assign(problem, columns, fewest.x, targets, limit)
    plan = _plan(problem, assignments, runs, started)
    check(plan, problem)
    return plan


def _earliest(problem: Problem, columns: Columns, need, avail, weight, fewest: milp.MilpResult) -> milp.MilpResult:
    """Ties: many choices use the fewest GPUs (every type that does the job with one GPU, say). Take the
    one that can finish earliest: the shortest time limit, on a grid of 2**_TIE_STEPS steps down from the
    window to the earliest first batch, at which the same count still covers the images.

    The count only grows as the limit shrinks. Most plans have no tie, or one only a few steps down, so
    the search gallops down from the window (1, 2, 4, ... steps) and then bisects the last gap. HiGHS is
    asked only where cheaper answers fail: the GPUs already found still cover the images (yes), each
    class's largest-first count sums to more GPUs (no: a lower bound), or there is one class (that count
    is the answer, and its GPUs the plan's)."""
    steps = 2**_TIE_STEPS
    step = (problem.usable_s - float(np.min(columns.first_finish()))) / steps
    if not step > 0:
        return fewest
    one_class = int(np.count_nonzero(need > 0)) == 1
    best: milp.MilpResult | None = fewest  # the GPUs found furthest down (None: one class, left to the end)

    def as_few(k: int) -> bool:
        """Whether as few GPUs as `fewest` cover the images k steps before the window (kept in `best`)."""
        nonlocal best
        cap = clip(columns.capacity(problem.usable_s - k * step), need)
        if best is not None and ((cap.astype(float) * best.x).sum(axis=0) >= need).all():  # float: no overflow
            return True
        if _fewest_at_least(cap, need, avail) > fewest.objective + 1e-9:
            return False
        result = None if one_class else milp.min_gpus(cap, need, avail, weight, time_limit=problem.time_limit_s)
        if not one_class and (result is None or result.objective > fewest.objective + 1e-9):
            return False
        best = result
        return True

    good, bad = 0, 1
    while bad < steps and as_few(bad):
        good, bad = bad, 2 * bad
    bad = min(bad, steps)
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if as_few(middle) else (good, middle)
    if best is not None:
        return best
    # One class: the largest-first count there is no more than fewest's, so it is a fewest-GPU choice too.
    cap = clip(columns.capacity(problem.usable_s - good * step), need)
    (s,) = np.flatnonzero(need > 0)
    x = np.zeros_like(fewest.x)
    x[:, s] = milp.greedy_counts(cap[:, s], avail, int(need[s]))
    images = np.minimum(need, (cap.astype(float) * x).sum(axis=0)).astype(np.int64)
    return dataclasses.replace(fewest, x=x, images=images)


def _fewest_at_least(cap: np.ndarray, need: np.ndarray, avail: np.ndarray) -> float:
    """A lower bound on the GPUs that cover every class (inf where even all of them cannot cover one):
    each class's largest-first count, as if it had every GPU to itself."""
    if milp.plainly_infeasible(cap, need, avail):
        return math.inf
    return sum(milp.greedy_lower_bound(cap[:, s], avail, int(need[s])) for s in np.flatnonzero(need > 0))


def assign(problem: Problem, columns: Columns, x: np.ndarray, targets: np.ndarray, limit: float) -> list[Assignment]:
    """Spread each class's images over its GPUs so that they finish as early as those GPUs can.

    The shortest time tau at which the chosen GPUs can finish the class is found by bisection on
    their capacity (a step function of tau); each group then gets a share no larger than it can do
    by tau, split evenly over its GPUs, and each GPU the batch size that finishes its share first.
    """
    groups: Counter = Counter()
    for s in range(len(problem.sizes)):
        target = int(targets[s])
        types = [int(k) for k in np.flatnonzero(x[:, s])]
        if target == 0 or not types:
            continue
        tau = _shortest_time(columns, s, types, x[types, s], target, limit)
        per_gpu = [columns.pair_capacity(k, s, tau) for k in types]
        for k, share in zip(types, split(target, x[types, s] * np.array(per_gpu))):
            count = int(x[k, s])
            q, r = divmod(share, count)
            for images, gpus in ((q + 1, r), (q, count - r)):
                if gpus and images:
                    column = columns.best_column(k, s, images, tau)
                    if column is None:
                        raise SolverFailure(
                            f"no candidate finishes {images} images by {tau} s, though capacity says so."
                        )
                    groups[(k, s, column, images)] += gpus
    return [_assignment(problem, columns, key, count) for key, count in sorted(groups.items())]


def _shortest_time(columns: Columns, s: int, types: list[int], counts: np.ndarray, target: int, limit: float) -> float:
    """The shortest time (within 1e-12, relative) by which `counts` GPUs of `types` can do `target` images."""
    lo, hi = 0.0, limit
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2
        done = sum(int(n) * columns.pair_capacity(k, s, mid) for k, n in zip(types, counts))
        lo, hi = (lo, mid) if done >= target else (mid, hi)
        if hi - lo <= 1e-12 * hi:
            break
    return hi


def split(total: int, capacities: np.ndarray) -> list[int]:
    """`total` in whole shares proportional to `capacities` (largest remainder), none above its capacity."""
    capacities = [int(c) for c in capacities]
    whole = sum(capacities)
    exact = [total * c for c in capacities]  # Python ints: no overflow, no rounding
    shares = [e // whole for e in exact]
    order = sorted(range(len(capacities)), key=lambda i: (-(exact[i] % whole), i))
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _assignment(problem: Problem, columns: Columns, key, count: int) -> Assignment:
    k, s, column, images = key
    b = int(columns.batch[column])
    batches = -(-images // b)
    return Assignment(
        hardware=problem.gpu_types[k].name,
        input_size=problem.sizes[s],
        batch_size=b,
        count=count,
        batches=batches,
        images=images,
        last_batch=images - (batches - 1) * b,
        load_s=float(columns.load[column]),
        warmup_s=float(columns.warmup[column]),
        latency_s=float(columns.latency[column]),
        finish_s=float(columns.finish_at(column, batches)),
        label=columns.labels[column],
    )


def _plan(problem: Problem, assignments: list[Assignment], runs, started: float) -> Plan:
    gpus_by_type = Counter()
    planned = {size: 0 for size in problem.sizes}
    for a in assignments:
        gpus_by_type[a.hardware] += a.count
        planned[a.input_size] += a.images_total
    prices = {t.name: t.cost_per_hour for t in problem.gpu_types}
    priced = all(prices[name] is not None for name in gpus_by_type or prices)  # no GPUs: priced if the pool is
    cost = sum(n * prices[name] for name, n in gpus_by_type.items()) * problem.deadline_s / 3600 if priced else None
    total = sum(gpus_by_type.values())
    if problem.mode == "relaxed":
        value = float(sum(planned.values()))
    else:
        value = cost if problem.objective == "cost" else float(total)
    gap = max(r.gap for r in runs)
    return Plan(
        mode=problem.mode,
        objective=problem.objective,
        status="optimal" if gap == 0 else "feasible",
        gap=gap,
        deadline_s=problem.deadline_s,
        margin=problem.margin,
        usable_s=problem.usable_s,
        images_requested=dict(problem.images),
        images_planned=planned,
        assignments=tuple(assignments),
        gpus_by_type={t.name: gpus_by_type[t.name] for t in problem.gpu_types if gpus_by_type[t.name]},
        makespan_s=max((a.finish_s for a in assignments), default=0.0),
        objective_value=value,
        cost=cost,
        build_time_s=sum(r.build_s for r in runs),
        solver_time_s=sum(r.solve_s for r in runs),
        solve_time_s=time.perf_counter() - started,
    )


def check(plan: Plan, problem: Problem) -> None:
    """Re-check the plan against the problem in whole numbers; a failure here is a bug, never the user's."""
    limit = problem.usable_s
    types = {t.name: t for t in problem.gpu_types}
    for name, n in plan.gpus_by_type.items():
        if types[name].count is not None and n > types[name].count:
            raise SolverFailure(f"the plan uses {n} x {name}, but only {types[name].count} exist.")
    done = Counter()
    for a in plan.assignments:
        gpu = types[a.hardware]
        cands = gpu.for_size(a.input_size)
        ok = (cands.batch_size == a.batch_size) & (cands.latency_s == a.latency_s) & (cands.warmup_s == a.warmup_s)
        limit_batches = problem.max_batches_of(gpu)
        problems = [
            (not ok.any(), "is not one of the candidates"),
            (
                not (a.batches - 1) * a.batch_size < a.images <= a.batches * a.batch_size,
                "has an empty or overfull batch",
            ),
            (limit_batches is not None and a.batches > limit_batches, f"runs more than {limit_batches} batches"),
            (
                not fits(problem.load_of(gpu) + a.warmup_s + (a.batches - 1) * a.latency_s, limit),
                f"ends after {limit} s",
            ),
        ]
        for bad, what in problems:
            if bad:
                raise SolverFailure(f"internal check failed: {a} {what}.")
        done[a.input_size] += a.images_total
    for size, wanted in problem.images.items():
        if wanted is not None and done[size] > wanted or (problem.mode == "soft" and done[size] != wanted):
            raise SolverFailure(f"internal check failed: {done[size]} images of {size} px planned, {wanted} asked.")
