"""A sweep's output file: the rows measured so far, which points they hold, and resuming.

Every backend's sweep writes through a ProfileOutput, so all of them resume the same way: the CSV
is rewritten atomically after each new row, and a point already in the file is never measured again.
"""

from __future__ import annotations

import os

import pandas as pd

from perfmodel.errors import InputError
from perfmodel.readers import output_file
from perfmodel.schema import POINT_KEY, REQUIRED_COLUMNS, load_profile, validate_profile, write_profile

# Settings that must match to resume: otherwise two kinds of measurement would share one curve.
RESUME_MUST_MATCH = ("warmup_method", "threads", "alongside", "processes", "device_name", "torch")
# A file from before the column was measured alone, in one process (and K = 1 writes no `processes`).
ABSENT_MEANS = {"alongside": "0", "processes": "1"}


class ProfileOutput:
    def __init__(self, path: str | os.PathLike, resume: bool):
        self.path = output_file(path, "`out`")
        self.existing: pd.DataFrame | None = None
        if self.path.exists():
            if not resume:
                raise InputError(
                    f"{self.path} already exists: continue that sweep with `resume`, or choose another `out`."
                )
            self.existing = load_profile(self.path)
        self.rows: list[dict] = [] if self.existing is None else self.existing.to_dict("records")
        self._index = {point_key(row): i for i, row in enumerate(self.rows)}
        self.added = 0

    def get(self, identity: dict) -> dict | None:
        """The row already measured for this point, or None."""
        i = self._index.get(point_key(identity))
        return None if i is None else self.rows[i]

    def add(self, row: dict) -> None:
        """Keep a newly measured row and rewrite the file with it (atomically)."""
        self._index[point_key(row)] = len(self.rows)
        self.rows.append(row)
        write_profile(self.frame(), self.path)
        self.added += 1

    def saved(self) -> str:
        """One sentence for a sweep that stopped early: what the file holds now."""
        if not self.added:
            held = f"; {self.path} holds the {len(self.rows)} point(s) measured before" if self.rows else ""
            return f"No new point was measured{held}."
        before = f" ({len(self.rows) - self.added} of them from before)" if len(self.rows) > self.added else ""
        return f"The {len(self.rows)} point(s) finished are saved in {self.path}{before}."

    def frame(self) -> pd.DataFrame:
        # A sweep whose points all failed still writes a valid profile (status error, times empty).
        df = pd.DataFrame(self.rows)
        df = df.reindex(columns=[*REQUIRED_COLUMNS, *(c for c in df.columns if c not in REQUIRED_COLUMNS)])
        return validate_profile(df, str(self.path))

    def check_resumable(self, identity: dict, settings: dict) -> None:
        """Refuse to add to a curve of the file that was measured with other settings."""
        if self.existing is None:
            return
        same = self.existing
        for column in ("hardware", "model", "backend", "precision"):
            same = same[same[column].astype(str) == str(identity[column])]
        for column in RESUME_MUST_MATCH:
            if column in settings and len(same) and (column in same.columns or column in ABSENT_MEANS):
                theirs = (
                    {_normal(v) for v in same[column].dropna().unique()}
                    if column in same.columns
                    else {ABSENT_MEANS[column]}
                )
                if theirs and theirs != {_normal(settings[column])}:
                    raise InputError(
                        f"{self.path} was measured with {column}={', '.join(sorted(theirs))}, this run has "
                        f"{settings[column]}: resume with the same settings, or write to a new `out`."
                    )


def point_key(row: dict) -> tuple:
    """What tells a measured point apart from the others, as text (the resume key)."""
    return tuple(_normal(row.get(c)) for c in POINT_KEY)


def _normal(value) -> str:
    """Point keys compare as text, so 64, 64.0 and '64' match and missing values are all ''."""
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
