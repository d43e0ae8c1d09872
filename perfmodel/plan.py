"""Plans from profiles or predictors: turn them into solver input (solvers/), solve, explain the answer.

Profiles plan over the batch sizes measured (status ok); predictors over every batch size from 1 to
max_batch(s). Every (backend, precision) measured on a hardware type is a candidate for that type:
the solver picks the fastest. Profiles hold milliseconds; the solver works in seconds.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import solvers
from perfmodel.errors import InfeasibleError, InputError, PerfmodelError, PerfmodelWarning
from perfmodel.plan_context import Option, PlannedJob, build_context, model_argument, option_of
from perfmodel.units import parse_count, parse_duration, parse_fraction

DEFAULT_INPUT_SIZE = 224
DEFAULT_MODEL = "resnet50"
LATENCY_COLUMNS = {"p50": "latency_ms", "p99": "latency_p99_ms"}


class NoPlanError(InfeasibleError):
    """No plan meets the deadline; `diagnosis` (solvers.Diagnosis) says why and what would."""

    def __init__(self, message: str, diagnosis: solvers.Diagnosis) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis


@dataclass
class _Options:
    """Candidate batch sizes gathered for one hardware type, per input size (seconds)."""

    columns: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]]] = field(default_factory=dict)
    load_s: list[float] = field(default_factory=list)
    load_from: set[str] = field(default_factory=set)  # "profile" / "predictor": where load_s came from
    details: dict[str, Option] = field(default_factory=dict)  # what each candidate label stands for

    def add(self, size: int, batch, latency_s, warmup_s, labels) -> None:
        self.columns.setdefault(size, []).append((np.asarray(batch), np.asarray(latency_s), np.asarray(warmup_s), list(labels)))

    def candidates(self, size: int) -> solvers.Candidates | None:
        parts = self.columns.get(size)
        if not parts:
            return None
        b, lat, warm, labels = zip(*parts)
        return solvers.Candidates(size, np.concatenate(b), np.concatenate(lat), np.concatenate(warm),
                                  labels=[x for part in labels for x in part])


def make_plan(
    images: int | str | None,
    deadline: float | str,
    *,
    input_size: int | None = None,
    mix: Mapping[int, int] | None = None,
    pool: Mapping[str, int] | None = None,
    profiles: Iterable[str | os.PathLike] = (),
    predictors: Iterable = (),
    model: str | None = None,
    mode: str = "soft",
    objective: str = "gpus",
    margin: float | str = 0.0,
    use: str = "p50",
    load_time: float | str | None = None,
    decode: float | str | None = None,
    max_batches: int | None = None,
    prices: Mapping[str, float] | None = None,
    backend: str | None = None,
    precision: str | None = None,
    gap: float | None = None,
    time_limit: float = 10.0,
) -> PlannedJob:
    """Plan how many GPUs of which type, and which batch sizes, meet `deadline` for `images`.

    images/deadline/margin/load_time accept numbers (images, seconds, fraction) or text ('100k', '60s',
    '5%'). With no profiles and no predictors, the files shipped in profiles/ are used; with no pool,
    every hardware type found is available in any number. `model` may be a TorchScript file: the plan
    is then for the model named by its stem and records the file. Returns a PlannedJob: the solver's
    Plan and what it was made of (model, sources, options). Raises NoPlanError (exit code 3) when no
    plan meets the deadline, InputError for bad input.
    """
    deadline_s = deadline if isinstance(deadline, (int, float)) else parse_duration(deadline, "--deadline")
    if isinstance(deadline_s, bool) or not (math.isfinite(deadline_s) and deadline_s > 0):
        raise InputError(f"the deadline must be a number of seconds > 0, not {deadline!r}.")
    margin = margin if isinstance(margin, (int, float)) else parse_fraction(margin, "--margin")
    load_s = load_time
    if isinstance(load_time, str):
        load_s = parse_duration(load_time, "--load-time", allow_zero=True)
    if use not in LATENCY_COLUMNS:
        raise InputError(f"--use must be p50 or p99, not {use!r}.")
    if mode not in solvers.problem.MODES or objective not in solvers.problem.OBJECTIVES:
        raise InputError(f"mode must be soft or relaxed and objective gpus or cost, not {mode!r} and {objective!r}.")
    workload = _workload(images, input_size, mix, mode)
    if mode == "relaxed" and None in workload.values() and not pool:
        raise InputError("relaxed mode with no --images plans as many images as a fixed pool can do: give --pool, e.g. --pool cpu=8.")

    profiles, predictors = list(profiles), list(predictors)
    if not profiles and not predictors:
        profiles, predictors = shipped_sources()
    model, model_path = model_argument(model)
    options, model = _gather(profiles, predictors, model, sorted(workload), use, backend, precision)
    decode_s = _with_decode(options, decode)
    problem = _problem(options, workload, deadline_s, pool, prices, mode, objective, margin, load_s, max_batches,
                       gap, time_limit)
    try:
        plan = solvers.solve(problem)
    except solvers.InfeasibleProblem as exc:
        raise NoPlanError(explain(exc.diagnosis), exc.diagnosis) from None
    except solvers.ProblemError as exc:
        raise InputError(str(exc)) from None
    except solvers.SolverFailure as exc:
        raise PerfmodelError(f"the solver failed: {exc}") from None
    context = build_context(model, model_path, sorted(workload), use, margin, profiles, predictors, options, load_s,
                            decode_s)
    return PlannedJob(plan, context)


def _workload(images, input_size, mix, mode) -> dict[int, int | None]:
    count = images if images is None or isinstance(images, int) else parse_count(images, "--images")
    if isinstance(count, bool) or (count is not None and count < 0):
        raise InputError(f"--images must be a whole number >= 0, not {images!r}.")
    if mix:
        if input_size is not None:
            raise InputError("give either --input-size or --mix, not both.")
        if count is not None and sum(mix.values()) != count:
            raise InputError(f"--mix adds up to {sum(mix.values()):,} images, but --images says {count:,}.")
        return {int(s): int(n) for s, n in mix.items()}
    if count is None and mode != "relaxed":
        raise InputError("soft mode needs --images (or --mix): how many images must be done by the deadline?")
    return {int(input_size or DEFAULT_INPUT_SIZE): count}


def shipped_sources() -> tuple[list[Path], list[Path]]:
    """The shipped predictors (profiles/*.json) if any, else the shipped profiles (profiles/*.csv)."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        folder = base / "profiles"
        predictors, profiles = sorted(folder.glob("*.json")), sorted(folder.glob("*.csv"))
        if predictors:
            return [], predictors
        if profiles:
            return profiles, []
    raise InputError("no profiles found in profiles/: give --profile FILE or --predictor FILE.")


def _gather(profiles, predictors, model, sizes, use, backend, precision) -> tuple[dict[str, _Options], str]:
    from perfmodel.schema import load_profiles

    frame = load_profiles(profiles) if profiles else None
    loaded = [_load_predictor(p) for p in predictors]
    models = set() if frame is None else set(frame["model"])
    models |= {g.model for p in loaded for g in p.groups}
    model = _pick_model(model, models)

    options: dict[str, _Options] = {}
    if frame is not None:
        _from_profiles(options, frame, model, sizes, use, backend, precision)
    for predictor in loaded:
        _from_predictor(options, predictor, model, sizes, use, backend, precision)
    for size in sizes:
        if not any(size in o.columns for o in options.values()):
            measured = sorted(_profile_sizes(frame, model))
            if size in measured:
                what = " ".join(x for x in (backend, precision) if x)
                raise InputError(f"no point of {model}{' ' + what if what else ''} at {size} px has status ok.")
            raise InputError(
                f"nothing measured at input size {size} for {model}; sizes measured: "
                f"{', '.join(map(str, measured)) or 'none'} (or give a predictor, which can extrapolate)."
            )
    return options, model


def _pick_model(model: str | None, models: set[str]) -> str:
    if model is not None:
        if model not in models:
            raise InputError(f"no {model} in the profiles or predictors given; they hold {', '.join(sorted(models))}.")
        return model
    if len(models) == 1:
        return next(iter(models))
    if DEFAULT_MODEL in models:
        return DEFAULT_MODEL
    raise InputError(f"the profiles hold several models ({', '.join(sorted(models))}): pick one with --model.")


def _profile_sizes(frame, model) -> set[int]:
    return set() if frame is None else {int(s) for s in frame.loc[frame["model"] == model, "input_size"]}


def _from_profiles(options, frame, model, sizes, use, backend, precision) -> None:
    rows = frame[(frame["status"] == "ok") & (frame["model"] == model) & frame["input_size"].isin(sizes)]
    if backend:
        rows = rows[rows["backend"] == backend]
    if precision:
        rows = rows[rows["precision"] == precision]
    column = LATENCY_COLUMNS[use]
    missing = rows["warmup_ms"].isna()
    if missing.any():
        warnings.warn(f"{int(missing.sum())} profile point(s) have no warm-up time; planning with their latency instead.",
                      PerfmodelWarning, stacklevel=3)
    for hardware, group in rows.groupby("hardware", sort=True):
        o = options.setdefault(str(hardware), _Options())
        if "load_ms" in group.columns and group["load_ms"].notna().any():
            o.load_s.append(float(np.nanmedian(group["load_ms"].to_numpy(dtype=float))) / 1000)
            o.load_from.add("profile")
        for size, at in group.groupby("input_size", sort=True):
            latency = at[column].to_numpy(dtype=float)
            warmup = at["warmup_ms"].to_numpy(dtype=float)
            warmup = np.where(np.isnan(warmup), latency, warmup)
            o.add(int(size), at["batch_size"].to_numpy(dtype=np.int64), latency / 1000, warmup / 1000,
                  [_label(r) for r in at.itertuples(index=False)])
            o.details.update((_label(r), option_of(r)) for r in at.itertuples(index=False))


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


def _from_predictor(options, predictor, model, sizes, use, backend, precision) -> None:
    for group in predictor.select(model=model, backend=backend, precision=precision):
        o = options.setdefault(group.hardware, _Options())
        load_ms = getattr(group, "load_ms", None)  # not in the agreed Predictor interface yet; used when present
        if load_ms is not None:
            o.load_s.append(float(load_ms) / 1000)
            o.load_from.add("predictor")
        low, high = min(group.input_sizes), max(group.input_sizes)
        for size in sizes:
            if not low <= size <= high:
                warnings.warn(f"{group.hardware} {group.backend} {group.precision}: input size {size} is outside the "
                              f"sizes measured ({low}-{high}); the predictor extrapolates.", PerfmodelWarning, stacklevel=3)
            largest = int(np.asarray(group.max_batch(size)).ravel()[0])
            if largest < 1:
                continue
            b = np.arange(1, largest + 1)
            latency = np.broadcast_to(np.asarray(getattr(group, LATENCY_COLUMNS[use])(b, size), dtype=float), b.shape)
            try:
                warmup = np.broadcast_to(np.asarray(group.warmup_ms(b, size), dtype=float), b.shape)
            except InputError:  # the profile had no warm-up times, so the predictor has no model for them
                warnings.warn(f"{group.hardware} {group.backend} {group.precision}: the predictor has no warm-up "
                              "model; planning with the latency instead.", PerfmodelWarning, stacklevel=3)
                warmup = latency
            good = np.isfinite(latency) & (latency > 0) & np.isfinite(warmup) & (warmup >= 0)
            if not good.all():
                warnings.warn(f"{group.hardware}: the predictor gives no usable time for {int((~good).sum())} batch "
                              f"size(s) at {size} px; they are left out.", PerfmodelWarning, stacklevel=3)
            label = f"{group.backend} {group.precision} (predicted)"
            o.add(size, b[good], latency[good] / 1000, warmup[good] / 1000, [label] * int(good.sum()))
            o.details[label] = option_of(group)


def _with_decode(options: dict[str, _Options], decode) -> float:
    """Add the time to decode each image to every batch (and first batch): b x decode seconds. For
    workers whose model shares the CPU cores with their image decoding (CPU workers on every core)."""
    if decode is None:
        return 0.0
    seconds = decode if isinstance(decode, (int, float)) else parse_duration(decode, "--decode-time", allow_zero=True)
    if isinstance(seconds, bool) or not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"--decode-time must be a duration >= 0 per image, e.g. 2ms, not {decode!r}.")
    for o in options.values():
        for size, parts in o.columns.items():
            o.columns[size] = [(b, lat + b * seconds, warm + b * seconds, labels) for b, lat, warm, labels in parts]
    return float(seconds)


def _problem(options, workload, deadline_s, pool, prices, mode, objective, margin, load_s, max_batches, gap,
             time_limit) -> solvers.Problem:
    found = sorted(options)
    if pool:
        unknown = [name for name in pool if name not in options]
        if unknown:
            raise InputError(f"no profile or predictor for {', '.join(unknown)} (hardware found: {', '.join(found)}).")
        counts = dict(pool)
    else:
        counts = {name: None for name in found}
    prices = dict(prices or {})
    unknown = [name for name in prices if name not in counts]
    if unknown:
        raise InputError(f"--price names {', '.join(unknown)}, which is not in the pool ({', '.join(counts)}).")
    if objective == "cost":
        unpriced = [name for name, n in counts.items() if name not in prices and n != 0]
        if unpriced:
            raise InputError(f"--objective cost needs a price per GPU-hour for {', '.join(unpriced)}: "
                             f"add e.g. --price {unpriced[0]}=2.5.")
    try:
        types = []
        for name, count in counts.items():
            o = options[name]
            candidates = [c for c in (o.candidates(size) for size in workload) if c is not None]
            load = load_s if load_s is not None else (float(np.median(o.load_s)) if o.load_s else 0.0)
            types.append(solvers.GpuType(name, count, candidates, cost_per_hour=prices.get(name), load_s=load))
        return solvers.Problem(types, workload, deadline_s, mode=mode, objective=objective, margin=margin,
                               max_batches=max_batches, mip_rel_gap=gap, time_limit_s=time_limit)
    except solvers.ProblemError as exc:
        raise InputError(str(exc)) from None


def explain(d: solvers.Diagnosis) -> str:
    """The diagnosis as a message: why, then what would make a plan possible."""
    fixes = []
    more = [f"{n:,} more {name}" for name, n in d.extra_gpus.items() if n is not None]
    if more:
        fixes.append("add " + " or ".join(more))
    if d.max_images and d.images:
        fixes.append(f"ask for no more than {d.max_images:,} images by this deadline (or use --mode relaxed)")
    if d.min_deadline_s is not None:
        shortest = format_seconds(d.min_deadline_s, up=True)
        fixes.append(f"allow a deadline of at least {shortest}" if d.exact else f"allow a deadline of {shortest}")
    message = f"no plan meets the deadline: {d.reason}."
    if fixes:
        message += " To make it feasible: " + "; or ".join(fixes) + "."
    elif d.unservable:
        message += " No number of GPUs helps: allow a longer deadline, or a smaller --margin or --load-time."
    return message


def format_seconds(value: float, up: bool = False) -> str:
    """'250 ms', '58.7 s', '12.5 min', '3.2 h' (3 significant digits); `up` rounds up, for a deadline to meet."""
    for unit, scale, above in (("h", 3600.0, 7200.0), ("min", 60.0, 600.0), ("s", 1.0, 1.0), ("ms", 0.001, 0.0)):
        if value >= above:
            break
    x = value / scale
    if up and x > 0:
        step = 10.0 ** (math.floor(math.log10(x)) - 2)
        x = math.ceil(x / step - 1e-6) * step
    return f"{x:,.0f} {unit}" if x >= 1000 else f"{x:.3g} {unit}"


def summary(plan: solvers.Plan) -> str:
    """One line: '12 x cpu, 100,000 images by 58.7 s of 60 s (margin 5%), optimal, solved in 14 ms'."""
    gpus = " + ".join(f"{n:,} x {name}" for name, n in plan.gpus_by_type.items()) or "no GPUs"
    asked = None if None in plan.images_requested.values() else sum(plan.images_requested.values())
    images = f"{plan.total_images:,} images"
    if plan.mode == "relaxed":
        images = f"{plan.total_images:,} of {asked:,} images" if asked is not None else f"{plan.total_images:,} images (as many as fit)"
    line = f"{gpus}, {images} by {format_seconds(plan.makespan_s)} of {format_seconds(plan.deadline_s)}"
    if plan.margin:
        line += f" (margin {plan.margin:.0%})"
    line += ", optimal" if plan.status == "optimal" else f", within {plan.gap:.2%} of optimal"
    if plan.cost is not None:
        line += f", cost {plan.cost:,.4g} (GPUs paid for the whole deadline)"
    return line + f", solved in {format_seconds(plan.solve_time_s)}"


PLAN_COLUMNS = ("GPUs", "type", "option", "size px", "batch", "batches", "last batch", "images/GPU",
                "load s", "warm-up s", "batch s", "finish s")


def plan_rows(plan: solvers.Plan) -> list[tuple]:
    """One row per group of identical GPUs, for console.table with PLAN_COLUMNS."""
    return [
        (a.count, a.hardware, a.label or "-", a.input_size, a.batch_size, a.batches, a.last_batch, a.images,
         a.load_s, a.warmup_s, a.latency_s, a.finish_s)
        for a in plan.assignments
    ]
