"""A batch plan for people: what `perfmodel plan` prints (plan_text), and why no plan meets a deadline.

The text apart from the logic: make_plan (batch.py) builds the plan and its annotations; this module only
words them. The one-line summary, the deadline probability, what the plan was made of and its fixed costs,
the table of GPU groups, where each type's numbers come from and what they lack (notes, from the plan
JSON's basis keys, as a plan file holds them), why each type serves with its option, and the message of a
plan refused (explain).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import solvers
from perfmodel.planning.context import GIVEN_LOAD, LoadTime, PlannedJob
from perfmodel.units import figure, format_seconds


@dataclass(frozen=True)
class PlanText:
    """A plan as `perfmodel plan` says it: lines for standard output, the table of GPU groups (PLAN_COLUMNS)
    after them, and notes for standard error."""

    lines: tuple[str, ...]
    rows: tuple[tuple, ...]
    notes: tuple[str, ...]


def plan_text(job: PlannedJob) -> PlanText:
    """Everything `perfmodel plan` prints of a plan, in the order it prints it."""
    lines = [summary(job), *transferred_lines(job.annotations.basis)]
    line = probability_line(job.to_dict(per_gpu_limit=0))
    lines += ([line] if line else []) + describe(job)
    notes_ = [*notes(job.annotations.basis), *(choice.why for choice in job.annotations.option_choice)]
    notes_ += [  # a profile with half the drift figures (written by hand): the other half is a guess
        f"{name}: {drift.source}." for name, drift in job.annotations.deadline.drifts.items() if drift.partly_default
    ]
    notes_.append(
        f"finish = load + warm-up (the first batch) + (batches - 1) x batch time; Pyomo built the model in "
        f"{job.build_time_s * 1000:.1f} ms, HiGHS solved it in {job.solver_time_s * 1000:.1f} ms."
    )
    return PlanText(tuple(lines), tuple(plan_rows(job)), tuple(notes_))


def explain(d: solvers.Diagnosis) -> str:
    """The diagnosis as a message: why, then what would make a plan possible."""
    fixes = []
    more = [f"{n:,} more {name}" for name, n in d.extra_gpus.items() if n is not None]
    if more:
        fixes.append("add " + " or ".join(more))
    if d.max_images and d.images:
        fixes.append(f"ask for no more than {d.max_images:,} images by this deadline (or use `mode` relaxed)")
    if d.min_deadline_s is not None:
        shortest = format_seconds(d.min_deadline_s, up=True)
        fixes.append(f"allow a deadline of at least {shortest}" if d.exact else f"allow a deadline of {shortest}")
    message = f"no plan meets the deadline: {d.reason}."
    if fixes:
        message += " To make it feasible: " + "; or ".join(fixes) + "."
    elif d.unservable:
        message += " No number of GPUs helps: allow a longer deadline, or a smaller `margin` or `load_time`."
    return message


def summary(plan: PlannedJob) -> str:
    """One line: '12 x cpu, 100,000 images by 58.7 s of 60 s (margin 5%), optimal, solved in 14 ms'."""
    gpus = " + ".join(f"{n:,} x {name}" for name, n in plan.gpus_by_type.items()) or "no GPUs"
    asked = None if None in plan.images_requested.values() else sum(plan.images_requested.values())
    images = f"{plan.total_images:,} images"
    if plan.mode == "relaxed":
        images = (
            f"{plan.total_images:,} of {asked:,} images"
            if asked is not None
            else f"{plan.total_images:,} images (as many as fit)"
        )
    line = f"{gpus}, {images} by {format_seconds(plan.makespan_s)} of {format_seconds(plan.deadline_s)}"
    if plan.margin and plan.annotations.deadline.asked is None:
        line += f" (margin {plan.margin:.0%})"
    line += ", optimal" if plan.status == "optimal" else f", within {plan.gap:.2%} of optimal"
    if plan.cost is not None:
        line += f", cost {figure(plan.cost)} (GPUs paid for the whole deadline)"
    return line + f", solved in {format_seconds(plan.solve_time_s)}"


def probability_line(data: dict) -> str | None:
    """'finishes by 60 s with probability 0.97; median 41.2 s, p95 52.0 s' from the plan JSON."""
    p = data.get("deadline_probability")
    q = data.get("makespan_quantiles_s") or {}
    if p is None or "p50" not in q:
        return None
    line = f"finishes by {format_seconds(data['deadline_s'])} with probability {shown_probability(p)}; "
    line += f"median {format_seconds(q['p50'])}, p95 {format_seconds(q['p95'])}"
    asked = (data.get("confidence") or {}).get("asked")
    return line + (f" (asked for {asked:g})" if asked is not None else " (fixed rule: no probability asked)")


def shown_probability(p: float) -> str:
    if p >= 0.9995:
        return "> 0.999"
    return f"{p:.3f}" if p >= 0.99 else f"{p:.2f}"


PLAN_COLUMNS = (
    "GPUs",
    "type",
    "option",
    "size px",
    "batch",
    "batches",
    "last batch",
    "images/GPU",
    "load s",
    "warm-up s",
    "batch s",
    "finish s",
)


def plan_rows(plan: solvers.Plan) -> list[tuple]:
    """One row per group of identical GPUs, for console.table with PLAN_COLUMNS."""
    return [
        (
            a.count,
            a.hardware,
            a.label or "-",
            a.input_size,
            a.batch_size,
            a.batches,
            a.last_batch,
            a.images,
            a.load_s,
            a.warmup_s,
            a.latency_s,
            a.finish_s,
        )
        for a in plan.assignments
    ]


SPREAD_NAMES = {  # spread_by_source_s's keys, said for people
    "batch": "batch-to-batch spread",
    "load and warm-up": "load and warm-up",
    "drift": "the machine's drift",
    "profile": "the profiled medians' own uncertainty",
    "predictor": "the predictor's measured error",
    "transfer": "the error of the transfer to a GPU never profiled",
    "co-location": "co-located workers",
}


def _largest_part(job: PlannedJob) -> str:
    spread = job.annotations.deadline.spread_by_source_s
    if not spread or max(spread.values()) <= 0:
        return ""
    source = max(spread, key=spread.get)
    return f"; the largest part: {SPREAD_NAMES.get(source, source)}"


def _fixed_costs(name: str, load: LoadTime, fixed: dict | None, job: PlannedJob) -> list[str]:
    """What a worker of the type pays before its batches: the load and the first call, as measured (or
    what stands in for them), and their share of the deadline (fixed_costs.py)."""
    if fixed is None:  # a plan of no images of this type
        return []
    where = {"none": "", "default": "", GIVEN_LOAD: f" ({GIVEN_LOAD})"}.get(load.source, f" ({load.source})")
    line = f"load per {name}{where}: {fixed['load']['described']}"
    if load.source == "none":
        line += ": set it with `load_time`"
    for option, first in fixed["first_call_excess"].items():
        if first["samples"] or first["default"] is not None:
            line += (
                f"; first call{'' if len(fixed['first_call_excess']) == 1 else f' ({option})'}: {first['described']}"
            )
    spread = job.annotations.deadline.spread_by_source_s.get("load and warm-up")
    share = (
        f"load and first batch take {fixed['load_and_first_call_s']:.3g} s, {fixed['share_of_deadline']:.0%} of "
        f"the {format_seconds(job.deadline_s)} deadline"
    )
    if spread is not None:
        share += f"; their spread adds {format_seconds(spread)} to the makespan's p95"
    return [line, share]


def describe(job: PlannedJob) -> list[str]:
    """Lines for people: what was planned, from which files, under which assumptions."""
    c = job.context
    model = f"{c.model} ({c.model_path})" if c.model_path else c.model
    asked = job.annotations.deadline.asked
    if asked is not None:
        reserve = (
            f"{job.plan.margin:.1%} of the deadline kept in reserve for the spread{_largest_part(job)}"
            if job.plan.margin
            else "met with none of the deadline kept in reserve"
        )
        rule = f"planned for deadline probability {asked:g} ({reserve})"
    else:
        rule = f"{'p99' if c.use == 'p99' else 'median (p50)'} latency, margin {c.margin:.0%}"
    lines = [f"model {model} at {', '.join(f'{s} px' for s in c.input_sizes)}; {rule}"]
    for s in c.sources:
        where = _shown(s.path) if s.path else "a predictor object"
        lines.append(f"planned from {s.kind} {where}" + (f" (sha256 {s.sha256[:12]})" if s.sha256 else ""))
    types = job.annotations.basis.get("data_by_type") or {}
    for name, t in c.load_times.items():
        if name in job.plan.gpus_by_type:
            lines += _fixed_costs(name, t, (types.get(name) or {}).get("fixed_costs"), job)
    if c.decode_s:
        lines.append(f"decoding: {c.decode_s * 1000:.3g} ms per image, added to every batch (`decode`)")
    return lines


def _shown(path: str) -> str:
    """A path as short as it is clear: relative when it lies under the current directory."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def transferred_lines(basis_dict: dict) -> list[str]:
    """The first lines of a plan on numbers transferred to a GPU nobody profiled: which types, and that the
    deadline probability counts the transfer's error."""
    types = [name for name, t in basis_dict.get("data_by_type", {}).items() if t.get("transferred")]
    if not types:
        return []
    them = "it" if len(types) == 1 else "them"
    return [
        f"TRANSFERRED: the numbers for {', '.join(types)} were never measured on {them}; "
        "they are other GPUs' curves carried through the GPU specifications, and the deadline probability counts "
        "the transfer's held-out error (below). Profile one before promising this deadline."
    ]


def notes(basis_dict: dict) -> list[str]:
    """Lines for the readable output: per type used, where its numbers come from and what they lack."""
    lines = []
    for name, t in basis_dict.get("data_by_type", {}).items():
        for option, sources in t["numbers_from"].items():
            line = f"{name} {option}: {t['kinds'][option]} numbers from {'; '.join(sources)}"
            added = ((t.get("fixed_costs") or {}).get("first_call_added_s") or {}).get(option)
            if not t["warmup_measured"]:
                line += "; no warm-up measured: the first batch is timed as a steady one"
                if added:
                    line += f" plus a first call of {added:.3g} s (above)"
            lines.append(line + ".")
        lines += list(t["transferred"].values())
        if "workers_when_measured" in t:
            w = t["workers_when_measured"]
            lines.append(
                f"{name}: {w['planned']} workers planned from times measured with {w['measured_with']} running; "
                "workers on one machine slow each other: profile with "
                f"`perfmodel profile --alongside {w['planned'] - 1}` to time them as they will run."
            )
        for b in t.get("loosely_measured", []):
            if b.get("counted"):
                lines.append(
                    f"{name} {b['option']} at {b['input_size']} px: the profile knows batch {b['batch_size']}'s "
                    f"median time within +-{b['median_ci_rel']:.0%} only (95% interval); the deadline probability "
                    "counts it: profile again with a longer `perfmodel profile --max-time-per-point` to narrow it."
                )
                continue
            lines.append(
                f"{name} {b['option']} at {b['input_size']} px: the profile knows batch {b['batch_size']}'s median "
                f"time within +-{b['median_ci_rel']:.0%} only (95% interval), wider than the {b['margin']:.0%} "
                "margin: profile it again with a longer `perfmodel profile --max-time-per-point`, or plan with "
                f"`margin` {math.ceil(b['median_ci_rel'] * 100)}%."
            )
        for b in t["beyond_measured"]:
            lines.append(
                f"{name} {b['option']} at {b['input_size']} px: batch {b['batch_size']} lies beyond the largest "
                f"measured ({b['largest_measured']:g}); its time is extrapolated."
            )
    extrapolation = basis_dict.get("extrapolation", {})
    if extrapolation.get("allowed"):
        lines.append(
            "`extrapolate`: predictors were used past 2x the largest batch measured, where their error was "
            "never measured."
        )
    return lines
