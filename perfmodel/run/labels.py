"""The labels a run produces: one row per image (path, top-1 class, its score, the worker and batch that
did it), written atomically to CSV or Parquet, and read back by --resume."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pandas as pd

from perfmodel.errors import InputError
from perfmodel.files import atomic_write_bytes, check_writable

COLUMNS = ("path", "class", "score", "worker", "batch")
FORMATS = (".csv", ".parquet")


def check_out(path) -> Path:
    """Fail before any work when --out cannot be written in a format we know."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise InputError(f"--out {path}: write labels to a .csv or .parquet file.")
    if path.suffix.lower() == ".parquet":
        _parquet_engine()
    return check_writable(path)


def _parquet_engine() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError("writing .parquet needs pyarrow: pip install 'perfmodel[run]', or write a .csv.") from None


def read_labels(path) -> pd.DataFrame:
    """The rows of an earlier run's --out, for --resume. An absent file is an empty result."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=list(COLUMNS))
    try:
        if path.suffix.lower() == ".parquet":
            _parquet_engine()
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, dtype={"path": str, "worker": str})
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {path} to resume from it ({exc}); move it away to start afresh.") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"{path} is not a labels file of perfmodel run (no {', '.join(missing)} column): "
            "give another --out, or move it away."
        )
    return frame[list(COLUMNS)]


class LabelWriter:
    """Collects rows and rewrites the whole file atomically on each flush (the earlier rows first)."""

    def __init__(self, path, earlier: pd.DataFrame | None = None):
        self.path = Path(path)
        self.earlier = earlier if earlier is not None and len(earlier) else None
        self.rows: list[tuple] = []
        self.written = 0

    def add(self, rows: list[tuple]) -> None:
        self.rows.extend(rows)

    @property
    def dirty(self) -> bool:
        return len(self.rows) != self.written

    def flush(self) -> None:
        frame = pd.DataFrame(self.rows, columns=list(COLUMNS))
        if self.earlier is not None:
            frame = pd.concat([self.earlier, frame], ignore_index=True)
        if self.path.suffix.lower() == ".parquet":
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            data = buffer.getvalue()
        else:
            data = frame.to_csv(index=False).encode("utf-8")
        atomic_write_bytes(self.path, data)
        self.written = len(self.rows)


def same_file(a, b) -> bool:
    """Whether two paths name one file (by inode), so that --out never overwrites an input."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
