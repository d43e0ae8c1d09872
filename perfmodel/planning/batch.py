"""Plans from profiles or predictors: turn them into solver input (solvers/), solve, explain the answer.

Profiles plan over the batch sizes measured (status ok); predictors over every batch size from 1 to
max_batch(s). Every (backend, precision) measured on a hardware type is a candidate for that type:
the solver picks the fastest. Profiles hold milliseconds; the solver works in seconds.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import solvers
from perfmodel import shipped
from perfmodel.errors import InfeasibleError, InputError, PerfmodelError, PerfmodelWarning
from perfmodel.fixed_costs import FixedCost, Samples, default_samples, first_call_samples_ms, is_cpu, load_samples_ms
from perfmodel.planning import arguments, choice, drift
from perfmodel.planning.basis import EXTRAPOLATION_FACTOR, Basis
from perfmodel.planning.batch_text import explain
from perfmodel.planning.context import Option, PlannedJob, build_context, model_argument, option_of
from perfmodel.planning.spread import batch_moments, makespan_of, undirected
from perfmodel.readers import number, plain, switch
from perfmodel.units import MAX_SECONDS, parse_count, parse_duration, parse_fraction, shown, spoken_list

# The most images (in all) and GPUs (of one type) a plan may hold: beyond them the solver's
# arithmetic would stop being exact (solvers.problem.MAX_COUNT); no real job comes near.
MAX_IMAGES = MAX_GPUS = solvers.problem.MAX_COUNT
DEFAULT_INPUT_SIZE = 224
DEFAULT_MODEL = "resnet50"
LATENCY_COLUMNS = {"p50": "latency_ms", "p99": "latency_p99_ms"}
MOMENT_COLUMNS = ("latency_mean_ms", "latency_std_ms")  # one batch's mean and sd, where the profile has them
DEFAULT_CONFIDENCE = 0.95  # the probability that the whole plan finishes by the deadline
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.999
TRANSFER_NAME = "made by --transfer"  # how a plan names the predictor --transfer fits on the fly
# Margins tried for a deadline probability, then bisected between the last too small and the first enough.
MARGIN_STEPS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.85, 0.95)
BISECTION_STEPS = 7


class NoPlanError(InfeasibleError):
    """No plan meets the deadline; `diagnosis` (solvers.Diagnosis) says why and what would."""

    def __init__(self, message: str, diagnosis: solvers.Diagnosis) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis


@dataclass
class _Options:
    """Candidate batch sizes gathered for one hardware type, per input size (seconds)."""

    # per input size: (batch, latency, warm-up, labels, where no warm-up was measured) per source
    columns: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]]] = field(
        default_factory=dict
    )
    # The fixed costs' samples (seconds), one per process that measured them (perfmodel/fixed_costs.py):
    # the loads, and per option the fresh first calls' excess over a steady batch (a compiled option's
    # first call compiles: its own); `sources` where they come from.
    loads: list[float] = field(default_factory=list)
    first_calls: dict[str, list[float]] = field(default_factory=dict)
    sources: dict[str, None] = field(default_factory=dict)
    details: dict[str, Option] = field(default_factory=dict)  # what each candidate label stands for

    def add(self, size: int, batch, latency_s, warmup_s, labels, unmeasured) -> None:
        unmeasured = np.broadcast_to(np.asarray(unmeasured, bool), np.shape(batch))
        self.columns.setdefault(size, []).append(
            (np.asarray(batch), np.asarray(latency_s), np.asarray(warmup_s), list(labels), unmeasured)
        )

    def add_first_calls(self, excess_s: dict[str, float]) -> None:
        """Add each option's first call beyond a steady batch to its candidates whose warm-up nobody measured."""
        for size, parts in self.columns.items():
            self.columns[size] = [
                (b, lat, warm + no * np.array([excess_s.get(x, 0.0) for x in labels]), labels, no)
                for b, lat, warm, labels, no in parts
            ]

    def add_fixed_costs(self, source: str, loads_ms, first_calls_ms: dict[str, list[float]]) -> None:
        if len(loads_ms) or any(len(v) for v in first_calls_ms.values()):
            self.sources[source] = None
        self.loads += [x / 1000 for x in loads_ms]
        for label, values in first_calls_ms.items():
            self.first_calls.setdefault(label, []).extend(x / 1000 for x in values)

    def fixed_costs(self, hardware: str, load_given: float | None, unmeasured) -> tuple[FixedCost, dict]:
        """The type's load, and each option's first call (`unmeasured`: the options whose warm-up nobody
        measured), each with the default that stands in where too few were measured."""
        source = "; ".join(self.sources) or "none"
        own = Samples(tuple(self.loads), source) if load_given is None else Samples((load_given,), "--load-time")
        first = default_samples(hardware, "first call")
        return FixedCost("load", own, default_samples(hardware, "load")), {
            label: FixedCost(
                "first call", Samples(tuple(self.first_calls.get(label, ())), source), first, label not in unmeasured
            )
            for label in self.details
        }

    def candidates(self, size: int) -> solvers.Candidates | None:
        parts = self.columns.get(size)
        if not parts:
            return None
        b, lat, warm, labels, _ = zip(*parts)
        return solvers.Candidates(
            size,
            np.concatenate(b),
            np.concatenate(lat),
            np.concatenate(warm),
            labels=[x for part in labels for x in part],
        )


@dataclass(frozen=True)
class PlanRequest:
    """How to plan, beyond what and by when: every setting of `make_plan`, with its default.

    Text is accepted where the command line takes it (margin '5%', load_time '2s', decode '2ms').
    """

    input_size: int | None = None
    mix: Mapping[int, int] | None = None
    pool: Mapping[str, int] | None = None
    profiles: tuple = ()
    predictors: tuple = ()
    model: str | None = None
    mode: str = "soft"
    objective: str = "gpus"
    margin: float | str | None = None  # None: not given (0, and the confidence rule); 0 given: the fixed rule
    use: str = "p50"
    load_time: float | str | None = None
    decode: float | str | None = None
    max_batches: int | None = None
    prices: Mapping[str, float] | None = None
    backend: str | None = None
    precision: str | None = None
    gap: float | None = None
    time_limit: float = 10.0
    extrapolate: bool = False
    confidence: float | str | None = None
    transfer: bool = False  # plan pool types nobody profiled on the other GPUs' curves, carried (transfer.py)


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
    r = _request(request, settings)
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
    workload = _workload(images, r.input_size, r.mix, r.mode)
    if r.mode == "relaxed" and None in workload.values() and not r.pool:
        raise InputError(
            "relaxed mode with no --images plans as many images as a fixed pool can do: give --pool, e.g. --pool cpu=8."
        )

    profiles, predictors = list(r.profiles), list(r.predictors)
    if not profiles and not predictors:
        profiles, predictors = shipped.sources()
    target = _check_confidence(r.confidence, r.margin is not None, r.use)
    basis = Basis(extrapolate=switch(r.extrapolate, "extrapolate"), probability=target is not None)
    model, model_path = model_argument(r.model)
    options, model = _gather(profiles, predictors, model, sorted(workload), r, basis)
    for name, o in options.items():
        t = basis.of(name)
        t.load, t.first_call = o.fixed_costs(name, load_s, {*t.warmup_unmeasured, *t.no_warmup_model})
        if not is_cpu(name):  # a GPU's first call is seconds: where not measured, the option's or the default's
            o.add_first_calls({label: cost.median_s for label, cost in t.first_call.items() if not cost.per_batch})
    decode_s = _with_decode(options, r.decode, basis)

    def solve_at(m: float, images: int | None = None) -> solvers.Plan:
        """The plan at margin m, for `images` in place of the asked number (one input size only)."""
        work = workload if images is None else {size: images for size in workload}
        return _solve(_problem(options, work, deadline_s, r, m, basis), r.time_limit)

    if target is None:
        plan = solve_at(margin)
        distribution = makespan_of(plan, basis)
    else:
        plan, distribution = _plan_for_probability(solve_at, basis, deadline_s, target, len(workload) == 1)
    _warn_unmeasured_warmup(basis, plan)
    annotations = {**basis.to_dict(plan), **deadline_keys(distribution, deadline_s, target)}
    annotations["option_choice"] = choice.explain(
        plan, {(k, s): o.candidates(s) for k, o in options.items() for s in workload}
    )
    plan = dataclasses.replace(plan, annotations=annotations)
    context = build_context(
        model, model_path, sorted(workload), r.use, margin, profiles, predictors, options, basis, decode_s
    )
    return PlannedJob(plan, context)


def _request(request, settings: dict) -> PlanRequest:
    """The request with the settings given as keywords, each checked for its type and shape (arguments.py).
    A misspelt keyword stays a TypeError (a programming error, as for any Python function)."""
    if request is not None and not isinstance(request, PlanRequest):
        raise InputError(f"request must be a PlanRequest (or None), not an object of type {type(request).__name__}.")
    r = dataclasses.replace(request or PlanRequest(), **settings)
    return dataclasses.replace(
        r,
        input_size=arguments.input_size(r.input_size),
        mix=arguments.mix(r.mix),
        pool=arguments.named_numbers(r.pool, "pool", "{'a100': 8}"),
        prices=arguments.named_numbers(r.prices, "prices", "{'a100': 2.5}"),
        profiles=tuple(arguments.sources(r.profiles, "profiles")),
        predictors=tuple(arguments.sources(r.predictors, "predictors", objects=True)),
        **{what: arguments.name(getattr(r, what), what) for what in ("model", "backend", "precision")},
        transfer=_flag(r.transfer, "transfer"),
    )


def _flag(value, what: str) -> bool:
    """A yes/no setting: True or False only ('no' is a truthy string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{what} must be True or False, not {shown(value)}.")
    return bool(value)


def _workload(images, input_size, mix, mode) -> dict[int, int | None]:
    count = images if images is None or isinstance(images, int) else parse_count(images, "--images", maximum=MAX_IMAGES)
    if isinstance(count, bool) or (count is not None and not 0 <= count <= MAX_IMAGES):
        raise InputError(f"--images must be a whole number from 0 to {MAX_IMAGES:,}, not {shown(images)}.")
    if mix and sum(mix.values()) > MAX_IMAGES:
        raise InputError(f"--mix adds up to more than {MAX_IMAGES:,} images, the most perfmodel plans at once.")
    if mix:
        if input_size is not None:
            raise InputError("give either --input-size or --mix, not both.")
        if count is not None and sum(mix.values()) != count:
            raise InputError(f"--mix adds up to {sum(mix.values()):,} images, but --images says {count:,}.")
        return {int(s): int(n) for s, n in mix.items()}
    if count is None and mode != "relaxed":
        raise InputError("soft mode needs --images (or --mix): how many images must be done by the deadline?")
    return {int(input_size or DEFAULT_INPUT_SIZE): count}


def _check_confidence(confidence, margin_given: bool, use: str) -> float | None:
    """The deadline probability to plan for, or None for the fixed rule (a margin given, even 0; or p99)."""
    if isinstance(confidence, str) and confidence.strip().lower() in ("none", "off"):
        return None
    if confidence is None:  # the default: a probability, unless a fixed rule was asked for
        return None if margin_given or use == "p99" else DEFAULT_CONFIDENCE
    value = number(confidence, "confidence", example="0.95 (a probability), or 'none' for a fixed rule")
    if not MIN_CONFIDENCE <= value <= MAX_CONFIDENCE:
        raise InputError(
            f"--confidence must lie from {MIN_CONFIDENCE} (the median plan) to {MAX_CONFIDENCE}, not "
            f"{confidence.strip() if isinstance(confidence, str) else plain(value)}; e.g. --confidence 0.95."
        )
    if margin_given or use == "p99":
        raise InputError(
            "give either --confidence (a probability of meeting the deadline) or a fixed rule (--margin, "
            "--use p99), not both."
        )
    return value


def _solve(problem: solvers.Problem, time_limit: float) -> solvers.Plan:
    try:
        return solvers.solve(problem)
    except solvers.InfeasibleProblem as exc:
        raise NoPlanError(explain(exc.diagnosis), exc.diagnosis) from None
    except solvers.ProblemError as exc:
        raise InputError(str(exc)) from None
    except solvers.errors.SolverTimeLimit:
        raise PerfmodelError(
            f"the solver found no plan within its time limit of {time_limit:g} s; allow more with --time-limit."
        ) from None
    except solvers.SolverFailure as exc:
        raise PerfmodelError(f"the solver failed: {exc}") from None


def _plan_for_probability(solve_at, basis, deadline_s: float, target: float, one_size: bool):
    """The plan for the smallest margin at which it finishes by the deadline with probability >= target,
    and its makespan distribution.

    A larger margin leaves the solver less time, so its plan finishes earlier (or uses more GPUs, or
    does fewer images in relaxed mode), and its probability grows. With no margin the plan is the median one.
    """
    tried = 0.0

    def met(m: float):
        nonlocal tried
        tried = m
        plan = solve_at(m)
        distribution = makespan_of(plan, basis)
        return (plan, distribution) if distribution.probability(deadline_s) >= target else None

    try:
        found = _smallest_margin(met)
    except NoPlanError as exc:
        raise _no_plan_for(exc, tried, solve_at, basis, deadline_s, target, one_size) from None
    if found is None:
        raise InfeasibleError(
            f"no plan finishes by the deadline with probability {target:g}, even with {MARGIN_STEPS[-1]:.0%} of "
            "the deadline kept in reserve: allow a longer deadline, or ask for a lower --confidence."
        )
    return found[1]


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


def _no_plan_for(exc: NoPlanError, margin: float, solve_at, basis, deadline_s, target, one_size) -> NoPlanError:
    """No plan of all the images meets the target: the solver's refusal, said in terms of the probability,
    at the smallest margin at which a plan of the most images it names meets the target too. So 'ask for
    no more than N images' names a request that plans (the N of the median plan does not). `exc` at
    `margin` is what is said where there is no such number (a --mix, nothing fits) or no margin gives one."""
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
    if margin > 0 and target > MIN_CONFIDENCE:  # at no margin the median plan is refused too: no lower one helps
        message += f" Or ask for a lower --confidence (it kept {margin:.0%} of the deadline in reserve)."
    return NoPlanError(message, d)


def _probability(plan: solvers.Plan, basis, deadline_s: float) -> float:
    return makespan_of(plan, basis).probability(deadline_s)


def deadline_keys(distribution, deadline_s: float, target: float | None) -> dict:
    """The plan JSON's keys about its deadline probability."""
    quantiles = distribution.quantiles()
    check = distribution.simulate(deadline_s)
    return {
        "deadline_probability": distribution.probability(deadline_s),
        "makespan_quantiles_s": {f"p{round(q * 100)}": v for q, v in quantiles.items()},
        "spread_by_source_s": distribution.spread_by_source(),
        "confidence": {
            "asked": target,
            "rule": "probability" if target is not None else "fixed (margin, p50 or p99)",
        },
        "makespan_model": {
            "method": "lognormal sum per worker, quadrature over the shared factors (planning/makespan.py)",
            "simulated_probability": None if check is None else check["probability"],
            "simulated_draws": None if check is None else check["draws"],
            "drift": {name: basis_drift.to_dict() for name, basis_drift in distribution.drifts.items()},
        },
    }


def _gather(profiles, predictors, model, sizes, r: PlanRequest, basis) -> tuple[dict[str, _Options], str]:
    use, backend, precision = r.use, r.backend, r.precision
    frame = _load_tagged(profiles) if profiles else None
    loaded = [(_source_name(p), _load_predictor(p)) for p in predictors]
    models = set() if frame is None else set(frame["model"])
    models |= {g.model for _, p in loaded for g in p.groups}
    model = _pick_model(model, models, [p for _, p in loaded])

    options: dict[str, _Options] = {}
    if frame is not None:
        _from_profiles(options, frame, model, sizes, use, backend, precision, basis)
    for name, predictor in loaded:
        _from_predictor(options, predictor, model, sizes, use, backend, precision, basis, name)
    unknown = [t for t in (r.pool or {}) if t not in options]
    if unknown and r.transfer:
        transferred = _transferred(frame, model, unknown, options)
        _from_predictor(options, transferred, model, sizes, use, backend, precision, basis, TRANSFER_NAME)
    elif unknown:
        raise InputError(_no_source_for(unknown, options, profiles))
    for size in sizes:
        if not any(size in o.columns for o in options.values()):
            measured = sorted(_profile_sizes(frame, model))
            if size in measured:
                what = " ".join(x for x in (backend, precision) if x)
                raise InputError(f"no point of {model}{' ' + what if what else ''} at {size} px has status ok.")
            hint = f"plan at one of them with --input-size {measured[0]}, or give" if measured else "give"
            raise InputError(
                f"nothing measured at input size {size} for {model}; sizes measured: "
                f"{', '.join(map(str, measured)) or 'none'}: {hint} a predictor, which can extrapolate."
            )
    return options, model


def _transferred(frame, model: str, targets: list[str], options):
    """A predictor of `targets`, nobody's profiled GPUs, carried from the profiles' other GPUs (plan --transfer)."""
    from perfmodel.fitting.train import transferred

    if frame is None:
        raise InputError(
            "--transfer carries measured curves to a GPU nobody profiled: give the profiles (--profile FILE), "
            "not only predictors."
        )
    rows = frame[frame["model"] == model].drop(columns=["profile_file"], errors="ignore")
    with warnings.catch_warnings():  # what the transfer cannot see is in its note, which the plan repeats
        warnings.simplefilter("ignore", PerfmodelWarning)
        return transferred(rows, targets)


def _no_source_for(unknown: list[str], options, profiles) -> str:
    """No profile or predictor for a pool type: and, for GPUs of the specification table, how to plan anyway."""
    from perfmodel.fitting.gpu_specs import load_gpu_specs, spec_key

    message = f"no profile or predictor for {', '.join(unknown)} (hardware found: {', '.join(sorted(options))})"
    specs = load_gpu_specs()
    known = [spec_key(t, specs) for t in unknown if spec_key(t, specs) is not None]
    if not known or not profiles:
        return message + "."
    paths = [str(p) for p in profiles]
    folder = shipped.profiles_folder()
    if folder is not None and sorted(map(Path, profiles)) == sorted(shipped.sources()[0]):  # the shipped ones
        paths = [str(folder / "*.csv"), str(folder / "reference" / "*.csv")]
    names = ",".join(known)
    return (
        message + f"; to plan on {', '.join(known)} from the curves measured on the other GPUs, carried through "
        "the GPU specifications (about 25% error, median, counted in the deadline probability), add --transfer, "
        f"or fit a predictor and plan on it: perfmodel fit {' '.join(paths)} --target-hardware {names} "
        f"--out transferred.json, then --predictor transferred.json."
    )


def _pick_model(model: str | None, models: set[str], predictors=()) -> str:
    if model is not None:
        if model not in models:
            raise InputError(
                f"no {model} in the profiles or predictors given; they hold {', '.join(sorted(models))}"
                + _left_out_at_fit(model, predictors)
                + "."
            )
        return model
    if len(models) == 1:
        return next(iter(models))
    if DEFAULT_MODEL in models:
        return DEFAULT_MODEL
    raise InputError(f"the profiles hold several models ({', '.join(sorted(models))}): pick one with --model.")


def _left_out_at_fit(model: str, predictors) -> str:
    """Why a predictor lacks `model`, where its fit left the model's groups out (provenance.skipped_groups)."""
    reasons = [
        f"{'/'.join(str(v) for v in s['group'].values())} has {s.get('reason', 'no reason given')}"
        for p in predictors
        for s in (p.provenance.get("skipped_groups") or [])
        if isinstance(s, dict) and isinstance(s.get("group"), dict) and s["group"].get("model") == model
    ]
    return f" (their fit left it out: {'; '.join(reasons)})" if reasons else ""


def _profile_sizes(frame, model) -> set[int]:
    return set() if frame is None else {int(s) for s in frame.loc[frame["model"] == model, "input_size"]}


def _load_tagged(paths):
    """The profiles concatenated, each row tagged with its file (`profile_file`) for the plan's basis."""
    import pandas as pd

    from perfmodel.schema import load_profile

    return pd.concat([load_profile(p).assign(profile_file=os.fspath(p)) for p in paths], ignore_index=True, sort=False)


def _source_name(source) -> str:
    return "a Predictor object" if hasattr(source, "select") else os.fspath(source)


def _record_profile_basis(basis, hardware, group) -> None:
    """Where each option's profile rows come from: their `source` (published or imported), else their file;
    how well each point's median is known; for a CPU type, how many workers ran while they were measured
    (--alongside)."""
    import pandas as pd

    labels = []
    for row in group.itertuples(index=False):
        label = _label(row)
        labels.append(label)
        ci = getattr(row, "latency_ci_rel", None)
        if ci is not None and np.isfinite(ci):  # published and imported rows have no spread to report
            known, key = basis.of(hardware).median_ci, (label, int(row.input_size), int(row.batch_size))
            known[key] = max(float(ci), known.get(key, 0.0))
        cited = str(getattr(row, "source", "") or "").strip()
        if cited and cited != "nan":
            basis.cite(hardware, label, cited, "published")
        else:
            basis.cite(hardware, label, f"profile {row.profile_file}", "measured")
    if hardware.startswith("cpu"):  # CPU workers share a machine's cores; GPU workers each have their own GPU
        alongside = group.get("alongside", pd.Series(0, index=group.index)).fillna(0)  # older files: measured alone
        t = basis.of(hardware)
        for label, n in (alongside.astype(int) + 1).groupby(labels).min().items():
            t.measured_workers[label] = min(int(n), t.measured_workers.get(label, int(n)))
    measured = group["warmup_ms"].notna().groupby([group["input_size"].to_numpy(), labels]).any()
    if not measured.all():  # an option with no warm-up at an input size: its first batch is timed as a steady one
        basis.of(hardware).warmup_measured = False


def _from_profiles(options, frame, model, sizes, use, backend, precision, basis) -> None:
    options_rows = frame[frame["model"] == model]
    if backend:
        options_rows = options_rows[options_rows["backend"] == backend]
    if precision:
        options_rows = options_rows[options_rows["precision"] == precision]
    rows = options_rows[(options_rows["status"] == "ok") & options_rows["input_size"].isin(sizes)]
    if "rate_per_s" in rows.columns:  # open-loop rows time a served stream, not a batch
        rows = rows[rows["rate_per_s"].isna()]
    column = LATENCY_COLUMNS[use]
    for hardware, group in rows.groupby("hardware", sort=True):
        o = options.setdefault(str(hardware), _Options())
        _record_profile_basis(basis, str(hardware), group)
        # every row of the option (any input size or status) that timed a load or a fresh first call
        processes = options_rows[options_rows["hardware"] == hardware]
        for file, part in processes.groupby("profile_file", sort=False):
            labels = np.array([_label(r) for r in part.itertuples(index=False)])
            first = {label: first_call_samples_ms(part[labels == label]) for label in dict.fromkeys(labels)}
            o.add_fixed_costs(f"profile {file}", load_samples_ms(part), first)
        _record_drift(basis.of(str(hardware)), group, str(hardware))
        for size, at in group.groupby("input_size", sort=True):
            latency = at[column].to_numpy(dtype=float)
            points = list(at.itertuples(index=False))
            labels = [_label(r) for r in points]  # once per row: the warm-up fill, the options and their details
            warmup, filled, unmeasured = _fill_warmup(
                at["batch_size"].to_numpy(dtype=float), np.array(labels), latency, at["warmup_ms"].to_numpy(dtype=float)
            )
            basis.of(str(hardware)).warmup_filled.update(filled)
            basis.of(str(hardware)).warmup_unmeasured.update(unmeasured)
            batch = at["batch_size"].to_numpy(dtype=np.int64)
            o.add(int(size), batch, latency / 1000, warmup / 1000, labels, np.isin(labels, list(unmeasured)))
            o.details.update((label, option_of(r)) for label, r in zip(labels, points))
            mean, sd = batch_moments(*(_column(at, c) for c in ("latency_ms", "latency_p99_ms", *MOMENT_COLUMNS)))
            moments = basis.of(str(hardware)).moments
            for label, b, m, d in zip(labels, at["batch_size"].astype(int), mean / 1000, sd / 1000):
                moments[(label, int(size), int(b))] = (float(m), float(d))


def _warn_unmeasured_warmup(basis, plan: solvers.Plan) -> None:
    """Say which of the options the plan uses had no warm-up time: profile points without one, predictor
    groups without its model (options it does not use, e.g. GPU rows under --pool cpu=2, are none of the
    user's concern)."""
    used = sorted({(a.hardware, a.label) for a in plan.assignments})
    names = list(
        dict.fromkeys(basis.of(h).no_warmup_model[label] for h, label in used if label in basis.of(h).no_warmup_model)
    )
    if names:
        warnings.warn(
            f"{len(names)} predictor group(s) have no warm-up model ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}); planning their first batch with the latency"
            f"{_first_call_added(basis, used)}.",
            PerfmodelWarning,
            stacklevel=3,
        )
    filled = sum(basis.of(h).warmup_filled[label] for h, label in used)
    unmeasured = sum(basis.of(h).warmup_unmeasured[label] for h, label in used)
    if filled:
        warnings.warn(
            f"{filled} profile point(s) have no warm-up time; planning with the warm-up excess over latency "
            "interpolated from the batch sizes measured with a fresh warm-up (same option and input size).",
            PerfmodelWarning,
            stacklevel=3,
        )
    if unmeasured:
        warnings.warn(
            f"{unmeasured} profile point(s) have no warm-up time; planning with their latency"
            f"{_first_call_added(basis, used)}.",
            PerfmodelWarning,
            stacklevel=3,
        )


def _first_call_added(basis, used) -> str:
    """' plus a first call of 2.08 s on a100' where a GPU's first batch got one (make_plan), else ' instead'."""
    said = []
    for h, label in used:
        cost = basis.of(h).first_call.get(label)
        if not is_cpu(h) and cost is not None and not cost.per_batch and cost.median_s > 0:
            said.append(f"{cost.median_s:.3g} s on {h} {label}")
    return f" plus a first call of {', '.join(said)} (see the load line)" if said else " instead"


def _column(frame, name):
    return frame[name].to_numpy(dtype=float) if name in frame.columns else None


def _record_drift(t, group, hardware: str) -> None:
    t.drift = drift.from_rows(group, hardware) or t.drift


def _fill_warmup(batch, labels, latency, warmup):
    """Warm-up times for every point of one input size: a point without one (a profile that measured
    warm-up at a few batch sizes only, --fresh-warmup-at) gets its latency plus the warm-up's excess over
    latency interpolated in batch size from the points of its option that have one (held flat past the
    ends); an option with none keeps its latency. Returns (warm-up, points filled and points left at latency,
    each by option)."""
    out, filled, unmeasured = warmup.copy(), Counter(), Counter()
    for label in dict.fromkeys(labels):
        mine = labels == label
        missing, known = mine & np.isnan(warmup), mine & ~np.isnan(warmup)
        if not missing.any():
            continue
        if known.any():
            order = np.argsort(batch[known])
            excess = np.maximum(warmup[known] - latency[known], 0.0)[order]
            out[missing] = latency[missing] + np.interp(batch[missing], batch[known][order], excess)
            filled[label] += int(missing.sum())
        else:
            out[missing] = latency[missing]
            unmeasured[label] += int(missing.sum())
    return out, filled, unmeasured


def _label(row) -> str:
    """The candidate's name in the plan: backend and precision, plus the serving mode when recorded."""
    parts = [row.backend, row.precision]
    for name in ("protocol", "mode", "concurrency"):
        value = getattr(row, name, None)
        if value is not None and str(value) not in ("", "nan", "<NA>"):
            parts.append(f"c{value}" if name == "concurrency" else str(value))
    return " ".join(parts)


def _load_predictor(source):
    if hasattr(source, "select"):  # already a Predictor
        return source
    from perfmodel.fitting import Predictor

    return Predictor.load(source)


def _from_predictor(options, predictor, model, sizes, use, backend, precision, basis, name="") -> None:
    quantity = LATENCY_COLUMNS[use]
    for group in predictor.select(model=model, backend=backend, precision=precision):
        o = options.setdefault(group.hardware, _Options())
        t = basis.of(group.hardware)
        loads = getattr(group, "load_samples_ms", ()) or ()
        if not loads and getattr(group, "load_ms", None) is not None:  # a file written before the samples
            loads = (group.load_ms,)
        low, high = min(group.input_sizes), max(group.input_sizes)
        label = f"{group.backend} {group.precision} " + (
            "(transferred)" if getattr(group, "transfer", None) else "(predicted)"
        )
        first = list(getattr(group, "first_call_samples_ms", ()) or ())
        o.add_fixed_costs(f"predictor {name}", loads, {label: first})
        _record_predictor_basis(basis, group, label, name, predictor)
        for size in sizes:
            if not low <= size <= high:
                warnings.warn(
                    f"{group.hardware} {group.backend} {group.precision}: input size {size} is outside the "
                    f"sizes measured ({low}-{high}); the predictor extrapolates.",
                    PerfmodelWarning,
                    stacklevel=3,
                )
            largest = int(np.asarray(group.max_batch(size)).ravel()[0])
            measured = _largest_measured(group, size)
            t.measured[(label, size)] = measured
            if not basis.extrapolate:
                largest = min(largest, int(EXTRAPOLATION_FACTOR * measured))
            if largest < 1:
                continue
            b = np.arange(1, largest + 1)
            with warnings.catch_warnings():  # beyond the measured range on purpose (up to 2x): said in the plan
                warnings.simplefilter("ignore", PerfmodelWarning)
                latency = np.broadcast_to(np.asarray(getattr(group, quantity)(b, size), dtype=float), b.shape)
                try:
                    warmup = np.broadcast_to(np.asarray(group.warmup_ms(b, size), dtype=float), b.shape)
                except InputError:  # the profile had no warm-up times, so the predictor has no model for them
                    warmup = None
            if warmup is None:
                t.no_warmup_model[label] = f"{group.hardware} {group.backend} {group.precision}"
                t.warmup_measured = False
                warmup = latency
            good = np.isfinite(latency) & (latency > 0) & np.isfinite(warmup) & (warmup >= 0)
            if not good.all():
                warnings.warn(
                    f"{group.hardware}: the predictor gives no usable time for {int((~good).sum())} batch "
                    f"size(s) at {size} px; they are left out.",
                    PerfmodelWarning,
                    stacklevel=3,
                )
            no_model = label in t.no_warmup_model
            o.add(size, b[good], latency[good] / 1000, warmup[good] / 1000, [label] * int(good.sum()), no_model)
            o.details[label] = option_of(group)
            _record_predictor_spread(t, group, label, size, b[good])


def _largest_measured(group, size: int) -> float:
    """The largest batch the group measured at this input size (its batch range for other predictors)."""
    if hasattr(group, "measured_batch_range"):
        return float(np.asarray(group.measured_batch_range(np.array([float(size)]))[1]).ravel()[0])
    return float(group.batch_range[1])


def _record_predictor_basis(basis, group, label: str, name: str, predictor) -> None:
    fitted_on = [
        os.path.basename(str(s.get("source", ""))) for s in getattr(predictor, "provenance", {}).get("sources", [])
    ]
    source = f"predictor {name}" + (f" (fitted on {', '.join(fitted_on)})" if fitted_on else "")
    transfer = getattr(group, "transfer", None)
    basis.cite(group.hardware, label, source, "transferred" if transfer else "predicted")
    if transfer:
        from perfmodel.fitting.report import transfer_note

        basis.of(group.hardware).transferred[label] = transfer_note(group)


def _record_predictor_spread(t, group, label: str, size: int, b: np.ndarray) -> None:
    """A predicted batch's mean and sd (a lognormal through the predicted p50 and p99, where the predictor
    models both) and the predictor's measured errors, inside its batch range and beyond."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfmodelWarning)
        p50 = np.broadcast_to(np.asarray(group.latency_ms(b, size), dtype=float), b.shape)
        p99 = None
        if "latency_p99_ms" in getattr(group, "models", {}):
            p99 = np.broadcast_to(np.asarray(group.latency_p99_ms(b, size), dtype=float), b.shape)
    mean, sd = batch_moments(p50, p99)
    for batch, m, d in zip(b, mean / 1000, sd / 1000):
        t.moments[(label, size, int(batch))] = (float(m), float(d))
    for region in ("inside", "beyond"):
        if (label, region) not in t.errors and hasattr(group, "error_samples"):
            samples = group.error_samples(beyond=region == "beyond", quantity="latency_ms")
            if samples is not None and getattr(group, "transfer", None) is None:
                samples = undirected(samples)
            if samples is not None:  # measured/predicted <= 0 (a negative prediction) is no slowdown factor
                t.errors[(label, region)] = tuple(float(x) for x in samples if x > -1)


def _with_decode(options: dict[str, _Options], decode, basis: Basis) -> float:
    """Add the time to decode each image to every batch (and first batch): b x decode seconds. For
    workers whose model shares the CPU cores with their image decoding (CPU workers on every core)."""
    if decode is None:
        return 0.0
    seconds = decode if isinstance(decode, (int, float)) else parse_duration(decode, "--decode-time", allow_zero=True)
    if isinstance(seconds, bool) or not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"--decode-time must be a duration >= 0 per image, e.g. 2ms, not {decode!r}.")
    for o in options.values():
        for size, parts in o.columns.items():
            o.columns[size] = [
                (b, lat + b * seconds, warm + b * seconds, labels, no) for b, lat, warm, labels, no in parts
            ]
    for t in basis.types.values():
        t.moments = {key: (mean + key[2] * seconds, sd) for key, (mean, sd) in t.moments.items()}
    return float(seconds)


def pool_counts(found, pool, prices, objective) -> tuple[dict, dict]:
    """The pool (every type found, in any number, without --pool) and its prices, checked: every type
    named has a source, every price a type, and a cost objective a price for every type it may use."""
    unknown = [name for name in (pool or {}) if name not in found]
    if unknown:
        raise InputError(
            f"no profile or predictor for {', '.join(unknown)} (hardware found: {', '.join(sorted(found))})."
        )
    counts = dict(pool) if pool else {name: None for name in sorted(found)}
    prices = dict(prices or {})
    unknown = [name for name in prices if name not in counts]
    if unknown:
        raise InputError(
            f"--price names {spoken_list(unknown)}, which {'is' if len(unknown) == 1 else 'are'} not in the "
            f"pool ({', '.join(counts)})."
        )
    if objective == "cost":
        unpriced = [name for name, n in counts.items() if name not in prices and n != 0]
        if unpriced:
            raise InputError(
                f"--objective cost needs a price per GPU-hour for {', '.join(unpriced)}: "
                f"add e.g. --price {unpriced[0]}=2.5."
            )
    return counts, prices


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
