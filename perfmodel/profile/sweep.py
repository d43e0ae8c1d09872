"""The profiling sweep: every (input size, batch size) point, measured and written as it finishes.

The output CSV is rewritten atomically after every point, so an interrupted sweep keeps every point
it finished, and `resume=True` skips them: none is lost, none is measured twice.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pandas as pd
import psutil

from perfmodel.errors import InputError
from perfmodel.profile import memory
from perfmodel.profile.backends.torch_backend import TorchOptions, TorchRunner, check_device, is_oom
from perfmodel.profile.models import resolve_model
from perfmodel.profile.monitor import HardwareMonitor
from perfmodel.profile.output import ProfileOutput
from perfmodel.profile.provenance import hardware_key, now_utc, torch_provenance
from perfmodel.profile.search import search_batch_sizes
from perfmodel.profile.timing import StabilityRule, measure_latency
from perfmodel.profile.worker import run_in_fresh_process

if TYPE_CHECKING:
    from perfmodel.profile.backends.triton_backend import TritonOptions

WARMUP_METHODS = ("fresh-process", "in-process")


@dataclass(frozen=True)
class ProfileConfig:
    """Everything one `perfmodel profile` run needs. Defaults suit a quick CPU try."""

    model: str
    device: str = "cpu"
    batch_sizes: tuple[int, ...] | None = (1, 2, 4, 8)  # None: search up to the largest that fits
    input_sizes: tuple[int, ...] = (224,)
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    cuda_graphs: bool = False
    warmup: str = "fresh-process"
    threads: int | None = None  # None: 1 thread on CPU (quiet, repeatable timing), torch's default on CUDA
    hardware: str | None = None  # the pool key; None derives it from the device name
    rule: StabilityRule = field(default_factory=StabilityRule)
    max_batch_size: int | None = None  # auto search cap; None: 1024 on CPU, 16384 on CUDA
    max_call_ms: float | None = None  # auto search stops after a slower call; None: 2000 on CPU, none on CUDA
    memory_limit_mb: float | None = None  # CPU only: the memory budget; None: half the free memory
    worker_timeout_s: float = 900.0
    seed: int = 0
    triton: TritonOptions | None = None  # None: in-process torch; else through a Triton server (backends/triton_backend.py)

    def __post_init__(self):
        if self.warmup not in WARMUP_METHODS:
            raise InputError(f"unknown warm-up method {self.warmup!r}: choose {' or '.join(WARMUP_METHODS)}.")
        if not self.input_sizes:
            raise InputError("give at least one input size.")
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise InputError("--max-batch-size must be a positive whole number.")
        if self.memory_limit_mb is not None and self.memory_limit_mb <= 0:
            raise InputError("--memory-limit-mb must be a positive number of MiB.")


@dataclass(frozen=True)
class SweepEvent:
    """Progress of a sweep, for a progress bar or a log. `total` is None while auto-searching."""

    kind: str  # "start", "point" (a point finished or was taken from the file), "search" (auto stopped)
    done: int = 0
    total: int | None = None
    input_size: int | None = None
    batch_size: int | None = None
    status: str | None = None
    resumed: bool = False
    message: str = ""


ProgressCallback = Callable[[SweepEvent], None]


def run_profile(config: ProfileConfig, out: str | os.PathLike, resume: bool = False,
                on_progress: ProgressCallback | None = None) -> pd.DataFrame:
    """Measure the grid of `config` and write the profile CSV to `out`; return the whole profile."""
    notify = on_progress or (lambda event: None)
    if config.triton is not None:
        from perfmodel.profile.backends.triton_backend import run_triton_profile

        return run_triton_profile(config, out, resume, notify)
    spec = resolve_model(config.model)
    output = ProfileOutput(out, resume)
    device = check_device(config.device)
    is_cuda = device.startswith("cuda")
    threads = config.threads if config.threads is not None else (None if is_cuda else 1)
    options = TorchOptions(device, config.precision, config.channels_last, config.compile, config.cuda_graphs, threads)

    runner = TorchRunner(spec, options, config.seed)
    provenance = torch_provenance(device)
    hardware = config.hardware or hardware_key(str(provenance["device_name"]), is_cuda)
    identity = {"hardware": hardware, "model": spec.name, "backend": options.backend_name,
                "precision": options.precision, "architecture": "inprocess"}
    fixed = {**identity, "warmup_method": config.warmup, "threads": threads if threads else runner.torch.get_num_threads(),
             **provenance}
    output.check_resumable(identity, fixed)

    memory_limit = None
    if not is_cuda:
        memory_limit = config.memory_limit_mb or psutil.virtual_memory().available / 2**20 / 2
    max_batch = config.max_batch_size or (16384 if is_cuda else 1024)
    max_call_ms = config.max_call_ms if config.max_call_ms is not None else (None if is_cuda else 2000.0)

    runner.load()
    gpu_index = (runner.device.index or 0) if is_cuda else None
    with HardwareMonitor(gpu_index=gpu_index) as monitor:
        if monitor.has_gpu_counters:
            fixed["driver"] = monitor.gpu_info().driver
        sweep = _Sweep(config, spec, options, runner, monitor, fixed, identity, output, memory_limit, notify)
        total = None if config.batch_sizes is None else len(config.batch_sizes) * len(config.input_sizes)
        notify(SweepEvent("start", total=total))
        for size in config.input_sizes:
            if config.batch_sizes is None:
                result = search_batch_sizes(lambda b: sweep.point(b, size), max_batch, max_call_ms)
                notify(SweepEvent("search", done=sweep.done, input_size=size, message=result.reason))
            else:
                for b in config.batch_sizes:
                    sweep.point(b, size, total)
    return output.frame()


class _Sweep:
    """Measures points one at a time and keeps the output file up to date after each."""

    def __init__(self, config, spec, options, runner, monitor, fixed, identity, output, memory_limit, notify):
        self.config, self.spec, self.options, self.runner = config, spec, options, runner
        self.monitor, self.fixed, self.output, self.memory_limit, self.notify = monitor, fixed, output, memory_limit, notify
        self.identity = identity
        self.done = 0

    def point(self, batch_size: int, input_size: int, total: int | None = None) -> dict:
        row = self.output.get({**self.identity, "input_size": input_size, "batch_size": batch_size})
        resumed = row is not None
        if not resumed:
            row = self._measure(batch_size, input_size)
            self.output.add(row)
        self.done += 1
        self.notify(SweepEvent("point", self.done, total, input_size, batch_size, row["status"], resumed))
        return row

    def _measure(self, batch_size: int, input_size: int) -> dict:
        """One point. With fresh-process warm-up, the worker goes first and decides whether the batch
        fits at all; on a CPU it also gives the memory figure, since only a fresh process's peak RSS
        growth is free of the memory that earlier points left to the C allocator."""
        row = {**self.fixed, "input_size": input_size, "batch_size": batch_size, "load_avg_1m": os.getloadavg()[0],
               "created_at": now_utc()}
        fresh_process = self.config.warmup == "fresh-process"
        if fresh_process:
            first = run_in_fresh_process(self.spec, self.options, batch_size, input_size, self.memory_limit,
                                         self.config.worker_timeout_s, self.config.seed)
            row["load_ms"] = first.get("load_ms")
            if first["status"] != "ok":
                return {**row, **_failed(first["status"], first.get("error", ""))}
            row["warmup_ms"] = first["warmup_ms"]
            if not self.runner.is_cuda:
                row["memory_mb"] = first["memory_mb"]
        else:
            row["load_ms"] = self.runner.load_ms
        in_process_cpu = not fresh_process and not self.runner.is_cuda
        row.update(self._steady_state(batch_size, input_size, timed_first_call=not fresh_process,
                                      memory_limit=self.memory_limit if in_process_cpu else None,
                                      measure_memory=self.runner.is_cuda or in_process_cpu))
        return row

    def _steady_state(self, batch_size: int, input_size: int, timed_first_call: bool,
                      memory_limit: float | None, measure_memory: bool) -> dict:
        runner = self.runner
        runner.release()
        mark = self.monitor.window()
        extra = None if memory_limit is None else memory_limit - runner.used_memory_mb()
        measured: dict = {}
        try:
            with memory.data_limit(extra), runner.inference():
                call = runner.bind(runner.inputs(batch_size, input_size))
                if timed_first_call:
                    t0 = time.perf_counter()
                    call(0)
                    measured["warmup_ms"] = (time.perf_counter() - t0) * 1e3
                summary = measure_latency(call, self.config.rule, on_steady=runner.reset_peak)
            measured.update(summary.columns())
            if measure_memory:
                measured["memory_mb"] = runner.peak_memory_mb()
            measured["throughput_ips"] = batch_size / summary.median_ms * 1e3
            measured["status"] = "ok"
        except Exception as exc:
            if not (is_oom(exc) or isinstance(exc, RuntimeError)):
                raise
            measured = _failed("oom" if is_oom(exc) else "error", f"{type(exc).__name__}: {str(exc).strip()[:300]}")
        finally:
            call = None  # drop the inputs and any captured graph before freeing memory
            runner.release()
        measured.update(self.monitor.summary(mark))
        return measured


def _failed(status: str, error: str) -> dict:
    return {"status": status, "error": error.splitlines()[0] if error else ""}
