"""Online serving plans from profiles or predictors: batch service times per GPU type, then solvers.online_solve.

    from perfmodel.planning.online import make_online_plan
    plan = make_online_plan("400/s", "100ms", percentile=99, profiles=["p.csv"], input_size=64)

A profile gives, per hardware type and option (backend, precision; for Triton profiles also protocol
and mode), the median and p99 time of one call at each batch size measured: those rows measured one
request at a time (no concurrency above 1, no open-loop rate). Between measured batch sizes the
times are interpolated linearly, below the smallest they are taken as the smallest's; the candidate
max_batch settings are the batch sizes measured. A Triton profile also gives the server's own time
(server_compute_ms): the rest of a request's latency (network, client) is added to every latency but
takes no server time. A predictor answers every batch size up to its max_batch; the candidates are
the powers of two up to it and max_batch itself.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping

import numpy as np

from perfmodel import shipped
from perfmodel.errors import InfeasibleError, InputError, PerfmodelError, PerfmodelWarning
from perfmodel.files import read_csv_text
from perfmodel.planning import arguments
from perfmodel.planning.sources import DEFAULT_INPUT_SIZE, load_predictor, option_label, pick_model, pool_counts
from perfmodel.readers import plain, switch
from perfmodel.units import figure, format_seconds, parse_duration, parse_fraction, parse_percentile, parse_rate
from solvers import InfeasibleProblem, ProblemError, SolverError
from solvers.online_solution import percent
from solvers.online_solve import OnlineDiagnosis, OnlineGpuType, OnlinePlan, OnlineProblem, ServiceTimes, solve_online

ARRIVAL_COLUMN = "arrival_s"
PREDICTED_LARGEST = 4096  # a predictor's batch sizes are asked up to this many images (max_batch may say far more)


class NoOnlinePlanError(InfeasibleError):
    """No GPUs of the pool meet the SLO at the rate; `diagnosis` (solvers.online_solve.OnlineDiagnosis) says why
    and what would."""

    def __init__(self, message: str, diagnosis: OnlineDiagnosis) -> None:
        super().__init__(message)
        self.diagnosis = diagnosis


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
    nothing meets the SLO, InputError for bad input.
    """
    rate_s = None if rate is None else rate if isinstance(rate, (int, float)) else parse_rate(rate)
    slo_s = slo if isinstance(slo, (int, float)) else parse_duration(slo, "`slo`")
    pct = percentile if isinstance(percentile, (int, float)) else parse_percentile(percentile)
    share = margin if isinstance(margin, (int, float)) else parse_fraction(margin, "`margin`")
    trace = read_arrivals(arrivals) if isinstance(arrivals, (str, os.PathLike)) else arrivals
    if rate_s is None and trace is None:
        raise InputError(
            "give `rate` (e.g. 400/s) or `arrivals` (a file of arrival times): online plans need a request rate."
        )
    profiles, predictors = arguments.sources(profiles, "profiles"), arguments.sources(predictors, "predictors", True)
    if not profiles and not predictors:
        profiles, predictors = shipped.sources()
    size = arguments.input_size(input_size) or DEFAULT_INPUT_SIZE
    pool = arguments.named_numbers(pool, "pool", "{'a100': 8}")
    prices = arguments.named_numbers(prices, "prices", "{'a100': 2.5}")
    model, backend, precision = (
        arguments.name(v, w) for v, w in ((model, "model"), (backend, "backend"), (precision, "precision"))
    )
    options = service_options(profiles, predictors, model, size, backend, precision)
    try:
        problem = OnlineProblem(
            _gpu_types(options, pool, prices, objective),
            rate_s,
            slo_s,
            pct,
            request_size,
            objective,
            arrivals_s=trace,
            delays_s=None if max_queue_delays is None else list(max_queue_delays),
            simulate=switch(simulate, "simulate"),
            seed=seed,
            input_size=size,
            margin=share,
        )
        largest = max(o.largest for found in options.values() for o in found)
        if problem.request_size > largest:
            raise InputError(
                f"`request_size` {problem.request_size} is above the largest batch timed ({largest} "
                "images): no GPU takes requests of that many images."
            )
        return solve_online(problem)
    except InfeasibleProblem as exc:
        raise NoOnlinePlanError(explain_online(exc.diagnosis), exc.diagnosis) from None
    except ProblemError as exc:
        raise InputError(str(exc)) from None
    except SolverError as exc:
        raise PerfmodelError(f"the solver failed: {exc}") from None


def _gpu_types(options: dict[str, list[ServiceTimes]], pool, prices, objective) -> list[OnlineGpuType]:
    """The pool (every type found, in any number, without a pool) and its prices, checked as batch plans do."""
    counts, prices = pool_counts(options, pool, prices, objective)
    return [OnlineGpuType(name, n, options[name], prices.get(name)) for name, n in counts.items()]


# ---------------------------------------------------------------------------------------------
# Service times


def service_options(
    profiles, predictors, model, input_size: int, backend=None, precision=None
) -> dict[str, list[ServiceTimes]]:
    """Per hardware type, every way of serving `model` at `input_size` that the sources time."""
    from perfmodel.schema import load_profiles

    frame = load_profiles(profiles) if profiles else None
    loaded = [load_predictor(p) for p in predictors]
    models = set() if frame is None else set(frame["model"])
    models |= {g.model for p in loaded for g in p.groups}
    model = pick_model(model, models, loaded)
    options: dict[str, list[ServiceTimes]] = {}
    if frame is not None:
        _from_profiles(options, frame, model, input_size, backend, precision)
    for predictor in loaded:
        _from_predictor(options, predictor, model, input_size, backend, precision)
    if not options:
        what = " ".join(x for x in (backend, precision) if x)
        sizes = _sizes_timed(frame, model, backend, precision) if frame is not None else []
        if sizes:
            measured = f"sizes timed so: {', '.join(map(str, sizes))}: plan at one with `input_size` {sizes[0]}"
        elif frame is not None:
            measured = (
                "the profiles time it so at no input size: profile it one request at a time (no open-loop rate, "
                "concurrency 1)"
            )
        else:
            measured = "give `input_size` of a size measured"
        raise InputError(
            f"nothing times {model}{' ' + what if what else ''} at {input_size} px one request at a time (status ok, "
            f"concurrency 1, no open-loop rate); {measured}, or give a predictor."
        )
    return options


def _sizes_timed(frame, model, backend, precision) -> list[int]:
    """The input sizes at which a profile times `model` one request at a time (what _from_profiles reads)."""
    rows = frame[(frame["status"] == "ok") & (frame["model"] == model)]
    if backend:
        rows = rows[rows["backend"] == backend]
    if precision:
        rows = rows[rows["precision"] == precision]
    return sorted({int(x) for x in _single_requests(rows)["input_size"]})


def _single_requests(frame):
    """The rows that time one call alone: no open-loop rate, concurrency 1 (or not recorded)."""
    keep = np.ones(len(frame), dtype=bool)
    if "rate_per_s" in frame.columns:
        keep &= frame["rate_per_s"].isna().to_numpy()
    if "concurrency" in frame.columns:
        c = frame["concurrency"].astype("Float64")
        keep &= (c.isna() | (c == 1)).to_numpy(dtype=bool)
    return frame[keep]


def _from_profiles(options, frame, model, size, backend, precision) -> None:
    rows = frame[(frame["status"] == "ok") & (frame["model"] == model) & (frame["input_size"] == size)]
    if backend:
        rows = rows[rows["backend"] == backend]
    if precision:
        rows = rows[rows["precision"] == precision]
    rows = _single_requests(rows)
    if not len(rows):
        return
    labels = [option_label(r) for r in rows.itertuples(index=False)]
    for (hardware, label), group in rows.assign(_label=labels).groupby(["hardware", "_label"], sort=True):
        by_batch = group.groupby("batch_size")[["latency_ms", "latency_p99_ms"]].median()
        measured = by_batch.index.to_numpy(dtype=int)
        b = np.arange(1, measured.max() + 1)
        p50 = np.interp(b, measured, by_batch["latency_ms"].to_numpy(dtype=float)) / 1000
        p99 = np.interp(b, measured, by_batch["latency_p99_ms"].to_numpy(dtype=float)) / 1000
        overhead = _overhead_s(group, p50)
        options.setdefault(str(hardware), []).append(
            ServiceTimes(p50 - overhead, np.maximum(p99, p50) - overhead, label, tuple(measured), overhead)
        )


def _overhead_s(group, p50) -> float:
    """A server's profile (Triton: server_compute_ms beside the client's latency) splits each request's
    time into the server's and the rest (network, client), which takes no server time: the rest of the
    smallest batch measured, as each request of a dynamic batch travels alone. 0 without that column."""
    if "server_compute_ms" not in group.columns:
        return 0.0
    smallest = group[group["batch_size"] == group["batch_size"].min()]
    client = smallest["latency_ms"].astype(float)  # means against the server's mean where the profile has them
    if "latency_mean_ms" in smallest.columns and smallest["latency_mean_ms"].notna().all():
        client = smallest["latency_mean_ms"].astype(float)
    rest = float((client - smallest["server_compute_ms"].astype(float)).median()) / 1000
    if not np.isfinite(rest) or rest <= 0:
        return 0.0
    return min(rest, 0.9 * float(np.min(p50)))  # the server's own time stays above zero at every batch size


def _from_predictor(options, predictor, model, size, backend, precision) -> None:
    for group in predictor.select(model=model, backend=backend, precision=precision):
        if int(group.key.get("concurrency", 1) or 1) != 1:
            continue
        low, high = min(group.input_sizes), max(group.input_sizes)
        if not low <= size <= high:
            warnings.warn(
                f"{group.hardware} {group.backend} {group.precision}: input size {size} is outside the "
                f"sizes measured ({low}-{high}); the predictor extrapolates.",
                PerfmodelWarning,
                stacklevel=4,
            )
        largest = min(int(np.asarray(group.max_batch(size)).ravel()[0]), PREDICTED_LARGEST)
        if largest < 1:
            continue
        b = np.arange(1, largest + 1)
        p50 = np.broadcast_to(np.asarray(group.latency_ms(b, size), dtype=float), b.shape) / 1000
        try:
            p99 = np.broadcast_to(np.asarray(group.latency_p99_ms(b, size), dtype=float), b.shape) / 1000
        except InputError:
            warnings.warn(
                f"{group.hardware}: the predictor has no p99 model; the batch time is taken as fixed.",
                PerfmodelWarning,
                stacklevel=4,
            )
            p99 = p50
        good = np.isfinite(p50) & (p50 > 0) & np.isfinite(p99)
        if not good.all():  # keep the batch sizes up to the first one without a usable time
            b = b[: int(np.argmin(good))]
        if len(b):
            label = f"{group.backend} {group.precision} (predicted)"
            options.setdefault(group.hardware, []).append(
                ServiceTimes(p50[: len(b)], np.maximum(p99, p50)[: len(b)], label)
            )


# ---------------------------------------------------------------------------------------------
# Arrival traces


def read_arrivals(path: str | os.PathLike) -> np.ndarray:
    """Arrival times (seconds, any origin) from a CSV with an `arrival_s` column; returned sorted."""
    import pandas as pd

    source = os.fspath(path)
    hint = f"give a CSV with a column '{ARRIVAL_COLUMN}' of arrival times in seconds"
    frame = read_csv_text(path, InputError, f"an arrivals CSV (a column '{ARRIVAL_COLUMN}' of times in seconds)")
    columns = [c.strip() for c in frame.columns]
    if ARRIVAL_COLUMN not in columns:
        raise InputError(f"{source} has no column '{ARRIVAL_COLUMN}' (it has {', '.join(columns) or 'none'}): {hint}.")
    text = frame.iloc[:, columns.index(ARRIVAL_COLUMN)].str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{source}, row {i + 1}, column '{ARRIVAL_COLUMN}': {text.iloc[i]!r} is not a finite number of seconds."
        )
    values = np.sort(values)
    if len(values) < 2 or values[-1] <= values[0]:
        raise InputError(f"{source} needs at least two arrivals at different times to give a rate.")
    return values


# ---------------------------------------------------------------------------------------------
# Explaining


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


def online_summary(plan: OnlinePlan) -> str:
    """'3 x cpu: 400 requests/s within 100 ms for 99% of them (up to 431/s), optimal, solved in 412 ms';
    with a margin '... of them (up to 431/s; margin 10%: holds the SLO with every batch 10% slower), ...'."""
    gpus = " + ".join(f"{n:,} x {name}" for name, n in plan.gpus_by_type.items())
    margin = ""
    if plan.margin:
        margin = f"; margin {percent(plan.margin)}: holds the SLO with every batch {percent(plan.margin)} slower"
    line = (
        f"{gpus}: {figure(plan.rate_per_s)} requests/s within {format_seconds(plan.slo_s)} for "
        f"{plain(plan.percentile)}% of them (up to {figure(plan.capacity_per_s)}/s{margin})"
    )
    if plan.request_size > 1:
        line += f", {plan.request_size} images per request"
    if plan.arrivals == "trace":
        line += ", arrivals from the trace"
    line += ", optimal" if plan.status == "optimal" else ", feasible (the simulation asked for more GPUs)"
    if plan.cost is not None:
        line += f", cost {figure(plan.cost)}/h"
    return line + f", solved in {format_seconds(plan.solve_time_s)}"


ONLINE_COLUMNS = (
    "GPUs",
    "type",
    "option",
    "size px",
    "max batch",
    "delay ms",
    "req/s per GPU",
    "utilization",
    "p50 ms",
    "p99 ms",
)


def online_rows(plan: OnlinePlan) -> list[tuple]:
    return [
        (
            a.count,
            a.hardware,
            a.option or "-",
            a.input_size,
            a.max_batch,
            a.max_queue_delay_s * 1000,
            a.rate_per_gpu_s,
            f"{a.utilization:.0%}",
            a.predicted_p50_s * 1000,
            a.predicted_p99_s * 1000,
        )
        for a in plan.assignments
    ]


def triton_settings(plan: OnlinePlan, cpu_types: Iterable[str] = ("cpu",)) -> dict:
    """The config.pbtxt settings each GPU type of the plan assumes (one model instance per device)."""
    from perfmodel.planning.triton_config import BatchingSettings

    cpu = set(cpu_types)
    return {
        a.hardware: BatchingSettings(
            a.max_batch,
            a.preferred_batch_sizes,
            int(round(a.max_queue_delay_s * 1e6)),
            "KIND_CPU" if a.hardware in cpu else "KIND_GPU",
        )
        for a in plan.assignments
    }


def triton_header(plan: OnlinePlan) -> str:
    margin = f", margin {percent(plan.margin)}" if plan.margin else ""
    lines = [
        f"perfmodel plan --mode online: {plan.rate_per_s:,.6g} requests/s, p{plain(plan.percentile)} <= "
        f"{plan.slo_s * 1000:g} ms{margin}, {plan.request_size} image(s) per request."
    ]
    for a in plan.assignments:
        lines.append(
            f"{a.hardware}: {a.count} device(s), each its own model instance behind a load balancer "
            f"({figure(a.rate_per_gpu_s)} requests/s each); predicted p50 {a.predicted_p50_s * 1000:.3g} ms, "
            f"p99 {a.predicted_p99_s * 1000:.3g} ms."
        )
    return "\n".join(lines)
