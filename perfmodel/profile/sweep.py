"""The profiling sweep: checks the request, picks the backend, and keeps the output file.

Every backend measures its points through a ProfileOutput, which rewrites the CSV atomically after
every point, so an interrupted sweep keeps every point it finished and `resume=True` skips them:
none is lost, none is measured twice. The backends (backends/) sit behind one small interface,
`estimate(config)` and `sweep(config, output, notify)`; none of them imports this module.
"""

from __future__ import annotations

import os

import pandas as pd

from perfmodel.profile.backends import load_backend
from perfmodel.profile.config import Estimate, ProfileConfig, ProgressCallback, SweepEvent  # noqa: F401 (re-exported)
from perfmodel.profile.lifetime import remove_stale
from perfmodel.profile.output import ProfileOutput

STALE_PREFIXES = ("perfmodel-worker-", "perfmodel-triton-")  # temp folders of runs that died (lifetime.py)


def estimate_profile(config: ProfileConfig) -> Estimate:
    """How many points `config` measures and how long that may take, without measuring anything."""
    return load_backend(config.backend).estimate(config)


def run_profile(
    config: ProfileConfig, out: str | os.PathLike, resume: bool = False, on_progress: ProgressCallback | None = None
) -> pd.DataFrame:
    """Measure the grid of `config` and write the profile CSV to `out`; return the whole profile."""
    backend = load_backend(config.backend)
    for prefix in STALE_PREFIXES:
        remove_stale(prefix)
    output = ProfileOutput(out, resume)
    backend.sweep(config, output, on_progress or (lambda event: None))
    return output.frame()
