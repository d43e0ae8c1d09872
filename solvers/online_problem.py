"""The online planning problem as plain numbers (seconds, requests/s), validated when built.

ServiceTimes   how long one GPU type takes for a batch of b images (median and p99), one way of serving
OnlineGpuType  a kind of GPU: how many, how it can serve, its price per hour
OnlineProblem  the GPU types, the request rate (or a trace), the SLO at a percentile, the objective,
               the safety margin
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from solvers.errors import ProblemError
from solvers.online_batcher import sigma_from

OBJECTIVES = ("gpus", "cost")
MAX_MARGIN = 10.0  # a margin is below this: every batch up to 11 x slower
# What the model computes within bounds: below MIN_RATE_PER_S (one request in 31 years) a trace stretched
# to the rate overflows; above MAX_RATE_PER_S no pool of at most solvers.batch_problem.MAX_COUNT GPUs at
# 1,000 requests/s each holds it. Any rate between needs at least one GPU, however few requests arrive
# within the SLO: a request alone must be answered within it. An SLO above MAX_SLO_S (a day) is a batch
# job (perfmodel plan --images N --deadline T), not a latency objective.
MIN_RATE_PER_S = 1e-9
MAX_RATE_PER_S = 1e15
MAX_SLO_S = 86_400.0


@dataclass(frozen=True, eq=False)
class ServiceTimes:
    """One way to serve on a GPU type (`label`, e.g. 'torch fp16'): batch service times in seconds,
    p50_s[b - 1] and p99_s[b - 1] for a batch of b = 1 .. len images; len is the largest batch that fits.

    `max_batches` are the candidate max_batch settings (images); None: the powers of two up to the
    largest batch, and the largest batch. `overhead_s`: the part of every request's latency spent
    outside the server (network, client), added to each latency but taking no server time; the p50_s
    and p99_s are then the server's own time for a batch.
    """

    p50_s: Sequence[float] | np.ndarray
    p99_s: Sequence[float] | np.ndarray
    label: str = ""
    max_batches: Sequence[int] | None = None
    overhead_s: float = 0.0

    def __post_init__(self) -> None:
        p50 = np.asarray(self.p50_s, dtype=float).ravel()
        p99 = np.asarray(self.p99_s, dtype=float).ravel()
        where = f"service times{f' of {self.label}' if self.label else ''}"
        if not len(p50) or len(p50) != len(p99):
            raise ProblemError(f"{where}: p50_s and p99_s need the same length, one time per batch size from 1.")
        if not (np.all(np.isfinite(p50)) and np.all(p50 > 0) and np.all(np.isfinite(p99))):
            raise ProblemError(f"{where}: every time must be a finite number of seconds > 0.")
        if np.any(p99 < p50 * (1 - 1e-9)):
            raise ProblemError(f"{where}: a p99 time is below its p50.")
        if not (isinstance(self.overhead_s, (int, float)) and math.isfinite(self.overhead_s) and self.overhead_s >= 0):
            raise ProblemError(f"{where}: overhead_s must be a finite number of seconds >= 0.")
        candidates = self.max_batches
        if candidates is None:
            candidates = sorted({*(2**i for i in range(int(math.log2(len(p50))) + 1)), len(p50)})
        candidates = tuple(sorted({int(b) for b in candidates}))
        if not candidates or candidates[0] < 1 or candidates[-1] > len(p50):
            raise ProblemError(f"{where}: max_batches must lie between 1 and {len(p50)}, the largest batch timed.")
        for name, value in (("p50_s", p50), ("p99_s", np.maximum(p99, p50))):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "max_batches", candidates)

    @property
    def largest(self) -> int:
        return len(self.p50_s)

    def per_request(self, request_size: int, max_requests: int) -> tuple[np.ndarray, np.ndarray]:
        """median[m], sigma[m] for a batch of m = 1 .. max_requests requests (index 0 unused)."""
        images = np.arange(1, max_requests + 1) * request_size
        p50, p99 = self.p50_s[images - 1], self.p99_s[images - 1]
        return np.concatenate([[p50[0]], p50]), np.concatenate([[0.0], sigma_from(p50, p99)])


@dataclass(frozen=True, eq=False)
class OnlineGpuType:
    """A kind of GPU: how many there are (None: as many as needed), how it can serve, its price per hour."""

    name: str
    count: int | None
    options: Sequence[ServiceTimes]
    cost_per_hour: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ProblemError("every GPU type needs a non-empty name.")
        if self.count is not None and (isinstance(self.count, bool) or int(self.count) != self.count or self.count < 0):
            raise ProblemError(f"GPU type {self.name!r}: count must be a whole number >= 0.")
        options = tuple(self.options)
        if not options or not all(isinstance(o, ServiceTimes) for o in options):
            raise ProblemError(f"GPU type {self.name!r}: give at least one ServiceTimes.")
        object.__setattr__(self, "options", options)
        if self.cost_per_hour is not None and not (math.isfinite(self.cost_per_hour) and self.cost_per_hour >= 0):
            raise ProblemError(f"GPU type {self.name!r}: cost_per_hour must be a number >= 0.")


@dataclass(frozen=True, eq=False)
class OnlineProblem:
    """What to plan. The rate is in requests/s, each request `request_size` images; the SLO in seconds,
    met by `percentile` percent of requests. `arrivals_s` (sorted arrival times, seconds) replaces the
    Poisson process in the check: with rate_per_s None the rate is the trace's own, else the trace is
    stretched or squeezed in time to that mean rate. `delays_s`: the max_queue_delay candidates (None:
    0 and 1/4, 1/2, 1 x one request's service time). `margin`: the plan must meet the SLO even with every
    batch's server time (p50_s, p99_s) 1 + margin times what was given, the round trip (overhead_s) as
    it is; the latencies it reports are those at the times given (see slowed())."""

    gpu_types: Sequence[OnlineGpuType]
    rate_per_s: float | None
    slo_s: float
    percentile: float = 99.0
    request_size: int = 1
    objective: str = "gpus"
    arrivals_s: np.ndarray | None = None
    delays_s: Sequence[float] | None = None
    simulate: bool = True
    simulated_requests: int | None = None  # per check; None: enough for the percentile (20k to 200k)
    seed: int = 0
    input_size: int | None = None  # for the report
    margin: float = 0.0
    trace: np.ndarray | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        types = tuple(self.gpu_types)
        if not types or not all(isinstance(t, OnlineGpuType) for t in types):
            raise ProblemError("give at least one OnlineGpuType.")
        names = [t.name for t in types]
        if len(set(names)) != len(names):
            raise ProblemError(f"GPU type names must be unique; got {', '.join(names)}.")
        object.__setattr__(self, "gpu_types", types)
        if self.objective not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {', '.join(OBJECTIVES)}, not {self.objective!r}.")
        if not (_number(self.slo_s) and self.slo_s > 0):
            raise ProblemError(f"the SLO must be a finite number of seconds > 0, not {self.slo_s!r}.")
        if self.slo_s > MAX_SLO_S:
            raise ProblemError(
                f"an SLO of {self.slo_s:,.6g} s is more than a day ({MAX_SLO_S:,.0f} s): that is a batch job's "
                "deadline, not a latency objective for online serving."
            )
        if not (_number(self.percentile) and 0 < self.percentile < 100):
            raise ProblemError(f"the percentile must lie strictly between 0 and 100, not {self.percentile!r}.")
        if not _number(self.request_size) or int(self.request_size) != self.request_size or self.request_size < 1:
            raise ProblemError(f"the request size must be a whole number of images >= 1, not {self.request_size!r}.")
        object.__setattr__(self, "request_size", int(self.request_size))
        rate = self.rate_per_s
        if self.arrivals_s is not None:
            trace = _floats(self.arrivals_s, "the arrival times")
            if len(trace) < 2 or not np.all(np.isfinite(trace)) or np.any(np.diff(trace) < 0) or trace[-1] <= trace[0]:
                raise ProblemError("the arrival trace needs at least two finite, sorted times spanning more than 0 s.")
            trace = trace - trace[0]
            own = (len(trace) - 1) / trace[-1]
            if rate is None:
                rate = own
            _check_rate(rate, "the trace's rate" if self.rate_per_s is None else "the rate")
            if rate != own:
                trace = trace * (own / rate)  # same shape, the asked mean rate
            trace.flags.writeable = False
            object.__setattr__(self, "trace", trace)
        _check_rate(rate, "the rate")
        object.__setattr__(self, "rate_per_s", float(rate))
        if self.delays_s is not None:
            delays = tuple(_floats(self.delays_s, "max_queue_delay candidates").tolist())
            if not delays or not all(math.isfinite(d) and d >= 0 for d in delays):
                raise ProblemError("max_queue_delay candidates must be finite numbers of seconds >= 0.")
            if min(delays) >= self.slo_s:
                raise ProblemError(
                    f"every max_queue_delay candidate (the smallest {min(delays):,.6g} s) is at least the SLO "
                    f"({self.slo_s:,.6g} s): a request alone would wait that long before its batch is sent; give "
                    "delays well below the SLO."
                )
            object.__setattr__(self, "delays_s", delays)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise ProblemError(f"the seed must be a whole number, not {self.seed!r}.")
        if not (_number(self.margin) and 0 <= self.margin < MAX_MARGIN):
            raise ProblemError(
                f"the margin must be a fraction >= 0 and below {MAX_MARGIN:g} (e.g. 0.1: every batch "
                f"10% slower), not {self.margin!r}."
            )
        object.__setattr__(self, "margin", float(self.margin))
        if self.objective == "cost":
            unpriced = [t.name for t in types if t.cost_per_hour is None and t.count != 0]
            if unpriced:
                raise ProblemError(f"the cost objective needs a price per GPU-hour for {', '.join(unpriced)}.")

    @property
    def target(self) -> float:
        """The share of requests that may take longer than the SLO."""
        return 1.0 - self.percentile / 100.0

    def slowed(self) -> OnlineProblem:
        """The problem the plan must hold: every batch's server time x (1 + margin), the round trip as it
        is, and no margin left to apply; the problem itself when the margin is 0."""
        if not self.margin:
            return self
        f = 1.0 + self.margin
        types = [
            replace(t, options=[replace(o, p50_s=o.p50_s * f, p99_s=o.p99_s * f) for o in t.options])
            for t in self.gpu_types
        ]
        slowed = replace(self, gpu_types=types, margin=0.0)
        object.__setattr__(slowed, "trace", self.trace)  # the very arrivals, not rescaled again
        return slowed


def _check_rate(rate, what: str) -> None:
    if rate is None or not (_number(rate) and rate > 0):
        raise ProblemError(f"{what} must be a finite number of requests/s > 0, not {rate!r}.")
    if rate < MIN_RATE_PER_S:
        raise ProblemError(
            f"{what}, {rate:.3g} requests/s (one request in {1 / rate / 3.15576e7:,.3g} years), is below the "
            f"{MIN_RATE_PER_S:g}/s the model plans for; at any rate above it the answer is one GPU per type "
            "that answers a request alone within the SLO."
        )
    if rate > MAX_RATE_PER_S:
        raise ProblemError(
            f"{what}, {rate:.3g} requests/s, is above the {MAX_RATE_PER_S:.0e}/s the model plans for (10^12 GPUs "
            "at 1,000 requests/s each)."
        )


def _number(value) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, (int, float, np.integer, np.floating))
        and math.isfinite(value)
    )


def _floats(values, what: str) -> np.ndarray:
    """Numbers as a flat float array, or ProblemError (text, None, nested objects)."""
    try:
        return np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ProblemError(f"{what} must be numbers of seconds, not {str(values)[:40]}.") from None
