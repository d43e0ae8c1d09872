"""Run a plan on Ray: check everything, start (or join) the cluster, one actor per planned GPU, each
loading the model, then running its batches; collect the records and the labels; stop what was started.

Everything that can be checked before Ray starts is checked first (the plan, the model, a local Ray's CPUs
and GPUs, the memory the run needs, the images, the labels file), so that bad input costs no cluster start, and a
plan this machine cannot run costs no preparation of its inputs. Results already received are kept when a
worker dies or the run is interrupted: the labels file is rewritten as they arrive (atomically, every few
seconds) and once more at the end, however the run ends.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from perfmodel.errors import InputError, PerfmodelError, first_line
from perfmodel.models import BUILTIN_MODELS, model_file_problem
from perfmodel.run import budget
from perfmodel.run import cluster as clusters
from perfmodel.run.images import find_images, size_classes
from perfmodel.run.labels import LabelWriter, RunIdentity, check_out, read_labels
from perfmodel.run.planfile import RunPlan
from perfmodel.run.progress import Outlook, TypeProgress, outlook, progress
from perfmodel.run.replan import suggest
from perfmodel.run.result import RunResult
from perfmodel.run.shares import batches, split, synthetic_batches
from perfmodel.run.state import NodeLoss, RunState, WorkerRun, batches_done, images_in
from perfmodel.run.worker import WorkerSpec, check_runnable

READY_TIMEOUT_S = 300.0  # actors started (a process each, torch and the model's code imported, the device opened)
LOAD_TIMEOUT_S = 900.0  # every model loaded
POLL_S = 0.25
# A worker that stops answering is lost with its node when the cluster reports that node dead within this
# time (Ray's default health check takes about 15-30 s); otherwise its process died on a living node.
NODE_VERDICT_S = 120.0
HEAD_NODE = "node:__internal_head__"  # the resource Ray gives the head node only
PROGRESS_EVERY_S = 0.5
DEFAULT_BEHIND = 0.05  # a worker is behind when later than planned by more than the margin, or this
BEHIND_MIN_S = 0.25  # and by more than this: scheduling noise on sub-second plans is no news


@dataclass(frozen=True)
class RunOptions:
    images: str | None = None  # a folder of image files; None with synthetic
    synthetic: bool = False
    out: str | None = None  # labels .csv or .parquet
    resume: bool = False
    address: str | None = None  # an existing Ray cluster; None starts a local one
    device: str | None = None  # cpu or cuda; None: cpu for the cpu type, cuda for GPU types
    weights: str | None = None
    model_path: str | None = None  # a TorchScript file (overrides the plan's)
    steal: bool = False
    decode_threads: int = 1
    seed: int = 0
    fault: tuple[int, int] | None = None  # (worker index, batches): that worker kills itself after them
    flush_every_s: float = 5.0
    num_cpus: int | None = None  # a local Ray's CPUs (default: this machine's)


@dataclass(frozen=True)
class RunEvent:
    """Something the CLI may show: a phase, progress per hardware type, a worker behind its plan or dead."""

    kind: str  # phase, progress, behind, died, lost; stopping: the work is over, what was started is stopped
    text: str = ""
    worker: WorkerRun | None = None
    elapsed_s: float = 0.0
    progress: tuple[TypeProgress, ...] = ()
    outlook: Outlook | None = None  # the whole run's expected end and probability of meeting the deadline


@dataclass
class Inputs:
    given: dict[int, list] = field(default_factory=dict)  # worker index -> its batches
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    resumed: int = 0
    earlier: object = None  # the labels of the earlier run (a DataFrame) with `resume`


def prepare_inputs(plan: RunPlan, options: RunOptions) -> Inputs:
    """Each worker's batches, from the images folder or random inputs, less what an earlier run did."""
    if options.synthetic == (options.images is not None):
        raise InputError(
            "give either `images`, a folder (a real job over image files), or `synthetic` (random inputs)."
        )
    if options.out is not None:
        check_out(options.out)
        if os.path.exists(options.out) and not options.resume:
            raise InputError(
                f"`out` {options.out} exists: add `resume` to finish the run that wrote it, or give "
                "another file (perfmodel does not write over finished labels)."
            )
    if options.resume and options.out is None:
        raise InputError("`resume` needs `out`: the labels file of the earlier run.")
    if options.synthetic:
        if options.resume:
            raise InputError("`resume` needs `images`: random inputs have nothing to resume.")
        if options.decode_threads != 1:
            raise InputError("`decode_threads` needs `images`: random inputs are not decoded.")
        return Inputs({w.index: synthetic_batches(w) for w in plan.workers})
    files, unreadable = find_images(options.images)
    if options.out is not None and any(os.path.abspath(f) == os.path.abspath(options.out) for f in files):
        raise InputError(f"`out` {options.out} lies among the images: write the labels elsewhere.")
    by_size, unreadable_headers = size_classes(files, sorted(plan.images_by_size))
    shares = split(plan, by_size)
    inputs = Inputs(unreadable=unreadable + unreadable_headers)
    done: set[str] = set()
    if options.resume:
        identity = RunIdentity.of(plan.sha256, options.images)
        inputs.earlier = read_labels(options.out, identity, files, [w.name for w in plan.workers])
        done = set(inputs.earlier["path"])
        inputs.resumed = len(done)
    for w in plan.workers:
        mine = [f for f in shares.get(w.index, []) if f not in done]
        inputs.given[w.index] = batches(mine, w.batch_size)
    return inputs


def check_model(plan: RunPlan, options: RunOptions) -> tuple[str, str | None]:
    """The model to load: (name, TorchScript path or None); InputError when it cannot be found."""
    path = options.model_path or plan.model_path
    if path is not None:
        problem = model_file_problem(path)
        if problem is not None:
            raise InputError(f"the model file {path} {problem}: give the TorchScript file (a .pt) as `model_path`.")
        return plan.model, path
    if plan.model not in BUILTIN_MODELS:
        raise InputError(
            f"the plan's model {plan.model!r} is neither built in ({', '.join(BUILTIN_MODELS)}) nor "
            "a file the plan names: give its TorchScript file (a .pt) as `model_path`."
        )
    if options.weights is not None and not os.path.isfile(options.weights):
        raise InputError(f"the weights file {options.weights} does not exist.")
    return plan.model, None


def devices(plan: RunPlan, options: RunOptions) -> dict[str, str]:
    """The torch device of each hardware type."""
    out = {}
    for name in plan.hardware_types:
        if name == "cpu":
            if options.device == "cuda":
                raise InputError(
                    "`device` cuda: this plan's workers are of type cpu (one CPU core each); leave "
                    "`device` out, or make a plan from a GPU profile."
                )
            out[name] = "cpu"
        else:
            out[name] = options.device or "cuda"
    return out


def run_plan(plan: RunPlan, options: RunOptions, on_event: Callable[[RunEvent], None] = lambda e: None) -> RunResult:
    """Execute `plan`; returns what was measured. Raises InputError for input it cannot run (before
    starting anything where it can), ClusterError when Ray cannot be started or reached. A worker that
    dies, or an interrupt (KeyboardInterrupt), ends the run with the finished results kept: the
    result's status says which (worker-failed, interrupted)."""
    if importlib.util.find_spec("ray") is None:
        raise InputError("perfmodel run needs ray: in perfmodel's clone, pip install '.[run]'.")
    model, model_path = check_model(plan, options)
    device_of = devices(plan, options)
    for w in plan.workers:
        check_runnable(w.backend, w.precision, device_of[w.hardware], f"{plan.path}, GPU {w.index + 1}")
    gpus = {}
    if options.address is None and "cuda" in device_of.values():
        gpus = clusters.local_gpus()
        if not gpus:
            raise InputError(
                "this plan runs on GPUs (`device` cuda), but this machine has none that NVML sees: "
                "run it where the GPUs are, or give the `address` of a cluster that has them."
            )
    local = None if options.address is not None else clusters.LocalRay(options.num_cpus, gpus)
    if local is not None:  # a pool this machine lacks costs no cluster start, nor the inputs' preparation
        clusters.place(_hardware(plan), _device_choice(device_of), local.nodes())
    budget.check(plan, device_of, options.synthetic, options.out is not None, local=local is not None)
    inputs = prepare_inputs(plan, options)
    if options.address is not None:
        address = clusters.resolve_address(options.address)
    writer = None
    if options.out is not None:
        writer = LabelWriter(options.out, RunIdentity.of(plan.sha256, options.images), inputs.earlier)
    started = dt.datetime.now(dt.UTC).astimezone().isoformat(timespec="seconds")
    state = RunState(
        plan,
        [WorkerRun(w, inputs.given[w.index]) for w in plan.workers],
        "running",
        "synthetic" if options.synthetic else os.fspath(options.images),
        options.address or "local",
        "/".join(sorted(set(device_of.values()))),
        started,
        options.steal,
        labels=options.out,
        resumed_images=inputs.resumed,
        unreadable=inputs.unreadable,
        load_avg=(os.getloadavg()[0], 0.0),
    )
    if not any(inputs.given.values()):  # e.g. --resume of a finished run: nothing to start Ray for
        for w in state.workers:
            w.status = "done"
        state.status, state.load_avg = "complete", (state.load_avg[0], state.load_avg[0])
        return state.result()
    try:
        on_event(RunEvent("phase", "starting a local Ray" if local else f"joining the Ray cluster at {address}"))
        if local is not None:
            address = local.start()
        clusters.connect(address, local.settings if local else None)  # the caller's SIGTERM handler kept
        _Execution(plan, options, state, writer, on_event).run(model, model_path, device_of)
    except KeyboardInterrupt:  # Ctrl-C (or SIGTERM turned into one by the CLI): keep what is done
        if state.status == "running":  # not when every batch was done before it came
            state.status = "interrupted"
        for w in state.workers:
            if w.status == "running":
                w.status = "interrupted"
    finally:
        on_event(RunEvent("stopping", "stopping the workers and Ray"))  # the CLI: a SIGTERM now waits for the end
        try:
            if writer is not None and writer.dirty:
                writer.flush()
        finally:
            try:
                _disconnect()
            finally:  # even if a signal handler of the caller's raised
                if local is not None:
                    local.stop()
                state.load_avg = (state.load_avg[0], os.getloadavg()[0])
    return state.result()


def _disconnect() -> None:
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        with clusters.sigterm_kept():  # ray.shutdown leaves SIGTERM to its default action: death, no output
            ray.shutdown()


class _Execution:
    """One run in a connected Ray: actors, loading, the batches, and the bookkeeping as records arrive."""

    def __init__(self, plan: RunPlan, options: RunOptions, state: RunState, writer: LabelWriter | None, on_event):
        self.plan, self.options, self.state, self.writer, self.on_event = plan, options, state, writer, on_event
        self.t0 = 0.0
        self.last_flush = self.last_progress = time.monotonic()
        self.tolerance = max(plan.margin, DEFAULT_BEHIND)
        self.actors: dict[int, object] = {}  # worker index -> its actor
        self.queue = None
        self.suspects: dict[int, tuple[float, Exception]] = {}  # stopped answering: since, and why

    def run(self, model: str, model_path: str | None, device_of: dict[str, str]) -> None:
        import ray

        from perfmodel.run.worker import RunWorker

        runs = self.state.workers
        nodes = ray.nodes()
        placements = clusters.place(_hardware(self.plan), _device_choice(device_of), nodes)
        if self.options.address is not None:  # a local Ray's memory was checked before it started
            budget.check_nodes(self.plan, device_of, self.options.synthetic, placements, nodes)
        self.on_event(RunEvent("phase", f"starting {len(runs)} worker(s)"))
        remote = ray.remote(RunWorker)
        actors = []
        for w in runs:
            p = w.plan
            fault = self.options.fault
            spec = WorkerSpec(
                p.name,
                model,
                model_path,
                self.options.weights,
                device_of[p.hardware],
                p.precision,
                p.backend,
                1 if device_of[p.hardware] == "cpu" else None,
                self.options.decode_threads,
                self.options.seed,
                fault[1] if fault and fault[0] == p.index else None,
                batch_size=p.batch_size,
            )
            w.node = placements[p.index].node_id or ""
            actors.append(remote.options(**placements[p.index].actor_options()).remote(spec))
            self.actors[p.index] = actors[-1]
        try:
            # The batch queue is an actor too: its process starts before the clock, not beside the loads.
            self.queue = queue = self._queue()
            ready = _get_all(
                [a.ready.remote() for a in actors] + [queue.has_work.remote(runs[0].plan.index)],
                READY_TIMEOUT_S,
                "starting the workers",
            )
            for w, info in zip(runs, ready):
                w.host, w.pid, w.threads, w.device = info["host"], info["pid"], info["threads"], info["device"]
                w.niceness = info["niceness"]
            self.on_event(RunEvent("phase", "loading the model on every worker"))
            self.t0 = time.time()
            loads, pending = [], {}
            for a, w in zip(actors, runs):
                p = w.plan
                loads.append(
                    a.load.remote(p.input_size, None, queue, p.index, p.batch_size if self.options.synthetic else None)
                )
                # Submitted at once: an actor runs its calls in order, so each worker starts its batches
                # when its own model is loaded, as the plan counts it, not when the slowest load ends.
                pending[a.run.remote()] = w
            for w, t in zip(runs, _get_all(loads, LOAD_TIMEOUT_S, "loading the models")):
                w.load = (t["start"] - self.t0, t["end"] - self.t0)
                w.load_parts = t.get("parts", {})
            self.on_event(RunEvent("phase", "running", elapsed_s=self.elapsed()))
            self._stream(pending)
        except KeyboardInterrupt:
            for a in actors:  # stop the work now; Ray itself goes with the cluster
                ray.kill(a)
            raise
        failed = any(w.status == "died" for w in runs) or self.state.unfinished()
        self.state.status = "worker-failed" if failed else "complete"

    def _queue(self):
        """The batches, in an actor on the head node: a lost node must not take the queue with it (the
        cluster does not outlive its head anyway)."""
        import ray

        from perfmodel.run.steal import BatchQueue

        runs = self.state.workers
        return (
            ray.remote(BatchQueue)
            .options(num_cpus=0, resources={HEAD_NODE: 0.001})
            .remote(
                {w.plan.index: w.given for w in runs},
                {w.plan.index: w.plan.input_size for w in runs},
                {w.plan.index: w.plan.latency_s for w in runs},
                self.options.steal,
                {w.plan.index: w.plan.batch_size for w in runs},
            )
        )

    def elapsed(self) -> float:
        return time.time() - self.t0

    def _stream(self, pending: dict) -> None:
        import ray

        while pending or self.suspects:  # a worker that stopped answering waits for its verdict
            ready = []
            if pending:
                ready = ray.wait(list(pending), num_returns=1, timeout=POLL_S)[0]
            else:
                time.sleep(POLL_S)
            for generator in ready:
                w = pending[generator]
                try:
                    records = ray.get(next(generator))
                except StopIteration:
                    w.status = "done"
                    del pending[generator]
                    self._run_again(w, pending)
                    continue
                except ray.exceptions.RayActorError as exc:
                    del pending[generator]
                    ray.kill(self.actors[w.plan.index])  # it takes no further batch, whatever happened
                    self.suspects[w.plan.index] = (time.monotonic(), exc)
                    continue
                for record in records:
                    self._record(w, record)
            self._verdicts(pending)
            self._check_behind(list(pending.values()))
            self._flush()
            if time.monotonic() - self.last_progress >= PROGRESS_EVERY_S:
                self.last_progress = time.monotonic()
                now = self.elapsed()
                by_type = tuple(progress(self.state.workers, now))
                ahead = outlook(self.state.workers, now, self.plan.deadline_s, self.plan.drifts)
                self.on_event(RunEvent("progress", elapsed_s=now, progress=by_type, outlook=ahead))

    def _verdicts(self, pending: dict) -> None:
        """Decide for each worker that stopped answering: lost with its node (its batches put back for the
        survivors), or a process that died on a living node (not re-run: its work may be what killed it)."""
        if not self.suspects:
            return
        import ray

        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        for index, (since, exc) in list(self.suspects.items()):
            w = self.state.workers[index]
            if w.node and w.node not in alive:
                del self.suspects[index]
                self._lose(w, pending)
            elif isinstance(exc, ray.exceptions.ActorDiedError) or time.monotonic() - since > NODE_VERDICT_S:
                del self.suspects[index]
                w.status, w.error = "died", _death(exc)
                self.on_event(RunEvent("died", w.error, w, self.elapsed()))

    def _lose(self, w: WorkerRun, pending: dict) -> None:
        import ray

        done = batches_done(self.state.workers)
        back = ray.get(self.queue.lose.remote(w.plan.index, sorted(done)))
        self._split_batches()
        w.status, w.error = "lost", "its node was lost"
        survivors = [x for x in self.state.workers if x.status in ("running", "done") and _usable(x, w)]
        left = [item for x in self.state.workers if _usable(x, w) for item in x.not_done(done)]
        now = self.elapsed()
        images_left = images_in(left)
        suggestion = suggest(self.state.workers, w, now, images_left, self.plan.deadline_s, self.plan.confidence)
        self.state.lost.append(NodeLoss(w, now, [tuple(k) for k in back], bool(survivors), suggestion))
        text = f"the node of {w.plan.name} was lost after {len(w.batches)} of its batches"
        if back:
            text += f"; its {len(back)} unfinished batch(es) " + (
                f"go to {', '.join(x.plan.name for x in survivors)}"
                if survivors
                else "have no worker left to take them"
            )
        self.on_event(RunEvent("lost", text, w, self.elapsed()))
        for x in survivors:
            self._run_again(x, pending)

    def _run_again(self, w: WorkerRun, pending: dict) -> None:
        """A worker that finished its own batches runs again when batches of a lost one wait for it."""
        import ray

        if self.state.lost and w.status == "done" and ray.get(self.queue.has_work.remote(w.plan.index)):
            w.status = "running"
            pending[self.actors[w.plan.index].run.remote()] = w

    def _split_batches(self) -> None:
        """Batches the queue split (put back after a lost node, or stolen, for a smaller batch size): the
        pieces are new batches of their owner, counted instead of the batch they replace."""
        import ray

        queues, replaced = ray.get(self.queue.state.remote())
        for x in self.state.workers:
            x.given = list(queues[x.plan.index])
            x.replaced = {n for owner, n in replaced if owner == x.plan.index}

    def _record(self, w: WorkerRun, record: dict) -> None:
        if record["batch"] >= len(self.state.workers[record["owner"]].given):  # a piece of a split batch
            self._split_batches()
        record["start"] -= self.t0
        record["end"] -= self.t0
        record["seq"] = len(w.batches)  # the worker's own count, across runs again after a lost node
        w.batches.append(record)
        if self.writer is not None and record["images"]:
            owner = self.plan.workers[record["owner"]].name
            paths = record["paths"] or [f"synthetic/{owner}/{record['batch']}/{i}" for i in range(record["images"])]
            self.writer.add(
                [
                    (path, c, s, w.plan.name, record["seq"])
                    for path, c, s in zip(paths, record["classes"], record["scores"])
                ]
            )

    def _check_behind(self, active: list[WorkerRun]) -> None:
        """Warn once per worker that runs later than its plan by more than the margin (at least 5%)."""
        now = self.elapsed()
        for w in active:
            if w.behind or w.status != "running":
                continue
            done = len(w.batches)
            planned = w.plan.predicted_end(done + 1)  # the batch under way should end by then
            last = w.batches[-1]["end"] if w.batches else None
            late_now = now - planned
            late_last = last - w.plan.predicted_end(done) if last is not None else 0.0
            late = max(late_now, late_last)
            if late > max(self.tolerance * planned, BEHIND_MIN_S):
                w.behind = (
                    f"{w.plan.name} is behind its plan: {done} of {len(w.given)} batches done at "
                    f"{now:.1f} s, {late:.1f} s later than planned (more than {self.tolerance:.0%})"
                )
                self.on_event(RunEvent("behind", w.behind, w, now))

    def _flush(self) -> None:
        """Rewrite the labels every few seconds, so that even a SIGKILL loses little (run_plan writes the rest)."""
        if self.writer is None or not self.writer.dirty:
            return
        if time.monotonic() - self.last_flush >= self.options.flush_every_s:
            self.writer.flush()
            self.last_flush = time.monotonic()


def _usable(survivor: WorkerRun, lost: WorkerRun) -> bool:
    """Whether a worker can run a lost one's batches: the same model at the same input size."""
    return survivor.plan.input_size == lost.plan.input_size


def _hardware(plan: RunPlan) -> list[str]:
    return [w.hardware for w in plan.workers]


def _device_choice(device_of: dict[str, str]) -> str:
    return "cpu" if set(device_of.values()) == {"cpu"} else "cuda"


def _get_all(refs: list, timeout_s: float, what: str) -> list:
    """ray.get, with a worker's own PerfmodelError (e.g. weights that do not fit) raised as itself."""
    import ray

    try:
        return clusters.wait_for_actors(refs, timeout_s, what)
    except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
        cause = _cause(exc)
        if isinstance(cause, PerfmodelError):
            raise cause from None
        if isinstance(exc, ray.exceptions.RayTaskError):
            raise PerfmodelError(f"a worker failed while {what}: {first_line(cause or exc)}") from None
        raise PerfmodelError(f"a worker died while {what}: {_death(exc)}") from None


def _cause(exc):
    """The exception a worker raised, through Ray's wrappers (an actor that failed in __init__ nests it)."""
    seen = 0
    while exc is not None and seen < 5:
        inner = getattr(exc, "cause", None) or getattr(getattr(exc, "creation_task_error", None), "cause", None)
        if inner is None or inner is exc:
            return exc if not type(exc).__module__.startswith("ray") else None
        exc, seen = inner, seen + 1
    return exc


def _death(exc) -> str:
    text = str(exc)
    for hint in ("killed", "OOM", "out of memory", "SIGKILL", "unexpectedly"):
        if hint in text:
            return "the worker process died (killed, or out of memory)"
    return first_line(exc)
