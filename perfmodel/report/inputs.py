"""Reading what a report shows -- profiles, predictors, a plan -- with one clear error for a bad file."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from perfmodel.errors import InputError
from perfmodel.files import read_json
from perfmodel.readers import version
from perfmodel.report.groups import SOURCE
from perfmodel.report.runfile import check_run
from perfmodel.run import plan_fields
from perfmodel.run.result import RUN_FORMAT, RUN_SCHEMA_VERSION
from perfmodel.schema import load_profile


def read_profiles(paths) -> pd.DataFrame | None:
    """The profiles concatenated, each row tagged with its file's name (to tell two runs of one group apart)."""
    paths = [os.fspath(p) for p in paths]
    if not paths:
        return None
    names = [Path(p).name for p in paths]
    if len(set(names)) < len(names):  # same name in two folders: the path tells them apart
        names = paths
    frames = []
    for path, name in zip(paths, names):
        frame = load_profile(path)
        frame[SOURCE] = name
        frames.append(frame)
    return pd.concat(frames, ignore_index=True, sort=False)


def read_predictors(paths) -> list:
    if not paths:
        return []
    try:
        from perfmodel.fitting import Predictor
    except ImportError:
        raise InputError(
            "this perfmodel cannot read predictors (perfmodel.fitting is missing); report profiles and plans only."
        ) from None
    return [Predictor.load(p) for p in paths]


def read_plan(path) -> dict | None:
    """A plan as `perfmodel plan --json` writes it, every known field checked: InputError otherwise.

    Fields this perfmodel does not know are kept (and shown as they are); the known ones must hold
    what the plan command writes, or the figure would draw, or silently leave out, something wrong.
    """
    if path is None:
        return None
    return plan_fields.read_plan(path, online="the report draws batch plans (soft, relaxed) only").data


def read_run(path) -> dict | None:
    """A run as `perfmodel run --json` writes it, checked enough to draw: InputError otherwise."""
    if path is None:
        return None
    source = os.fspath(path)
    how = "give the JSON that `perfmodel run --json` prints"
    run = read_json(path, InputError, "a run", how)
    if not isinstance(run, dict) or run.get("format") != RUN_FORMAT:
        raise InputError(f'{source} is not a run of perfmodel (no "format": "{RUN_FORMAT}"); {how}.')
    again = "draw it with the perfmodel that wrote it, or run the plan again"
    if version(run, source, "run", range(1, RUN_SCHEMA_VERSION + 1), again) is None:  # written since the first run
        raise InputError(f"{source} does not say its schema_version; {again}.")
    workers = run.get("workers")
    if not isinstance(workers, list) or not all(
        isinstance(w, dict) and isinstance(w.get("worker"), str) for w in workers
    ):
        raise InputError(f'{source} is not a run (no "workers" list); {how}.')
    check_run(run, source, how)
    return run
