"""A small, sourced table of GPU specifications: what `--target-hardware` needs to predict a GPU never profiled.

perfmodel/data/gpu_specs.csv holds one row per hardware key (the `hardware` of profiles and pools):
peak dense FLOP/s per precision (fp32 on the CUDA cores; tf32, fp16 and int8 on the tensor cores),
memory bandwidth, SM count, memory and L2, the documents the figures come from (`source`) and, where
one exists, a second document they were checked against (`second_source`, optional). Sparse tensor
figures are halved: the table holds dense rates. A user's own table with the same columns may replace
it (`perfmodel fit --gpu-specs FILE`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from perfmodel import shipped
from perfmodel.errors import InputError
from perfmodel.files import read_csv_text
from perfmodel.readers import NOT_A_NUMBER, decimal, shown, text

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
# Plausible bounds of each figure (from below the K80 to far above the B200): a table with absurd but
# positive figures (1e-300 GB/s) made fit write a predictor that plan then called damaged.
BOUNDS = {
    "fp32_tflops": (0.01, 10_000.0, "TFLOP/s"),
    "tf32_tflops": (0.01, 100_000.0, "TFLOP/s"),
    "fp16_tflops": (0.01, 100_000.0, "TFLOP/s"),
    "int8_tops": (0.01, 100_000.0, "TOP/s"),
    "memory_bandwidth_gbs": (1.0, 100_000.0, "GB/s"),
    "sm_count": (1.0, 10_000.0, "SMs"),
    "memory_gb": (0.1, 10_000.0, "GB"),
    "l2_mb": (0.01, 10_000.0, "MB"),
}
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
    # bounded, UTF-8, every row as wide as the header (files.read_csv_text)
    frame = read_csv_text(path, InputError, f"a GPU specification table (columns {', '.join(COLUMNS)})")
    frame.columns = [str(c).strip() for c in frame.columns]
    rows = frame.to_dict("records")
    missing = [c for c in COLUMNS if rows and c not in rows[0]]
    if not rows or missing:
        raise InputError(
            f"{path} is not a GPU specification table: it needs the columns {', '.join(COLUMNS)}"
            + (f" (missing {', '.join(missing)})." if missing else " and at least one row.")
        )
    specs, rows_of = {}, {}
    for i, row in enumerate(rows):
        where = f"{path}, row {i + 1}"
        for column in ("hardware", "name", "source", "second_source"):  # printed in notes and predictor files
            if (row.get(column) or "").strip():
                text(row[column], f"{where}, column '{column}'")
        key = (row["hardware"] or "").strip()
        if not key:
            raise InputError(f"{where}, column 'hardware': empty.")
        twin = rows_of.get(key.casefold())
        if twin is not None:
            first, row_number = twin
            raise InputError(
                f"{where}, column 'hardware': {key!r} "
                + ("appears twice" if first == key else f"differs from {first!r} (row {row_number}) only in case")
                + "; hardware keys are matched in any case (H100 is h100): keep one row per GPU."
            )
        rows_of[key.casefold()] = (key, i + 1)
        numbers = {
            c: _number(row[c], f"{where}, column '{c}'", c, optional=c in _PEAK_COLUMN.values() and c != "fp32_tflops")
            for c in COLUMNS
            if c not in ("hardware", "name", "source")
        }
        if numbers["sm_count"] != int(numbers["sm_count"]):
            raise InputError(f"{where}, column 'sm_count': {row['sm_count'].strip()!r} is not a whole number of SMs.")
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


def spec_key(hardware: str, specs: dict[str, GpuSpec]) -> str | None:
    """The table's key for a hardware name in any case (a profile's V100 is the table's v100), or None."""
    name = str(hardware).strip()
    if name in specs:
        return name
    return next((key for key in specs if key.casefold() == name.casefold()), None)


def _number(text: str | None, where: str, column: str, optional: bool) -> float | None:
    text = (text or "").strip()
    if text == "" and optional:
        return None
    value = decimal(text)  # ASCII digits: float() would read '٣٣٥٠' and '3_350'
    if value is None:
        raise InputError(f"{where}: {shown(text)} is not a number: write {NOT_A_NUMBER}.")
    low, high, unit = BOUNDS[column]
    if not (math.isfinite(value) and low <= value <= high):
        raise InputError(f"{where}: {shown(text)} is outside the plausible {low:,g} to {high:,g} {unit}.")
    return value
