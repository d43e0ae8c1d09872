"""Triton perf_analyzer's CSV (`perf_analyzer -f FILE`): one row per concurrency level.

Header (perf_analyzer's report writer): `Concurrency` (or `Request Rate`), `Inferences/Second`,
`Client Send`, with server statistics `Network+Server Send/Recv, Server Queue, Server Compute Input,
Server Compute Infer, Server Compute Output`, then `Client Recv`, `p50 latency`, `p90 latency`,
`p95 latency`, `p99 latency`; with --verbose-csv also `Avg latency`, `request/response`,
`response wait`, and with --collect-metrics `Avg GPU Utilization, Avg GPU Power Usage, Max GPU Memory
Usage, Total GPU Memory` as `gpu-uuid:value;` lists. Times are in microseconds, throughput in
inferences (images) per second. The file does not record the batch size (`-b`): it comes from
--batch-size.
"""

from __future__ import annotations

import math
import os
import re

from perfmodel.errors import ProfileFormatError
from perfmodel.importers.common import (
    ORIGIN,
    ImportSettings,
    check_p99,
    find_column,
    identity,
    number,
    read_text_csv,
    steady_latency,
    where,
    whole_number,
)

WHAT = "a perf_analyzer CSV (perf_analyzer -f FILE)"
_PERCENTILE = re.compile(r"^p([0-9]+) latency$", re.IGNORECASE)  # ASCII digits: \d matches '٩
_SERVER = ("Server Compute Input", "Server Compute Infer", "Server Compute Output")


def read(path: str | os.PathLike, batch_size: int, settings: ImportSettings) -> list[dict]:
    name = os.fspath(path)
    frame = read_text_csv(path, WHAT)
    if find_column(frame, "Request Rate") is not None and find_column(frame, "Concurrency") is None:
        raise ProfileFormatError(
            f"{name} is a request-rate sweep; perfmodel imports perf_analyzer's concurrency sweeps "
            "(--concurrency-range), whose rows are one call in flight per client."
        )
    concurrency_col = find_column(frame, "Concurrency")
    throughput_col = find_column(frame, "Inferences/Second")
    if concurrency_col is None or throughput_col is None:
        raise ProfileFormatError(
            f"{name} lacks perf_analyzer's 'Concurrency' and 'Inferences/Second' columns: is it {WHAT}?"
        )
    percentiles = {int(m.group(1)): c for c in frame.columns if (m := _PERCENTILE.match(c))}
    mean_col = find_column(frame, "Avg latency")
    queue_col = find_column(frame, "Server Queue")
    server_cols = [find_column(frame, c) for c in _SERVER]
    base = identity(settings, name)
    source = settings.source or name
    rows = []
    for i, cells in enumerate(frame.to_dict("records")):
        concurrency = whole_number(cells[concurrency_col], name, i, concurrency_col)
        throughput = number(cells[throughput_col], name, i, throughput_col)
        micro = {p: number(cells[c], name, i, c, optional=True) / 1000.0 for p, c in percentiles.items()}
        mean = number(cells[mean_col], name, i, mean_col, optional=True) / 1000.0 if mean_col else math.nan
        latency, basis = steady_latency(
            name,
            i,
            {"p50": micro.get(50, math.nan), "throughput": throughput, "mean": mean},
            {"p50": percentiles.get(50), "throughput": throughput_col, "mean": mean_col},
            batch_size,
            concurrency,
            settings.latency_from,
        )
        row = {
            **base,
            "batch_size": batch_size,
            "concurrency": concurrency,
            "status": "ok",
            "latency_ms": latency,
            "latency_basis": basis,
            "latency_p99_ms": check_p99(name, i, percentiles.get(99), micro.get(99, math.nan), latency, basis),
            "warmup_ms": math.nan,
            "memory_mb": math.nan,
            "throughput_ips": throughput,
            "latency_mean_ms": mean,
            "source": source,
        }
        for p, column in ((50, "latency_p50_ms"), (90, "latency_p90_ms"), (95, "latency_p95_ms")):
            if p in micro:
                row[column] = micro[p]
        if queue_col:
            row["server_queue_ms"] = (
                number(cells[queue_col], name, i, queue_col, positive=False, optional=True) / 1000.0
            )
        if all(server_cols):
            row["server_compute_ms"] = (
                sum(number(cells[c], name, i, c, positive=False, optional=True) for c in server_cols) / 1000.0
            )
        row.update(_gpu_metrics(cells, frame, name, i))
        headers = {
            "concurrency": concurrency_col,
            "throughput_ips": throughput_col,
            "latency_mean_ms": mean_col,
            "server_queue_ms": queue_col,
            "latency_ms": {"p50": percentiles.get(50), "throughput": throughput_col, "mean": mean_col}[basis],
            **{f"latency_p{p}_ms": c for p, c in percentiles.items()},
        }
        row[ORIGIN] = (name, i, headers)
        rows.append(row)
    return rows


def _gpu_metrics(cells: dict, frame, name: str, row: int) -> dict:
    """--collect-metrics columns ('uuid:value;' per GPU): the busiest GPU's figures."""
    out = {}
    for header, column, scale in (
        ("Avg GPU Utilization", "gpu_util_avg", 100.0),
        ("Avg GPU Power Usage", "power_w_avg", 1.0),
        ("Max GPU Memory Usage", "gpu_mem_used_mb_max", 1.0 / 2**20),
    ):
        found = find_column(frame, header)
        if found is None or cells[found] == "":
            continue
        values = []
        for part in filter(None, cells[found].split(";")):
            if ":" not in part:
                raise ProfileFormatError(
                    f"{where(name, row, found)}: {cells[found]!r} is not a list of 'gpu-uuid:value;'."
                )
            values.append(number(part.rsplit(":", 1)[1].strip(), name, row, found, positive=False))
        if values:
            out[column] = max(values) * scale
    return out
