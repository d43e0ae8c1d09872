"""Triton Model Analyzer's `metrics-model-inference.csv`: one row per (model config, batch, concurrency).

Header (Model Analyzer's default inference_output_fields, times in milliseconds): `Model, Batch,
Concurrency, Model Config Path, Instance Group, Max Batch Size, Satisfies Constraints, Throughput
(infer/sec), p99 Latency (ms)`, and where configured `Avg Latency (ms)`, `p90 Latency (ms)`,
`p95 Latency (ms)`, `Server Queue time (ms)`, `Server Compute Infer time (ms)` ... A file holds the
configurations Model Analyzer tried; one is imported (--model-config), so that one profile describes
one way of serving. Model Analyzer records no median: latency_ms is the time per call its throughput
implies (see common.steady_latency), unless --latency-from mean.
"""

from __future__ import annotations

import math
import os

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
    whole_number,
)

WHAT = "a Model Analyzer metrics-model-inference.csv"
_SERVER = ("Server Compute Input time (ms)", "Server Compute Infer time (ms)", "Server Compute Output time (ms)")


def read(path: str | os.PathLike, settings: ImportSettings) -> list[dict]:
    name = os.fspath(path)
    frame = read_text_csv(path, WHAT)
    if find_column(frame, "Request Rate") is not None and find_column(frame, "Concurrency") is None:
        raise ProfileFormatError(
            f"{name} is a request-rate search; perfmodel imports Model Analyzer's concurrency "
            "searches, whose rows are a number of calls in flight."
        )
    columns = {
        key: find_column(frame, header)
        for key, header in (
            ("batch", "Batch"),
            ("concurrency", "Concurrency"),
            ("config", "Model Config Path"),
            ("throughput", "Throughput (infer/sec)"),
            ("p99", "p99 Latency (ms)"),
            ("p90", "p90 Latency (ms)"),
            ("p95", "p95 Latency (ms)"),
            ("mean", "Avg Latency (ms)"),
            ("queue", "Server Queue time (ms)"),
        )
    }
    missing = [
        h
        for k, h in (("batch", "Batch"), ("concurrency", "Concurrency"), ("throughput", "Throughput (infer/sec)"))
        if columns[k] is None
    ]
    if missing:
        raise ProfileFormatError(
            f"{name} lacks Model Analyzer's column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(m) for m in missing)}: is it {WHAT}?"
        )
    frame = _one_config(frame, columns["config"], settings.model_config, name)
    server_cols = [find_column(frame, c) for c in _SERVER]
    base = identity(settings, name)
    source = settings.source or name
    rows = []
    for i, cells in frame.iterrows():
        i = int(i)
        batch = whole_number(cells[columns["batch"]], name, i, columns["batch"])
        concurrency = whole_number(cells[columns["concurrency"]], name, i, columns["concurrency"])
        found = {
            k: number(cells[c], name, i, c, optional=True) if c else math.nan
            for k, c in columns.items()
            if k in ("throughput", "p99", "p90", "p95", "mean")
        }
        latency, basis = steady_latency(name, i, found, columns, batch, concurrency, settings.latency_from)
        row = {
            **base,
            "batch_size": batch,
            "concurrency": concurrency,
            "status": "ok",
            "latency_ms": latency,
            "latency_basis": basis,
            "latency_p99_ms": check_p99(name, i, columns["p99"], found["p99"], latency, basis),
            "latency_p90_ms": found["p90"],
            "latency_p95_ms": found["p95"],
            "latency_mean_ms": found["mean"],
            "warmup_ms": math.nan,
            "memory_mb": math.nan,
            "throughput_ips": found["throughput"],
            "source": source,
        }
        if columns["queue"]:
            row["server_queue_ms"] = number(
                cells[columns["queue"]], name, i, columns["queue"], positive=False, optional=True
            )
        if all(server_cols):
            row["server_compute_ms"] = sum(
                number(cells[c], name, i, c, positive=False, optional=True) for c in server_cols
            )
        if columns["config"]:
            row["model_config"] = cells[columns["config"]]
        headers = {
            "batch_size": columns["batch"],
            "concurrency": columns["concurrency"],
            "throughput_ips": columns["throughput"],
            "latency_mean_ms": columns["mean"],
            "server_queue_ms": columns["queue"],
            "latency_ms": columns[basis],
            **{f"latency_{p}_ms": columns[p] for p in ("p90", "p95", "p99")},
        }
        row[ORIGIN] = (name, i, headers)
        rows.append(row)
    return rows


def _one_config(frame, column: str | None, wanted: str | None, name: str):
    """The rows of one model configuration: the one asked for, or the only one in the file."""
    if column is None:
        if wanted is not None:
            raise ProfileFormatError(f"{name} has no 'Model Config Path' column, so `model_config` cannot choose one.")
        return frame
    configs = list(dict.fromkeys(frame[column]))
    if wanted is None:
        if len(configs) > 1:
            raise ProfileFormatError(
                f"{name} holds {len(configs)} model configurations ({', '.join(configs)}): "
                f"choose one with `model_config`, e.g. `model_config` {configs[0]}."
            )
        return frame
    if wanted not in configs:
        raise ProfileFormatError(f"{name} has no model configuration {wanted!r}; it holds {', '.join(configs)}.")
    return frame[frame[column] == wanted]
