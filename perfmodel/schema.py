"""The profile contract (docs/design.md, section 2): columns, units, validation, atomic read and write.

A profile is one tidy CSV: one row per measured point, one column per quantity, provenance repeated
in every row. Anyone may write one by hand, so everything read here is checked and every problem is
reported as one sentence naming the file, the row and the column.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from perfmodel.errors import InputError, ProfileFormatError
from perfmodel.files import atomic_write_text, read_csv_text, source_of
from perfmodel.fixed_costs import LOAD_PART_COLUMNS
from perfmodel.readers import decimal, output_file, shown
from perfmodel.units import GPU_TYPE_NAME, MAX_BATCH_SIZE, MAX_INPUT_SIZE

SCHEMA_VERSION = 1

REQUIRED_COLUMNS: tuple[str, ...] = (
    "hardware",
    "model",
    "backend",
    "precision",
    "input_size",
    "batch_size",
    "latency_ms",
    "latency_p99_ms",
    "warmup_ms",
    "memory_mb",
    "status",
)

STATUSES = ("ok", "oom", "error")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")

# Columns that, beside (hardware, model, backend, precision, input size, batch size), tell two
# measured points apart: a sweep over concurrency levels (or open-loop rates, with the server's
# batcher settings) has one row per level.
POINT_KEY: tuple[str, ...] = (
    "hardware",
    "model",
    "backend",
    "precision",
    "architecture",
    "protocol",
    "mode",
    "concurrency",
    "rate_per_s",
    "server_max_batch",
    "server_max_queue_delay_ms",
    "input_size",
    "batch_size",
)

HARDWARE_COUNTERS = (
    "gpu_util",
    "gpu_mem_used_mb",
    "power_w",
    "temp_c",
    "sm_clock_mhz",
    "cpu_util",
    "host_rss_mb",
)

RECOMMENDED_COLUMNS: tuple[str, ...] = (
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p95_ms",
    "latency_mean_ms",
    "latency_std_ms",
    "latency_min_ms",
    "latency_ci_rel",
    "processes",  # processes that measured the point (--processes K; the latency figures are their mean)
    "process_rel_sd",  # sd of the log of their medians
    "drift_rel_sd",  # the machine's drift, from the sweep's probe (planning/drift.py)
    "drift_corr_s",
    "drift_probe_s",
    "samples",
    "stable",
    "throughput_ips",
    "load_ms",
    "load_process",  # the process whose load_ms (and warm-up) the row holds: rows naming one share one sample
    *LOAD_PART_COLUMNS,  # a fresh process's time until its first call returned, in parts
    "warmup_method",
    "warmup_includes",  # what the first call did besides running: compile, cudnn-autotune, graph-capture (+run)
    "compile_cache",  # torch.compile's cache at the first call: fresh (empty, the process's own) or process
    "compile_graphs",  # graphs the first call compiled (one per batch shape)
    "compile_ms",  # the part of warmup_ms spent compiling (Dynamo's timer)
    "architecture",
    "protocol",
    "mode",
    "concurrency",
    "throughput_spread_rel",
    "server_queue_ms",
    "server_compute_ms",
    "server_request_ms",
    "rate_per_s",
    "achieved_rate_per_s",
    "kept_up",
    "server_batch_mean",
    "server_batch_max",
    "server_executions",
    "server_busy_share",
    "server_max_batch",
    "server_max_queue_delay_ms",
    "sender_lag_p99_ms",
    "requests_failed",
    "client_rss_mb_max",
    "server_rss_mb_max",
    "client_cpu_avg",
    "client_cpu_max",
    "server_cpu_avg",
    "server_cpu_max",
    "server_version",
    "server_cpus",
    "error",
    "source",
    "latency_basis",
    *(f"{c}_{s}" for c in HARDWARE_COUNTERS for s in ("min", "avg", "max")),
    "load_avg_1m",
    "threads",
    "alongside",
    "device_name",
    "device_memory_mb",
    "driver",
    "cuda",
    "torch",
    "perfmodel",
    "host",
    "created_at",
    "schema_version",
)

INTEGER_COLUMNS = frozenset(
    {
        "input_size",
        "batch_size",
        "samples",
        "concurrency",
        "processes",
        "compile_graphs",
        "threads",
        "alongside",
        "schema_version",
        "server_max_batch",
        "requests_failed",
    }
)
TEXT_COLUMNS = frozenset(
    {
        "hardware",
        "model",
        "backend",
        "precision",
        "status",
        "warmup_method",
        "warmup_includes",
        "compile_cache",
        "load_process",
        "architecture",
        "protocol",
        "mode",
        "kept_up",
        "server_version",
        "server_cpus",
        "error",
        "device_name",
        "driver",
        "cuda",
        "torch",
        "perfmodel",
        "host",
        "created_at",
        "stable",
        "source",
        "latency_basis",
    }
)
# Every other known column is a non-negative number; unknown columns are kept as text.
NUMERIC_COLUMNS = frozenset(
    c for c in (*REQUIRED_COLUMNS, *RECOMMENDED_COLUMNS) if c not in TEXT_COLUMNS and c not in INTEGER_COLUMNS
)
# latency_p99_ms, warmup_ms and memory_mb may be empty (imported and published measurements often
# lack them); when latency_p99_ms is given for an 'ok' row it must be > 0 and not below the median.
POSITIVE_WHEN_OK = ("latency_ms",)

# The physically sane range of every numeric column, checked when a profile is read: a value outside
# is a typo or a damaged file, and would overflow the fit or the solver further on. (low, high): a
# value must be 0 or within [low, high]. A time under a nanosecond or a memory under a byte is no
# measurement; a side over 65,536 px, a batch over 2^20 images or a call of days is not either.
_MS, _MIB, _CORES = (1e-6, 1e9), (1e-6, 1e9), (0.0, 1e5)  # milliseconds, MiB, % of one core
BOUNDS: dict[str, tuple[float, float]] = {
    "input_size": (1, MAX_INPUT_SIZE),
    "batch_size": (1, MAX_BATCH_SIZE),
    "concurrency": (1, 65_536),
    "samples": (1, 1e9),
    "processes": (1, 1024),
    "compile_graphs": (1, 1e6),
    "threads": (1, 65_536),
    "alongside": (1, 1024),  # workers running beside the measured one (0: alone)
    "schema_version": (1, 1e6),
    **dict.fromkeys(
        (
            "latency_ms",
            "latency_p99_ms",
            "warmup_ms",
            "latency_p50_ms",
            "latency_p90_ms",
            "latency_mean_ms",
            "latency_min_ms",
            "load_ms",
            "compile_ms",
            *LOAD_PART_COLUMNS,
            "server_queue_ms",
            "server_compute_ms",
            "server_request_ms",
        ),
        _MS,
    ),
    "latency_std_ms": (0.0, 1e9),
    "latency_ci_rel": (0.0, 1e6),
    "drift_rel_sd": (0.0, 10.0),
    "process_rel_sd": (0.0, 10.0),
    "drift_corr_s": (0.0, 1e6),
    "drift_probe_s": (0.0, 600.0),
    "throughput_spread_rel": (0.0, 1e6),
    "throughput_ips": (0.0, 1e12),
    **dict.fromkeys(("memory_mb", "client_rss_mb_max", "server_rss_mb_max", "device_memory_mb"), _MIB),
    **{
        f"{c}_{s}": r
        for c, r in (
            ("gpu_util", (0.0, 100.0)),
            ("gpu_mem_used_mb", _MIB),
            ("power_w", (0.0, 1e5)),
            ("temp_c", (0.0, 200.0)),
            ("sm_clock_mhz", (0.0, 1e5)),
            ("cpu_util", _CORES),
            ("host_rss_mb", _MIB),
        )
        for s in ("min", "avg", "max")
    },
    **dict.fromkeys(("client_cpu_avg", "client_cpu_max", "server_cpu_avg", "server_cpu_max"), _CORES),
    "load_avg_1m": (0.0, 1e6),
    "server_busy_share": (0.0, 100.0),  # a share, over 1 only with several model instances
}
DEFAULT_BOUND = (0.0, 1e15)  # a numeric column without an entry above


def _where(source: str, row: int, column: str) -> str:
    return f"{source}, row {row + 1}, column '{column}'"


def _check_names(df: pd.DataFrame, source: str) -> None:
    """The hardware key is what a plan's pool and prices name, so it must be a GPU type name; model, backend,
    source and device_name are printed in tables, plans and figures, so they may hold no control character
    (readers.text: an escape sequence would recolour a terminal)."""
    bad = ~df["hardware"].map(lambda v: bool(GPU_TYPE_NAME.fullmatch(v)))
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ProfileFormatError(
            f"{_where(source, i, 'hardware')}: {shown(df['hardware'].iloc[i])} is not a GPU type name "
            "(letters, digits, '_', '-', '.'), which a plan's pool and prices could name."
        )
    for column in [c for c in ("model", "backend", "source", "device_name") if c in df.columns]:
        bad = ~df[column].map(str.isprintable)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ProfileFormatError(
                f"{_where(source, i, column)}: {shown(df[column].iloc[i])} holds a control character."
            )


def _convert_numbers(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Turn text cells into numbers; empty cells become NaN, anything else unreadable is an error.

    Cell by cell in plain Python: a regular expression and float() per cell are ~20x faster here than
    pandas' string methods per column (profiles have ~50 columns of a few dozen rows).
    """
    out = df.copy()
    for column in df.columns:
        if column not in NUMERIC_COLUMNS and column not in INTEGER_COLUMNS:
            continue
        values = np.full(len(df), np.nan)
        for i, cell in enumerate(df[column].tolist()):
            text = cell.strip(" \t")
            if not text:
                continue
            value = decimal(text)  # ASCII digits, a sign, point and exponent: not '4\x002', '1_000', 'inf' or '٤'
            if value is None:
                raise ProfileFormatError(
                    f"{_where(source, i, column)}: {shown(text)} is not a number; "
                    "write a plain number (digits, a point, an exponent) or leave the cell empty."
                )
            values[i] = value
        out[column] = values
    return out


def validate_profile(df: pd.DataFrame, source: str = "profile") -> pd.DataFrame:
    """Check a profile frame against the contract and return it with proper dtypes.

    Raises ProfileFormatError with one sentence naming the first problem found.
    """
    if not isinstance(df, pd.DataFrame):
        raise ProfileFormatError(f"{source} is not a DataFrame but an object of type {type(df).__name__}.")
    if len(df.columns) == 0 or len(df) == 0:
        raise ProfileFormatError(
            f"{source} has no measured points: a profile needs a header row and at least one data row."
        )
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        names = ", ".join(f"'{c}'" for c in missing)
        raise ProfileFormatError(
            f"{source} lacks the required column{'s' if len(missing) > 1 else ''} {names} "
            "(docs/profile-format.md says what each column holds)."
        )
    df = df.reset_index(drop=True)
    as_text = df.apply(lambda col: col.map(lambda v: "" if _is_missing(v) else str(v)))
    df = _convert_numbers(as_text, source)

    for column in ("hardware", "model", "backend", "precision", "status"):
        df[column] = df[column].str.strip()
        empty = df[column] == ""
        if empty.any():
            i = int(np.flatnonzero(empty.to_numpy())[0])
            raise ProfileFormatError(f"{_where(source, i, column)} is empty; every row needs a {column}.")
    _check_names(df, source)
    df["precision"] = df["precision"].str.lower()
    df["status"] = df["status"].str.lower()
    _check_choice(df, "status", STATUSES, source)
    _check_choice(df, "precision", PRECISIONS, source)

    _check_bounds(df, source)
    for column in sorted(INTEGER_COLUMNS & set(df.columns)):
        values = df[column].to_numpy(dtype=float)
        present = ~np.isnan(values)
        if column in ("input_size", "batch_size") and not present.all():
            i = int(np.flatnonzero(~present)[0])
            raise ProfileFormatError(
                f"{_where(source, i, column)} is empty; every row needs a positive whole number here."
            )
        bad = present & (
            (values != np.round(values))
            | (values < (1 if column in ("input_size", "batch_size", "concurrency", "processes") else 0))
        )
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ProfileFormatError(f"{_where(source, i, column)}: {_fmt(values[i])} is not a positive whole number.")
        df[column] = (
            pd.array(np.where(present, values, np.nan), dtype="Int64") if not present.all() else values.astype(np.int64)
        )

    for column in sorted(NUMERIC_COLUMNS & set(df.columns)):
        values = df[column].to_numpy(dtype=float)
        bad = ~np.isnan(values) & (~np.isfinite(values) | (values < 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ProfileFormatError(
                f"{_where(source, i, column)}: {_fmt(values[i])} is not allowed; it must be a finite number >= 0."
            )

    ok = (df["status"] == "ok").to_numpy()
    for column in POSITIVE_WHEN_OK:
        values = df[column].to_numpy(dtype=float)
        bad = ok & ~(values > 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ProfileFormatError(
                f"{_where(source, i, column)}: a row with status 'ok' needs a time in milliseconds > 0, not "
                f"{_fmt(values[i])}."
            )
    median, p99 = df["latency_ms"].to_numpy(dtype=float), df["latency_p99_ms"].to_numpy(dtype=float)
    bad = ok & ~np.isnan(p99) & ~(p99 > 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProfileFormatError(
            f"{_where(source, i, 'latency_p99_ms')}: a row with status 'ok' needs a time in milliseconds > 0 "
            f"or an empty cell, not {_fmt(p99[i])}."
        )
    bad = ok & (p99 < median * (1 - 1e-9))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ProfileFormatError(
            f"{_where(source, i, 'latency_p99_ms')}: the 99th percentile {_fmt(p99[i])} ms is below the median "
            f"{_fmt(median[i])} ms, which cannot be."
        )
    _check_mean(df, ok, median, source)
    return df


_ROUNDING = 1e-4  # relative: profiles are written with 6 significant digits


def _check_mean(df: pd.DataFrame, ok: np.ndarray, median: np.ndarray, source: str) -> None:
    """A mean that no set of call times could have (the planner draws batch times from it): below the
    fastest call, below half the median (half the calls take at least the median), or further from the
    median than one standard deviation (|mean - median| <= sd holds for any set of numbers)."""
    if "latency_mean_ms" not in df.columns:
        return
    mean = df["latency_mean_ms"].to_numpy(dtype=float)
    fastest = df["latency_min_ms"].to_numpy(dtype=float) if "latency_min_ms" in df.columns else np.full(len(df), np.nan)
    sd = df["latency_std_ms"].to_numpy(dtype=float) if "latency_std_ms" in df.columns else np.full(len(df), np.nan)
    given = ok & ~np.isnan(mean)
    slack = _ROUNDING * np.maximum(mean, median)
    checks = (
        (mean < fastest - slack, lambda i: f"is below the fastest call, latency_min_ms {_fmt(fastest[i])} ms"),
        (
            mean < median / 2 - slack,
            lambda i: f"is below half the median {_fmt(median[i])} ms (half the calls take at least the median)",
        ),
        (
            np.abs(mean - median) > sd + slack,
            lambda i: (
                f"lies further from the median {_fmt(median[i])} ms than the standard deviation "
                f"{_fmt(sd[i])} ms allows (|mean - median| <= sd for any set of calls)"
            ),
        ),
    )
    for bad, why in checks:
        bad = given & bad
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ProfileFormatError(
                f"{_where(source, i, 'latency_mean_ms')}: the mean {_fmt(mean[i])} ms {why(i)}, which cannot be; "
                "fix it or leave the cell empty."
            )


def _check_bounds(df: pd.DataFrame, source: str) -> None:
    """Every positive number within its column's sane range (BOUNDS), else one sentence naming row and column."""
    for column in df.columns:
        if column not in NUMERIC_COLUMNS and column not in INTEGER_COLUMNS:
            continue
        low, high = BOUNDS.get(column, DEFAULT_BOUND)
        values = df[column].to_numpy(dtype=float, na_value=np.nan)
        bad = (values > high) | ((values > 0) & (values < low))  # negative ones get their own sentence below
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            zero = "" if column in INTEGER_COLUMNS else ", or 0"
            raise ProfileFormatError(
                f"{_where(source, i, column)}: {_fmt(values[i])} is outside the range perfmodel accepts for "
                f"{column} ({_plain(low)} to {_plain(high)}{zero}); fix the value or leave the cell empty."
            )


def _plain(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def _is_missing(value: object) -> bool:
    # pd.NA: an empty cell of a nullable column (Int64, and pandas 3's strings) as map() hands it over.
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _fmt(value: float) -> str:
    return "empty" if math.isnan(value) else f"{value:g}"


def _check_choice(df: pd.DataFrame, column: str, allowed: Sequence[str], source: str) -> None:
    bad = ~df[column].isin(allowed)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise ProfileFormatError(
            f"{_where(source, i, column)}: {df[column].iloc[i]!r} is not one of {', '.join(allowed)}."
        )


def load_profile(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate one profile CSV; return a DataFrame with the contract's dtypes."""
    return validate_profile(read_csv_text(path, ProfileFormatError, "a profile CSV"), os.fspath(path))


def load_profiles(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Read several profiles and concatenate them (provenance is in every row, so this is safe); one path is
    a list of one."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not isinstance(paths, Iterable):
        raise ProfileFormatError(f"expected a list of profile CSV paths, not an object of type {type(paths).__name__}.")
    frames = [load_profile(p) for p in paths]
    if not frames:
        raise ProfileFormatError("no profile given: name at least one profile CSV.")
    return pd.concat(frames, ignore_index=True, sort=False)


def ordered_columns(columns: Iterable[str]) -> list[str]:
    """Required columns first, then the recommended ones in contract order, then the rest as they came."""
    columns = list(dict.fromkeys(columns))
    known = [c for c in (*REQUIRED_COLUMNS, *RECOMMENDED_COLUMNS) if c in columns]
    return known + [c for c in columns if c not in known]


def profile_to_csv(df: pd.DataFrame) -> str:
    buffer = io.StringIO()
    df[ordered_columns(df.columns)].to_csv(buffer, index=False, float_format="%.6g")
    return buffer.getvalue()


def write_profile(df: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a profile atomically (temporary file, then rename); InputError if `path` is not a path or cannot
    be written (a directory, a missing folder)."""
    source_of(path, InputError, "give the name of the CSV file to write")
    output_file(path, "the profile's path")
    atomic_write_text(path, profile_to_csv(df))
