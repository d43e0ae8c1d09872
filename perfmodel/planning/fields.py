"""The known fields of a plan JSON, checked: what `perfmodel plan --json` writes in each, so that a
reader (report, run) draws or runs nothing wrong. The one checker of plan files: the plan's own fields,
each assignment (a group of GPUs) and each per-GPU row. Fields this perfmodel does not know are left alone."""

from __future__ import annotations

import json
import math
import os

from perfmodel.errors import InputError
from perfmodel.files import read_json
from perfmodel.schema import PRECISIONS
from perfmodel.units import GPU_TYPE_NAME, MAX_BATCH_SIZE, MAX_INPUT_SIZE, MAX_SECONDS, shown
from solvers.problem import MAX_COUNT

PLAN_STATUSES = ("optimal", "feasible", "infeasible")
PLAN_HOW = "give the JSON that `perfmodel plan --json` prints"


def read_batch_plan(path, online: str) -> dict:
    """Read a batch plan file (soft or relaxed) for report and run, every known field checked: InputError
    with one sentence otherwise. `online` says why the reader cannot use an online plan."""
    from perfmodel.planning.context import check_plan_format  # context imports numpy and the solvers

    plan = read_json(path, InputError, "a plan", PLAN_HOW)
    source = os.fspath(path)
    if isinstance(plan, dict) and plan.get("mode") == "online":
        raise InputError(f"{source} is an online plan (--mode online): {online}.")
    if not isinstance(plan, dict) or not isinstance(plan.get("status"), str):
        raise InputError(f'{source} is JSON but not a plan (no "status"); {PLAN_HOW}.')
    check_plan_format(plan, source, PLAN_HOW)
    check_plan_fields(plan, source, PLAN_HOW)
    return plan


def check_plan_fields(plan: dict, source: str, how: str) -> None:
    """InputError naming the first known field (of the plan, an assignment or a per-GPU row) that does
    not hold what the plan command writes there."""
    if plan["status"] not in PLAN_STATUSES:
        raise InputError(
            f"{source} has the status {shown(plan['status'])}, which is none of {', '.join(PLAN_STATUSES)}; {how}."
        )
    problem = _fields_problem(plan, _PLAN_FIELDS)
    if problem:
        raise InputError(f"{source}: {problem}; {how}.")
    if plan["status"] == "infeasible":
        return
    assignments = plan.get("assignments")
    if not isinstance(assignments, list):
        raise InputError(f'{source} is not a plan (no "assignments" list); {how}.')
    _check_rows(assignments, "assignment", source, how)
    rows = plan.get("gpus")  # one per GPU; absent where a plan is too large to list every GPU
    if rows is None:
        return
    if not isinstance(rows, list):
        raise InputError(f'{source}: "gpus" is {_json(rows)}, not a list; {how}.')
    _check_rows(rows, "GPU", source, how)


def _check_rows(rows: list, kind: str, source: str, how: str) -> None:
    """Assignments and per-GPU rows hold the same fields: InputError at the first that does not."""
    for i, row in enumerate(rows):
        problem = _assignment_problem(row)
        if problem:
            raise InputError(f"{source}, {kind} {i + 1}: {problem}; {how}.")


# What each known field must hold (None is allowed wherever a field is optional).
_SECONDS = ("seconds", lambda v: is_number(v) and 0 <= v <= MAX_SECONDS, "a number of seconds from 0 to 10 years")
_DEADLINE = (
    "deadline",
    lambda v: is_number(v) and 0 < v <= MAX_SECONDS,
    "a number of seconds above 0, at most 10 years",
)
_COUNT = ("count", lambda v: _is_whole(v) and 0 <= v <= MAX_COUNT, f"a whole number from 0 to {MAX_COUNT:,}")
_POSITIVE = ("positive", lambda v: _is_whole(v) and 1 <= v <= MAX_COUNT, f"a whole number from 1 to {MAX_COUNT:,}")
_BATCH = ("batch", lambda v: _is_whole(v) and 1 <= v <= MAX_BATCH_SIZE, f"a whole number from 1 to {MAX_BATCH_SIZE:,}")
_SIZE = ("size", lambda v: _is_whole(v) and 1 <= v <= MAX_INPUT_SIZE, f"a whole number from 1 to {MAX_INPUT_SIZE:,}")
_FRACTION = ("fraction", lambda v: is_number(v) and 0 <= v < 1, "a fraction from 0 to below 1")
_NUMBER = ("number", lambda v: is_number(v) and v >= 0, "a number >= 0")
_TEXT = ("text", lambda v: isinstance(v, str), "text")
_FLAG = ("flag", lambda v: isinstance(v, bool), "true or false")
_PRECISION = ("precision", lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}")
_PLAN_FIELDS = {
    "mode": _TEXT,
    "objective": _TEXT,
    "reason": _TEXT,
    "cost_billing": _TEXT,
    "exact": _FLAG,
    "deadline_s": _DEADLINE,
    "usable_s": _SECONDS,
    "makespan_s": _SECONDS,
    "min_deadline_s": _SECONDS,
    "margin": _FRACTION,
    "objective_value": _NUMBER,
    "gap": _NUMBER,
    "max_images_gap": _NUMBER,
    "cost": _NUMBER,
    "build_time_s": _NUMBER,
    "solver_time_s": _NUMBER,
    "solve_time_s": _NUMBER,
    "images": _COUNT,
    "images_planned": _COUNT,
    "total_gpus": _COUNT,
    "max_images": _COUNT,
    "images_by_size": {"": _COUNT},
    "images_planned_by_size": {"": _COUNT},
    "max_images_by_size": {"": _COUNT},
    "gpus_by_type": {"": _COUNT},
    "extra_gpus": {"": _COUNT},
    "fastest_first_batch_s": {"": _SECONDS},
    "unservable_sizes": [_SIZE],
}
# An assignment (a group of `count` GPUs) and a per-GPU row (`gpu`, its number within its type) alike.
_ASSIGNMENT_FIELDS = {
    "option": _TEXT,
    "backend": _TEXT,
    "precision": _PRECISION,
    "input_size": _SIZE,
    "count": _POSITIVE,
    "batches": _POSITIVE,
    "images": _COUNT,
    "images_total": _COUNT,
    "last_batch": _COUNT,
    "load_s": _SECONDS,
    "warmup_s": _SECONDS,
    "latency_s": _SECONDS,
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
                return f'"{key}" is {_json(value)}, not an object'
            bad = next((k for k, v in value.items() if v is not None and not check[1](v)), None)
            if bad is not None:
                return f'"{key}" gives {shown(bad)} the value {_json(value[bad])}, not {check[2]}'
        elif isinstance(kind, list):  # a list of values
            check = kind[0]
            if not isinstance(value, list) or not all(check[1](v) for v in value):
                return f'"{key}" is {_json(value)}, not a list of {check[2]}s'
        elif not kind[1](value):
            return f'"{key}" is {_json(value)}, not {kind[2]}'
    return ""


def _assignment_problem(a) -> str:
    if not isinstance(a, dict):
        return "is not an object"
    if not isinstance(a.get("hardware"), str) or not a["hardware"]:
        return 'has no "hardware"'
    if not GPU_TYPE_NAME.fullmatch(a["hardware"]):  # it names workers, Ray resources and files
        return f'"hardware" is {_json(a["hardware"])}, not a GPU type name (letters, digits, ".", "_", "-")'
    for key, kind in (("batch_size", _BATCH), ("finish_s", _SECONDS)):  # the two the timeline cannot do without
        if not kind[1](a.get(key)):
            return f'"{key}" is {_json(a.get(key))}, not {kind[2]}'
    return _fields_problem(a, _ASSIGNMENT_FIELDS) or _share_problem(a)


def _share_problem(a: dict) -> str:
    """A GPU's images must be its batches: batches - 1 full ones and a last one of 1 to batch_size."""
    size, batches, images, last = a["batch_size"], a.get("batches"), a.get("images"), a.get("last_batch")
    if batches is None or images is None:
        return ""
    full = (batches - 1) * size
    if not full < images <= full + size or (last is not None and images != full + last):
        last_text = "" if last is None else f", the last of {last}"
        return f'"images" is {images}, which is not what {batches} batch(es) of {size}{last_text} hold'
    count, total = a.get("count"), a.get("images_total")
    if count is not None and total is not None and total != count * images:
        return f'"images_total" is {total}, not "count" x "images" ({count} x {images})'
    return ""


def _json(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:40] + "..."


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
