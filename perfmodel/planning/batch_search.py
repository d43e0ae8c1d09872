"""A batch plan solved: at one margin, or at the smallest margin whose plan keeps the deadline with the
probability asked (the margin steps, then bisection), and the refusal said in terms of that probability.
"""

from __future__ import annotations

import dataclasses
import math

import solvers
from perfmodel.errors import InfeasibleError, InputError, PerfmodelError
from perfmodel.planning.batch_request import MAX_GPUS, MIN_CONFIDENCE
from perfmodel.planning.batch_text import explain
from perfmodel.planning.spread import makespan_of
from perfmodel.units import format_seconds

# Margins tried for a deadline probability, then bisected between the last too small and the first enough.
MARGIN_STEPS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85, 0.95)
BISECTION_STEPS = 7


class NoPlanError(InfeasibleError):
    """No plan meets the deadline; `diagnosis` (solvers.Diagnosis) says why and what would."""

    def __init__(self, message: str, diagnosis: solvers.Diagnosis) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis


def solve(problem: solvers.Problem, time_limit: float) -> solvers.Plan:
    """The solver's plan, or its refusal as a perfmodel error: NoPlanError with the diagnosis worded."""
    try:
        return solvers.solve(problem)
    except solvers.InfeasibleProblem as exc:
        raise NoPlanError(explain(exc.diagnosis), exc.diagnosis) from None
    except solvers.ProblemError as exc:
        raise InputError(str(exc)) from None
    except solvers.errors.SolverTimeLimit:
        raise PerfmodelError(
            f"the solver found no plan within its time limit of {time_limit:g} s; allow more with `time_limit`."
        ) from None
    except solvers.SolverFailure as exc:
        raise PerfmodelError(f"the solver failed: {exc}") from None


def plan_for_probability(solve_at, basis, deadline_s: float, target: float, one_size: bool, pool=None):
    """The plan for the smallest margin at which it finishes by the deadline with probability >= target,
    and its makespan distribution. `pool`: the GPUs given per type (None: any number).

    A larger margin leaves the solver less time, so its plan finishes earlier (or uses more GPUs, or
    does fewer images in relaxed mode), and its probability grows. With no margin the plan is the median one.
    """
    best = 0.0  # the highest probability of the plans made
    shortest = math.inf  # the shortest deadline a plan made on the way keeps with the target probability

    def met(m: float):
        nonlocal best, shortest
        plan = solve_at(m)
        distribution = makespan_of(plan, basis)
        probability = distribution.probability(deadline_s)
        best = max(best, probability)
        if probability >= target:
            return plan, distribution
        shortest = min(shortest, distribution.quantiles((target,))[target])
        return None

    try:
        found = _smallest_margin(met)
    except NoPlanError as exc:
        raise _no_plan_for(exc, best, shortest, solve_at, basis, deadline_s, target, one_size, pool) from None
    if found is None:
        longer = "a longer deadline"
        if math.isfinite(shortest):
            longer = f"a deadline of {format_seconds(shortest, up=True)}"
        raise InfeasibleError(
            f"no plan finishes by the deadline with probability {target:g}, even with {MARGIN_STEPS[-1]:.0%} of "
            f"the deadline kept in reserve: allow {longer}{_lower_confidence(best, target, ', or')}."
        )
    return found[1]


def _lower_confidence(best: float, target: float, lead: str) -> str:
    """The advice to ask for less, only where a plan made on the way would be met at an allowed confidence:
    below MIN_CONFIDENCE (the median plan) no lower one can be asked for."""
    if best < MIN_CONFIDENCE or best >= target:
        return ""
    most = math.floor(best * 1000) / 1000
    return f"{lead} ask for a `confidence` of at most {most:g} (a plan of all the images reached {best:.3g})"


def _smallest_margin(attempt):
    """(m, attempt(m)) for the smallest margin m at which attempt gives something other than None, found by
    stepping through 0 and MARGIN_STEPS, then bisecting between the last step too small and the first that
    gave something, or the first that no plan fits (NoPlanError): between a margin whose plan keeps too
    little of the deadline and one with no plan, a plan may keep enough (472 CPU workers plan 100,000 images
    by 60 s at 0.95 with 45% kept, and no plan fits with 50%). None if nothing is found and no step
    refused; the first refusal raised again if one did.
    """
    low, found, refused = 0.0, None, None
    for m in (0.0, *MARGIN_STEPS):
        try:
            result = attempt(m)
        except NoPlanError as exc:
            if m == 0.0:
                raise
            refused = (m, exc)
            break
        if result is not None:
            found = (m, result)
            break
        low = m
    top = found[0] if found else refused[0] if refused else 0.0
    for _ in range(BISECTION_STEPS if top > 0 else 0):
        middle = (low + top) / 2
        try:
            result = attempt(middle)
        except NoPlanError:
            top = middle  # no plan fits here: a smaller margin may
            continue
        if result is not None:
            found, top = (middle, result), middle
        else:
            low = middle
    if found is None and refused is not None:
        raise refused[1]
    return found


def _no_plan_for(
    exc: NoPlanError, best: float, shortest: float, solve_at, basis, deadline_s, target, one_size, pool
) -> NoPlanError:
    """No plan of all the images meets the target: the solver's refusal, said in terms of the probability,
    at the smallest margin at which a plan of the most images it names meets the target too. So 'ask for
    no more than N images' names a request that plans (the N of the median plan does not). `exc` is what is
    said where there is no such number (a mix, nothing fits) or no margin gives one; then its hints give
    way to a deadline a plan keeps at the target (_at_target)."""

    def met(m: float):
        """The solver's refusal at margin m where a plan of its most images meets the target, else None."""
        try:
            solve_at(m)
            return None  # all the images plan at m, only not surely enough: no refusal to say
        except NoPlanError as refused:
            found = refused
        most = found.diagnosis.max_images
        try:
            ok = most and _probability(solve_at(m, images=most), basis, deadline_s) >= target
        except NoPlanError:
            ok = False
        return found if ok else None

    found = _smallest_margin(met) if one_size and exc.diagnosis.max_images else None
    d = (found[1] if found else exc).diagnosis
    if found is None:
        d = _at_target(d, shortest, solve_at, basis, target)
    else:  # a deadline found with a margin kept is enough, not the least: a longer one needs less of it
        d = _more_gpus_at_target(d, pool or {}, solve_at, basis, deadline_s, target)
        d = dataclasses.replace(d, exact=d.exact and found[0] == 0)
    message = explain(d).replace(
        "no plan meets the deadline", f"no plan meets the deadline with probability {target:g}"
    )
    advice = _lower_confidence(best, target, " Or")  # at no margin the median plan is refused: best is 0
    return NoPlanError(message + (f"{advice}." if advice else ""), d)


def _at_target(d: solvers.Diagnosis, shortest: float, solve_at, basis, target: float) -> solvers.Diagnosis:
    """The refusal's hints where none of its kind holds at the target: the solver's (more GPUs, fewer images,
    the shortest deadline) are for the median plan or a margin kept, and no plan of the images they name
    keeps the target (on the H100, 9,240 images by 10 s: the median plan's 10.6 s, or 211 s with 95% of
    the deadline kept in reserve, where 12.6 s does). What is said instead: a deadline that a plan keeps
    with the target probability, `shortest` from the plans made on the way, else the median plan's at the
    shortest deadline the solver names; enough, not shown to be the least."""
    if not math.isfinite(shortest) and d.min_deadline_s is not None:
        try:
            plan = solve_at(0.0, deadline_s=d.min_deadline_s)
            shortest = makespan_of(plan, basis).quantiles((target,))[target]
        except NoPlanError:
            pass
    return dataclasses.replace(
        d,
        max_images=None,
        extra_gpus={name: None for name in d.extra_gpus},
        min_deadline_s=shortest if math.isfinite(shortest) else None,
        exact=False,
    )


def _more_gpus_at_target(d: solvers.Diagnosis, pool: dict, solve_at, basis, deadline_s, target):
    """How many more GPUs of each type make a plan at the target: the solver's count is for one margin, and
    each GPU pays its own load and first call, so the fewest at the target may be more, or none ('add 2
    more h100' was said at 0.5 for 9,240 images by 10 s on one H100, where three were refused). Searched
    with the margins as a plan is, in a pool of that type up to four times the solver's count."""
    counted = {}
    for name, n in d.extra_gpus.items():
        counted[name] = None
        if n is None or name not in pool:
            continue
        wider = {name: min(pool[name] + 4 * n, MAX_GPUS)}

        def met(m: float, wider=wider):
            plan = solve_at(m, pool=wider)
            return plan if _probability(plan, basis, deadline_s) >= target else None

        try:
            found = _smallest_margin(met)
        except NoPlanError:
            found = None
        if found is not None:
            counted[name] = max(found[1].gpus_by_type.get(name, 0) - pool[name], 1)
    return dataclasses.replace(d, extra_gpus=counted)


def _probability(plan: solvers.Plan, basis, deadline_s: float) -> float:
    return makespan_of(plan, basis).probability(deadline_s)
