"""Triton's inference statistics, read here only: the JSON that `get_inference_statistics` answers.

A snapshot is that JSON as the server gives it (cumulative counts and nanoseconds since the model was
loaded); what a window measured is the difference of two snapshots. ServerConnection.model_statistics
fetches a snapshot; the functions below turn snapshots into numbers, summed over the models listed.
"""

from __future__ import annotations

import math

COMPUTE = ("compute_input", "compute_infer", "compute_output")  # a model instance busy on one execution


def stage_totals(stats: dict | None) -> dict[str, tuple[int, int]]:
    """Per request stage (success, queue, compute_*): cumulative (count, ns). Each request counts once,
    so a batch of n requests adds its compute time n times."""
    totals: dict[str, list[int]] = {}
    for model in (stats or {}).get("model_stats", []):
        for stage, entry in model.get("inference_stats", {}).items():
            total = totals.setdefault(stage, [0, 0])
            total[0] += int(entry.get("count", 0))
            total[1] += int(entry.get("ns", 0))
    return {stage: (count, ns) for stage, (count, ns) in totals.items()}


def batch_totals(stats: dict | None) -> dict[int, tuple[int, int]]:
    """Per batch size the model ran: cumulative (executions, busy ns: compute input + infer + output).
    Each execution counts once."""
    totals: dict[int, list[int]] = {}
    for model in (stats or {}).get("model_stats", []):
        for entry in model.get("batch_stats", []):
            total = totals.setdefault(int(entry.get("batch_size", 0)), [0, 0])
            total[0] += int(entry.get("compute_infer", {}).get("count", 0))
            total[1] += sum(int(entry.get(k, {}).get("ns", 0)) for k in COMPUTE)
    return {size: (count, ns) for size, (count, ns) in totals.items()}


def execution_totals(stats: dict | None) -> tuple[int, int]:
    """Cumulative (model executions, images inferred)."""
    models = (stats or {}).get("model_stats", [])
    return (
        sum(int(m.get("execution_count", 0)) for m in models),
        sum(int(m.get("inference_count", 0)) for m in models),
    )


def server_times_ms(before: dict | None, after: dict | None) -> dict[str, float]:
    """Per-request means between two snapshots: the queue, the compute, and the whole request (NaN where
    a snapshot is missing or no request was counted)."""
    out = {"server_queue_ms": math.nan, "server_compute_ms": math.nan, "server_request_ms": math.nan}
    if not before or not after:
        return out
    b0, b1 = stage_totals(before), stage_totals(after)

    def mean_ms(stage: str) -> float:
        (c0, n0), (c1, n1) = b0.get(stage, (0, 0)), b1.get(stage, (0, 0))
        return (n1 - n0) / (c1 - c0) / 1e6 if c1 > c0 else math.nan

    out["server_queue_ms"] = mean_ms("queue")
    out["server_compute_ms"] = sum(mean_ms(stage) for stage in COMPUTE)
    out["server_request_ms"] = mean_ms("success")
    return out


def batch_statistics(before: dict | None, after: dict | None, wall_s: float = math.nan) -> dict[str, float]:
    """Between two snapshots `wall_s` apart: model executions, images per execution, the largest batch,
    the model instance's busy time per execution (compute input + infer + output) and the share of the
    window it was busy (near 1: the server had no spare time, queues grow with any extra load)."""
    out = {
        "server_executions": math.nan,
        "server_batch_mean": math.nan,
        "server_batch_max": math.nan,
        "server_compute_ms": math.nan,
        "server_busy_share": math.nan,
    }
    if not before or not after:
        return out
    (e0, i0), (e1, i1) = execution_totals(before), execution_totals(after)
    if e1 <= e0:
        return out
    b0, b1 = batch_totals(before), batch_totals(after)
    n0, n1 = sum(ns for _, ns in b0.values()), sum(ns for _, ns in b1.values())
    out["server_executions"] = float(e1 - e0)
    out["server_batch_mean"] = (i1 - i0) / (e1 - e0)
    grown = [size for size, (count, _) in b1.items() if count > b0.get(size, (0, 0))[0]]
    out["server_batch_max"] = float(max(grown)) if grown else math.nan
    if n1 > n0:
        out["server_compute_ms"] = (n1 - n0) / (e1 - e0) / 1e6
        if wall_s > 0:
            out["server_busy_share"] = (n1 - n0) / 1e9 / wall_s
    return out


def executions_by_size(windows) -> dict[int, tuple[int, float]]:
    """Over (before, after) snapshot pairs: per batch size, (executions, mean ms busy per execution)."""
    totals: dict[int, list] = {}
    for before, after in windows:
        if not before or not after:
            continue
        b0 = batch_totals(before)
        for size, (count, ns) in batch_totals(after).items():
            c0, n0 = b0.get(size, (0, 0))
            if count > c0:
                entry = totals.setdefault(size, [0, 0])
                entry[0] += count - c0
                entry[1] += ns - n0
    return {size: (count, ns / count / 1e6) for size, (count, ns) in totals.items()}
