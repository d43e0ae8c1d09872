"""Progress of a run per hardware type: images done of given, and when it will end, measured beside planned;
and the outlook of the whole run: when it should end and the probability that it ends by the deadline.

A worker's measured end is extrapolated from its own batches so far (now + batches left x its median
batch time; its planned batch time before it has any); a type ends when its last worker does. The
outlook's spread per worker: the batches left vary as its batches so far did (their standard deviation),
and the machine's speed drifts over the time left (planning/drift.py); workers are taken as independent.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from scipy.special import ndtr

from perfmodel.planning.drift import Drift, default_for
from perfmodel.run.result import WorkerRun


@dataclass(frozen=True)
class TypeProgress:
    hardware: str
    workers: int
    images_done: int
    images_given: int
    eta_s: float  # measured so far: when this type's last worker should end (s from the start)
    planned_s: float  # what the plan says (the latest finish_s of the type)


def progress(workers: list[WorkerRun], now_s: float) -> list[TypeProgress]:
    out = []
    for hardware in dict.fromkeys(w.plan.hardware for w in workers):
        mine = [w for w in workers if w.plan.hardware == hardware]
        out.append(
            TypeProgress(
                hardware,
                len(mine),
                sum(w.images_done for w in mine),
                sum(w.images_given for w in mine),
                max(_eta(w, now_s) for w in mine),
                max(w.plan.finish_s for w in mine),
            )
        )
    return out


def _left(w: WorkerRun) -> int:
    """The batches it still owes: those it was given that count (not the ones put back in pieces after a
    lost node, whose pieces count instead; WorkerRun.replaced) less those it ran."""
    return len(w.own_given()) - len(w.batches)


def _eta(w: WorkerRun, now_s: float) -> float:
    left = _left(w)
    if w.status != "running" or left <= 0:
        return w.finish if w.finish is not None else now_s
    times = [b["end"] - b["start"] for b in w.batches[1:]]
    per_batch = statistics.median(times) if times else w.plan.latency_s
    if not w.batches:  # still loading or on its warm-up batch: the plan's times until measured ones exist
        return max(now_s, w.plan.predicted_end(1)) + (left - 1) * per_batch
    return max(now_s, w.batches[-1]["end"]) + left * per_batch


@dataclass(frozen=True)
class Outlook:
    expected_end_s: float  # when the last worker should end, from the batches measured so far
    probability: float  # that every worker ends by the deadline


def outlook(workers: list[WorkerRun], now_s: float, deadline_s: float, drifts: dict[str, Drift]) -> Outlook:
    ends, probability = [], 1.0
    for w in workers:
        if w.status == "lost":  # its batches went back to the survivors, whose ends count them
            continue
        end = _eta(w, now_s)
        ends.append(end)
        left = _left(w)
        if w.status != "running" or left <= 0:
            probability *= 1.0 if end <= deadline_s else 0.0
            continue
        times = [b["end"] - b["start"] for b in w.batches[1:]]
        per_batch = statistics.median(times) if times else w.plan.latency_s
        batch_sd = statistics.stdev(times) if len(times) > 2 else 0.0
        window = left * per_batch
        drift = drifts.get(w.plan.hardware) or default_for(w.plan.hardware)
        sd = math.sqrt(left * batch_sd**2 + (window * drift.run_rel_sd(window)) ** 2)
        probability *= float(ndtr((deadline_s - end) / sd)) if sd > 0 else float(end <= deadline_s)
    return Outlook(max(ends, default=now_s), probability)
