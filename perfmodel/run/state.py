"""What a run knows while it goes on: each worker's batches as their records arrive, the workers lost with
their node, the run's status. perfmodel.run.execute fills it in, the live outlook (progress.py) and a lost
node's re-plan (replan.py) read it on the way, and at the end it gives the run's result: the frozen values
of perfmodel.run.result, measured beside predicted (see there for what each time means).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from perfmodel.run.planfile import RunPlan, WorkerPlan
from perfmodel.run.result import LostWorker, Pair, Replan, RerunBatch, RunResult, SkippedFile, WorkerResult

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
    status: str = "running"  # running, done, died, lost, interrupted
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

    def own_given(self) -> list[tuple[int, object]]:
        """(number, batch) of the batches it was given that count: those put back in pieces do not."""
        return [(i, item) for i, item in enumerate(self.given) if i not in self.replaced]

    def not_done(self, done: set) -> list:
        """Its counting batches not in `done` ((owner, number) pairs): file lists, or image counts."""
        return [item for i, item in self.own_given() if (self.plan.index, i) not in done]

    @property
    def images_given(self) -> int:
        return images_in(item for _, item in self.own_given())

    def steady_batch(self) -> float | None:
        full = [b["end"] - b["start"] for b in self.batches[1:] if b["images"] == self.plan.batch_size]
        return statistics.median(full) if full else None

    def decode_totals(self) -> tuple[float, int]:
        """Seconds spent decoding, and files decoded (readable or not)."""
        files = sum(b["images"] + len(b["failed"]) for b in self.batches if b["paths"] is not None)
        return sum(b["decode_s"] for b in self.batches), files

    def bottleneck(self) -> str | None:
        if not self.batches:
            return None
        if all(b["paths"] is None for b in self.batches):
            return "model"
        busy = sum(b["end"] - b["start"] for b in self.batches)
        waited = sum(b["wait_s"] for b in self.batches[1:])  # the first batch was decoded during the load
        return "decoding" if busy > 0 and waited > DECODE_BOUND * busy else "model"

    def result(self) -> WorkerResult:
        p, batches = self.plan, self.batches
        load = None if self.load is None else self.load[1] - self.load[0]
        warmup = None if not batches else batches[0]["end"] - batches[0]["start"]
        decode_s, files = self.decode_totals()
        return WorkerResult(
            plan=p,
            host=self.host,
            node=self.node or None,
            pid=self.pid,
            device=self.device,
            threads=self.threads,
            niceness=self.niceness,
            status=self.status,
            error=self.error or None,
            batches_given=len(self.given) - len(self.replaced),
            images_given=self.images_given,
            batches=tuple(batches),
            images_done=self.images_done,
            load=self.load,
            load_parts_ms=dict(self.load_parts) or None,
            load_s=Pair(p.load_s, load),
            warmup_s=Pair(p.warmup_s, warmup),
            batch_s=Pair(p.latency_s, self.steady_batch()),
            finish_s=Pair(p.finish_s, self.finish),
            model_s_median=statistics.median([b["model_s"] for b in batches]) if batches else None,
            wait_s=sum(b["wait_s"] for b in batches),
            decode_s_per_image=decode_s / files if files else None,
            bottleneck=self.bottleneck(),
            behind=self.behind or None,
        )


@dataclass(frozen=True)
class NodeLoss:
    """A worker lost with its node: when the driver knew it (s from the clock's start), the batches it
    had not finished, put back for the survivors as (owner, batch number), and whether any could take them."""

    worker: WorkerRun
    at_s: float
    put_back: list[tuple[int, int]]
    taken: bool
    replan: Replan | None = None  # what would still make the deadline (perfmodel.run.replan.suggest)

    def result(self, workers: list[WorkerRun]) -> LostWorker:
        ran = {(b["owner"], b["batch"]): x.plan.name for x in workers for b in x.batches}
        items = [workers[owner].given[number] for owner, number in self.put_back]
        return LostWorker(
            worker=self.worker.plan.name,
            hardware=self.worker.plan.hardware,
            node=self.worker.node or None,
            lost_at_s=self.at_s,
            batches_done=len(self.worker.batches),
            batches_put_back=len(self.put_back),
            images_put_back=images_in(items),
            rerun_on=tuple(sorted({ran[k] for k in self.put_back if k in ran})),
            replan=self.replan,
        )


@dataclass
class RunState:
    """The run as it goes: its workers' records, its status, what it was given."""

    plan: RunPlan
    workers: list[WorkerRun]
    status: str  # running; at the end complete, worker-failed or interrupted
    source: str  # "synthetic" or the images folder
    cluster: str  # "local" or the address
    device: str
    started_at: str
    steal: bool
    labels: str | None = None
    resumed_images: int = 0  # done by an earlier run (--resume)
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    load_avg: tuple[float, float] | None = None  # 1-minute load average at the start and at the end
    lost: list[NodeLoss] = field(default_factory=list)  # workers lost with their node, in order

    def unfinished(self) -> list:
        """The batches given to workers and not done (a worker died, or the run was interrupted):
        file lists, or image counts on random inputs."""
        done = batches_done(self.workers)
        return [item for w in self.workers for item in w.not_done(done)]

    def result(self) -> RunResult:
        """What was measured, as it stands now (at the end of the run: its result)."""
        finishes = [w.finish for w in self.workers if w.finish is not None]
        complete = self.status == "complete" and not self.resumed_images  # a resumed run did not do them all now
        decode_s, decoded = (sum(x) for x in zip(*(w.decode_totals() for w in self.workers)))
        unfinished = self.unfinished()
        bottlenecks = {w.bottleneck() for w in self.workers} - {None}
        skipped = list(self.unreadable) + [tuple(f) for w in self.workers for b in w.batches for f in b["failed"]]
        return RunResult(
            plan=self.plan,
            status=self.status,
            inputs=self.source,
            cluster=self.cluster,
            device=self.device,
            started_at=self.started_at,
            steal=self.steal,
            load_avg_1m=self.load_avg,
            measured_makespan_s=max(finishes) if finishes and complete else None,
            images_done=sum(w.images_done for w in self.workers),
            images_resumed=self.resumed_images,
            skipped_files=tuple(SkippedFile(path, reason) for path, reason in skipped),
            images_unfinished=images_in(unfinished),
            unfinished_files=tuple(p for x in unfinished if not isinstance(x, int) for p in x),
            decode_s_per_image=decode_s / decoded if decoded else None,
            bottleneck="decoding" if "decoding" in bottlenecks else ("model" if bottlenecks else None),
            labels=self.labels,
            lost_workers=tuple(lost.result(self.workers) for lost in self.lost),
            rerun_batches=self._rerun_batches(),
            workers=tuple(w.result() for w in self.workers),
        )

    def _rerun_batches(self) -> tuple[RerunBatch, ...]:
        """The batches of lost workers that others re-ran."""
        put_back = {k for lost in self.lost for k in lost.put_back}
        names = {w.plan.index: w.plan.name for w in self.workers}
        return tuple(
            RerunBatch(names[b["owner"]], b["batch"], b["images"], w.plan.name, b["end"])
            for w in self.workers
            for b in w.batches
            if (b["owner"], b["batch"]) in put_back
        )
