"""A plan file: what `perfmodel plan --json` writes in each known field, and the one reader of plan files
(`run` types what it reads for running, perfmodel/run/planfile.py; `report --plan` draws it). The reader
checks the plan's own fields, each assignment (a group of GPUs) and each per-GPU row, and the totals
against the assignments they are summed from, so that no reader draws or runs anything wrong. Fields this
perfmodel does not know are left alone.

It lives beside the run that executes plans, not in planning/ that writes them (planning/context.py, whose
format and schema_version it checks): a run reads and checks its plan, then runs it, all in run/."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass

from perfmodel.errors import InputError
from perfmodel.files import decode_json, read_bytes, source_of
from perfmodel.planning.context import PLAN_FORMAT, PLAN_SCHEMA_VERSION
from perfmodel.readers import is_number, version
from perfmodel.schema import PRECISIONS
from perfmodel.units import GPU_TYPE_NAME, MAX_BATCH_SIZE, MAX_INPUT_SIZE, MAX_SECONDS, shown
from solvers.batch_problem import MAX_COUNT

PLAN_STATUSES = ("optimal", "feasible", "infeasible")
PLAN_HOW = "give the JSON that `perfmodel plan --json` prints"


@dataclass(frozen=True)
class PlanFile:
    """A batch plan file as read: where it is, the sha256 of its bytes (a run's labels name their plan by
    it) and its JSON, every known field checked."""

    path: str
    sha256: str
    data: dict


def read_plan(path, online: str) -> PlanFile:
    """Read a batch plan file (soft or relaxed), every known field checked: InputError with one sentence
    otherwise. `online` says why the reader cannot use an online plan."""
    source = source_of(path, InputError, PLAN_HOW)
    raw = read_bytes(path, InputError, PLAN_HOW)
    plan = decode_json(raw, source, InputError, "a plan", PLAN_HOW)
    if isinstance(plan, dict) and plan.get("mode") == "online":
        raise InputError(f"{source} is an online plan (made by `perfmodel plan --mode online`): {online}.")
    if not isinstance(plan, dict) or not isinstance(plan.get("status"), str):
        raise InputError(f'{source} is JSON but not a plan (no "status"); {PLAN_HOW}.')
    fmt = plan.get("format", PLAN_FORMAT)  # plans written before the format key have neither key
    if fmt != PLAN_FORMAT:
        raise InputError(f"{source} is a {fmt!r} file, not a plan; {PLAN_HOW}.")
    version(plan, source, "plan", range(1, PLAN_SCHEMA_VERSION + 1), PLAN_HOW)
    check_fields(plan, source)
    return PlanFile(source, hashlib.sha256(raw).hexdigest(), plan)


def check_fields(plan: dict, source: str) -> None:
    """InputError naming the first known field (of the plan, an assignment or a per-GPU row) that does
    not hold what the plan command writes there, or a total that is not what the assignments hold."""
    if plan["status"] not in PLAN_STATUSES:
        statuses = ", ".join(PLAN_STATUSES)
        raise InputError(f"{source} has the status {shown(plan['status'])}, which is none of {statuses}; {PLAN_HOW}.")
    problem = _fields_problem(plan, _PLAN_FIELDS)
    if problem:
        raise InputError(f"{source}: {problem}; {PLAN_HOW}.")
    if plan["status"] == "infeasible":
        return
    assignments = plan.get("assignments")
    if not isinstance(assignments, list):
        raise InputError(f'{source} is not a plan (no "assignments" list); {PLAN_HOW}.')
    _check_rows(assignments, "assignment", source)
    rows = plan.get("gpus")  # one per GPU; absent where a plan is too large to list every GPU
    if rows is not None and not isinstance(rows, list):
        raise InputError(f'{source}: "gpus" is {_json(rows)}, not a list; {PLAN_HOW}.')
    if rows is not None:
        _check_rows(rows, "GPU", source)
    problem = _quantiles_problem(plan.get("makespan_quantiles_s")) or _totals_problem(plan) or _gpus_problem(plan)
    if problem:
        raise InputError(f"{source}: {problem}; {PLAN_HOW}.")


def _check_rows(rows: list, kind: str, source: str) -> None:
    """Assignments and per-GPU rows hold the same fields: InputError at the first that does not."""
    for i, row in enumerate(rows):
        problem = _assignment_problem(row)
        if problem:
            raise InputError(f"{source}, {kind} {i + 1}: {problem}; {PLAN_HOW}.")


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
_PROBABILITY = ("probability", lambda v: is_number(v) and 0 <= v <= 1, "a probability from 0 to 1")
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
    "deadline_probability": _PROBABILITY,
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
    "makespan_quantiles_s": {"": _SECONDS},
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
    "fill_planned": _FLAG,
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


def _quantiles_problem(quantiles) -> str:
    """The makespan's quantiles ({"p5": s, "p50": s, ...}, each a number of seconds: checked above) must
    grow with the probability: a later quantile never ends sooner."""
    if not isinstance(quantiles, dict):
        return ""
    named = []
    for key, value in quantiles.items():
        percent = key[1:]
        if not (key.startswith("p") and percent.isascii() and percent.replace(".", "", 1).isdigit()):
            return f'"makespan_quantiles_s" names the quantile {shown(key)}, not p and a percentage (p50, p95)'
        if value is not None:
            named.append((float(percent), key, value))
    named.sort()
    for (_, low, a), (_, high, b) in zip(named, named[1:]):
        if b < a:
            return f'"makespan_quantiles_s" has {high} {b:g} s below {low} {a:g} s (a later quantile never ends sooner)'
    return ""


def _totals_problem(plan: dict) -> str:
    """The plan's totals must be those of its assignments (the solver's own list; the totals are summed
    from it): an edited total would make report and run show, or run, another plan than the one drawn."""
    groups = plan["assignments"]
    if not all(isinstance(a.get("count"), int) and isinstance(a.get("images"), int) for a in groups):
        return ""  # an assignment without its count or images: nothing to add up (run refuses it)
    gpus, by_type, by_size = 0, Counter(), Counter()
    for a in groups:
        gpus += a["count"]
        by_type[a["hardware"]] += a["count"]
        by_size[str(a["input_size"])] += a["count"] * a["images"]
    planned = sum(by_size.values())
    told = (
        ("total_gpus", plan.get("total_gpus"), gpus, "GPU(s)"),
        ("images_planned", plan.get("images_planned"), planned, "images"),
    )
    for key, value, wanted, what in told:
        if value is not None and value != wanted:
            return f'"{key}" is {value:,}, but the assignments hold {wanted:,} {what}'
    for key, wanted, what in (("gpus_by_type", by_type, "GPU(s)"), ("images_planned_by_size", by_size, "images")):
        value = plan.get(key)
        if value is not None and {k: v for k, v in value.items() if v} != dict(wanted):
            return f'"{key}" is {_json(value)}, but the assignments hold {_json(dict(wanted))} {what}'
    return _asked_problem(plan, by_size)


def _asked_problem(plan: dict, planned: Counter) -> str:
    """The images asked for: those planned (soft mode), or at least those (relaxed: as many as fit)."""
    asked, exact = plan.get("images_by_size"), plan.get("mode") != "relaxed"
    if asked is not None:
        for size in sorted(set(asked) | set(planned)):
            n, done = asked.get(size), planned.get(size, 0)
            if (n is None and exact) or (n is not None and (n < done or (exact and n != done))):
                return f'"images_by_size" asks {_json(n)} images of {_size(size)} px, but the assignments plan {done:,}'
    total = plan.get("images")
    if total is None:
        return ""
    if asked is not None and None not in asked.values() and total != sum(asked.values()):
        return f'"images" is {total:,}, but "images_by_size" asks {sum(asked.values()):,}'
    if total < sum(planned.values()) or (exact and total != sum(planned.values())):
        return f'"images" is {total:,}, but the assignments plan {sum(planned.values()):,}'
    return ""


# The fields a per-GPU row repeats of its assignment (a row is its assignment less count and images_total).
_ROW_OF_ASSIGNMENT = (
    "hardware",
    "input_size",
    "option",
    "backend",
    "precision",
    "batch_size",
    "batches",
    "images",
    "last_batch",
    "load_s",
    "warmup_s",
    "latency_s",
    "finish_s",
    "fill_planned",
)


def _gpus_problem(plan: dict) -> str:
    """The per-GPU rows (where listed) must be the assignments' GPUs: `count` rows of each, as written."""
    rows = plan.get("gpus")
    if rows is None or not all(isinstance(a.get("count"), int) for a in plan["assignments"]):
        return ""
    wanted: Counter = Counter()
    for a in plan["assignments"]:
        wanted[_row_key(a)] += a["count"]
    listed = Counter(_row_key(r) for r in rows)
    for i, row in enumerate(rows):
        key = _row_key(row)
        if key not in wanted:
            return f"GPU {i + 1} ({_described(row)}) is none of the assignments' GPUs (each row repeats its own)"
    for key, count in wanted.items():
        if listed[key] != count:
            row = json.loads(key)
            return f'"gpus" lists {listed[key]:,} GPU(s) of {_described(row)}, but its assignment counts {count:,}'
    return ""


def _size(key: str) -> str:
    return key if key.isascii() and key.isdigit() else shown(key)


def _row_key(row: dict) -> str:
    return json.dumps({k: row.get(k) for k in _ROW_OF_ASSIGNMENT}, sort_keys=True)


def _described(row: dict) -> str:
    return f"{row.get('hardware')}, {row.get('input_size')} px, batch {row.get('batch_size')}"


def _json(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _is_whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
