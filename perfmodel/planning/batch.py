"""A batch plan (soft or relaxed) from profiles or predictors, in the order the data flows:

    the request checked (batch_request.py) -> the candidates gathered, with their basis (batch_sources.py)
    -> their fixed costs -> solved at a margin, or searched for the deadline probability (batch_search.py)
    -> the plan with its annotations and context (context.py)

batch_text.py words the result for people.
"""

from __future__ import annotations

import dataclasses

import solvers
from perfmodel import shipped
from perfmodel.errors import InputError
from perfmodel.fixed_costs import is_cpu
from perfmodel.planning import choice
from perfmodel.planning.basis import Basis
from perfmodel.planning.batch_request import (
    LATENCY_COLUMNS,
    MAX_GPUS,
    MAX_IMAGES,
    PlanRequest,
    checked_request,
    confidence_target,
    workload_of,
)
from perfmodel.planning.batch_search import NoPlanError, deadline_keys, plan_for_probability, solve
from perfmodel.planning.batch_sources import gather, warn_unmeasured_warmup, with_decode
from perfmodel.planning.context import PlannedJob, build_context, model_argument
from perfmodel.planning.sources import pool_counts
from perfmodel.planning.spread import makespan_of
from perfmodel.readers import switch
from perfmodel.units import MAX_SECONDS, parse_duration, parse_fraction, shown

__all__ = ["MAX_GPUS", "MAX_IMAGES", "NoPlanError", "PlanRequest", "make_plan"]


def make_plan(
    images: int | str | None, deadline: float | str, request: PlanRequest | None = None, **settings
) -> PlannedJob:
    """Plan how many GPUs of which type, and which batch sizes, meet `deadline` for `images`.

    How: a PlanRequest, and/or its fields as keywords (`make_plan("100k", "60s", pool={"h100": 8})`).
    images/deadline/margin/load_time/decode accept numbers (images, seconds, fraction) or text ('100k',
    '60s', '5%'). With no profiles and no predictors, the files shipped in profiles/ and
    profiles/reference/ are used; with no pool, every hardware type found is available in any number.
    `model` may be a TorchScript file: the plan is then for the model named by its stem and records the
    file. A predictor offers batch sizes up to 2x the largest measured at each input size (`extrapolate`:
    up to its max_batch). `transfer`: pool types nobody profiled (GPUs of the specification table) are planned
    on the given profiles' other GPUs carried through the GPU specifications (perfmodel.fitting.transfer), their
    held-out error counted in the deadline probability. `confidence` is the probability that the whole plan
    finishes by the deadline
    (default 0.95; 0.5 the median plan): the plan is the cheapest whose makespan distribution
    (planning/makespan.py) meets it; 'none' plans on the fixed rule alone (the margin, p50 or p99), as
    does a `margin` given (0 included) or use='p99' without a confidence. Returns a PlannedJob: the solver's Plan (whose
    `annotations` say where its numbers come from) and what it was made of (model, sources, options).
    Raises NoPlanError (exit code 3) when no plan meets the deadline, InputError for bad input.
    """
    r = checked_request(request, settings)
    deadline_s = deadline if isinstance(deadline, (int, float)) else parse_duration(deadline, "--deadline")
    if isinstance(deadline_s, bool) or not 0 < deadline_s <= MAX_SECONDS:
        raise InputError(
            f"the deadline must be a number of seconds > 0 and at most {MAX_SECONDS:,.0f} (10 years), "
            f"not {shown(deadline)}."
        )
    margin = 0.0 if r.margin is None else r.margin  # None: not given, so the confidence rule decides
    margin = margin if isinstance(margin, (int, float)) else parse_fraction(margin, "--margin")
    if isinstance(margin, bool) or not 0 <= margin < 1:  # NaN too; the probability rule would ignore it
        raise InputError(f"the margin must be a fraction in [0, 1), not {shown(r.margin)}.")
    load_s = r.load_time
    if isinstance(r.load_time, str):
        load_s = parse_duration(r.load_time, "--load-time", allow_zero=True)
    if not isinstance(r.use, str) or r.use not in LATENCY_COLUMNS:
        raise InputError(f"--use must be p50 or p99, not {r.use!r}.")
    if r.mode not in solvers.problem.MODES or r.objective not in solvers.problem.OBJECTIVES:
        raise InputError(
            f"mode must be soft or relaxed and objective gpus or cost, not {r.mode!r} and {r.objective!r}."
        )
    workload = workload_of(images, r.input_size, r.mix, r.mode)
    if r.mode == "relaxed" and None in workload.values() and not r.pool:
        raise InputError(
            "relaxed mode with no --images plans as many images as a fixed pool can do: give --pool, e.g. --pool cpu=8."
        )

    profiles, predictors = list(r.profiles), list(r.predictors)
    if not profiles and not predictors:
        profiles, predictors = shipped.sources()
    target = confidence_target(r.confidence, r.margin is not None, r.use)
    basis = Basis(extrapolate=switch(r.extrapolate, "extrapolate"), probability=target is not None)
    model, model_path = model_argument(r.model)
    options, model = gather(profiles, predictors, model, sorted(workload), r, basis)
    for name, o in options.items():
        t = basis.of(name)
        t.load, t.first_call = o.fixed_costs(name, load_s, {*t.warmup_unmeasured, *t.no_warmup_model})
        if not is_cpu(name):  # a GPU's first call is seconds: where not measured, the option's or the default's
            o.add_first_calls({label: cost.median_s for label, cost in t.first_call.items() if not cost.per_batch})
    decode_s = with_decode(options, r.decode, basis)

    def solve_at(m: float, images: int | None = None) -> solvers.Plan:
        """The plan at margin m, for `images` in place of the asked number (one input size only)."""
        work = workload if images is None else {size: images for size in workload}
        return solve(_problem(options, work, deadline_s, r, m, basis), r.time_limit)

    if target is None:
        plan = solve_at(margin)
        distribution = makespan_of(plan, basis)
    else:
        plan, distribution = plan_for_probability(solve_at, basis, deadline_s, target, len(workload) == 1)
    warn_unmeasured_warmup(basis, plan)
    annotations = {**basis.to_dict(plan), **deadline_keys(distribution, deadline_s, target)}
    annotations["option_choice"] = choice.explain(
        plan, {(k, s): o.candidates(s) for k, o in options.items() for s in workload}
    )
    plan = dataclasses.replace(plan, annotations=annotations)
    context = build_context(
        model, model_path, sorted(workload), r.use, margin, profiles, predictors, options, basis, decode_s
    )
    return PlannedJob(plan, context)


def _problem(options, workload, deadline_s, r: PlanRequest, margin: float, basis) -> solvers.Problem:
    counts, prices = pool_counts(options, r.pool, r.prices, r.objective)
    try:
        types = []
        for name, count in counts.items():
            o = options[name]
            candidates = [c for c in (o.candidates(size) for size in workload) if c is not None]
            load = basis.of(name).load.median_s  # --load-time, the measured median, or a stated default
            types.append(solvers.GpuType(name, count, candidates, cost_per_hour=prices.get(name), load_s=load))
        return solvers.Problem(
            types,
            workload,
            deadline_s,
            mode=r.mode,
            objective=r.objective,
            margin=margin,
            max_batches=r.max_batches,
            mip_rel_gap=r.gap,
            time_limit_s=r.time_limit,
        )
    except solvers.ProblemError as exc:
        raise InputError(str(exc)) from None
