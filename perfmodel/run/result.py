"""What a run measured, beside what its plan predicted: per worker and in total, as frozen values (the
run JSON is their `to_dict`; perfmodel/run/state.py makes them at the end of a run, perfmodel/run/text.py
says them for people).

Times are seconds from the start of the clock: the moment the workers were asked to load their models
(the plan's finish times include the load). A worker's warm-up is its first batch; its steady batch
time is the median of its later full batches; its finish is the end of its last batch. Decoding is
the bottleneck of a worker when its model waited for decoded images for more than 5% of its busy time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from perfmodel.run.planfile import RunPlan, WorkerPlan

RUN_FORMAT = "perfmodel-run"
RUN_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Pair:
    """A time the plan predicted beside the one measured (None: not measured)."""

    predicted: float
    measured: float | None

    def to_dict(self) -> dict:
        return {"predicted": self.predicted, "measured": self.measured}


@dataclass(frozen=True)
class WorkerResult:
    """What one worker did, beside its share of the plan."""

    plan: WorkerPlan
    host: str
    node: str | None  # the Ray node it ran on (its ID), where known
    pid: int | None
    device: str
    threads: int | None
    niceness: int | None
    status: str  # done, died, lost, interrupted
    error: str | None
    batches_given: int
    images_given: int
    batches: tuple[dict, ...]  # its batch records (as the worker sent them), times from the clock's start
    images_done: int
    load: tuple[float, float] | None  # start, end
    load_parts_ms: Mapping[str, float] | None
    load_s: Pair
    warmup_s: Pair
    batch_s: Pair
    finish_s: Pair
    model_s_median: float | None
    wait_s: float
    decode_s_per_image: float | None
    bottleneck: str | None  # decoding or model; None before any batch
    behind: str | None  # the warning given when it fell behind its plan

    @property
    def batches_done(self) -> int:
        return len(self.batches)

    def to_dict(self) -> dict:
        p = self.plan
        return {
            "worker": p.name,
            "hardware": p.hardware,
            "input_size": p.input_size,
            "batch_size": p.batch_size,
            "batches": p.batches,
            "images": p.images,
            "backend": p.backend,
            "precision": p.precision,
            "host": self.host,
            "node": self.node,
            "pid": self.pid,
            "device": self.device,
            "threads": self.threads,
            "niceness": self.niceness,
            "status": self.status,
            "error": self.error,
            "batches_given": self.batches_given,
            "images_given": self.images_given,
            "batches_done": self.batches_done,
            "images_done": self.images_done,
            "load_s": self.load_s.to_dict(),
            "load_parts_ms": None if self.load_parts_ms is None else dict(self.load_parts_ms),
            "warmup_s": self.warmup_s.to_dict(),
            "batch_s": self.batch_s.to_dict(),
            "finish_s": self.finish_s.to_dict(),
            "model_s_median": self.model_s_median,
            "wait_s": self.wait_s,
            "decode_s_per_image": self.decode_s_per_image,
            "bottleneck": self.bottleneck,
            "behind": self.behind,
            "timeline": {
                "load": list(self.load) if self.load else None,
                "batches": [[b["start"], b["end"]] for b in self.batches],
            },
        }


@dataclass(frozen=True)
class Added:
    """Workers of one type that, added, would hold the deadline: how many, and the probability then."""

    hardware: str
    workers: int
    probability: float

    def to_dict(self) -> dict:
        return {"hardware": self.hardware, "workers": self.workers, "probability": self.probability}


@dataclass(frozen=True)
class Replan:
    """After a lost node: whether the survivors of its input size still make the deadline, at the
    probability the plan was made for, and if not, which workers would (perfmodel.run.replan.suggest)."""

    at_s: float
    images_left: int
    confidence: float
    survivors: int
    probability_with_survivors: float
    # when the survivors end (s from the clock's start), as the model predicts it then ({"p50": s, "p95": s}):
    # the run's makespan after the loss, if nothing else of the run ends later
    end_with_survivors_s: Mapping[str, float] | None
    enough: bool
    add: tuple[Added, ...]  # one per type of the plan at that input size that would do, in the plan's order
    method: str

    def to_dict(self) -> dict:
        return {
            "at_s": self.at_s,
            "images_left": self.images_left,
            "confidence": self.confidence,
            "survivors": self.survivors,
            "probability_with_survivors": self.probability_with_survivors,
            "end_with_survivors_s": None if self.end_with_survivors_s is None else dict(self.end_with_survivors_s),
            "enough": self.enough,
            "add": [a.to_dict() for a in self.add],
            "method": self.method,
        }


@dataclass(frozen=True)
class LostWorker:
    """A worker lost with its node: when, what it had done, what was put back and who re-ran it."""

    worker: str
    hardware: str
    node: str | None
    lost_at_s: float
    batches_done: int
    batches_put_back: int
    images_put_back: int
    rerun_on: tuple[str, ...]  # the workers that re-ran its batches, by name
    replan: Replan | None

    def to_dict(self) -> dict:
        return {
            "worker": self.worker,
            "hardware": self.hardware,
            "node": self.node,
            "lost_at_s": self.lost_at_s,
            "batches_done": self.batches_done,
            "batches_put_back": self.batches_put_back,
            "images_put_back": self.images_put_back,
            "rerun_on": list(self.rerun_on),
            "replan": None if self.replan is None else self.replan.to_dict(),
        }


@dataclass(frozen=True)
class RerunBatch:
    """A lost worker's batch that another worker re-ran: whose, which, where, and when it ended."""

    owner: str
    batch: int
    images: int
    worker: str
    end_s: float

    def to_dict(self) -> dict:
        return {
            "owner": self.owner,
            "batch": self.batch,
            "images": self.images,
            "worker": self.worker,
            "end_s": self.end_s,
        }


@dataclass(frozen=True)
class SkippedFile:
    """A file not labelled: not an image, or an image that could not be read."""

    path: str
    reason: str

    def to_dict(self) -> dict:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class RunResult:
    """A run: its plan, how it ended, and per worker and in total what was measured beside what was predicted."""

    plan: RunPlan
    status: str  # complete, worker-failed, interrupted
    inputs: str  # "synthetic" or the images folder
    cluster: str  # "local" or the address
    device: str
    started_at: str
    steal: bool
    load_avg_1m: tuple[float, float] | None  # at the start and at the end
    measured_makespan_s: float | None  # the end of the last batch: a complete run that did all its images now
    images_done: int
    images_resumed: int  # done by an earlier run (--resume)
    skipped_files: tuple[SkippedFile, ...]
    images_unfinished: int
    unfinished_files: tuple[str, ...]
    decode_s_per_image: float | None
    bottleneck: str | None
    labels: str | None  # the labels file
    lost_workers: tuple[LostWorker, ...]
    rerun_batches: tuple[RerunBatch, ...]
    workers: tuple[WorkerResult, ...]

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def predicted_makespan_s(self) -> float:
        return self.plan.makespan_s

    @property
    def error_rel(self) -> float | None:
        measured, predicted = self.measured_makespan_s, self.plan.makespan_s
        return None if measured is None or predicted <= 0 else (measured - predicted) / predicted

    @property
    def met_deadline(self) -> bool | None:
        return None if self.measured_makespan_s is None else self.measured_makespan_s <= self.plan.deadline_s

    @property
    def later_than_planned_s(self) -> float | None:
        return None if self.measured_makespan_s is None else self.measured_makespan_s - self.plan.makespan_s

    def to_dict(self) -> dict:
        plan = self.plan
        return {
            "format": RUN_FORMAT,
            "schema_version": RUN_SCHEMA_VERSION,
            "status": self.status,
            "plan": {"path": plan.path, "sha256": plan.sha256},
            "model": {"name": plan.model, "path": plan.model_path},
            "inputs": self.inputs,
            "cluster": self.cluster,
            "device": self.device,
            "steal": self.steal,
            "started_at": self.started_at,
            "load_avg_1m": list(self.load_avg_1m) if self.load_avg_1m else None,
            "predicted_makespan_s": plan.makespan_s,
            "measured_makespan_s": self.measured_makespan_s,
            "error_rel": self.error_rel,
            "deadline_s": plan.deadline_s,
            "margin": plan.margin,
            "met_deadline": self.met_deadline,
            "deadline_probability": plan.deadline_probability,  # what the plan stated (None: an older plan)
            "images_planned": plan.images,
            "images_done": self.images_done,
            "images_resumed": self.images_resumed,
            "skipped_files": [f.to_dict() for f in self.skipped_files],
            "images_unfinished": self.images_unfinished,
            "unfinished_files": list(self.unfinished_files),
            "decode_s_per_image": self.decode_s_per_image,
            "bottleneck": self.bottleneck,
            "labels": self.labels,
            "later_than_planned_s": self.later_than_planned_s,
            "lost_workers": [lost.to_dict() for lost in self.lost_workers],
            "rerun_batches": [b.to_dict() for b in self.rerun_batches],
            "workers": [w.to_dict() for w in self.workers],
        }
