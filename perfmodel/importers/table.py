"""A plain table of published or hand-collected figures: batch size, throughput and/or latency percentiles.

Columns (names are matched ignoring case, spaces, underscores and a unit in parentheses):

    batch_size                      'batch size', 'batch'                      required
    throughput_ips                  'throughput', 'avg throughput', 'img/s'    images per second
    latency_p50_ms ... p90, p95, p99   'p50 latency', '50% latency', 'latency 99%' ...   milliseconds
    latency_mean_ms                 'avg latency', 'mean latency', 'latency avg'
    input_size, hardware, model, backend, precision, source, device_name     per row; else the command line

At least one of throughput, p50 or mean latency must be there. A cell may carry its unit, as tables
copied from documents do ('5.26 ms', '191.23 img/s'). latency_ms is chosen by common.steady_latency.
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
    number,
    read_text_csv,
    steady_latency,
    whole_number,
)
from perfmodel.schema import PRECISIONS

WHAT = "a table with a batch size column and throughput or latency columns"
IDENTITY = ("hardware", "model", "backend", "precision", "input_size")
_ALIASES = {
    "batch_size": ("batch size", "batch", "bs"),
    "throughput_ips": (
        "throughput ips",
        "throughput",
        "avg throughput",
        "throughput avg",
        "img/s",
        "images/s",
        "images per second",
    ),
    "latency_mean_ms": (
        "latency mean ms",
        "mean latency",
        "avg latency",
        "latency avg",
        "average latency",
        "latency mean",
    ),
    **{
        f"latency_p{p}_ms": (
            f"latency p{p} ms",
            f"p{p}",
            f"p{p} latency",
            f"latency p{p}",
            f"{p}% latency",
            f"latency {p}%",
        )
        for p in (50, 90, 95, 99)
    },
    "input_size": ("input size", "image size"),
    "device_name": ("device name", "device"),
    **{name: (name,) for name in ("hardware", "model", "backend", "precision", "source")},
}
_UNITS = {"throughput_ips": ("img/s", "images/s", "ips"), **{c: ("ms",) for c in _ALIASES if c.startswith("latency")}}


_BASIS_COLUMN = {"p50": "latency_p50_ms", "throughput": "throughput_ips", "mean": "latency_mean_ms"}


def read(path: str | os.PathLike, settings: ImportSettings) -> list[dict]:
    name = os.fspath(path)
    frame = read_text_csv(path, WHAT)
    columns = _match_columns(frame.columns, name)
    if "batch_size" not in columns:
        raise ProfileFormatError(
            f"{name} has no batch size column (batch_size, 'batch size' or 'batch'): {WHAT} needs one."
        )
    if not {"throughput_ips", "latency_p50_ms", "latency_mean_ms"} & set(columns):
        raise ProfileFormatError(
            f"{name} has no throughput, p50 latency or mean latency column: one of them gives the time of a call."
        )
    rows = []
    for i, cells in enumerate(frame.to_dict("records")):
        row = _identity(cells, columns, settings, name, i)
        batch = whole_number(cells[columns["batch_size"]], name, i, columns["batch_size"])
        values = {
            c: number(cells[columns[c]], name, i, columns[c], _UNITS[c], optional=True) for c in _UNITS if c in columns
        }
        found = {
            "p50": values.get("latency_p50_ms", math.nan),
            "throughput": values.get("throughput_ips", math.nan),
            "mean": values.get("latency_mean_ms", math.nan),
        }
        latency, basis = steady_latency(
            name,
            i,
            found,
            {
                "p50": columns.get("latency_p50_ms"),
                "throughput": columns.get("throughput_ips"),
                "mean": columns.get("latency_mean_ms"),
            },
            batch,
            1,
            settings.latency_from,
        )
        p99 = check_p99(name, i, columns.get("latency_p99_ms"), values.get("latency_p99_ms", math.nan), latency, basis)
        rows.append(
            {
                **row,
                "batch_size": batch,
                "status": "ok",
                "latency_ms": latency,
                "latency_basis": basis,
                **{c: v for c, v in values.items() if c != "latency_p99_ms"},
                "latency_p99_ms": p99,
                "warmup_ms": math.nan,
                "memory_mb": math.nan,
                ORIGIN: (name, i, {**columns, "latency_ms": columns.get(_BASIS_COLUMN[basis])}),
            }
        )
    return rows


def _match_columns(headers, name: str) -> dict[str, str]:
    """Canonical column -> the file's header; an unknown header is kept out, a repeated one is an error."""
    lookup = {
        alias: canonical for canonical, aliases in _ALIASES.items() for alias in (canonical.replace("_", " "), *aliases)
    }
    found: dict[str, str] = {}
    for header in headers:
        canonical = lookup.get(_normal(header))
        if canonical is None:
            continue
        if canonical in found:
            raise ProfileFormatError(
                f"{name} has two columns for {canonical}: {found[canonical]!r} and {header!r}; keep one."
            )
        found[canonical] = header
    return found


def _normal(header: str) -> str:
    text = re.sub(r"\((ms|img/s|images/s|ips|px)\)", " ", header.lower().replace("*", ""))
    return re.sub(r"[\s_]+", " ", text).strip()


def _identity(cells: dict, columns: dict, settings: ImportSettings, name: str, i: int) -> dict:
    """hardware, model, backend, precision, input size (and source, device) from the row, else the command line."""
    row = {}
    for column in IDENTITY:
        header = columns.get(column)
        text = cells[header] if header else ""
        if text == "":
            value = getattr(settings, column)
            if value is None:
                where = f"{name}, row {i + 1}" + (f", column '{header}'" if header else "")
                flag = "--" + column.replace("_", "-")
                raise ProfileFormatError(
                    f"{where} has no {column.replace('_', ' ')}: give {flag} on the command line "
                    f"or add a column {column}."
                )
        elif column == "input_size":
            value = whole_number(text, name, i, header)
        else:
            value = text
        row[column] = value.lower() if column == "precision" else value
    if row["precision"] not in PRECISIONS:
        where = f"{name}, row {i + 1}" + (f", column '{columns['precision']}'" if "precision" in columns else "")
        raise ProfileFormatError(f"{where}: precision {row['precision']!r} is not one of {', '.join(PRECISIONS)}.")
    source = cells[columns["source"]] if "source" in columns else ""
    row["source"] = source or settings.source or name
    device = cells[columns["device_name"]] if "device_name" in columns else ""
    if device or settings.device_name:
        row["device_name"] = device or settings.device_name
    return row
