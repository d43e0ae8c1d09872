"""What a sweep is asked to do (ProfileConfig) and what it tells while it runs (SweepEvent).

Shared by sweep.py and every backend, so that no backend imports the sweep (or another backend).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from perfmodel.errors import InputError
from perfmodel.profile.timing import StabilityRule

WARMUP_METHODS = ("fresh-process", "in-process")
DRIFT_PROBE_CPU_S, DRIFT_PROBE_CUDA_S = 20.0, 5.0


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
    compile_mode: str = "default"  # torch.compile's mode (torch_runner.COMPILE_MODES), with compile
    cuda_graphs: bool = False
    warmup: str = "fresh-process"
    fresh_warmup_at: tuple[int, ...] | None = None  # fresh-process warm-up only at these batch sizes; None: every point
    threads: int | None = None  # None: 1 thread on CPU (quiet, repeatable timing), torch's default on CUDA
    alongside: int = 0  # more workers running the same point meanwhile (CPU; neighbours.py)
    # Processes that measure each point's steady state (torch backend): on a CPU a process's speed is one draw
    # (planning/drift.py, CPU_POINT_LEVEL), so a point measured in K of them is pooled over K draws.
    processes: int = 1
    hardware: str | None = None  # the pool key; None derives it from the device name
    rule: StabilityRule = field(default_factory=StabilityRule)
    max_batch_size: int | None = None  # auto search cap; None: 1024 on CPU, 16384 on CUDA
    max_call_ms: float | None = None  # auto search stops after a slower call; None: 2000 on CPU, none on CUDA
    search_tolerance: float = 0.0  # auto: stop bisecting when the gap is within this fraction of the largest that ran
    memory_limit_mb: float | None = None  # the memory budget; None: half the free memory (CPU), the whole GPU (CUDA)
    worker_timeout_s: float = 900.0  # a fresh warm-up worker, from start to answer
    call_timeout_s: float = 300.0  # one model call (or a point's set-up) without progress
    seed: int = 0
    # The machine's drift (planning/drift.py): one fixed call timed back to back this long before the sweep;
    # None: 20 s on a CPU, 5 s on CUDA (GPUs drift far less); 0: no probe. torch backend only.
    drift_probe_s: float | None = None
    backend: str = "torch"  # a name in backends.BACKENDS
    backend_options: object | None = None  # the backend's own options (e.g. TritonOptions)

    def __post_init__(self):
        if self.warmup not in WARMUP_METHODS:
            raise InputError(f"unknown warm-up method {self.warmup!r}: choose {' or '.join(WARMUP_METHODS)}.")
        if not self.input_sizes:
            raise InputError("give at least one input size.")
        if self.fresh_warmup_at is not None and self.warmup != "fresh-process":
            raise InputError(
                "`fresh_warmup_at` chooses where fresh processes measure the warm-up: it needs "
                "`warmup` fresh-process (the default); leave one of them out."
            )
        for name, value, unit in (
            ("max_batch_size", self.max_batch_size, None),
            ("max_call_ms", self.max_call_ms, "milliseconds"),
            ("memory_limit_mb", self.memory_limit_mb, "MiB"),
            ("worker_timeout_s", self.worker_timeout_s, "seconds"),
            ("call_timeout_s", self.call_timeout_s, "seconds"),
            ("threads", self.threads, None),
        ):
            if value is not None and not (math.isfinite(value) and value > 0):
                what = f"a positive number of {unit}" if unit else "a positive whole number"
                raise InputError(f"`{name}` must be {what}, not {value}.")
        if self.drift_probe_s is not None and not (
            math.isfinite(self.drift_probe_s) and 0 <= self.drift_probe_s <= 600
        ):
            raise InputError(
                f"`drift_probe_s` must be a duration from 0 s (no probe) to 10 min, not {self.drift_probe_s}."
            )
        if isinstance(self.alongside, bool) or not isinstance(self.alongside, int) or not 0 <= self.alongside <= 1024:
            raise InputError(f"`alongside` must be a whole number of workers from 0 to 1024, not {self.alongside!r}.")
        if isinstance(self.processes, bool) or not isinstance(self.processes, int) or not 1 <= self.processes <= 1024:
            raise InputError(
                f"`processes` must be a whole number of processes per point from 1 to 1024, not {self.processes!r}."
            )
        if not (math.isfinite(self.search_tolerance) and 0 <= self.search_tolerance < 1):
            raise InputError(f"`search_tolerance` must be at least 0% and below 100%, not {self.search_tolerance}.")

    @property
    def probe_s(self) -> float:
        """How long the drift probe runs (seconds; 0: none)."""
        if self.drift_probe_s is not None or self.backend != "torch":
            return self.drift_probe_s or 0.0
        return DRIFT_PROBE_CUDA_S if self.device.strip().lower().startswith("cuda") else DRIFT_PROBE_CPU_S

    def fresh_warmup(self, batch_size: int) -> bool:
        """Whether the point at this batch size gets a fresh warm-up worker."""
        if self.warmup != "fresh-process":
            return False
        return self.fresh_warmup_at is None or batch_size in self.fresh_warmup_at


@dataclass(frozen=True)
class SweepEvent:
    """Progress of a sweep, for a progress bar or a log.

    `total` is the number of points planned: exact for a list of batch sizes, an upper bound while an
    `auto` search runs (`total_is_bound`). `eta_s` is the estimated time left (None until known).
    """

    kind: str  # "start", "point" (a point finished or was taken from the file), "search" (auto stopped)
    done: int = 0
    total: int | None = None
    input_size: int | None = None
    batch_size: int | None = None
    status: str | None = None
    resumed: bool = False
    message: str = ""
    eta_s: float | None = None
    total_is_bound: bool = False


ProgressCallback = Callable[[SweepEvent], None]


@dataclass(frozen=True)
class Estimate:
    """How big a sweep is, known before it starts: its points, and its duration under a stated assumption.

    `per_point_s` bounds what a point costs besides its calls (its sampling time cap and its own set-up);
    the calls' time cannot be known before they are measured (the torch backend's; the other backends'
    points have bounds, and say "at most"). `slowest` names the sweep's slowest call; `calls_s` is what the
    calls add if it takes `slowest_s` (an auto search: its largest batch that fits, or `max_call_ms`), or,
    where nothing bounds it (`slowest_s` None), what they add for each second it takes.
    """

    points: int  # points to measure (an upper bound when `bound`: an auto search may stop sooner)
    bound: bool
    per_point_s: float  # the most sampling one point may take (--max-time-per-point) and its set-up
    fresh_workers: int  # fresh processes started (each: start Python, import torch, load the model, first calls)
    worker_s: float | None = None  # what starting one took here, once measured
    probe_s: float = 0.0  # the drift probe, once per sweep
    processes: int = 1  # processes that measure each point's steady state (--processes): K - 1 fresh ones more
    calls_s: float = 0.0  # the calls beyond `per_point_s` in one process (per second of `slowest` if no slowest_s)
    fresh_extra_s: float = 0.0  # what a fresh warm-up process takes beyond a worker's start (its calls, its exit)
    slowest: str = ""  # the slowest call, for people ("": the calls are bounded by per_point_s)
    slowest_s: float | None = None  # its time, where it can be said (and why, in `why`)
    why: str = ""

    @property
    def extra_workers(self) -> int:
        """The fresh processes --processes adds: K - 1 per point, each loading the model."""
        return self.points * (self.processes - 1)

    @property
    def sampling_s(self) -> float:
        """The most time all steady states may take besides their calls: each point in each of its processes."""
        return self.points * self.per_point_s * self.processes

    @property
    def measuring_s(self) -> float:
        """The sweep's time without its processes' starts: sampling, calls (at `slowest_s`, where said), the
        fresh processes' own calls, the drift probe."""
        calls = self.calls_s * self.processes if self.slowest_s is not None else 0.0
        return self.sampling_s + calls + self.fresh_workers * self.fresh_extra_s + self.probe_s

    @property
    def seconds(self) -> float | None:
        """The whole sweep in seconds, once a worker's start time is known (else None)."""
        if self.worker_s is None:
            return None
        return self.measuring_s + (self.fresh_workers + self.extra_workers + 1) * self.worker_s

    def describe(self) -> str:
        points = f"{'at most ' if self.bound else ''}{self.points} point(s)"
        fresh = f", {self.fresh_workers} of them with a fresh warm-up process" if self.fresh_workers else ""
        k = self.processes
        if k > 1:
            fresh += (
                f", each measured in {k} processes ({k - 1} fresh one{'s' if k > 2 else ''} per point besides the "
                f"measuring one, each loading the model: the steady-state part takes about {k}x as long)"
            )
        if not self.slowest:  # bounds only
            if self.seconds is None:
                starts = ", plus the start of each process" if self.fresh_workers or k > 1 else ""
                per = "per point" if k == 1 else "per point and process"
                return (
                    f"{points}{fresh}; sampling takes at most {self.per_point_s:g} s {per} "
                    f"({duration_text(self.sampling_s)} in all){starts}"
                )
            start = f"a worker process takes {self.worker_s:.0f} s to start here"
            return f"{points}{fresh}; at most {duration_text(self.seconds)} ({start})"
        if self.seconds is None:
            starts = self.fresh_workers + self.extra_workers + 1
            when = f"about {duration_text(self.measuring_s)} plus {starts} process start(s)"
        else:
            when = f"about {duration_text(self.seconds)} (a worker process takes {self.worker_s:.0f} s to start here)"
        if self.slowest_s is None:
            more = self.calls_s * self.processes
            return (
                f"{points}{fresh}; {when}, and {duration_text(more)} more for each second a call at {self.slowest} "
                f"takes (smaller batches' calls less, in proportion to their pixels)"
            )
        return (
            f"{points}{fresh}; {when}, if a call at {self.slowest} takes {self.slowest_s:g} s and smaller batches' "
            f"calls less, in proportion ({self.why})"
        )


def duration_text(seconds: float) -> str:
    """12 s, 7 min, 1.5 h: a duration as a person reads it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
