"""A batch plan solved: at one margin, or at the smallest margin whose plan keeps the deadline with the
probability asked (the margin steps, then bisection), and the refusal said in terms of that probability.
"""

from __future__ import annotations

import math

import solvers
from perfmodel.errors import InfeasibleError, InputError, PerfmodelError
from perfmodel.planning.batch_request import MIN_CONFIDENCE
from perfmodel.planning.batch_text import explain
from perfmodel.planning.spread import makespan_of

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


def plan_for_probability(solve_at, basis, deadline_s: float, target: float, one_size: bool):
    """The plan for the smallest margin at which it finishes by the deadline with probability >= target,
    and its makespan distribution.

    A larger margin leaves the solver less time, so its plan finishes earlier (or uses more GPUs, or
    does fewer images in relaxed mode), and its probability grows. With no margin the plan is the median one.
    """
    tried, best = 0.0, 0.0  # the last margin tried; the highest probability of the plans made

    def met(m: float):
        nonlocal tried, best
        tried = m
        plan = solve_at(m)
        distribution = makespan_of(plan, basis)
        probability = distribution.probability(deadline_s)
        best = max(best, probability)
        return (plan, distribution) if probability >= target else None

    try:
        found = _smallest_margin(met)
    except NoPlanError as exc:
        raise _no_plan_for(exc, tried, best, solve_at, basis, deadline_s, target, one_size) from None
    if found is None:
        raise InfeasibleError(
            f"no plan finishes by the deadline with probability {target:g}, even with {MARGIN_STEPS[-1]:.0%} of "
            f"the deadline kept in reserve: allow a longer deadline{_lower_confidence(best, target, ', or')}."
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
    stepping through 0 and MARGIN_STEPS, then bisecting between the last two steps; None if no step gives it.

    A NoPlanError while stepping ends the search (a larger margin leaves less time, so it plans no better);
    while bisecting, below a margin that planned, it counts as nothing found there.
    """
    low, found = 0.0, None
    for m in (0.0, *MARGIN_STEPS):
        result = attempt(m)
        if result is not None:
            found = (m, result)
            break
        low = m
    for _ in range(BISECTION_STEPS if found and found[0] > 0 else 0):
        middle = (low + found[0]) / 2
        try:
            result = attempt(middle)
        except NoPlanError:
            result = None
        if result is not None:
            found = (middle, result)
        else:
            low = middle
    return found


def _no_plan_for(
    exc: NoPlanError, margin: float, best: float, solve_at, basis, deadline_s, target, one_size
) -> NoPlanError:
    """No plan of all the images meets the target: the solver's refusal, said in terms of the probability,
    at the smallest margin at which a plan of the most images it names meets the target too. So 'ask for
    no more than N images' names a request that plans (the N of the median plan does not). `exc` at
    `margin` is what is said where there is no such number (a mix, nothing fits) or no margin gives one."""
    last = (margin, exc)

    def met(m: float):
        """The solver's refusal at margin m where a plan of its most images meets the target, else None."""
        nonlocal last
        try:
            solve_at(m)
            return None  # all the images plan at m, only not surely enough: no refusal to say
        except NoPlanError as refused:
            last = (m, refused)
        most = last[1].diagnosis.max_images
        try:
            ok = most and _probability(solve_at(m, images=most), basis, deadline_s) >= target
        except NoPlanError:
            ok = False
        return last[1] if ok else None

    margin, exc = (_smallest_margin(met) if one_size and exc.diagnosis.max_images else None) or last
    d = exc.diagnosis
    message = explain(d).replace(
        "no plan meets the deadline", f"no plan meets the deadline with probability {target:g}"
    )
    advice = _lower_confidence(best, target, " Or")  # at no margin the median plan is refused: best is 0
    return NoPlanError(message + (f"{advice}." if advice else ""), d)


def _probability(plan: solvers.Plan, basis, deadline_s: float) -> float:
    return makespan_of(plan, basis).probability(deadline_s)
