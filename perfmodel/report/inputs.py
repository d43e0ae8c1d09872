"""Reading what a report shows -- profiles, predictors, a plan -- with one clear error for a bad file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from perfmodel.errors import InputError
from perfmodel.files import read_json
from perfmodel.plan_context import check_plan_format
from perfmodel.report.groups import SOURCE
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
        raise InputError("this perfmodel cannot read predictors (perfmodel.fitting is missing); report profiles and plans only.") from None
    return [Predictor.load(p) for p in paths]


def read_plan(path) -> dict | None:
    """A plan as `perfmodel plan --json` writes it, checked enough to draw: InputError otherwise."""
    if path is None:
        return None
    source = os.fspath(path)
    how = "give the JSON that `perfmodel plan --json` prints"
    plan = read_json(path, InputError, "a plan", how)
    if not isinstance(plan, dict) or not isinstance(plan.get("status"), str):
        raise InputError(f"{source} is JSON but not a plan (no \"status\"); {how}.")
    check_plan_format(plan, source, how)
    if plan["status"] == "infeasible":
        return plan
    assignments = plan.get("assignments")
    if not isinstance(assignments, list):
        raise InputError(f"{source} is not a plan (no \"assignments\" list); {how}.")
    for i, a in enumerate(assignments):
        problem = _assignment_problem(a)
        if problem:
            raise InputError(f"{source}, assignment {i + 1}: {problem}; {how}.")
    return plan


def _assignment_problem(a) -> str:
    if not isinstance(a, dict):
        return "is not an object"
    if not isinstance(a.get("hardware"), str) or not a["hardware"]:
        return "has no \"hardware\""
    for key, positive in (("batch_size", True), ("finish_s", False), ("count", True), ("load_s", False),
                          ("warmup_s", False), ("latency_s", False)):
        value = a.get(key)
        if value is None and key not in ("batch_size", "finish_s"):
            continue
        if not _is_number(value) or value < 0 or (positive and value <= 0):
            return f"\"{key}\" is {json.dumps(value)}, not a {'positive' if positive else 'non-negative'} number"
    return ""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value and abs(value) != float("inf")


def read_run(path) -> dict | None:
    """A run as `perfmodel run --json` writes it, checked enough to draw: InputError otherwise."""
    if path is None:
        return None
    source = os.fspath(path)
    how = "give the JSON that `perfmodel run --json` prints"
    run = read_json(path, InputError, "a run", how)
    if not isinstance(run, dict) or run.get("format") != "perfmodel-run":
        raise InputError(f"{source} is not a run of perfmodel (no \"format\": \"perfmodel-run\"); {how}.")
    workers = run.get("workers")
    if not isinstance(workers, list) or not all(isinstance(w, dict) and isinstance(w.get("worker"), str) for w in workers):
        raise InputError(f"{source} is not a run (no \"workers\" list); {how}.")
    for w in workers:
        timeline = w.get("timeline")
        spans = [] if not isinstance(timeline, dict) else [timeline.get("load")] + list(timeline.get("batches") or [])
        for span in spans:
            if span is not None and not (isinstance(span, list) and len(span) == 2 and all(_is_number(x) for x in span)):
                raise InputError(f"{source}, worker {w['worker']}: a timeline entry is {json.dumps(span)}, not "
                                 f"[start, end]; {how}.")
    return run
