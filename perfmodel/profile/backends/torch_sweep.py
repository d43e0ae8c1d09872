"""The in-process PyTorch sweep (`--backend torch`): every (input size, batch size) point, in worker processes.

The profiler process only coordinates. One long-lived *measuring* worker (worker.py) loads the model
once and measures every point's steady state; *fresh* workers measure the warm-up, one per point
(`--warmup fresh-process`) or only at the batch sizes of `--fresh-warmup-at` (the shape a short GPU
window needs: one process for the steady states, a few fresh ones for the warm-up curve). With
`--processes K`, K - 1 more fresh workers per point each load the model and measure the point's steady
state again, and the row holds the mean of the K processes' figures (timing.pool_processes). Because the
model never runs in the profiler's process, a model call that never returns fails its point (the
worker's watchdog ends the worker; a new one takes over) and the sweep goes on; a broken CUDA
context ends the sweep at once, with the finished points saved.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import asdict, replace

import psutil

from perfmodel.errors import BackendError, InputError
from perfmodel.models import resolve_model
from perfmodel.profile.config import Estimate, ProfileConfig, ProgressCallback, SweepEvent
from perfmodel.profile.monitor import CPU_INTERVAL_S, HardwareMonitor, gpu_id
from perfmodel.profile.neighbours import Neighbours, check_alongside
from perfmodel.profile.output import ProfileOutput
from perfmodel.profile.provenance import hardware_key, now_utc
from perfmodel.profile.search import search_batch_sizes, search_bisections_bound, search_points_bound
from perfmodel.profile.timing import pool_processes
from perfmodel.profile.worker_process import WorkerProcess
from perfmodel.torch_runner import TorchOptions, check_device

# What a point costs besides its calls (its inputs, freeing memory, the monitor, the row), and what a new shape
# costs beyond its 2 untimed calls, in calls (cuDNN's autotuning). On CUDA measured on the H100 and H200 of
# experiment 008, budget.py's fit of a + (3 + samples + b) x call to the profiles' created_at: a = 1.9 s and
# 1.3 s, 3 + b = 6.7 calls before the samples on both GPUs. On the CPU VM 1-2 s a point with 0.5 s of
# sampling (tiny, load 8-10).
POINT_OVERHEAD_S = {"cuda": 2.0, "cpu": 1.0}
NEW_SHAPE_CALLS = {"cuda": 4.7, "cpu": 0.0}
# A fresh warm-up process beyond a worker's start (its first calls, its exit): 6.4 s (H100), 2.3 s (H200); 3-4 s
# on the 2-core CPU VM at load 8-10 (tiny, 2026-11-28).
FRESH_EXTRA_S = {"cuda": 4.0, "cpu": 3.0}
# A batch that does not fit, in calls of the largest that does: 4-9 s on the H100 (1.9 s calls) and the H200 (2.4-3 s).
OOM_CALLS = 2.5
# The slowest call, where --max-call-ms does not bound it: ResNet-50 fp16's largest batches that fit took
# 1.9-3.0 s a call on the H100 and the H200 (at every input size: the memory limit comes first).
SLOWEST_CALL_S = 2.0


def process_name(kind: str) -> str:
    """The `load_process` of the rows whose load (and warm-up) one worker measured: rows naming the same
    process hold one sample of the load, not one each (perfmodel/fixed_costs.py)."""
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def _max_batch(config: ProfileConfig, is_cuda: bool) -> int:
    return config.max_batch_size or (16384 if is_cuda else 1024)


def estimate(config: ProfileConfig) -> Estimate:
    """The sweep's points and its time. The calls are not known before they run: an auto search's are
    counted as if the largest batch that fits took SLOWEST_CALL_S at every input size (the memory limit
    comes first; --max-call-ms instead where set: the search stops after a slower call) and each smaller
    one half the call of the next, a batch that does not fit OOM_CALLS of those calls; a list's calls in
    proportion to their pixels, per second of the largest point's call."""
    is_cuda = config.device.strip().lower().startswith("cuda")
    device, rule = "cuda" if is_cuda else "cpu", config.rule
    timed_first = 1 if config.warmup == "in-process" else 0
    before = timed_first + rule.warmup_calls + NEW_SHAPE_CALLS[device]  # the calls before the samples

    def beyond_sampling(call_s: float) -> float:
        return before * call_s + max(0.0, rule.floor_samples * call_s - rule.longest_s)

    sizes = len(config.input_sizes)
    if config.batch_sizes is None:
        cap = _max_batch(config, is_cuda)
        per_size = search_points_bound(cap, config.search_tolerance)
        extra = len(config.fresh_warmup_at or ())  # listed sizes the doubling does not visit, at most
        points = (per_size + extra) * sizes
        if config.warmup != "fresh-process":
            fresh = 0
        elif config.fresh_warmup_at is None:
            fresh = points
        else:
            fresh = len(config.fresh_warmup_at) * sizes
        max_call_ms = _max_call_ms(config, is_cuda)
        slowest_s = SLOWEST_CALL_S if max_call_ms is None else max_call_ms / 1e3
        failing = 1 + search_bisections_bound(cap, config.search_tolerance) // 2
        ok = sum(beyond_sampling(slowest_s / 2**i) for i in range(per_size - failing))
        calls_s = (ok + failing * OOM_CALLS * slowest_s) * sizes
        slowest, why = (
            ("the largest batch that fits", "as ResNet-50 fp16's did on an H100 and an H200: 1.9-3.0 s")
            if max_call_ms is None
            else ("the largest batch", "`max_call_ms`: the search stops after a slower one")
        )
    else:
        points = len(config.batch_sizes) * sizes
        fresh = sum(config.fresh_warmup(b) for b in config.batch_sizes) * sizes
        work = [b * s * s for b in config.batch_sizes for s in config.input_sizes]
        calls_s = sum((before + rule.floor_samples) * w / max(work) for w in work)  # per second of the largest
        slowest, slowest_s, why = f"batch {max(config.batch_sizes)}, {max(config.input_sizes)} px", None, ""
    return Estimate(
        points,
        config.batch_sizes is None,  # the search's points are an upper bound
        rule.longest_s + POINT_OVERHEAD_S[device],
        fresh,
        probe_s=config.probe_s,
        processes=config.processes,
        calls_s=calls_s,
        fresh_extra_s=FRESH_EXTRA_S[device],
        slowest=slowest,
        slowest_s=slowest_s,
        why=why,
    )


def _max_call_ms(config: ProfileConfig, is_cuda: bool) -> float | None:
    """The call time after which an auto search stops: `max_call_ms`; on a CPU 2 s by default."""
    return config.max_call_ms if config.max_call_ms is not None else (None if is_cuda else 2000.0)


def sweep(config: ProfileConfig, output: ProfileOutput, notify: ProgressCallback) -> None:
    _TorchSweep(config, output, notify).run()


class _TorchSweep:
    def __init__(self, config: ProfileConfig, output: ProfileOutput, notify: ProgressCallback):
        self.config, self.output, self.notify = config, output, notify
        self.spec = resolve_model(config.model)
        if config.fresh_warmup_at is not None and config.batch_sizes is not None:
            missing = sorted(set(config.fresh_warmup_at) - set(config.batch_sizes))
            if missing:
                raise InputError(
                    f"`fresh_warmup_at` {','.join(map(str, missing))} is not among `batch_sizes`; "
                    "choose batch sizes the sweep measures."
                )
        self.device = check_device(config.device)
        self.is_cuda = self.device.startswith("cuda")
        threads = config.threads if config.threads is not None else (None if self.is_cuda else 1)
        self.options = TorchOptions(
            self.device,
            config.precision,
            config.channels_last,
            config.compile,
            config.cuda_graphs,
            threads,
            compile_mode=config.compile_mode,
        )
        check_alongside(config.alongside, threads or 1, self.is_cuda)
        self.memory_limit = (
            None if self.is_cuda else (config.memory_limit_mb or psutil.virtual_memory().available / 2**20 / 2)
        )
        self.max_call_ms = _max_call_ms(config, self.is_cuda)
        self.plan = estimate(config)
        self.measuring: WorkerProcess | None = None
        self.neighbours = Neighbours(
            config.alongside, self._load_request(), config.worker_timeout_s, config.call_timeout_s
        )
        self.largest_ok: dict[int, int] = {}  # input size -> largest batch that ran (for OOM in disguise)
        self.done = self.measured = 0
        self.probed = False  # the drift probe runs once, before the first point measured
        self.measuring_s = 0.0  # time spent on newly measured points, for the ETA
        # Points left per input size: exact for a list, a bound for auto (which may stop sooner).
        self.remaining_bound = {size: self.plan.points // len(config.input_sizes) for size in config.input_sizes}

    # -- the sweep ----------------------------------------------------------------------------

    def run(self) -> None:
        c = self.config
        gpu = gpu_id(self.device) if self.is_cuda else None
        try:
            self.loaded = self._start_measuring_worker()
            provenance = self.loaded["provenance"]
            hardware = c.hardware or hardware_key(str(provenance["device_name"]), self.is_cuda)
            self.identity = {
                "hardware": hardware,
                "model": self.spec.name,
                "backend": self.options.backend_name,
                "precision": self.options.precision,
                "architecture": "inprocess",
            }
            self.fixed = {
                **self.identity,
                "warmup_method": c.warmup,
                "warmup_includes": self.options.warmup_includes,
                "threads": self.loaded["threads"],
                "alongside": c.alongside,
                **({"processes": c.processes} if c.processes > 1 else {}),  # K = 1: the columns of before
                **provenance,
            }
            self.output.check_resumable(self.identity, {**self.fixed, "processes": c.processes})
            with HardwareMonitor(gpu, interval_s=0.05 if self.is_cuda else CPU_INTERVAL_S) as monitor:
                self.monitor = monitor
                if monitor.has_gpu_counters:
                    self.fixed["driver"] = monitor.gpu_info().driver
                plan = replace(self.plan, worker_s=self.loaded["start_s"])
                self.notify(
                    SweepEvent(
                        "start",
                        total=plan.points,
                        total_is_bound=plan.bound,
                        eta_s=plan.seconds,
                        message=plan.describe(),
                    )
                )
                for size in c.input_sizes:
                    self._sweep_size(size)
        finally:
            self.neighbours.stop()
            if self.measuring is not None:
                self.measuring.stop()

    def _drift_probe(self) -> dict:
        """The drift columns every row of this sweep carries: one small batch timed back to back (the
        smallest batch of the first input size), its window medians' spread and correlation time.

        With --warmup in-process the measuring worker times each point's first call, so it must not have
        run the probe's shape before (its cuDNN choice or its compilation would be missing from that
        point's warm-up): the probe then runs in a worker of its own."""
        seconds = self.config.probe_s
        if not seconds:
            return {}
        c = self.config
        request = {
            "op": "probe",
            "batch_size": min(c.batch_sizes) if c.batch_sizes else 1,
            "input_size": c.input_sizes[0],
            "seconds": seconds,
        }
        backstop = seconds + c.call_timeout_s + 60
        if c.warmup == "in-process":
            with WorkerProcess(own_compile_cache=c.compile) as prober:
                reply = prober.request(self._load_request(), c.worker_timeout_s, "`worker_timeout_s`")
                if reply["status"] == "ok":
                    reply = prober.request(request, backstop, "`call_timeout_s`")
        else:
            reply = self.measuring.request(request, backstop, "`call_timeout_s`")
        if reply["status"] != "ok" or reply.get("drift_rel_sd") is None:
            if not self.measuring.is_alive():
                self.loaded = {**self.loaded, **self._start_measuring_worker()}
            return {"drift_probe_s": seconds}  # too few calls, or a call failed: no figure, said by empty cells
        return {"drift_rel_sd": reply["drift_rel_sd"], "drift_corr_s": reply["drift_corr_s"], "drift_probe_s": seconds}

    def _sweep_size(self, size: int) -> None:
        c = self.config
        if c.batch_sizes is not None:
            for b in c.batch_sizes:
                self.point(b, size)
            return
        result = search_batch_sizes(
            lambda b: self.point(b, size), _max_batch(c, self.is_cuda), self.max_call_ms, c.search_tolerance
        )
        tried = {row["batch_size"] for row in result.rows}
        for b in sorted(c.fresh_warmup_at or ()):  # the chosen warm-up sizes the search did not visit
            if b not in tried and result.largest_ok is not None and b <= result.largest_ok:
                self.point(b, size)
        self.remaining_bound[size] = 0
        self.notify(SweepEvent("search", done=self.done, input_size=size, message=result.reason))

    def point(self, batch_size: int, input_size: int) -> dict:
        key = {**self.identity, "input_size": input_size, "batch_size": batch_size}
        row = self.output.get(key)
        resumed = row is not None
        sticky = None
        if not resumed:
            if not self.probed:  # before the first point measured now: a resumed sweep with nothing left skips it
                self.probed = True
                self.fixed.update(self._drift_probe())
            t0 = time.monotonic()
            row, sticky = self._measure(batch_size, input_size)
            self.output.add(row)
            self.measured += 1
            self.measuring_s += time.monotonic() - t0
        if row["status"] == "ok":
            self.largest_ok[input_size] = max(self.largest_ok.get(input_size, 0), int(batch_size))
        self.done += 1
        if self.remaining_bound[input_size]:
            self.remaining_bound[input_size] -= 1
        if sticky is not None:
            raise BackendError(
                f"the CUDA context broke at {input_size} px, batch {batch_size} ({sticky}); every later call in "
                f"that process would fail, so the sweep stops here. {self.output.saved()} Run it again with `resume` "
                "to go on (this point is recorded as an error)."
            )
        total = self.done + sum(self.remaining_bound.values())
        self.notify(
            SweepEvent(
                "point",
                self.done,
                total,
                input_size,
                batch_size,
                row["status"],
                resumed,
                eta_s=self._eta(),
                total_is_bound=self.config.batch_sizes is None,
            )
        )
        return row

    def _eta(self) -> float | None:
        if not self.measured:
            return None
        return self.measuring_s / self.measured * sum(self.remaining_bound.values())

    # -- one point ----------------------------------------------------------------------------

    def _measure(self, batch_size: int, input_size: int) -> tuple[dict, str | None]:
        """One point: (row, the message of a sticky CUDA error or None).

        With a fresh warm-up worker, it goes first and decides whether the batch fits at all; on a CPU
        it also gives the memory figure, since only a fresh process's peak RSS growth is free of the
        memory that earlier points left to the C allocator.
        """
        c = self.config
        row = {
            **self.fixed,
            "input_size": input_size,
            "batch_size": batch_size,
            "load_avg_1m": os.getloadavg()[0],
            "created_at": now_utc(),
        }
        if c.alongside:  # the others first, so that every part of the point is timed beside them
            busy = self.neighbours.busy(batch_size, input_size, self.memory_limit)
            if busy["status"] != "ok":
                return self._failed(row, busy, batch_size, input_size)
        fresh = c.fresh_warmup(batch_size)
        if fresh:
            first = self._fresh_warmup(batch_size, input_size)
            row["load_ms"], row["load_process"] = first.get("load_ms"), first.get("load_process")
            if first["status"] != "ok":
                return self._failed(row, first, batch_size, input_size)
            row["warmup_ms"] = first["warmup_ms"]
            row.update(self._compile_columns(first, "fresh"))
            row.update(first["parts"])
            if not self.is_cuda:
                row["memory_mb"] = first["memory_mb"]
        else:
            row["load_ms"], row["load_process"] = self.loaded["load_ms"], self.loaded["load_process"]
        mark = self.monitor.window()
        steady = self._steady(
            batch_size,
            input_size,
            timed_first_call=c.warmup == "in-process",
            memory_limit=None if fresh else self.memory_limit,
        )
        row.update(self.monitor.summary(mark))  # the counters of the measuring worker's sampling
        if steady["status"] != "ok":
            return self._failed(row, steady, batch_size, input_size)
        replies = [steady]
        for i in range(2, c.processes + 1):
            extra = self._extra_steady(batch_size, input_size)
            if extra["status"] != "ok":  # pooled over all K processes, or not measured
                said = f"process {i} of {c.processes}: {extra.get('error', '')}"
                return self._failed(row, {**extra, "error": said}, batch_size, input_size)
            replies.append(extra)
        steady = pool_processes(replies, batch_size)
        if c.alongside:
            busy = self.neighbours.still_busy()
            if busy["status"] != "ok":  # timed beside fewer workers than the row would say
                return self._failed(row, busy, batch_size, input_size)
        if fresh and not self.is_cuda:
            steady.pop("memory_mb")
        row.update(steady)
        if c.warmup == "in-process":
            row.update(self._compile_columns(steady, "process"))
        return row, None

    def _compile_columns(self, reply: dict, cache: str) -> dict:
        """What the timed first call compiled (graphs, ms) and from which cache: `fresh`, the empty one of a
        fresh worker, or `process`, the measuring worker's, which holds what earlier points compiled."""
        if not self.options.compile:
            return {}
        return {
            "compile_cache": cache,
            "compile_graphs": reply.get("compile_graphs"),
            "compile_ms": reply.get("compile_ms"),
        }

    def _failed(self, row: dict, reply: dict, batch_size: int, input_size: int) -> tuple[dict, str | None]:
        """The row of a failed point. OOM, a size limit, and an OOM in disguise after a smaller batch
        of the same input size ran, are `oom` (the search bisects); everything else is `error`."""
        kind, message = reply["kind"], reply.get("error", "")
        smaller_ran = self.largest_ok.get(input_size, 0) and self.largest_ok[input_size] < batch_size
        status = "oom" if kind in ("oom", "limit") or (kind == "oom-like" and smaller_ran) else "error"
        return {**row, "status": status, "error": message}, message if kind == "sticky" else None

    # -- the workers --------------------------------------------------------------------------

    def _load_request(self) -> dict:
        return {
            "op": "load",
            "model": asdict(self.spec),
            "options": asdict(self.options),
            "seed": self.config.seed,
            "call_timeout_s": self.config.call_timeout_s,
            "device_memory_limit_mb": self.config.memory_limit_mb if self.is_cuda else None,
        }

    def _start_measuring_worker(self) -> dict:
        """Start (or restart) the measuring worker and load the model; a failure here ends the sweep."""
        self.measuring = WorkerProcess(own_compile_cache=self.config.compile)
        self.measuring.start()
        loaded = self.measuring.request(self._load_request(), self.config.worker_timeout_s, "`worker_timeout_s`")
        if loaded["status"] != "ok":
            self.measuring.stop()
            self._raise_load_failure(loaded)
        loaded["start_s"] = time.monotonic() - self.measuring.started_at
        loaded["load_process"] = process_name("measuring")
        return loaded

    def _raise_load_failure(self, reply: dict) -> None:
        message = reply.get("error", "")
        if reply["kind"] == "input":  # a file that is not TorchScript, a model that needs torchvision ...
            raise InputError(message)
        resume = f" {self.output.saved()} Run it again with `resume` to go on." if self.measured else ""
        raise BackendError(f"the model could not be loaded on {self.device}: {message}.{resume}")

    def _steady_request(
        self, batch_size: int, input_size: int, timed_first_call: bool, memory_limit: float | None
    ) -> tuple[dict, float]:
        """A `steady` request and how long to wait for its answer at most."""
        rule = self.config.rule
        request = {
            "op": "steady",
            "batch_size": batch_size,
            "input_size": input_size,
            "memory_limit_mb": memory_limit,
            "memory_budget_mb": self.memory_limit,
            "timed_first_call": timed_first_call,
            "rule": asdict(rule),
        }
        # A backstop only: the worker's own watchdog reports a stuck call after --call-timeout.
        return request, rule.longest_s + (rule.warmup_calls + 3) * self.config.call_timeout_s + 60

    def _steady(self, batch_size: int, input_size: int, timed_first_call: bool, memory_limit: float | None) -> dict:
        if self.measuring is None or not self.measuring.is_alive():
            self.loaded = {**self.loaded, **self._start_measuring_worker()}
        request, backstop = self._steady_request(batch_size, input_size, timed_first_call, memory_limit)
        reply = self.measuring.request(request, backstop, "`call_timeout_s`")
        # A worker whose call timed out ends itself right after its answer: it may not have exited yet.
        if reply["status"] != "ok" and (reply.get("kind") == "timeout" or not self.measuring.is_alive()):
            self.measuring.stop()  # a new one takes over at the next point
        return reply

    def _extra_steady(self, batch_size: int, input_size: int) -> dict:
        """One more process's steady state of this point (--processes): a fresh worker loads the model,
        measures the point as the measuring worker does (its first calls untimed), and is stopped, however
        this ends (the `with`)."""
        with WorkerProcess(own_compile_cache=self.config.compile) as extra:
            loaded = extra.request(self._load_request(), self.config.worker_timeout_s, "`worker_timeout_s`")
            if loaded["status"] != "ok":
                return loaded
            request, backstop = self._steady_request(batch_size, input_size, False, self.memory_limit)
            return extra.request(request, backstop, "`call_timeout_s`")

    def _fresh_warmup(self, batch_size: int, input_size: int) -> dict:
        """A fresh worker: load the model, time the first call at this batch size, exit. The answer has
        the parts of the fresh process's time until its first call returned (the profile's `start_*`,
        `load_*` and `cold_start_ms` columns; docs/profile.md, "Where the load goes")."""
        deadline = time.monotonic() + self.config.worker_timeout_s
        with WorkerProcess(own_compile_cache=self.config.compile) as fresh:
            loaded = fresh.request(self._load_request(), self.config.worker_timeout_s, "`worker_timeout_s`")
            if loaded["status"] != "ok":
                return loaded
            request = {
                "op": "first_call",
                "batch_size": batch_size,
                "input_size": input_size,
                "memory_limit_mb": self.memory_limit,
            }
            first = fresh.request(request, max(1.0, deadline - time.monotonic()), "`worker_timeout_s`")
            answered = time.monotonic()
        parts = {
            "start_python_ms": (loaded["began_at"] - fresh.started_at) * 1e3,
            **loaded["parts"],
            "cold_start_ms": (answered - fresh.started_at) * 1e3,
        }
        return {**first, "load_ms": loaded["load_ms"], "parts": parts, "load_process": process_name("fresh")}
