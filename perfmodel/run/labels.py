"""The labels a run produces: one row per image (path, top-1 class, its score, the worker and batch that
did it, and which run it belongs to), written atomically to CSV or Parquet, and read back by --resume.

Every row names its run: `plan`, the first 16 hex digits of the plan file's sha256, and `inputs`, those
of the images folder's real path ('synthetic' for random inputs). --resume refuses a labels file of
another plan or another folder, which would otherwise be merged and counted as done.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from perfmodel.errors import InputError, PerfmodelError
from perfmodel.files import atomic_write_bytes
from perfmodel.readers import decimal, output_file, shown

ROW_COLUMNS = ("path", "class", "score", "worker", "batch")  # what a worker's result gives
COLUMNS = (*ROW_COLUMNS, "plan", "inputs")
FORMATS = (".csv", ".parquet")
DIGITS = 16


@dataclass(frozen=True)
class RunIdentity:
    """Which plan and which inputs a labels file belongs to."""

    plan: str
    inputs: str

    @classmethod
    def of(cls, plan_sha256: str, images: str | os.PathLike | None) -> RunIdentity:
        if images is None:
            return cls(plan_sha256[:DIGITS], "synthetic")
        real = os.path.realpath(images).encode("utf-8", "surrogateescape")
        return cls(plan_sha256[:DIGITS], hashlib.sha256(real).hexdigest()[:DIGITS])


def check_out(path) -> Path:
    """Fail before any work when the labels file (`out`) cannot be written in a format we know."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise InputError(f"`out` {path}: write labels to a .csv or .parquet file.")
    if path.suffix.lower() == ".parquet":
        _parquet_engine()
    return output_file(path)


def _parquet_engine() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InputError(
            "writing .parquet needs pyarrow: in perfmodel's clone, pip install '.[run]'; or write a .csv."
        ) from None


def read_labels(path, run: RunIdentity, files, workers=None) -> pd.DataFrame:
    """The rows of an earlier run's labels file, to resume it: refused unless every row belongs to `run`, names
    one of `files` (this run's images) once, and holds a label (a class, a score, a batch number, and one
    of `workers`, the plan's worker names, where given). An absent file is an empty result."""
    path = Path(path)
    if not path.exists():
        return pd.DataFrame(columns=list(COLUMNS))
    text = dict.fromkeys(COLUMNS, str)  # each cell as written: the label columns are checked below
    try:
        if path.suffix.lower() == ".parquet":
            _parquet_engine()
            frame = pd.read_parquet(path)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("error", pd.errors.ParserWarning)  # a row longer than the header
                # index_col=False: a trailing comma must not shift the columns (see files.read_csv_text)
                frame = pd.read_csv(_trimmed(path), dtype=text, keep_default_na=False, index_col=False)
    except (OSError, ValueError, csv.Error, pd.errors.ParserWarning) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot read {path} to resume from it ({reason}); move it away to start afresh.") from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"{path} is not a labels file of this perfmodel run (no {', '.join(missing)} column, so it does not "
            "say which plan and images it belongs to): give another `out`, or move it away."
        )
    frame = frame[list(COLUMNS)]
    _check_rows(path, frame, run, files)
    return _check_labels(path, frame, workers)


def _trimmed(path: Path):
    """The CSV with empty cells past the header's last column (a trailing comma) dropped: pandas 2 drops
    them itself with index_col=False, pandas 3 refuses the file."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    width = len(rows[0]) if rows else 0
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for row in rows:
        while len(row) > width and not row[-1].strip():
            row = row[:-1]
        writer.writerow(row)
    out.seek(0)
    return out


def _check_rows(path: Path, frame: pd.DataFrame, run: RunIdentity, files) -> None:
    if frame.empty:
        return
    empty = frame[list(COLUMNS)].astype(str).eq("").any(axis=1)
    if empty.any():
        raise InputError(
            f"{path}, data row {int(empty.to_numpy().argmax()) + 1} has an empty cell (a truncated or edited "
            "labels file): move it away to start afresh."
        )
    for column, mine, what in (("plan", run.plan, "another plan"), ("inputs", run.inputs, "another images folder")):
        other = frame[column].astype(str) != mine
        if other.any():
            theirs = str(frame[column][other].iloc[0])[:40]
            raise InputError(
                f"{path} holds labels of {what} ({column} {theirs!r}; this run's is {mine!r}): resume with the "
                "plan and `images` that wrote it, or give another `out`."
            )
    known = set(files)
    stray = [p for p in frame["path"] if p not in known]
    if stray:
        raise InputError(
            f"{path} names {len(stray):,} image(s) that are not among this run's files (e.g. {stray[0][:200]!r}): "
            "run from the directory and with the `images` spelling of the run that wrote it, or give another `out`."
        )


def _whole(x: str) -> bool:
    value = decimal(x)
    return value is not None and value >= 0 and value.is_integer()


def _score(x: str) -> bool:
    value = decimal(x)
    return value is not None and 0 <= value <= 1


_CELLS = (  # column, whether a cell holds what the run writes there, what that is
    ("class", _whole, "a class index (a whole number >= 0)"),
    ("score", _score, "a score from 0 to 1"),
    ("batch", _whole, "a batch number (a whole number >= 0)"),
)


def _check_labels(path: Path, frame: pd.DataFrame, workers) -> pd.DataFrame:
    """Every row a label the run wrote, each image once: an edited or merged file would otherwise be
    counted as done (a garbage row) or written again twice (a duplicate). Returns the rows with numbers
    for the class, score and batch."""
    if frame.empty:
        return frame
    cells = [(column, frame[column].astype(str).str.strip(), ok, what) for column, ok, what in _CELLS]
    if workers is not None:
        known = set(workers)
        cells.append(("worker", frame["worker"].astype(str), known.__contains__, "a worker of this plan"))
    for column, values, ok, what in cells:
        bad = ~values.map(ok)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise InputError(
                f"{path}, data row {row + 1}: {column} {shown(values.iloc[row])} is not {what} (an edited labels "
                "file): correct or delete that row (its image is then done again), or move the file away to "
                "start afresh."
            )
    twice = frame["path"].duplicated(keep=False).to_numpy()
    if twice.any():
        first = int(twice.argmax())
        again = first + 1 + int((frame["path"].iloc[first + 1 :] == frame["path"].iloc[first]).to_numpy().argmax())
        raise InputError(
            f"{path}, data rows {first + 1} and {again + 1} both label {shown(frame['path'].iloc[first], 200)} (a "
            "merged or edited labels file; a run labels each image once): delete one of them, or move the file "
            "away to start afresh."
        )
    numbers = {c: frame[c].astype(str).map(decimal) for c in ("class", "score", "batch")}
    return frame.assign(**numbers).astype({"class": int, "batch": int})


class LabelWriter:
    """Collects rows and rewrites the whole file atomically on each flush (the earlier rows first)."""

    def __init__(self, path, run: RunIdentity, earlier: pd.DataFrame | None = None):
        self.path = Path(path)
        self.run = run
        self.earlier = earlier if earlier is not None and len(earlier) else None
        self.rows: list[tuple] = []
        self.written = 0

    def add(self, rows: list[tuple]) -> None:
        """Rows of ROW_COLUMNS."""
        self.rows.extend(rows)

    @property
    def dirty(self) -> bool:
        return len(self.rows) != self.written

    def flush(self) -> None:
        frame = pd.DataFrame(self.rows, columns=list(ROW_COLUMNS)).assign(plan=self.run.plan, inputs=self.run.inputs)
        if self.earlier is not None:
            frame = pd.concat([self.earlier, frame], ignore_index=True)
        if self.path.suffix.lower() == ".parquet":
            buffer = io.BytesIO()
            frame.to_parquet(buffer, index=False)
            data = buffer.getvalue()
        else:
            data = frame.to_csv(index=False).encode("utf-8")
        try:
            atomic_write_bytes(self.path, data)
        except OSError as exc:  # its folder removed during the run, a full disk: one sentence, exit 1
            raise PerfmodelError(
                f"cannot write the labels to {self.path}: {exc.strerror or exc}"
                + (" (its folder was removed during the run)" if not self.path.parent.exists() else "")
                + f"; {len(self.rows):,} labels of this run are lost, the run is stopped."
            ) from None
        self.written = len(self.rows)


def same_file(a, b) -> bool:
    """Whether two paths name one file (by inode), so that --out never overwrites an input."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
