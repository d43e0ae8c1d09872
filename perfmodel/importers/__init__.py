"""Other tools' measurements as profiles: Triton perf_analyzer, Triton Model Analyzer, and plain tables.

    frame = import_profile("table", ["nvidia-table.csv"], ImportSettings(hardware="a100", ...))

returns a profile (a validated DataFrame following perfmodel.schema); every row carries `source`
(the file, or what --source said: a URL and version) and `latency_basis` (what latency_ms was taken
from). Imported rows have no warm-up and no memory (empty cells): plans built on them say so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import pandas as pd

from perfmodel.errors import ProfileFormatError
from perfmodel.importers import model_analyzer, perf_analyzer, table
from perfmodel.importers.common import LATENCY_FROM, ORIGIN, ImportSettings
from perfmodel.schema import POINT_KEY, validate_profile

FORMATS = {
    "perf-analyzer": "Triton perf_analyzer's CSV (perf_analyzer -f FILE); `batch_sizes` gives each file's -b",
    "model-analyzer": "Triton Model Analyzer's metrics-model-inference.csv",
    "table": "a plain table: batch size, throughput and/or latency percentiles (ms)",
}

__all__ = ["FORMATS", "LATENCY_FROM", "ImportSettings", "import_profile"]


def import_profile(fmt: str, paths: Sequence[str | os.PathLike], settings: ImportSettings) -> pd.DataFrame:
    """Read the files of one format into one validated profile frame."""
    if fmt not in FORMATS:
        raise ProfileFormatError(f"unknown import format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    paths = list(paths)
    if not paths:
        raise ProfileFormatError("no file given: name at least one file to import.")
    rows: list[dict] = []
    for index, path in enumerate(paths):
        if fmt == "perf-analyzer":
            rows += perf_analyzer.read(path, _batch_size(settings, index, len(paths)), settings)
        elif fmt == "model-analyzer":
            rows += model_analyzer.read(path, settings)
        else:
            rows += table.read(path, settings)
    origins = [row.pop(ORIGIN, None) for row in rows]
    frame = pd.DataFrame(rows)
    _check_unique(frame, [os.fspath(p) for p in paths])
    try:
        return validate_profile(frame, IMPORTED)
    except ProfileFormatError as exc:
        raise ProfileFormatError(_in_the_file(str(exc), origins)) from None


IMPORTED = "the imported rows"


def _in_the_file(message: str, origins: list) -> str:
    """validate_profile's 'the imported rows, row N, column 'c'...' as the file's row and header."""
    found = re.match(rf"{IMPORTED}, row (\d+), column '([^']+)'(.*)", message, re.DOTALL)
    if not found or not 0 < int(found[1]) <= len(origins) or origins[int(found[1]) - 1] is None:
        return message
    path, row, headers = origins[int(found[1]) - 1]
    column = found[2]
    header = headers.get(column)
    where = f"{path}, row {row + 1}" + (f", column '{header}' (the profile's {column})" if header else f", {column}")
    return where + found[3]


def _batch_size(settings: ImportSettings, index: int, files: int) -> int:
    sizes = settings.batch_sizes
    if not sizes:
        raise ProfileFormatError(
            "perf_analyzer's CSV does not record the batch size: give the -b of the run with "
            "`batch_sizes` N (or one per file: 1,8,32)."
        )
    if len(sizes) == 1:
        return sizes[0]
    if len(sizes) != files:
        raise ProfileFormatError(
            f"`batch_sizes` lists {len(sizes)} batch sizes for {files} files: give one for all "
            "files or one per file, in the same order."
        )
    return sizes[index]


def _check_unique(frame: pd.DataFrame, paths: list[str]) -> None:
    """Two rows for the same point (e.g. two files with the same batch size) would fit as noise: refuse them."""
    key = [c for c in POINT_KEY if c in frame.columns]
    repeated = frame.duplicated(subset=key, keep=False)
    if repeated.any():
        first = frame[repeated].iloc[0]
        point = ", ".join(f"{c} {first[c]}" for c in key if pd.notna(first[c]))
        raise ProfileFormatError(
            f"the files ({', '.join(paths)}) hold the point ({point}) more than once: "
            "import each measured point once (one of `batch_sizes` per file for perf_analyzer)."
        )
