"""After a lost node: would the survivors still make the deadline, and if not, how many workers of which
type would (a suggestion; adding nodes is the cluster's job, not perfmodel's).

The work left in the lost worker's input-size class (the survivors' unstarted batches and the batches put
back) is shared by the survivors and any added workers so that all end together, each at its own rate:
a survivor's measured batch time (the median of its batches so far; the plan's until it has some), an
added worker the plan's load, warm-up and batch time for its type at that size. The probability that
they all end by the deadline comes from the deadline-probability model (perfmodel.planning.makespan):
per worker a lognormal sum of its batches with the measured spread of the survivor's batch times, and
the drift its hardware type has by default (perfmodel.planning.drift).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from perfmodel.planning.drift import default_for
from perfmodel.planning.makespan import Makespan, Workers
from perfmodel.run.planfile import WorkerPlan
from perfmodel.run.result import Added, Replan
from perfmodel.run.state import WorkerRun

CONFIDENCE = 0.95  # the plans' default: for plans made on a fixed rule, or before plans recorded one
MAX_ADDED = 64  # per type: beyond this the suggestion says that no number of this type would do
METHOD = (
    "measured batch times of the survivors, the plan's for added workers; "
    "perfmodel.planning.makespan for the probability"
)


def suggest(
    workers: list[WorkerRun],
    lost: WorkerRun,
    now_s: float,
    images_left: int,
    deadline_s: float,
    confidence: float | None = None,
) -> Replan:
    """The suggestion (the run JSON's lost_workers[i]["replan"]), at the probability the plan was made for
    (`confidence`; CONFIDENCE when it had none)."""
    target = confidence or CONFIDENCE
    size = lost.plan.input_size
    survivors = [w for w in workers if w.status in ("running", "done") and w.plan.input_size == size]
    rates = [_measured(w) for w in survivors]
    alone = _probability(rates, [], images_left, now_s, deadline_s)
    model = _model(rates, [], images_left, now_s)
    quantiles = model.quantiles((0.5, 0.95)) if model is not None else {}
    enough = alone >= target
    add = []
    for hardware, plan in ({} if enough else _types(workers, size)).items():
        for count in range(1, MAX_ADDED + 1):
            p = _probability(rates, [(plan, count)], images_left, now_s, deadline_s)
            if p >= target:
                add.append(Added(hardware, count, p))
                break
    return Replan(
        at_s=now_s,
        images_left=images_left,
        confidence=target,
        survivors=len(survivors),
        probability_with_survivors=alone,
        end_with_survivors_s={f"p{round(q * 100)}": v for q, v in quantiles.items()} or None,
        enough=enough,
        add=tuple(add),
        method=METHOD,
    )


def _measured(w: WorkerRun) -> tuple[WorkerPlan, float, float]:
    """(its plan, mean batch time, its sd) from its batches after the first, else the plan's."""
    times = [b["end"] - b["start"] for b in w.batches[1:] if b["images"]]
    per_image = [t / b["images"] for t, b in zip(times, w.batches[1:]) if b["images"]]
    if len(per_image) >= 2:
        scale = w.plan.batch_size
        return w.plan, statistics.median(per_image) * scale, statistics.stdev(per_image) * scale
    return w.plan, w.plan.latency_s, 0.0


def _types(workers: list[WorkerRun], size: int) -> dict[str, WorkerPlan]:
    """One plan row per hardware type that the plan runs at this input size: what an added one would do."""
    return {w.plan.hardware: w.plan for w in workers if w.plan.input_size == size}


@dataclass(frozen=True)
class _Runner:
    """A worker (or `count` alike) that takes part of the work left: from `start_s`, batches of `plan.batch_size`."""

    plan: WorkerPlan
    mean_s: float
    sd_s: float
    start_s: float
    count: int = 1

    @property
    def images_per_s(self) -> float:
        return self.count * self.plan.batch_size / self.mean_s if self.mean_s > 0 else 0.0


def _probability(rates, added, images: int, now_s: float, deadline_s: float) -> float:
    """P(every worker of the class ends by the deadline)."""
    if images <= 0:
        return 1.0
    model = _model(rates, added, images, now_s)
    return model.probability(deadline_s) if model is not None else 0.0


def _model(rates, added, images: int, now_s: float) -> Makespan | None:
    """When the workers of the class end, the images left shared so that all end together (each takes
    images in proportion to its rate over the time it has); None when nobody can take them."""
    if images <= 0:
        return None
    runners = [_Runner(plan, mean, sd, now_s) for plan, mean, sd in rates]
    runners += [_Runner(p, p.latency_s, 0.0, now_s + p.load_s + p.warmup_s, count) for p, count in added]
    if not any(r.images_per_s > 0 for r in runners):
        return None
    end = _common_end(runners, images)
    groups = [
        Workers(r.count, r.start_s, 0.0, batches, r.mean_s, r.sd_s, drift=default_for(r.plan.hardware))
        for r in runners
        if (batches := math.ceil(max(0.0, end - r.start_s) / r.mean_s if r.mean_s > 0 else 0))
    ]
    return Makespan(tuple(groups))


def _common_end(runners: list[_Runner], images: int) -> float:
    """The time by which the runners, each from its start at its rate, have done `images` together."""
    lo = min(r.start_s for r in runners)
    hi = max(r.start_s for r in runners) + images / sum(r.images_per_s for r in runners)
    for _ in range(60):
        mid = (lo + hi) / 2
        done = sum(r.images_per_s * max(0.0, mid - r.start_s) for r in runners)
        lo, hi = (mid, hi) if done < images else (lo, mid)
    return hi
