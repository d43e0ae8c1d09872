"""An online plan as `perfmodel plan --mode online` says it to people: a summary line, the table of GPU types
(ONLINE_COLUMNS) and notes; the JSON is OnlineJob.to_dict (planning/online.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.planning.online import OnlineJob
from perfmodel.planning.slo_drift import COVERED
from perfmodel.readers import plain
from perfmodel.units import figure, format_seconds
from solvers.online_solution import percent
from solvers.online_solve import OnlinePlan


@dataclass(frozen=True)
class OnlineText:
    """What `perfmodel plan --mode online` prints: lines for standard output, the table after them, notes for
    standard error (library text: they name parameters, which the command line says as flags)."""

    lines: tuple[str, ...]
    rows: tuple[tuple, ...]
    notes: tuple[str, ...]


def plan_text(job: OnlineJob, triton=(), ray_serve=None) -> OnlineText:
    """Everything the command prints of a plan, in the order it prints it; `triton` (its config files) and
    `ray_serve` (a file): where the plan's server settings are written (online_configs.py)."""
    plan = job.plan
    how = "the simulation" if any(a.simulated for a in plan.assignments) else "the analytic model"
    notes = [
        f"p50 and p99 from {how} at each GPU's share of the rate; utilization = that share / the rate "
        "at which full batches keep the GPU busy."
    ]
    if plan.margin:
        slowed = ", ".join(f"{a.hardware} {a.slowed_s * 1000:.3g} ms" for a in plan.assignments)
        notes.append(
            f"those are at the profile's speed; with every batch {percent(plan.margin)} slower, "
            f"p{plain(plan.percentile)}: {slowed} (the SLO {plan.slo_s * 1000:g} ms)."
        )
    notes += drift_lines(job.drift, plan.margin)
    notes += [f"wrote {path}" for path in [*triton, *([ray_serve] if ray_serve else [])]]
    if len(triton) > 1:
        notes.append("start each type's servers with tritonserver --model-config-name=<type>.")
    return OnlineText((online_summary(plan),), tuple(online_rows(plan)), tuple(notes))


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


def drift_lines(found: dict, margin: float) -> list[str]:
    """One sentence per type, for the readable output."""
    out = []
    for name, d in found.items():
        share = d["slo_holds_share"]
        if margin:
            planned = f"the SLO is planned with every batch {margin:.0%} slower, covering the drift about {share:.0%}"
        else:
            planned = f"the SLO is planned at the profile's speed, a speed it keeps about {share:.0%}"
        line = (
            f"{name}: its speed drifts (relative sd {d['rel_sd']:.1%}; {d['source']}): {planned} of the time "
            "(the plan's headroom may carry it further)"
        )
        if share < COVERED:  # a whole percent, rounded up: a margin rounded down would cover less
            need = math.ceil(d["margin_covering"]["margin"] * 100 - 1e-9)
            line += f"; `margin` {need}% covers {COVERED:.0%} of it"
        out.append(line + ".")
    return out
