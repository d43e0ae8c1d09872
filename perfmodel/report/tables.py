"""The report's tables, formatted for a person: a profile's key numbers and provenance, a predictor's
error report, a plan's totals and assignments."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from perfmodel.report.content import Table
from perfmodel.report.groups import SOURCE, Layout
from perfmodel.report.plan_figures import assignment_label
from perfmodel.report.style import number


def _at(rows: pd.DataFrame, column: str, index) -> str:
    if column not in rows.columns:
        return "-"
    return number(float(rows.loc[index, column]))


def key_numbers(lay: Layout) -> Table:
    headers = (
        "compared",
        "input size (px)",
        "batch sizes ok",
        "largest ok",
        "smallest OOM",
        "latency at the smallest batch (ms)",
        "best throughput (images/s)",
        "warm-up ÷ latency",
        "peak memory at largest ok (MiB)",
    )
    rows = []
    for s in lay.series:
        r = s.rows
        b = r["batch_size"].astype(int)
        first, last = r.index[0], r.index[-1]
        ips = s.throughput_ips
        best = ips.idxmax()
        ratio = (r["warmup_ms"].astype(float) / r["latency_ms"].astype(float)).dropna()
        rows.append(
            (
                s.group or lay.common,
                str(s.input_size),
                f"{b.min():,}–{b.max():,} ({len(r)})" if len(r) > 1 else f"{b.min():,}",
                f"{b.max():,}",
                f"{s.smallest_oom:,}" if s.smallest_oom else "none measured",
                f"{_at(r, 'latency_ms', first)} (batch {b[first]:,})",
                f"{number(ips[best])} (batch {b[best]:,})",
                f"{number(ratio.min())}–{number(ratio.max())}" if len(ratio) else "-",
                _at(r, "memory_mb", last),
            )
        )
    note = "Points with status ok only; 'smallest OOM' is the smallest batch that ran out of memory at that input size."
    return Table("Key numbers", headers, tuple(rows), note)


PROVENANCE = (
    ("hardware", "hardware"),
    ("device_name", "device"),
    ("device_memory_mb", "device memory (MiB)"),
    ("torch", "torch"),
    ("cuda", "CUDA"),
    ("driver", "driver"),
    ("perfmodel", "perfmodel"),
    ("threads", "threads"),
    ("warmup_method", "warm-up measured"),
    ("host", "host"),
    ("created_at", "created at"),
    ("load_avg_1m", "load average (1 min)"),
)


def provenance(df: pd.DataFrame) -> Table:
    """Per profile file: where and when it was measured, and how busy the machine was."""
    present = [(c, h) for c, h in PROVENANCE if c in df.columns and _span(df[c]) != "-"]
    headers = ("profile", "points (ok / oom / error)", *(h for _, h in present))
    rows = []
    for source, frame in df.groupby(SOURCE, sort=False):
        counts = frame["status"].value_counts()
        cells = [str(source), " / ".join(str(int(counts.get(s, 0))) for s in ("ok", "oom", "error"))]
        cells += [_span(frame[c]) for c, _ in present]
        rows.append(tuple(cells))
    return Table("Provenance", headers, tuple(rows), "A range (first–last, or min–max for numbers) where rows differ.")


def _span(values: pd.Series) -> str:
    values = values.dropna()
    values = values[values.astype(str).str.strip() != ""]
    if values.empty:
        return "-"
    if pd.api.types.is_numeric_dtype(values):
        lo, hi = float(values.min()), float(values.max())
        return number(lo) if lo == hi else f"{number(lo)}–{number(hi)}"
    unique = list(dict.fromkeys(values.astype(str)))
    if len(unique) == 1:
        return unique[0]
    ordered = sorted(unique)
    return f"{ordered[0]} – {ordered[-1]}" if len(unique) > 3 else ", ".join(unique)


def _flatten(value, prefix: str = "") -> dict[str, object]:
    """A nested dict as {'a › b': leaf}; lists stay leaves."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix} › {k}" if prefix else str(k)))
        return out
    return {prefix: value}


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float, np.number)):
        return "-" if isinstance(value, float) and math.isnan(value) else number(float(value))
    if isinstance(value, dict):  # nested in a plan ('load_time', 'sources'): not Python's {'s': 1.9299300000000001}
        pairs = ", ".join(f"{str(k).replace('_', ' ')}: {_cell(v)}" for k, v in value.items())
        return f"({pairs})" if pairs else "-"
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (list, tuple)) for v in value):
            return "; ".join(" → ".join(_cell(x) for x in v) for v in value)
        return ", ".join(_cell(v) for v in value) if value else "-"
    return str(value)


# What a person reads for the keys of a predictor's error report and of a plan; a key not listed here
# is shown with its underscores as spaces. A nested key reads as its parts joined by ': '.
NAMES = {
    # predictor error report
    "latency_ms": "median latency (ms)",
    "latency_p99_ms": "p99 latency (ms)",
    "warmup_ms": "warm-up (ms)",
    "memory_mb": "memory (MiB)",
    "max_batch": "largest batch",
    "family": "model family chosen",
    "features": "features (linear family)",
    "rows": "points fitted",
    "training_range": "fitted on (smallest, largest)",
    "batch_size": "batch sizes",
    "input_size": "input sizes (px)",
    "cv_mape": "cross-validated error, mean %",
    "cv_max_error": "cross-validated error, worst %",
    "cv_points": "cross-validated points",
    "cv_errors_pct": "cross-validated errors, each point %",
    "errors_pct": "errors, each point %",
    "measured": "measured (px → smallest → largest batch)",
    "rows_from": "points fitted from (source GPUs)",
    "transfer_error": "held-out transfer error",
    "reference_errors": "two-batch-size line's error on published curves",
    "selection": "choice",
    "lobo_mape": "leave-one-batch-size-out error %",
    "extrapolation": "extrapolating",
    "batch_2x": "to 2x the batch",
    "batch_half": "past the median batch",
    "split": "how",
    "mape": "mean error %",
    "max_error": "worst error %",
    "points": "points tested",
    "note": "note",
    "measured_ci_pct_median": "measured median known to +- % (typical)",
    "measured_ci_pct_max": "measured median known to +- % (worst)",
    "reason": "why no model",
    "memory_capacity_mb": "memory capacity (MiB)",
    "largest_ok": "largest ok (px → batch)",
    "smallest_oom": "smallest out of memory (px → batch)",
    "method": "method",
    # plan
    "status": "status",
    "mode": "mode",
    "objective": "objective",
    "objective_value": "objective value",
    "gap": "gap to the optimum",
    "images": "images asked",
    "images_by_size": "images asked (px → images)",
    "images_planned": "images planned",
    "images_planned_by_size": "images planned (px → images)",
    "deadline_s": "deadline (s)",
    "margin": "safety margin",
    "usable_s": "usable time (s)",
    "makespan_s": "predicted makespan (s)",
    "total_gpus": "GPUs",
    "gpus_by_type": "GPUs by type",
    "cost_billing": "cost billing",
    "build_time_s": "Pyomo build time (s)",
    "solver_time_s": "HiGHS time (s)",
    "solve_time_s": "solve time (s)",
    "load_time": "model load time",
    "decode_s_per_image": "decode per image (s)",
    "warmup_measured": "warm-up measured",
    "deadline_probability": "probability of meeting the deadline",
    "makespan_quantiles_s": "predicted makespan quantiles (s)",
    "spread_by_source_s": "makespan spread by source (s)",
    "min_deadline_s": "shortest deadline that works (s)",
    "max_images": "most images by the deadline",
    "extra_gpus": "GPUs to add (type → GPUs)",
    "unservable_sizes": "input sizes no GPU can serve in time",
    "exact": "hints proven least",
    "fastest_first_batch_s": "fastest first batch (px → s)",
    "max_images_gap": "most images: gap",
    "max_images_by_size": "most images (px → images)",
    # assignments
    "batches": "batches",
    "last_batch": "last batch",
    "images_total": "images in all",
    "load_s": "load (s)",
    "warmup_s": "warm-up (s)",
    "latency_s": "per batch (s)",
    "finish_s": "finish (s)",
}


_ASSIGNMENT_NAMES = {**NAMES, "images": "images per GPU"}
_PLAN_NAMES = {**NAMES, "reason": "why no plan"}  # an infeasible plan's reason (a predictor's is 'why no model')


def readable(key: str, names: dict = NAMES) -> str:
    """A key of a report or plan ('selection › linear › lobo_mape') as words ('choice: linear: leave-...')."""
    return ": ".join(names.get(part, part.replace("_", " ")) for part in str(key).split(" › "))


def error_report(title: str, report) -> Table:
    """Whatever nested dict the predictor reports, as one table: a row per measure, a column per quantity."""
    report = report if isinstance(report, dict) else {"report": report}
    columns = [k for k, v in report.items() if isinstance(v, dict)]
    loose = {k: v for k, v in report.items() if not isinstance(v, dict)}
    flat = {c: _flatten(report[c]) for c in columns}
    if loose:
        columns.append("")
        flat[""] = loose
    measures = list(dict.fromkeys(m for c in columns for m in flat[c]))
    rows = tuple((readable(m), *(_cell(flat[c].get(m)) for c in columns)) for m in measures)
    return Table(
        title,
        ("measure", *(readable(c) for c in columns)),
        rows,
        "As the predictor reports it (perfmodel fit --report explains each measure).",
    )


def plan_summary(plan: dict) -> Table:
    skip = {"assignments", "gpus"}
    rows = tuple((readable(k, _PLAN_NAMES), _plan_cell(k, v)) for k, v in plan.items() if k not in skip)
    return Table("Plan", ("", "value"), rows)


def _plan_cell(key: str, value) -> str:
    if key == "margin" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{number(value * 100)}%"  # as the timeline's legend writes it: 41%, not 0.414
    return _cell(value) if not isinstance(value, dict) else _cell(list(value.items()))


# Already in each row's group label (count x type, option, size, batch): not repeated as columns.
_IN_LABEL = ("hardware", "count", "option", "input_size", "batch_size")


def plan_assignments(plan: dict) -> Table | None:
    assignments = plan.get("assignments") or []
    if not assignments:
        return None
    keys = [k for k in dict.fromkeys(k for a in assignments for k in a) if k not in _IN_LABEL]
    rows = tuple((assignment_label(a), *(_cell(a.get(k)) for k in keys)) for a in assignments)
    return Table(
        "Assignments (per GPU in each group)", ("group", *(readable(k, _ASSIGNMENT_NAMES) for k in keys)), rows
    )
