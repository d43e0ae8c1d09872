"""A batch plan (soft or relaxed) from profiles or predictors, in the order the data flows:

    the request checked (batch_request.py) -> each type's candidates gathered with their fixed costs, and
    what they rest on (batch_sources.py, basis.py) -> solved at a margin, or at the smallest margin that
    meets the deadline probability (batch_search.py) -> the plan with its annotations and context (context.py)

batch_text.py words the result for people.
"""

from __future__ import annotations

import dataclasses

import solvers
from perfmodel import shipped
from perfmodel.errors import InfeasibleError, InputError
from perfmodel.planning import choice
from perfmodel.planning.basis import Basis
from perfmodel.planning.batch_request import MAX_GPUS, MAX_IMAGES, PlanRequest, asked
from perfmodel.planning.batch_search import NoPlanError, plan_for_probability, solve
from perfmodel.planning.batch_sources import gather, warn_counted_import, warn_unmeasured_warmup
from perfmodel.planning.context import PlanAnnotations, PlannedJob, build_context, model_argument
from perfmodel.planning.makespan import DeadlineProbability
from perfmodel.planning.sources import pool_counts
from perfmodel.planning.spread import makespan_of

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
    does a `margin` given (0 included) or use='p99' without a confidence. Returns a PlannedJob: the solver's
    Plan (whose `annotations` say where its numbers come from) and what it was made of (model, sources,
    options). Raises NoPlanError (exit code 3) when no plan meets the deadline, InputError (naming the
    parameter, batch_request.CHECKS) for bad input.
    """
    a = asked(images, deadline, request, settings)
    r = a.request
    profiles, predictors = list(r.profiles), list(r.predictors)
    if not profiles and not predictors:
        profiles, predictors = shipped.sources()
    basis = Basis(extrapolate=r.extrapolate, probability=a.target is not None)
    model, model_path = model_argument(r.model)
    options, model = gather(profiles, predictors, model, a, basis)

    def solve_at(m: float, images: int | None = None, deadline_s: float | None = None, pool=None) -> solvers.Plan:
        """The plan at margin m, for `images` in place of the asked number (one input size only), by
        `deadline_s` in place of the asked deadline, with `pool`'s counts in place of the asked ones."""
        work = a.workload if images is None else {size: images for size in a.workload}
        other = r if pool is None else dataclasses.replace(r, pool={**r.pool, **pool})
        return solve(_problem(options, work, deadline_s or a.deadline_s, other, m, basis), r.time_limit)

    try:
        if a.target is None:
            plan = solve_at(a.margin)
            distribution = makespan_of(plan, basis)
        else:
            one_size = len(a.workload) == 1
            plan, distribution = plan_for_probability(solve_at, basis, a.deadline_s, a.target, one_size, r.pool)
    except InfeasibleError:
        usable = [name for name in options if not r.pool or r.pool.get(name)]
        warn_counted_import(basis, usable)  # a refusal may be theirs: every GPU type it could have used
        raise
    warn_unmeasured_warmup(basis, plan)
    warn_counted_import(basis, {x.hardware for x in plan.assignments if x.count})
    annotations = PlanAnnotations(
        basis.to_dict(plan),
        DeadlineProbability.of(distribution, a.deadline_s, a.target),
        choice.explain(plan, {(k, s): o.candidates(s) for k, o in options.items() for s in a.workload}),
    )
    context = build_context(
        model, model_path, sorted(a.workload), r.use, a.margin, profiles, predictors, options, basis, r.decode or 0.0
    )
    return PlannedJob(plan, context, annotations)


def _problem(options, workload, deadline_s, r: PlanRequest, margin: float, basis) -> solvers.Problem:
    counts, prices = pool_counts(options, r.pool, r.prices, r.objective)
    try:
        types = []
        for name, count in counts.items():
            o = options[name]
            candidates = [c for c in (o.candidates(size) for size in workload) if c is not None]
            load = basis.of(name).load.median_s  # the given load_time, the measured median, or a default
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
