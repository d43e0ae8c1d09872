"""What every importer shares: reading a CSV as text, numbers with their place named, and the profile rows.

An importer turns another tool's file into rows of the profile contract (docs/design.md section 2). What
the file does not say -- hardware, model, backend, precision, input size, sometimes the batch size --
comes from `ImportSettings` (the command line). Every problem is one sentence naming the file, the
row (data rows counted from 1, as `perfmodel.schema` does) and the column.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass

import pandas as pd

from perfmodel.errors import ProfileFormatError
from perfmodel.files import read_csv_text
from perfmodel.readers import NOT_A_NUMBER, UNSIGNED, shown, text
from perfmodel.schema import PRECISIONS

LATENCY_FROM = ("auto", "p50", "throughput", "mean")
# Each imported row's origin: (file, data row from 0, profile column -> the file's header), so that a value
# the profile contract refuses is named by the file's row and header, not the profile's column.
ORIGIN = "_origin"


@dataclass(frozen=True)
class ImportSettings:
    """What the imported file does not record. None means: take it from the file, or fail if it lacks it."""

    hardware: str | None = None
    model: str | None = None
    backend: str | None = None
    precision: str | None = None
    input_size: int | None = None
    batch_sizes: tuple[int, ...] = ()  # perf_analyzer: one per file, or one for all files
    source: str | None = None  # default: the file's path
    latency_from: str = "auto"
    model_config: str | None = None  # Model Analyzer: which model configuration
    device_name: str | None = None

    def __post_init__(self) -> None:
        for name in ("hardware", "model", "backend", "source", "model_config", "device_name"):
            if getattr(self, name) is not None:  # echoed into the profile, its tables and plans
                object.__setattr__(self, name, text(getattr(self, name), name, error=ProfileFormatError))
        if self.latency_from not in LATENCY_FROM:
            raise ProfileFormatError(
                f"`latency_from` must be one of {', '.join(LATENCY_FROM)}, not {self.latency_from!r}."
            )
        if self.precision is not None and self.precision.lower() not in PRECISIONS:
            raise ProfileFormatError(f"`precision` {self.precision!r} is not one of {', '.join(PRECISIONS)}.")
        if self.input_size is not None and not (isinstance(self.input_size, int) and self.input_size >= 1):
            raise ProfileFormatError(f"`input_size` must be a whole number of pixels >= 1, not {self.input_size!r}.")
        if any(not (isinstance(b, int) and b >= 1) for b in self.batch_sizes):
            raise ProfileFormatError(f"`batch_sizes` takes whole numbers >= 1, not {self.batch_sizes!r}.")


def where(path: str, row: int, column: str) -> str:
    """'FILE, row N, column 'X'' with row the 0-based index of a data row."""
    return f"{path}, row {row + 1}, column '{column}'"


def read_text_csv(path: str | os.PathLike, what: str) -> pd.DataFrame:
    """A CSV as a frame of stripped strings (empty cells as ''), or one sentence on why it cannot be read."""
    frame = read_csv_text(path, ProfileFormatError, what)
    if frame.empty:
        raise ProfileFormatError(f"{os.fspath(path)} has a header but no data rows: {what} needs at least one.")
    frame.columns = [str(c).strip() for c in frame.columns]
    return frame.apply(lambda column: column.str.strip())


# A number (readers.UNSIGNED: ASCII digits, so '١٠٠' is none) and an optional unit; 1,234.5 is read without commas.
_NUMBER_WITH_UNIT = re.compile(rf"([-+]?{UNSIGNED})\s*([A-Za-z/%µ]*)")
_THOUSANDS = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")


def number(
    text: str,
    path: str,
    row: int,
    column: str,
    units: tuple[str, ...] = (),
    *,
    positive: bool = True,
    optional: bool = False,
) -> float:
    """The number in a cell ('5.26', '5.26 ms', '191 img/s' when the unit is one of `units`).

    Empty cells are NaN when `optional`, an error otherwise.
    """
    if text == "":
        if optional:
            return math.nan
        raise ProfileFormatError(f"{where(path, row, column)} is empty; it needs a number.")
    match = _NUMBER_WITH_UNIT.fullmatch(text.replace(",", "") if _THOUSANDS.fullmatch(text) else text)
    unit = match.group(2) if match else ""
    if match is None or (unit and unit.lower() not in {u.lower() for u in units}):
        expected = f", optionally followed by {' or '.join(units)}" if units else ""
        raise ProfileFormatError(
            f"{where(path, row, column)}: {shown(text)} is not a number: write {NOT_A_NUMBER}{expected}."
        )
    value = float(match.group(1))
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ProfileFormatError(
            f"{where(path, row, column)}: {text!r} must be a finite number {'> 0' if positive else '>= 0'}."
        )
    return value


def whole_number(text: str, path: str, row: int, column: str) -> int:
    value = number(text, path, row, column)
    if value != int(value):
        raise ProfileFormatError(f"{where(path, row, column)}: {text!r} is not a whole number.")
    return int(value)


def steady_latency(
    path: str, row: int, values: dict, columns: dict, batch: int, concurrency: int, latency_from: str
) -> tuple[float, str]:
    """The profile's latency_ms for one row, and what it was taken from ('p50', 'throughput' or 'mean').

    auto: the median if the file has it; else the time per call its throughput implies (Little's law:
    concurrency x batch / throughput, which is the mean time of a call when the client keeps
    `concurrency` calls in flight); else the mean latency. values and columns map 'p50', 'throughput',
    'mean' to the row's numbers (NaN when absent) and to the file's column names.
    """
    order = ("p50", "throughput", "mean") if latency_from == "auto" else (latency_from,)
    for basis in order:
        value = values.get(basis, math.nan)
        if math.isnan(value):
            continue
        if basis == "throughput":
            return concurrency * batch / value * 1000.0, basis
        return value, basis
    wanted = " or ".join(f"a {b} column" for b in order)
    if latency_from != "auto" and columns.get(latency_from):
        raise ProfileFormatError(
            f"{where(path, row, columns[latency_from])} is empty; `latency_from` {latency_from} needs it."
        )
    raise ProfileFormatError(
        f"{path}, row {row + 1} has no latency: the file needs {wanted} (p50 latency, a throughput, or a mean latency)."
    )


def check_p99(path: str, row: int, column: str | None, p99: float, latency: float, basis: str) -> float:
    """p99 as imported. Below a measured median it is an error; below a latency derived from the
    throughput or the mean (rounded published figures) it is raised to that latency."""
    if math.isnan(p99):
        return p99
    if p99 < latency * (1 - 1e-9):
        if basis == "p50":
            raise ProfileFormatError(
                f"{where(path, row, column)}: the 99th percentile {p99:g} ms is below the median "
                f"{latency:g} ms, which cannot be."
            )
        return latency
    return p99


def identity(settings: ImportSettings, path: str) -> dict:
    """The profile columns the settings supply (the file does not), failing if one is missing."""
    missing = [
        name for name in ("hardware", "model", "backend", "precision", "input_size") if getattr(settings, name) is None
    ]
    if missing:
        raise ProfileFormatError(
            f"{path} does not say its {', '.join(m.replace('_', ' ') for m in missing)}: give "
            f"{', '.join(f'`{m}`' for m in missing)}."
        )
    row = {
        "hardware": settings.hardware,
        "model": settings.model,
        "backend": settings.backend,
        "precision": settings.precision.lower(),
        "input_size": settings.input_size,
    }
    if settings.device_name:
        row["device_name"] = settings.device_name
    return row


def find_column(frame: pd.DataFrame, *names: str) -> str | None:
    """The frame's column matching one of `names` (case and spacing ignored), or None."""
    wanted = {_key(n) for n in names}
    for column in frame.columns:
        if _key(column) in wanted:
            return column
    return None


def _key(name: str) -> str:
    return re.sub(r"[\s_*]+", " ", name.strip().lower()).strip()
