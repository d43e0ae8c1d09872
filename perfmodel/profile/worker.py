"""The worker program: the process in which a model is loaded and timed (docs/design.md, section 3: how to measure).

    python -m perfmodel.profile.worker      (started by worker_process.py, never by hand)

The profiler itself never runs the model. It starts this program in its own session and sends it
requests as JSON lines on stdin; each answer is one JSON line on the file descriptor named by
PERFMODEL_REPLY_FD (stdout and stderr stay free for whatever the model or torch prints):

- `load`: build the model on the device (the answer has load_ms, provenance and the thread count);
- `first_call`: time the first call at a batch size (a *fresh* worker: load, then this, then exit;
  that is the warm-up: cuDNN autotuning, lazy module loading, allocator growth, compilation);
- `steady`: the steady-state distribution and memory of one point (the *measuring* worker, one
  per sweep, answers one such request per point);
- `busy`: run the model at a batch and input size back to back in a thread, until the next `busy`
  or the end (a *neighbour*, `--alongside`: the load of the other workers of a plan on this machine).

A call that does not return within the call timeout is reported by a watchdog thread, which then
ends the process (a model stuck in C++ cannot be interrupted any other way). A failed call is
classified (failures.py); on CUDA a failure is followed by a probe of the context, and a broken
context is reported as `sticky`. The program ends when stdin closes or its parent dies.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time

from perfmodel.errors import PerfmodelError
from perfmodel.profile.failures import Failure, classify
from perfmodel.profile.lifetime import exit_with_parent

REPLY_FD_ENV = "PERFMODEL_REPLY_FD"
SCRATCH_ENV = "PERFMODEL_WORKER_SCRATCH"  # a folder this worker must remove if its parent dies
TIMEOUT_EXIT = 3
EXIT_REQUEST = {"op": "exit"}


class _Watchdog:
    """Ends the process when a request makes no progress (no call returns) for `timeout_s`."""

    def __init__(self, timeout_s: float, on_timeout):
        self.timeout_s = timeout_s
        self.on_timeout = on_timeout
        self.calls = 0  # counted by guard(); read by the watch thread
        self._lock = threading.Lock()
        self._active = False  # a request is being handled
        self._since = 0.0  # when it began, or last made progress
        threading.Thread(target=self._watch, name="perfmodel-call-watchdog", daemon=True).start()

    def guard(self, call):
        """call(i), counted: each return is progress. Adds one Python frame (~0.1 us) per call."""

        def guarded(i: int) -> None:
            call(i)
            self.calls += 1

        return guarded

    def begin(self) -> None:
        with self._lock:
            self._active, self._since = True, time.monotonic()

    def end(self) -> None:
        with self._lock:
            self._active = False

    def _watch(self) -> None:
        seen = self.calls
        while True:
            time.sleep(min(1.0, self.timeout_s / 10))
            with self._lock:
                if not self._active:
                    continue
                if self.calls != seen:
                    seen, self._since = self.calls, time.monotonic()
                elif time.monotonic() - self._since > self.timeout_s:
                    self.on_timeout()
                    os._exit(TIMEOUT_EXIT)


class Worker:
    def __init__(self, reply):
        self.reply = reply
        self.runner = None
        self.request: dict = {}
        self.watchdog: _Watchdog | None = None
        self._loop: tuple[threading.Thread, threading.Event] | None = None
        self._loop_failure: Failure | None = None

    def handle(self, request: dict) -> dict:
        self.request = request
        op = request.get("op")
        if op == "load":
            self.watchdog = _Watchdog(float(request["call_timeout_s"]), self._timed_out)
        if self.watchdog is None:
            return {"status": "failed", "kind": "error", "error": "the worker was asked to measure before loading"}
        if op != "load":  # loading (importing torch, building the model) is bounded by --worker-timeout
            self.watchdog.begin()
        failure = None
        try:
            return getattr(self, f"_{op}")(request)
        except PerfmodelError as exc:  # a model file that cannot be loaded, a device that is not there
            return {"status": "failed", "kind": "input", "error": str(exc), "exit_code": exc.exit_code}
        except Exception as exc:
            failure = classify(exc)
        finally:
            self.watchdog.end()
        # Out of the except block: the traceback, which holds the failed call's tensors, is gone.
        return self._failed(failure)

    def _timed_out(self) -> None:
        b = self.request.get("batch_size")
        self.reply(
            {
                "status": "failed",
                "kind": "timeout",
                "error": f"a model call at batch {b} did not return within {self.watchdog.timeout_s:g} s "
                "(`call_timeout_s`)",
            }
        )

    def _failed(self, failure: Failure) -> dict:
        """The answer for a failed request; on CUDA, an unexplained failure is checked for a broken context."""
        kind = failure.kind
        if self.runner is not None and self.runner.is_cuda:
            self._free()
            if kind in ("oom-like", "error") and self._context_broken():
                kind = "sticky"
        return {"status": "failed", "kind": kind, "error": failure.message}

    def _free(self) -> None:
        try:
            self.runner.release()
        except Exception:  # a broken context fails here too; the probe below says so
            pass

    def _context_broken(self) -> bool:
        """Whether a trivial kernel still runs: after a sticky error every CUDA call fails."""
        torch = self.runner.torch
        try:
            torch.ones(1, device=self.runner.device).add_(1)
            torch.cuda.synchronize(self.runner.device)
            return False
        except Exception as exc:
            return classify(exc).kind != "oom"

    # -- requests -----------------------------------------------------------------------------

    def _load(self, request: dict) -> dict:
        from perfmodel.models import ModelSpec
        from perfmodel.profile.provenance import torch_provenance
        from perfmodel.torch_runner import TorchOptions, TorchRunner

        # The interpreter and perfmodel's own imports are done; torch's and the model's come next. The
        # clock is time.monotonic(), the same in every process of the machine.
        began_at = time.monotonic()
        options = TorchOptions(**request["options"])
        self.runner = TorchRunner(ModelSpec(**request["model"]), options, request["seed"])
        parts = self.runner.start()
        limit = request.get("device_memory_limit_mb")
        if limit is not None and self.runner.is_cuda:  # a smaller GPU than this one: the allocator's cap
            torch = self.runner.torch
            total = torch.cuda.get_device_properties(self.runner.device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, limit * 2**20 / total), self.runner.device)
        load_ms = self.runner.load()
        return {
            "status": "ok",
            "load_ms": load_ms,
            "parts": {**parts, **self.runner.load_parts},
            "began_at": began_at,
            "threads": self.runner.torch.get_num_threads(),
            "provenance": torch_provenance(options.device),
            "compile_cache": _compile_cache(),
            "temp_dir": tempfile.gettempdir(),  # Inductor's precompiled headers go here
        }

    def _first_call(self, request: dict) -> dict:
        """The warm-up: the first call at this batch size, then two more, so that `memory_mb` (the
        peak since before the model was loaded: RSS growth on a CPU, the allocator's peak on CUDA)
        covers serving one batch, not only the first call."""
        from perfmodel import memory

        runner, b, s = self.runner, request["batch_size"], request["input_size"]
        limit = request.get("memory_limit_mb")
        extra = None if runner.is_cuda or limit is None else limit - runner.used_memory_mb()
        with memory.data_limit(extra), runner.inference():
            call = self.watchdog.guard(runner.bind(runner.inputs(b, s, count=1)))
            before = runner.compile_counts()
            t0 = time.perf_counter()
            call(0)
            warmup_ms = (time.perf_counter() - t0) * 1e3
            first = runner.compile_counts()
            call(1)
            call(2)
        out = {"status": "ok", "warmup_ms": warmup_ms, "memory_mb": runner.peak_memory_mb()}
        if before is None:
            return out
        problem = _compile_problem(
            runner, first.since(before), runner.compile_counts().since(first), "in the calls after the first"
        )
        return problem or {**out, **_compile_columns(first.since(before))}

    def _steady(self, request: dict) -> dict:
        """One point's steady state: latency distribution, throughput and the memory of serving one batch.

        The memory figure is the peak after the first calls (on CUDA graphs: from just before the
        capture, so that the graph's pool counts; torch.compile's graphs: from the point's start) less the
        input batches held only for rotation:
        weights + one input batch + activations + workspace.
        """
        from perfmodel import memory
        from perfmodel.profile.timing import StabilityRule, measure_latency

        runner, b, s = self.runner, request["batch_size"], request["input_size"]
        limit = request.get("memory_limit_mb")
        graphs = runner.options.captures_graphs
        runner.release()
        if graphs and not runner.options.cuda_graphs:
            # torch.compile records its graphs' pool in the untimed calls (no capture of ours resets the peak
            # before it): counted from the point's start (the H200's reduce-overhead said 220 MiB at batch
            # 256, NVML 3,362 MiB)
            runner.reset_peak()
        extra = None if limit is None or runner.is_cuda else limit - runner.used_memory_mb()
        count = runner.input_count(b, s, request.get("memory_budget_mb") or runner.device_memory_mb())
        out: dict = {}
        counts = {"start": runner.compile_counts()}

        def on_steady() -> None:  # after the untimed calls: from here on, nothing may compile
            counts["timed"] = runner.compile_counts()
            if not graphs:
                runner.reset_peak()

        try:
            with memory.data_limit(extra), runner.inference():
                call = self.watchdog.guard(runner.bind(runner.inputs(b, s, count)))
                if request.get("timed_first_call"):
                    t0 = time.perf_counter()
                    call(0)
                    out["warmup_ms"] = (time.perf_counter() - t0) * 1e3
                    counts["first"] = runner.compile_counts()
                summary = measure_latency(call, StabilityRule(**request["rule"]), on_steady=on_steady)
            if counts["start"] is not None:
                first = counts.get("first", counts["timed"]).since(counts["start"])
                problem = _compile_problem(
                    runner, first, runner.compile_counts().since(counts["timed"]), "while the point was timed"
                )
                if problem:
                    return problem
                if "first" in counts:
                    out.update(_compile_columns(first))
            rotation_only = count if graphs and count > 1 else count - 1
            out.update(summary.columns())
            out["memory_mb"] = max(0.0, runner.peak_memory_mb() - rotation_only * runner.batch_mb(b, s))
            out["throughput_ips"] = b / summary.median_ms * 1e3
            out["status"] = "ok"
            return out
        finally:
            call = None  # drop the inputs and any captured graph before freeing memory
            runner.release()

    def _probe(self, request: dict) -> dict:
        """The machine's drift: one batch timed back to back for `seconds`, analysed here (planning/drift.py)."""
        from perfmodel.planning.drift import analyse_probe

        runner, b, s = self.runner, request["batch_size"], request["input_size"]
        runner.release()
        ends, durations = [], []
        try:
            with runner.inference():
                call = self.watchdog.guard(runner.bind(runner.inputs(b, s, 1)))
                call(0)
                stop = time.perf_counter() + request["seconds"]
                while True:
                    t0 = time.perf_counter()
                    call(0)
                    t1 = time.perf_counter()
                    ends.append(t1)
                    durations.append(t1 - t0)
                    if t1 >= stop:
                        break
        finally:
            call = None
            runner.release()
        found = analyse_probe(ends, durations)
        if found is None:
            return {"status": "ok", "drift_rel_sd": None, "drift_corr_s": None, "calls": len(durations)}
        return {"status": "ok", "drift_rel_sd": found[0], "drift_corr_s": found[1], "calls": len(durations)}

    def _busy(self, request: dict) -> dict:
        """Run this point's batch back to back in a thread until told otherwise. The first call runs
        here, so that a batch that does not fit is this request's answer (as in `first_call`)."""
        from perfmodel import memory

        self.stop_loop()
        runner, b, s = self.runner, request["batch_size"], request["input_size"]
        limit = request.get("memory_limit_mb")
        extra = None if runner.is_cuda or limit is None else limit - runner.used_memory_mb()
        with memory.data_limit(extra), runner.inference():
            call = self.watchdog.guard(runner.bind(runner.inputs(b, s, count=1)))
            call(0)
        stop = threading.Event()

        def loop() -> None:
            try:
                with runner.inference():
                    while not stop.is_set():
                        call(0)
            except Exception as exc:  # said by the next `still_busy`
                self._loop_failure = classify(exc)

        thread = threading.Thread(target=loop, name="perfmodel-neighbour", daemon=True)
        self._loop_failure = None
        thread.start()
        self._loop = (thread, stop)
        return {"status": "ok"}

    def _still_busy(self, request: dict) -> dict:
        """Whether the `busy` loop has run without failing since it started."""
        if self._loop_failure is not None:
            return self._failed(self._loop_failure)
        if self._loop is None or not self._loop[0].is_alive():
            return {"status": "failed", "kind": "error", "error": "the neighbour's loop is not running"}
        return {"status": "ok"}

    def stop_loop(self) -> None:
        """End a `busy` loop (after the call it is in) and free its batch."""
        if self._loop is not None:
            thread, stop = self._loop
            stop.set()
            thread.join()
            self._loop = None
            self.runner.release()


def _compile_columns(first) -> dict:
    """The profile columns of what a first call compiled: its graphs and the part of warmup_ms spent compiling."""
    return {
        "compile_graphs": first.graphs,
        "compile_ms": first.seconds * 1e3 if first.seconds == first.seconds else None,
    }


def _compile_problem(runner, first, later, when: str) -> dict | None:
    """A failed answer when torch.compile did not do what the row would claim: it compiled again after the
    first call (`later`, `when`: while timing, or in a fresh worker's calls after its first), or, in a mode
    with CUDA graphs, Inductor gave them up; None when all is as it should be."""
    mode = runner.options.compile_mode
    if later.graphs:
        return {
            "status": "failed",
            "kind": "error",
            "error": f"torch.compile compiled {later.graphs} more graph(s) {when}, so the point's times would "
            "include compilation: the model's guards fail on repeated calls of one batch shape "
            "(run with TORCH_LOGS=recompiles to see why)",
        }
    if runner.is_cuda and mode in ("reduce-overhead", "max-autotune") and (first.graph_skips or later.graph_skips):
        return {
            "status": "failed",
            "kind": "error",
            "error": f"torch.compile's {mode} mode gave up its CUDA graphs for this model, so the row would "
            "not be what it says (run with TORCH_LOGS=perf_hints to see why)",
        }
    return None


def _compile_cache() -> str | None:
    """Where torch.compile keeps its caches in this process (the worker's own folder, see worker_process.py).
    None for a worker without a folder of its own: TORCHINDUCTOR_CACHE_DIR may still be set, by torchvision's
    import of torch._dynamo, here or in the parent, and importing Inductor to read it took 6-7 s."""
    if SCRATCH_ENV not in os.environ:
        return None
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return cache_dir()


def main() -> None:
    abandon = exit_with_parent(owned_dir=os.environ.get(SCRATCH_ENV))
    reply_fd = int(os.environ[REPLY_FD_ENV])
    lock = threading.Lock()

    def reply(message: dict) -> None:
        data = (json.dumps(message, allow_nan=True) + "\n").encode()
        with lock:
            while data:
                data = data[os.write(reply_fd, data) :]

    worker = Worker(reply)
    try:
        for line in sys.stdin:
            request = json.loads(line) if line.strip() else None
            if request == EXIT_REQUEST:  # the profiler lets us go (and removes our folder itself)
                worker.stop_loop()
                return
            if request is not None:
                reply(worker.handle(request))
    except BrokenPipeError:  # nobody reads our answers any more
        pass
    abandon()  # stdin closed without a word: the profiler died (its pipes close before it is gone)


if __name__ == "__main__":
    main()
