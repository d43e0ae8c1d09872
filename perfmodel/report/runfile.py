"""The checker of run files (`perfmodel run --json`) for the report, as plans have theirs: every field the
report reads has the type it draws with, or one sentence names the field, the worker and what it holds.

A number where an object belongs (load_s: 5), a string where a number belongs (batch_s.measured: "x"), or
a timeline that is not [start, end] pairs made the report fail with TypeError, KeyError, AttributeError
or ValueError."""

from __future__ import annotations

import json

from perfmodel.errors import InputError
from perfmodel.readers import is_number

MAX_SECONDS = 1e9  # about 31 years: a time beyond is not a run's (and no axis can draw it)
PAIRS = ("load_s", "warmup_s", "batch_s", "finish_s")
COUNTS = ("input_size", "batch_size", "batches_done", "batches_given", "images_done")
# The run's own numbers, with the least each can be (None: any, as a time from the plan's end can be early).
TOP_NUMBERS = {
    "predicted_makespan_s": 0,
    "measured_makespan_s": 0,
    "deadline_s": 0,
    "error_rel": -1,  # measured - predicted, over predicted: a makespan is never below 0
    "later_than_planned_s": None,
}


def check_run(run: dict, source: str, how: str) -> None:
    """InputError naming the first field of `run` the report cannot draw."""

    def refuse(where: str, value, wanted: str) -> None:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise InputError(f"{source}: {where} is {shown}, not {wanted}; {how}.")

    def number(where: str, value, optional: bool = True, seconds: bool = True, least=None) -> None:
        if value is None and optional:
            return
        if not is_number(value) or (seconds and abs(value) > MAX_SECONDS) or (least is not None and value < least):
            wanted = "a number" + (f" of seconds within {MAX_SECONDS:g}" if seconds else "")
            refuse(where, value, wanted + ("" if least is None else f", at least {least}"))

    if not isinstance(run.get("status"), str):
        refuse('"status"', run.get("status"), "a string")
    model = run.get("model")
    if model is not None and not (isinstance(model, dict) and isinstance(model.get("name"), (str, type(None)))):
        refuse('"model"', model, 'an object with a "name"')
    for key, least in TOP_NUMBERS.items():
        number(f'"{key}"', run.get(key), seconds=key != "error_rel", least=least)
    p = run.get("deadline_probability")
    if p is not None and not (is_number(p) and 0 <= p <= 1):
        refuse('"deadline_probability"', p, "a probability from 0 to 1")
    load = run.get("load_avg_1m")
    if load is not None and not (isinstance(load, list) and all(is_number(x) for x in load)):
        refuse('"load_avg_1m"', load, "a list of numbers")
    _check_losses(run, refuse, number)
    for w in run["workers"]:
        name = w["worker"][:40]
        for key in PAIRS:
            pair = w.get(key)
            if not isinstance(pair, dict):
                refuse(f'worker {name}, "{key}"', pair, 'an object {"predicted": s, "measured": s}')
            for side in ("predicted", "measured"):
                number(f'worker {name}, "{key}".{side}', pair.get(side))
        for key in COUNTS:
            value = w.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                refuse(f'worker {name}, "{key}"', value, "a whole number >= 0")
        number(f'worker {name}, "decode_s_per_image"', w.get("decode_s_per_image"))
        if not isinstance(w.get("bottleneck"), (str, type(None))):
            refuse(f'worker {name}, "bottleneck"', w.get("bottleneck"), "a string")
        timeline = w.get("timeline")
        if timeline is None:
            continue
        if not isinstance(timeline, dict):
            refuse(f'worker {name}, "timeline"', timeline, 'an object {"load": [start, end], "batches": [...]}')
        batches = timeline.get("batches")
        if batches is not None and not isinstance(batches, list):
            refuse(f'worker {name}, "timeline".batches', batches, "a list of [start, end]")
        for span in [timeline.get("load"), *(batches or [])]:
            if span is None:
                continue
            if not (isinstance(span, list) and len(span) == 2 and all(is_number(x) for x in span)):
                refuse(f"worker {name}, a timeline entry", span, "[start, end]")
            for x in span:
                number(f"worker {name}, a timeline entry", x)
            if span[1] < span[0]:
                refuse(f"worker {name}, a timeline entry", span, "[start, end] with the end not before the start")


def _check_losses(run: dict, refuse, number) -> None:
    """A lost node's keys (run files since the lost-node survival; older ones lack them): lost_workers and
    rerun_batches, each a list of objects naming a worker."""
    for key, times in (("lost_workers", ("lost_at_s",)), ("rerun_batches", ("end_s",))):
        entries = run.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            refuse(f'"{key}"', entries, "a list")
        for entry in entries:
            if not (isinstance(entry, dict) and isinstance(entry.get("worker"), str)):
                refuse(f'an entry of "{key}"', entry, 'an object with a "worker" name')
            for field in times:
                number(f'"{key}", worker {entry["worker"][:40]}, "{field}"', entry.get(field))
