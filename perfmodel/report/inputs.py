"""Reading what a report shows -- profiles, predictors, a plan -- with one clear error for a bad file."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd

from perfmodel.errors import InputError
from perfmodel.files import read_json
from perfmodel.plan_context import check_plan_format
from perfmodel.report.groups import SOURCE
from perfmodel.schema import load_profile
from perfmodel.units import MAX_BATCH_SIZE, MAX_INPUT_SIZE, MAX_SECONDS, shown
from solvers.problem import MAX_COUNT


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


PLAN_STATUSES = ("optimal", "feasible", "infeasible")


def read_plan(path) -> dict | None:
    """A plan as `perfmodel plan --json` writes it, every known field checked: InputError otherwise.

    Fields this perfmodel does not know are kept (and shown as they are); the known ones must hold
    what the plan command writes, or the figure would draw, or silently leave out, something wrong.
    """
    if path is None:
        return None
    source = os.fspath(path)
    how = "give the JSON that `perfmodel plan --json` prints"
    plan = read_json(path, InputError, "a plan", how)
    if isinstance(plan, dict) and plan.get("mode") == "online":
        raise InputError(f"{source} is an online plan (--mode online): the report draws batch plans (soft, relaxed) only.")
    if not isinstance(plan, dict) or not isinstance(plan.get("status"), str):
        raise InputError(f"{source} is JSON but not a plan (no \"status\"); {how}.")
    check_plan_format(plan, source, how)
    if plan["status"] not in PLAN_STATUSES:
        raise InputError(f"{source} has the status {shown(plan['status'])}, which is none of {', '.join(PLAN_STATUSES)}; {how}.")
    problem = _fields_problem(plan, _PLAN_FIELDS)
    if problem:
        raise InputError(f"{source}: {problem}; {how}.")
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


# What each known field must hold (None is allowed wherever a field is optional).
_SECONDS = ("seconds", lambda v: _is_number(v) and 0 <= v <= MAX_SECONDS, "a number of seconds from 0 to 10 years")
_DEADLINE = ("deadline", lambda v: _is_number(v) and 0 < v <= MAX_SECONDS, "a number of seconds above 0, at most 10 years")
_COUNT = ("count", lambda v: _is_whole(v) and 0 <= v <= MAX_COUNT, f"a whole number from 0 to {MAX_COUNT:,}")
_POSITIVE = ("positive", lambda v: _is_whole(v) and 1 <= v <= MAX_COUNT, f"a whole number from 1 to {MAX_COUNT:,}")
_BATCH = ("batch", lambda v: _is_whole(v) and 1 <= v <= MAX_BATCH_SIZE, f"a whole number from 1 to {MAX_BATCH_SIZE:,}")
_SIZE = ("size", lambda v: _is_whole(v) and 1 <= v <= MAX_INPUT_SIZE, f"a whole number from 1 to {MAX_INPUT_SIZE:,}")
_FRACTION = ("fraction", lambda v: _is_number(v) and 0 <= v < 1, "a fraction from 0 to below 1")
_NUMBER = ("number", lambda v: _is_number(v) and v >= 0, "a number >= 0")
_TEXT = ("text", lambda v: isinstance(v, str), "text")
_FLAG = ("flag", lambda v: isinstance(v, bool), "true or false")
_PLAN_FIELDS = {
    "mode": _TEXT, "objective": _TEXT, "reason": _TEXT, "cost_billing": _TEXT, "exact": _FLAG,
    "deadline_s": _DEADLINE, "usable_s": _SECONDS, "makespan_s": _SECONDS, "min_deadline_s": _SECONDS,
    "margin": _FRACTION, "objective_value": _NUMBER, "gap": _NUMBER, "max_images_gap": _NUMBER, "cost": _NUMBER,
    "build_time_s": _NUMBER, "solver_time_s": _NUMBER, "solve_time_s": _NUMBER,
    "images": _COUNT, "images_planned": _COUNT, "total_gpus": _COUNT, "max_images": _COUNT,
    "images_by_size": {"": _COUNT}, "images_planned_by_size": {"": _COUNT}, "max_images_by_size": {"": _COUNT},
    "gpus_by_type": {"": _COUNT}, "extra_gpus": {"": _COUNT}, "fastest_first_batch_s": {"": _SECONDS},
    "unservable_sizes": [_SIZE],
}
_ASSIGNMENT_FIELDS = {
    "option": _TEXT, "input_size": _SIZE, "count": _POSITIVE, "batches": _POSITIVE, "images": _COUNT,
    "images_total": _COUNT, "last_batch": _COUNT, "load_s": _SECONDS, "warmup_s": _SECONDS, "latency_s": _SECONDS,
    "gpu": _COUNT,
}


def _fields_problem(data: dict, fields: dict) -> str:
    """The first known field whose value is not what it must be, as a phrase; '' when all are."""
    for key, kind in fields.items():
        value = data.get(key)
        if value is None:
            continue
        if isinstance(kind, dict):  # an object of name -> value
            check = kind[""]
            if not isinstance(value, dict):
                return f"\"{key}\" is {_json(value)}, not an object"
            bad = next((k for k, v in value.items() if v is not None and not check[1](v)), None)
            if bad is not None:
                return f"\"{key}\" gives {shown(bad)} the value {_json(value[bad])}, not {check[2]}"
        elif isinstance(kind, list):  # a list of values
            check = kind[0]
            if not isinstance(value, list) or not all(check[1](v) for v in value):
                return f"\"{key}\" is {_json(value)}, not a list of {check[2]}s"
        elif not kind[1](value):
            return f"\"{key}\" is {_json(value)}, not {kind[2]}"
    return ""


def _assignment_problem(a) -> str:
    if not isinstance(a, dict):
        return "is not an object"
    if not isinstance(a.get("hardware"), str) or not a["hardware"]:
        return "has no \"hardware\""
    for key, kind in (("batch_size", _BATCH), ("finish_s", _SECONDS)):  # the two the timeline cannot do without
        if not kind[1](a.get(key)):
            return f"\"{key}\" is {_json(a.get(key))}, not {kind[2]}"
    return _fields_problem(a, _ASSIGNMENT_FIELDS)


def _json(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


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
