"""Why no plan meets the deadline, and what would make one: more GPUs, fewer images, a later deadline."""

from __future__ import annotations

import math
import time

import numpy as np

from solvers import milp
from solvers.batch_problem import Problem
from solvers.batch_solution import Diagnosis
from solvers.capacity import TOLERANCE, Columns, availability, clip, fits, needs

_BISECTION_STEPS = 60
_DOUBLINGS = 200
# Each model behind a hint gets at most this long (or the problem's time limit, if shorter), and all
# of them together the problem's time limit; a hint not proven in time is still true (enough GPUs,
# a deadline that works), only perhaps not the least, and Diagnosis.exact says so.
HINT_SECONDS = 1.0


def diagnose(problem: Problem, columns: Columns) -> Diagnosis:
    until = time.perf_counter() + problem.time_limit_s
    each = min(HINT_SECONDS, problem.time_limit_s)
    limit = problem.usable_s
    need, avail = needs(problem), availability(problem)
    cap = columns.capacity(limit)
    first = columns.first_finish()
    active = [s for s in range(len(problem.sizes)) if need[s] > 0]
    sizes = [problem.sizes[s] for s in active]
    fastest = {problem.sizes[s]: float(first[:, s].min()) if np.isfinite(first[:, s].min()) else None for s in active}
    unservable = tuple(problem.sizes[s] for s in active if cap[:, s].max() == 0)
    # A hint, not the plan: within HiGHS's default gap unless the problem asks for another.
    hint_gap = 1e-4 if problem.mip_rel_gap is None else problem.mip_rel_gap
    most = milp.max_images(clip(cap, need), need, avail, rel_gap=hint_gap, time_limit=each)
    exact = most.gap <= hint_gap
    max_by_size = {problem.sizes[s]: int(most.images[s]) for s in active}
    counted = not np.isinf(need).any()
    total = int(need.sum()) if counted else None

    extra: dict[str, int | None] = {}
    if counted:
        for k, gpu in enumerate(problem.gpu_types):
            if gpu.count is None:
                continue
            if unservable:  # no number of GPUs finishes a first batch in time
                extra[gpu.name] = None
                continue
            more, weight = avail.copy(), np.zeros(len(avail))
            more[k], weight[k] = math.inf, 1.0
            fewest = milp.min_gpus(clip(cap, need), need, more, weight, time_limit=each)
            extra[gpu.name] = None if fewest is None else max(0, int(fewest.x[k].sum()) - gpu.count)
            exact = exact and (fewest is None or fewest.gap == 0)
        shortest, proven = shortest_limit(columns, need, avail, limit, each, until)
        exact = exact and proven
    else:  # relaxed with no image count: anything at all would do
        usable = first[avail > 0]
        shortest = float(usable.min()) if usable.size and np.isfinite(usable.min()) else None

    return Diagnosis(
        reason=_reason(problem, unservable, fastest, most, total, sizes, avail),
        deadline_s=problem.deadline_s,
        usable_s=limit,
        images=total,
        unservable=unservable,
        fastest_first_batch_s=fastest,
        max_images=int(most.objective),
        max_images_gap=most.gap,
        max_images_by_size=max_by_size,
        extra_gpus=extra,
        min_deadline_s=None if shortest is None else shortest / (1.0 - problem.margin),
        exact=exact,
    )


def shortest_limit(
    columns: Columns, need: np.ndarray, avail: np.ndarray, start: float, each: float = 10.0, until: float = math.inf
) -> tuple[float | None, bool]:
    """The shortest time limit by which the pool finishes every class's images (None if no limit
    does), and whether that is proven the shortest.

    Capacity only grows with the limit, so feasibility is monotone: double until feasible, then bisect
    (to 1e-6 relative) and snap to the exact finish time. A limit on batches per GPU caps capacity:
    past saturation_time nothing changes. The answer is always a limit that works; when a model is
    not decided within `each` seconds, or the time runs out at `until`, it may not be the shortest.
    """
    first = columns.first_finish()
    if any(not np.isfinite(first[avail > 0, s]).any() for s in np.flatnonzero(need > 0)):
        return None, True
    proven = True

    def feasible(limit: float) -> bool:
        nonlocal proven
        cap = clip(columns.capacity(limit), need)
        if greedy_cover(cap, need, avail):
            return True
        answer = milp.is_feasible(cap, need, avail, time_limit=each)
        proven = proven and answer is not None
        return bool(answer)

    ceiling = columns.saturation_time()
    lo, hi = 0.0, start
    for _ in range(_DOUBLINGS):
        if feasible(hi):
            break
        if hi >= ceiling:
            return None, proven
        lo, hi = hi, min(hi * 2, ceiling)
    else:
        return None, proven
    for _ in range(_BISECTION_STEPS):
        if hi - lo <= 1e-6 * hi:
            break
        if time.perf_counter() > until:
            return hi, False
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return _snap(columns, feasible, lo, hi), proven


def _snap(columns: Columns, feasible, lo: float, hi: float) -> float:
    """The exact answer: capacity only changes when some GPU finishes a batch, so the shortest limit is
    the first feasible finish time in (lo, hi]; each candidate's latest finish by hi is a candidate."""
    with np.errstate(over="ignore"):  # inf where a tiny latency meets a long limit; capped next
        further = np.floor(np.maximum((hi - columns.first) / columns.latency + TOLERANCE, 0.0))
    further = np.minimum(further, columns.max_batches - 1)
    finish = columns.first + further * columns.latency
    values = np.unique(finish[(finish > lo) & fits(finish, hi)])
    left, right = 0, len(values)  # the first feasible value, by bisection over the sorted candidates
    while left < right:
        middle = (left + right) // 2
        left, right = (left, middle) if feasible(float(values[middle])) else (middle + 1, right)
    return float(values[left]) if left < len(values) else hi


def greedy_cover(cap: np.ndarray, need: np.ndarray, avail: np.ndarray) -> bool:
    """A quick sufficient test: fill the largest classes first with the fastest GPUs left."""
    left_gpus = avail.astype(float).copy()
    for s in np.argsort(-need, kind="stable"):
        left = need[s]
        for k in np.argsort(-cap[:, s], kind="stable"):
            if left <= 0 or cap[k, s] <= 0:
                break
            use = min(left_gpus[k], math.ceil(left / cap[k, s]))
            left_gpus[k] -= use
            left -= use * cap[k, s]
        if left > 0:
            return False
    return True


def _reason(problem: Problem, unservable, fastest, most: milp.MilpResult, total: int | None, sizes, avail) -> str:
    within = f"within {seconds(problem.usable_s)}"
    if problem.margin:
        within += f" (the {seconds(problem.deadline_s)} deadline less the {problem.margin:.0%} margin)"
    if unservable:
        parts = [
            f"{size} px (the fastest takes {seconds(fastest[size])}: model load + warm-up)"
            if fastest[size] is not None
            else f"{size} px (no GPU type has a batch size for it)"
            for size in unservable
        ]
        return f"no GPU type finishes even a first batch {within} for " + ", ".join(parts)
    if not (avail > 0).any():
        return "the pool has no GPUs (every count is 0)"
    if total is None:
        return f"no GPU in the pool finishes even one batch {within}"
    of = f"{total:,} images" if len(sizes) == 1 else f"{total:,} images ({', '.join(f'{s} px' for s in sizes)})"
    if most.gap:
        return f"the pool finishes {most.objective:,.0f} of the {of} {within} (the most, to {most.gap:.2g} relative)"
    return f"the pool finishes at most {most.objective:,.0f} of the {of} {within}"


def seconds(value: float) -> str:
    """A duration for a sentence: '250 ms', '57.3 s', '1,500 s'."""
    if value < 1:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s" if value < 1000 else f"{value:,.0f} s"
