"""What a run measured, beside what its plan predicted: per worker and in total (the run JSON).

Times are seconds from the start of the clock: the moment the workers were asked to load their models
(the plan's finish times include the load). A worker's warm-up is its first batch; its steady batch
time is the median of its later full batches; its finish is the end of its last batch. Decoding is
the bottleneck of a worker when its model waited for decoded images for more than 5% of its busy time.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from perfmodel.run.planfile import RunPlan, WorkerPlan

RUN_FORMAT = "perfmodel-run"
RUN_SCHEMA_VERSION = 1
DECODE_BOUND = 0.05  # waiting more than this fraction of the busy time makes decoding the bottleneck


def images_in(batches) -> int:
    """The images in batches given as file lists or, on random inputs, as image counts."""
    return sum(item if isinstance(item, int) else len(item) for item in batches)


def batches_done(workers) -> set[tuple[int, int]]:
    """(owner, batch number) of every batch a worker has finished, whoever's it was."""
    return {(b["owner"], b["batch"]) for w in workers for b in w.batches}


@dataclass
class WorkerRun:
    """What one worker did; filled in while the run goes on."""

    plan: WorkerPlan
    given: list  # its batches: file lists, or image counts on random inputs (fewer than planned when resumed)
    host: str = ""
    node: str = ""  # the Ray node it was placed on (its ID), where known
    pid: int | None = None
    threads: int | None = None  # torch's intra-op threads in the worker
    niceness: int | None = None  # its scheduling priority (Ray's default for workers is 15)
    device: str = ""
    load: tuple[float, float] | None = None  # start, end
    # The parts of its process's start (before the clock) and of its load, in ms, named as the profile's columns.
    load_parts: dict[str, float] = field(default_factory=dict)
    batches: list[dict] = field(default_factory=list)  # the worker's records, times from the clock's start
    status: str = "running"  # running, done, died, interrupted
    error: str = ""
    behind: str = ""  # the warning given when it fell behind its plan, if it did
    # Its batches split into pieces (BatchQueue.replaced): put back after its node was lost, or stolen by a
    # worker of a smaller batch size. The pieces follow in `given`, numbered after its own batches, and
    # count instead of them.
    replaced: set[int] = field(default_factory=set)

    @property
    def images_done(self) -> int:
        return sum(b["images"] for b in self.batches)

    @property
    def finish(self) -> float | None:
        return self.batches[-1]["end"] if self.batches else None

    def steady_batch(self) -> float | None:
        full = [b["end"] - b["start"] for b in self.batches[1:] if b["images"] == self.plan.batch_size]
        return statistics.median(full) if full else None

    def own_given(self) -> list[tuple[int, object]]:
        """(number, batch) of the batches it was given that count: those put back in pieces do not."""
        return [(i, item) for i, item in enumerate(self.given) if i not in self.replaced]

    def not_done(self, done: set) -> list:
        """Its counting batches not in `done` ((owner, number) pairs): file lists, or image counts."""
        return [item for i, item in self.own_given() if (self.plan.index, i) not in done]

    @property
    def images_given(self) -> int:
        return images_in(item for _, item in self.own_given())

    def decode_totals(self) -> tuple[float, int]:
        """Seconds spent decoding, and files decoded (readable or not)."""
        files = sum(b["images"] + len(b["failed"]) for b in self.batches if b["paths"] is not None)
        return sum(b["decode_s"] for b in self.batches), files

    def decode_per_image(self) -> float | None:
        seconds, files = self.decode_totals()
        return seconds / files if files else None

    def bottleneck(self) -> str | None:
        if not self.batches:
            return None
        if all(b["paths"] is None for b in self.batches):
            return "model"
        busy = sum(b["end"] - b["start"] for b in self.batches)
        waited = sum(b["wait_s"] for b in self.batches[1:])  # the first batch was decoded during the load
        return "decoding" if busy > 0 and waited > DECODE_BOUND * busy else "model"

    def to_dict(self) -> dict:
        p = self.plan
        load = None if self.load is None else self.load[1] - self.load[0]
        warmup = None if not self.batches else self.batches[0]["end"] - self.batches[0]["start"]
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
            "node": self.node or None,
            "pid": self.pid,
            "device": self.device,
            "threads": self.threads,
            "niceness": self.niceness,
            "status": self.status,
            "error": self.error or None,
            "batches_given": len(self.given) - len(self.replaced),
            "images_given": self.images_given,
            "batches_done": len(self.batches),
            "images_done": self.images_done,
            "load_s": _pair(p.load_s, load),
            "load_parts_ms": self.load_parts or None,
            "warmup_s": _pair(p.warmup_s, warmup),
            "batch_s": _pair(p.latency_s, self.steady_batch()),
            "finish_s": _pair(p.finish_s, self.finish),
            "model_s_median": statistics.median([b["model_s"] for b in self.batches]) if self.batches else None,
            "wait_s": sum(b["wait_s"] for b in self.batches),
            "decode_s_per_image": self.decode_per_image(),
            "bottleneck": self.bottleneck(),
            "behind": self.behind or None,
            "timeline": {
                "load": list(self.load) if self.load else None,
                "batches": [[b["start"], b["end"]] for b in self.batches],
            },
        }


@dataclass
class LostWorker:
    """A worker lost with its node: when the driver knew it (s from the clock's start), the batches it
    had not finished, put back for the survivors as (owner, batch number), and whether any could take them."""

    worker: WorkerRun
    at_s: float
    put_back: list[tuple[int, int]]
    taken: bool
    replan: dict | None = None  # what would still make the deadline (perfmodel.run.replan.suggest)

    def to_dict(self, workers: list[WorkerRun]) -> dict:
        ran = {(b["owner"], b["batch"]): x.plan.name for x in workers for b in x.batches}
        items = [workers[owner].given[number] for owner, number in self.put_back]
        return {
            "worker": self.worker.plan.name,
            "hardware": self.worker.plan.hardware,
            "node": self.worker.node or None,
            "lost_at_s": self.at_s,
            "batches_done": len(self.worker.batches),
            "batches_put_back": len(self.put_back),
            "images_put_back": sum(x if isinstance(x, int) else len(x) for x in items),
            "rerun_on": sorted({ran[k] for k in self.put_back if k in ran}),
            "replan": self.replan,
        }


def _pair(predicted: float, measured: float | None) -> dict:
    return {"predicted": predicted, "measured": measured}


@dataclass
class RunResult:
    plan: RunPlan
    workers: list[WorkerRun]
    status: str  # complete, worker-failed, interrupted
    source: str  # "synthetic" or the images folder
    cluster: str  # "local" or the address
    device: str
    started_at: str
    steal: bool
    labels: str | None = None
    resumed_images: int = 0  # done by an earlier run (--resume)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    load_avg: tuple[float, float] | None = None  # 1-minute load average at the start and at the end
    lost: list[LostWorker] = field(default_factory=list)  # workers lost with their node, in order

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def measured_makespan(self) -> float | None:
        """The end of the last batch, for a complete run that did all its images now (not a resumed one)."""
        finishes = [w.finish for w in self.workers if w.finish is not None]
        return max(finishes) if finishes and self.complete and not self.resumed_images else None

    def unfinished(self) -> list:
        """The batches given to workers and not done (a worker died, or the run was interrupted):
        file lists, or image counts on random inputs."""
        done = batches_done(self.workers)
        return [item for w in self.workers for item in w.not_done(done)]

    def rerun_batches(self) -> list[dict]:
        """The batches of lost workers that others re-ran: whose, which, where, and when they ended."""
        put_back = {k for lost in self.lost for k in lost.put_back}
        names = {w.plan.index: w.plan.name for w in self.workers}
        return [
            {
                "owner": names[b["owner"]],
                "batch": b["batch"],
                "images": b["images"],
                "worker": w.plan.name,
                "end_s": b["end"],
            }
            for w in self.workers
            for b in w.batches
            if (b["owner"], b["batch"]) in put_back
        ]

    def failed(self) -> list[tuple[str, str]]:
        """Files skipped: not images, or images that could not be read (with why)."""
        return list(self.unreadable) + [tuple(f) for w in self.workers for b in w.batches for f in b["failed"]]

    def to_dict(self) -> dict:
        predicted, measured = self.plan.makespan_s, self.measured_makespan
        decode_s, decoded = (sum(x) for x in zip(*(w.decode_totals() for w in self.workers)))
        unfinished = self.unfinished()
        bottlenecks = {w.bottleneck() for w in self.workers} - {None}
        return {
            "format": RUN_FORMAT,
            "schema_version": RUN_SCHEMA_VERSION,
            "status": self.status,
            "plan": {"path": self.plan.path, "sha256": self.plan.sha256},
            "model": {"name": self.plan.model, "path": self.plan.model_path},
            "inputs": self.source,
            "cluster": self.cluster,
            "device": self.device,
            "steal": self.steal,
            "started_at": self.started_at,
            "load_avg_1m": list(self.load_avg) if self.load_avg else None,
            "predicted_makespan_s": predicted,
            "measured_makespan_s": measured,
            "error_rel": None if measured is None or predicted <= 0 else (measured - predicted) / predicted,
            "deadline_s": self.plan.deadline_s,
            "margin": self.plan.margin,
            "met_deadline": None if measured is None else measured <= self.plan.deadline_s,
            "deadline_probability": self.plan.deadline_probability,  # what the plan stated (None: an older plan)
            "images_planned": self.plan.images,
            "images_done": sum(w.images_done for w in self.workers),
            "images_resumed": self.resumed_images,
            "skipped_files": [{"path": p, "reason": r} for p, r in self.failed()],
            "images_unfinished": sum(x if isinstance(x, int) else len(x) for x in unfinished),
            "unfinished_files": [p for x in unfinished if not isinstance(x, int) for p in x],
            "decode_s_per_image": decode_s / decoded if decoded else None,
            "bottleneck": "decoding" if "decoding" in bottlenecks else ("model" if bottlenecks else None),
            "labels": self.labels,
            "later_than_planned_s": None if measured is None else measured - predicted,
            "lost_workers": [lost.to_dict(self.workers) for lost in self.lost],
            "rerun_batches": self.rerun_batches(),
            "workers": [w.to_dict() for w in self.workers],
        }
