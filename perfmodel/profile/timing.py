"""The steady-state timing loop and its stability rule (docs/design.md, section 3: how to measure).

Each call is timed on its own with the host clock; the callable must block until its work is done
(on CUDA it synchronizes), so asynchronous launches are never timed. Sampling stops when the median
is known well enough: the distribution-free 95% confidence interval of the median is narrower than
`rel_ci` of the median, or a sample or time cap is reached. A point is timed to its noise: a long,
steady call is known from the floor of 6 samples (the fewest with such an interval), while short calls
whose median is still loose at `max_time_s` may go on to `short_calls_time_s` (launch-bound batches on a
GPU: on the H100 of 2026-11-27, batch 1-64 were known to +-2-13% after 0.5 s; batch >= 1024 had sd 0.1%).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StabilityRule:
    """When to stop sampling. Defaults suit calls of a millisecond to a second."""

    rel_ci: float = 0.01  # stop when the 95% CI half-width of the median is under 1% of it ...
    min_samples: int = 20  # ... and at least this many samples were taken,
    max_samples: int = 2000  # or stop at this many samples,
    max_time_s: float = 10.0  # or after this long (but never with fewer than `floor_samples`),
    floor_samples: int = 6  # the fewest whose distribution-free 95% interval of the median exists
    warmup_calls: int = 2  # untimed calls before sampling (after the first, measured call)
    # Short calls (`min_samples` fit in max_time_s) still looser than rel_ci then: this long (None: max_time_s).
    short_calls_time_s: float | None = None

    def __post_init__(self):
        if not (0 < self.rel_ci < 1):
            raise ValueError("rel_ci must be between 0 and 1")
        if not (1 <= self.floor_samples <= self.min_samples <= self.max_samples):
            raise ValueError("need 1 <= floor_samples <= min_samples <= max_samples")
        if self.max_time_s <= 0 or self.warmup_calls < 0:
            raise ValueError("max_time_s must be > 0 and warmup_calls >= 0")
        if self.short_calls_time_s is not None and not self.short_calls_time_s >= self.max_time_s:
            raise ValueError("short_calls_time_s must be at least max_time_s")

    @property
    def longest_s(self) -> float:
        """The most sampling time one point may take."""
        return max(self.max_time_s, self.short_calls_time_s or 0.0)


@dataclass(frozen=True)
class LatencySummary:
    """The distribution of one point's call times, in milliseconds."""

    median_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    samples: int
    ci_rel: float  # relative half-width of the median's 95% confidence interval
    stable: bool  # whether ci_rel <= the rule's rel_ci

    @classmethod
    def from_samples(cls, samples_ms: np.ndarray, rel_ci: float) -> LatencySummary:
        x = np.sort(np.asarray(samples_ms, dtype=float))
        median = float(np.median(x))
        ci = median_ci_rel(x)
        return cls(
            median_ms=median,
            p90_ms=float(np.percentile(x, 90)),
            p99_ms=float(np.percentile(x, 99)),
            mean_ms=float(x.mean()),
            std_ms=float(x.std(ddof=1)) if len(x) > 1 else 0.0,
            min_ms=float(x[0]),
            samples=len(x),
            ci_rel=ci,
            stable=ci <= rel_ci,
        )

    def columns(self) -> dict[str, object]:
        """The profile columns this summary fills."""
        return {
            "latency_ms": self.median_ms,
            "latency_p50_ms": self.median_ms,
            "latency_p90_ms": self.p90_ms,
            "latency_p99_ms": self.p99_ms,
            "latency_mean_ms": self.mean_ms,
            "latency_std_ms": self.std_ms,
            "latency_min_ms": self.min_ms,
            "latency_ci_rel": self.ci_rel if math.isfinite(self.ci_rel) else float("nan"),  # too few samples: unknown
            "samples": self.samples,
            "stable": self.stable,
        }


def median_ci_rel(sorted_samples: np.ndarray) -> float:
    """Relative half-width of the distribution-free 95% confidence interval of the median.

    The interval runs between the order statistics of `median_ci_ranks`; infinite when there are too
    few samples to bound the median (fewer than 6).
    """
    x = sorted_samples
    ranks = median_ci_ranks(len(x))
    if ranks is None:
        return math.inf
    median = float(np.median(x))
    return (float(x[ranks[1]]) - float(x[ranks[0]])) / 2 / median if median > 0 else math.inf


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int) -> tuple[int, int] | None:
    """The 0-based ranks (lo, hi) of the narrowest interval [x_lo, x_hi] of n sorted samples that holds
    their distribution's median with probability >= 95%, exactly: [x_(k), x_(n+1-k)] (1-based) misses it
    with probability 2 P(B <= k - 1), B ~ Binomial(n, 1/2). None below 6 samples (even the widest,
    [min, max], holds it with 1 - 2^(1-n) < 95% only)."""
    total, tail, term, k = 2**n, 0, 1, 0  # term = C(n, k); tail = sum of C(n, i) for i < k
    while 40 * (tail + term) <= total:  # the next k still holds it with >= 95%: 2 (tail + term) / 2^n <= 0.05
        tail += term
        term = term * (n - k) // (k + 1)
        k += 1
    return None if k == 0 else (k - 1, n - k)


def measure_latency(
    call: Callable[[int], object],
    rule: StabilityRule = StabilityRule(),
    clock: Callable[[], int] = time.perf_counter_ns,
    on_steady: Callable[[], object] | None = None,
) -> LatencySummary:
    """Time `call(i)` (i counts up, so the callable can rotate inputs) until the rule says stop.

    `on_steady` runs once after the untimed warm-up calls, before sampling (e.g. a memory peak reset).
    """
    for i in range(rule.warmup_calls):
        call(i)
    if on_steady is not None:
        on_steady()
    samples: list[float] = []
    start = clock()
    next_check = rule.min_samples
    cap_s = rule.max_time_s
    i = rule.warmup_calls
    while True:
        t0 = clock()
        call(i)
        t1 = clock()
        samples.append((t1 - t0) / 1e6)
        i += 1
        n = len(samples)
        elapsed_s = (t1 - start) / 1e9
        if n >= rule.max_samples:
            break
        if elapsed_s >= cap_s and n >= rule.floor_samples:
            if n < rule.min_samples or cap_s >= rule.longest_s:
                break
            cap_s = rule.longest_s  # short calls whose median is still loose (else they had stopped): more time
        if n >= next_check:
            # Checking costs a sort; do it at ~10% growth steps, so the loop's overhead stays flat.
            next_check = n + max(1, n // 10)
            if median_ci_rel(np.sort(samples)) <= rule.rel_ci:
                break
    return LatencySummary.from_samples(np.asarray(samples), rule.rel_ci)


# The figures of a steady state that `--processes K` pools over its K processes.
POOLED = (
    "latency_ms",
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p99_ms",
    "latency_mean_ms",
    "latency_std_ms",
    "latency_min_ms",
    "latency_ci_rel",
)


def pool_processes(replies: list[dict], batch_size: int) -> dict:
    """One point's steady state measured in several processes (`--processes K`), as one row's figures.

    `replies` are the processes' `steady` answers, the measuring worker's first; the warm-up and memory
    figures stay the first one's. Each latency figure is the mean of the processes' figures: a process's
    speed is one draw of a level (on a CPU, sd 8.4% of the median), and a mean of K draws averages the
    processes' own part of it (a median of K >= 3 spreads more: 0.67 of one for K = 3), though not the
    machine's state of the minutes they share (experiments/011, the plan does not count on it).
    Each process's own median already shrugs off short busy spells. p99 >= median holds for the pooled
    figures too, since each process's does. `samples` adds up, `stable` needs every process
    stable, `process_rel_sd` is the sample sd of the log of the processes' medians. One reply: unchanged.
    """
    out = dict(replies[0])
    if len(replies) < 2:
        return out
    for column in POOLED:
        values = np.array([np.nan if r.get(column) is None else float(r[column]) for r in replies])
        values = values[np.isfinite(values)]  # a process with too few samples has no interval
        out[column] = float(np.mean(values)) if len(values) else float("nan")
    medians = np.array([float(r["latency_ms"]) for r in replies])
    out["samples"] = int(sum(int(r["samples"]) for r in replies))
    out["stable"] = all(bool(r["stable"]) for r in replies)
    out["throughput_ips"] = batch_size / out["latency_ms"] * 1e3
    out["processes"] = len(replies)
    out["process_rel_sd"] = float(np.std(np.log(medians), ddof=1))
    return out
