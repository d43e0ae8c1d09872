"""Progress of a run per hardware type: images done of given, and when it will end, measured beside planned;
and the outlook of the whole run: when it should end and the probability that it ends by the deadline.

A worker's measured end is extrapolated from its own batches so far (now + batches left x its median
batch time; its planned batch time before it has any); its batches left are its own that no worker has
done (with --steal, others run some) and its share of a lost worker's, which go one by one to whichever
survivor would be free first, as the queue gives them out. A type ends when its last worker does. The
outlook's spread per worker: the batches left vary as its batches so far did (their standard deviation),
and the machine's speed drifts over the time left (planning/drift.py); workers are taken as independent.
"""

from __future__ import annotations

import heapq
import math
import statistics
from dataclasses import dataclass

from perfmodel.planning.drift import Drift, default_for
from perfmodel.run.state import WorkerRun, batches_done


@dataclass(frozen=True)
class TypeProgress:
    hardware: str
    workers: int
    images_done: int
    images_given: int
    eta_s: float  # measured so far: when this type's last worker should end (s from the start)
    planned_s: float  # what the plan says (the latest finish_s of the type)


def progress(workers: list[WorkerRun], now_s: float) -> list[TypeProgress]:
    left = _left(workers, now_s)
    out = []
    for hardware in dict.fromkeys(w.plan.hardware for w in workers):
        mine = [w for w in workers if w.plan.hardware == hardware]
        out.append(
            TypeProgress(
                hardware,
                len(mine),
                sum(w.images_done for w in mine),
                sum(w.images_given for w in mine),
                max(_eta(w, left.get(w.plan.index, 0), now_s) for w in mine),
                max(w.plan.finish_s for w in mine),
            )
        )
    return out


def _left(workers: list[WorkerRun], now_s: float) -> dict[int, int]:
    """The batches each worker still has to run, by plan index: its own that count (not those put back in
    pieces, whose pieces count instead) and that no worker has done (with --steal another may have), and
    the undone batches of the workers lost with their node, each to the survivor of its input size that
    would be free first, as the queue hands them out (run/steal.py)."""
    done = batches_done(workers)
    left = {w.plan.index: len(w.not_done(done)) for w in workers if w.status != "lost"}
    for lost in (w for w in workers if w.status == "lost"):
        takers = [
            (_eta(w, left[w.plan.index], now_s), _per_batch(w), w.plan.index)
            for w in workers
            if w.status in ("running", "done") and w.plan.input_size == lost.plan.input_size
        ]
        heapq.heapify(takers)
        for _ in lost.not_done(done) if takers else ():
            end, per_batch, index = heapq.heappop(takers)
            left[index] += 1
            heapq.heappush(takers, (end + per_batch, per_batch, index))
    return left


def _per_batch(w: WorkerRun) -> float:
    """Its median batch time after the first (the warm-up), or the plan's before it has one."""
    times = [b["end"] - b["start"] for b in w.batches[1:]]
    return statistics.median(times) if times else w.plan.latency_s


def _eta(w: WorkerRun, left: int, now_s: float) -> float:
    """When it should end with `left` batches still to run (a worker that died or was stopped: its end)."""
    if w.status not in ("running", "done") or left <= 0:
        return w.finish if w.finish is not None else now_s
    if not w.batches:  # still loading or on its warm-up batch: the plan's times until measured ones exist
        return max(now_s, w.plan.predicted_end(1)) + (left - 1) * _per_batch(w)
    return max(now_s, w.batches[-1]["end"]) + left * _per_batch(w)


@dataclass(frozen=True)
class Outlook:
    expected_end_s: float  # when the last worker should end, from the batches measured so far
    probability: float  # that every worker ends by the deadline
    deadline_s: float  # the plan's, which the probability is of


def outlook(workers: list[WorkerRun], now_s: float, deadline_s: float, drifts: dict[str, Drift]) -> Outlook:
    ends, probability = [], 1.0
    left = _left(workers, now_s)
    for w in workers:
        if w.status == "lost":  # its batches went back to the survivors, whose ends count them
            continue
        n = left[w.plan.index]
        end = _eta(w, n, now_s)
        ends.append(end)
        if w.status not in ("running", "done") or n <= 0:
            probability *= 1.0 if end <= deadline_s else 0.0
            continue
        times = [b["end"] - b["start"] for b in w.batches[1:]]
        batch_sd = statistics.stdev(times) if len(times) > 2 else 0.0
        window = n * _per_batch(w)
        drift = drifts.get(w.plan.hardware) or default_for(w.plan.hardware)
        sd = math.sqrt(n * batch_sd**2 + (window * drift.run_rel_sd(window)) ** 2)
        probability *= statistics.NormalDist(end, sd).cdf(deadline_s) if sd > 0 else float(end <= deadline_s)
    return Outlook(max(ends, default=now_s), probability, deadline_s)
