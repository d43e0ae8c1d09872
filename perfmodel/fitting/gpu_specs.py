"""A small, sourced table of GPU specifications: what `--target-hardware` needs to predict a GPU never profiled.

perfmodel/data/gpu_specs.csv holds one row per hardware key (the `hardware` of profiles and pools):
peak dense FLOP/s per precision (fp32 on the CUDA cores; tf32, fp16 and int8 on the tensor cores),
memory bandwidth, SM count, memory and L2, the documents the figures come from (`source`) and, where
one exists, a second document they were checked against (`second_source`, optional). Sparse tensor
figures are halved: the table holds dense rates. A user's own table with the same columns may replace
it (`perfmodel fit --gpu-specs FILE`).
"""

from __future__ import annotations

import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path

from perfmodel import shipped
from perfmodel.errors import InputError

DEFAULT_TABLE = shipped.gpu_specs_table()
COLUMNS = (
    "hardware",
    "name",
    "fp32_tflops",
    "tf32_tflops",
    "fp16_tflops",
    "int8_tops",
    "memory_bandwidth_gbs",
    "sm_count",
    "memory_gb",
    "l2_mb",
    "source",
)
OPTIONAL_COLUMNS = ("second_source",)
# Which peak a precision runs at. bf16 runs at the fp16 tensor rate on every GPU of the table that has it.
_PEAK_COLUMN = {
    "fp32": "fp32_tflops",
    "tf32": "tf32_tflops",
    "fp16": "fp16_tflops",
    "bf16": "fp16_tflops",
    "int8": "int8_tops",
}


@dataclass(frozen=True)
class GpuSpec:
    hardware: str
    name: str
    peaks: dict  # column -> TFLOP/s (or TOP/s), None where the GPU lacks the precision
    memory_bandwidth_gbs: float
    sm_count: int
    memory_gb: float
    l2_mb: float
    source: str
    second_source: str = ""

    def peak_tflops(self, precision: str) -> float | None:
        """The peak rate a precision runs at; None when this GPU does not have it (tf32 before Ampere)."""
        column = _PEAK_COLUMN.get(precision)
        return None if column is None else self.peaks.get(column)

    def runs(self, precision: str) -> bool:
        return self.peak_tflops(precision) is not None


def load_gpu_specs(path: str | os.PathLike | None = None) -> dict[str, GpuSpec]:
    """hardware key -> GpuSpec from the table at `path` (default: the shipped one)."""
    path = Path(path) if path is not None else DEFAULT_TABLE
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise InputError(
            f"{path} does not exist: give a GPU specification table (columns {', '.join(COLUMNS)})."
        ) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read the GPU specification table {path} ({exc}).") from None
    missing = [c for c in COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise InputError(
            f"{path} is not a GPU specification table: it needs the columns {', '.join(COLUMNS)}"
            + (f" (missing {', '.join(missing)})." if missing else " and at least one row.")
        )
    specs = {}
    for i, row in enumerate(rows):
        where = f"{path}, row {i + 1}"
        key = (row["hardware"] or "").strip()
        if not key or key in specs:
            raise InputError(f"{where}, column 'hardware': {'empty' if not key else repr(key) + ' appears twice'}.")
        numbers = {
            c: _number(row[c], f"{where}, column '{c}'", optional=c in _PEAK_COLUMN.values() and c != "fp32_tflops")
            for c in COLUMNS
            if c not in ("hardware", "name", "source")
        }
        if not (row["source"] or "").strip():
            raise InputError(f"{where}, column 'source' is empty: every row says where its figures come from.")
        specs[key] = GpuSpec(
            key,
            (row["name"] or key).strip(),
            {c: numbers[c] for c in set(_PEAK_COLUMN.values())},
            numbers["memory_bandwidth_gbs"],
            int(numbers["sm_count"]),
            numbers["memory_gb"],
            numbers["l2_mb"],
            row["source"].strip(),
            (row.get("second_source") or "").strip(),
        )
    return specs


def _number(text: str | None, where: str, optional: bool) -> float | None:
    text = (text or "").strip()
    if text == "" and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{where}: {text!r} is not a number.") from None
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{where}: {text!r} must be a number > 0.")
    return value
