"""Online serving plans from profiles or predictors, in the order the data flows:

    make_online_plan's parameters checked (online_request.py) -> the files read once, then each hardware
    type's batch service times (online_sources.py) -> solvers.online_solve -> the plan and its SLO on a
    drifting machine (slo_drift.py)

    from perfmodel.planning.online import make_online_plan
    plan = make_online_plan("400/s", "100ms", percentile=99, profiles=["p.csv"], input_size=64)

online_text.py words the result for people; online_configs.py writes the server settings it means.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from perfmodel.errors import InfeasibleError, InputError, PerfmodelError
from perfmodel.planning import slo_drift
from perfmodel.planning.online_request import OnlineAsked, asked
from perfmodel.planning.online_sources import OnlineSources, options_of, read
from perfmodel.planning.sources import pool_counts
from perfmodel.units import figure, format_seconds
from solvers import InfeasibleProblem, ProblemError, SolverError
from solvers.online_solve import OnlineDiagnosis, OnlineGpuType, OnlinePlan, OnlineProblem, ServiceTimes, solve_online


class NoOnlinePlanError(InfeasibleError):
    """No GPUs of the pool meet the SLO at the rate; `diagnosis` (solvers.online_solve.OnlineDiagnosis) says why
    and what would."""

    def __init__(self, message: str, diagnosis: OnlineDiagnosis) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis


@dataclass(frozen=True)
class OnlineJob:
    """An online plan with what the plan alone does not say: per hardware type, how often its SLO holds on a
    machine whose speed drifts (slo_drift.slo_drift)."""

    plan: OnlinePlan
    drift: dict

    def to_dict(self) -> dict:
        return {**self.plan.to_dict(), "drift": self.drift}


def make_online_plan(
    rate: float | str | None,
    slo: float | str,
    *,
    percentile: float | str = 99.0,
    profiles: Iterable[str | os.PathLike] = (),
    predictors: Iterable = (),
    pool: Mapping[str, int] | None = None,
    prices: Mapping[str, float] | None = None,
    objective: str = "gpus",
    request_size: int = 1,
    input_size: int | None = None,
    model: str | None = None,
    backend: str | None = None,
    precision: str | None = None,
    arrivals=None,
    max_queue_delays: Iterable[float] | None = None,
    simulate: bool = True,
    seed: int = 0,
    margin: float | str = 0.0,
) -> OnlinePlan:
    """How many GPUs of which type, with which max_batch and max_queue_delay, answer `rate` requests/s
    within `slo` for `percentile` percent of them.

    rate/slo/percentile accept numbers (requests/s, seconds, percent) or text ('400/s', '100ms', 'p99').
    `arrivals` is a CSV of arrival times (column arrival_s) or an array of them; with rate None its own
    rate is used. `margin` (a fraction, or text: '10%', '0.1'): the plan meets the SLO even with every
    batch's server time that much longer than the profile's (the round trip outside the server is not
    scaled); its predicted latencies stay those at the profile's speed. With no profiles and no
    predictors, the files shipped in profiles/ are used. Raises NoOnlinePlanError (exit code 3) when
    nothing meets the SLO, InputError (naming the parameter, online_request.CHECKS) for bad input.
    """
    a = asked(
        rate,
        slo,
        percentile=percentile,
        profiles=profiles,
        predictors=predictors,
        pool=pool,
        prices=prices,
        objective=objective,
        request_size=request_size,
        input_size=input_size,
        model=model,
        backend=backend,
        precision=precision,
        arrivals=arrivals,
        max_queue_delays=max_queue_delays,
        simulate=simulate,
        seed=seed,
        margin=margin,
    )
    return plan_online(a, read(a)).plan


def plan_online(a: OnlineAsked, found: OnlineSources) -> OnlineJob:
    """The plan for what was asked (online_request.asked) on the files read (online_sources.read)."""
    options = options_of(found.frame, found.predictors, a.model, a.input_size, a.backend, a.precision)
    try:
        problem = OnlineProblem(
            _gpu_types(options, a.pool, a.prices, a.objective),
            a.rate,
            a.slo,
            a.percentile,
            a.request_size,
            a.objective,
            arrivals_s=found.arrivals,
            delays_s=a.max_queue_delays,
            simulate=a.simulate,
            seed=a.seed,
            input_size=a.input_size,
            margin=a.margin,
        )
        largest = max(o.largest for found in options.values() for o in found)
        if problem.request_size > largest:
            raise InputError(
                f"`request_size` {problem.request_size} is above the largest batch timed ({largest} "
                "images): no GPU takes requests of that many images."
            )
        plan = solve_online(problem)
    except InfeasibleProblem as exc:
        raise NoOnlinePlanError(explain_online(exc.diagnosis), exc.diagnosis) from None
    except ProblemError as exc:
        raise InputError(str(exc)) from None
    except SolverError as exc:
        raise PerfmodelError(f"the solver failed: {exc}") from None
    hardware = [x.hardware for x in plan.assignments]
    return OnlineJob(plan, slo_drift.slo_drift(hardware, plan.margin, slo_drift.measured(found.profiles)))


def _gpu_types(options: dict[str, list[ServiceTimes]], pool, prices, objective) -> list[OnlineGpuType]:
    """The pool (every type found, in any number, without a pool) and its prices, checked as batch plans do."""
    counts, prices = pool_counts(options, pool, prices, objective)
    return [OnlineGpuType(name, n, options[name], prices.get(name)) for name, n in counts.items()]


def explain_online(d: OnlineDiagnosis) -> str:
    """The diagnosis as a message: why, then what would make a plan possible."""
    fixes = []
    more = [f"{n:,} more {name}" for name, n in d.extra_gpus.items() if n is not None and n > 0]
    if more:
        fixes.append("add " + " or ".join(more))
    if d.max_rate_per_s:
        fixes.append(f"ask for no more than {figure(d.max_rate_per_s)} requests/s")
    if d.min_slo_s is not None and d.min_slo_s > d.slo_s:
        fixes.append(f"allow an SLO of at least {format_seconds(d.min_slo_s, up=True)}")
    if d.margin:
        fixes.append("plan with a smaller `margin`")
    message = f"no plan meets the SLO: {d.reason}."
    if fixes:
        message += " To make it feasible: " + "; or ".join(fixes) + "."
    return message
