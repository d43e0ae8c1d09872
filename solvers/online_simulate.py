"""A discrete-event simulation of Triton's dynamic batcher on one GPU, and of a pool behind a load balancer.

It checks the analytic model (batcher.py) and gives the plan its predicted percentiles. The rule is
Triton's: when the GPU is free, a batch leaves as soon as `max_batch` requests wait or the oldest has
waited `delay` seconds, and takes every waiting request up to `max_batch`. Service times are drawn
from the lognormal the profile gives (median, spread) for the batch's size. Deterministic: the same
seed gives the same answer.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

import numpy as np

WARMUP_SHARE = 0.1  # requests of an empty start that are left out of the statistics


@dataclass(frozen=True)
class Simulated:
    """What a simulation measured: per-request latencies (seconds, warm-up dropped) and per-batch sizes."""

    latency_s: np.ndarray
    batch_sizes: np.ndarray  # requests per batch, every batch
    busy_s: float  # GPU-seconds busy
    span_s: float  # first arrival to last completion

    def quantile(self, percentile: float) -> float:
        return float(np.percentile(self.latency_s, percentile)) if len(self.latency_s) else math.nan


def simulate_gpu(
    arrivals_s, max_batch: int, delay_s: float, median, sigma, seed: int = 0, warmup_share: float = WARMUP_SHARE
) -> Simulated:
    """Serve sorted arrival times (seconds) on one GPU. median[m], sigma[m]: service of m requests."""
    t = np.asarray(arrivals_s, dtype=float)
    n = len(t)
    if n == 0:
        return Simulated(np.zeros(0), np.zeros(0, dtype=np.int64), 0.0, 0.0)
    times = t.tolist()
    draws = np.random.default_rng(seed).standard_normal(n)
    median = np.asarray(median, dtype=float)
    sigma = np.asarray(sigma, dtype=float)
    finish = np.empty(n)
    starts: list[int] = []
    ends: list[float] = []
    free, i, busy = -math.inf, 0, 0.0
    right, exp = bisect.bisect_right, math.exp
    med, sig, z = median.tolist(), sigma.tolist(), draws.tolist()
    while i < n:
        last = i + max_batch - 1
        full_at = times[last] if last < n else math.inf
        send = min(times[i] + delay_s, full_at)
        if free > send:
            send = free
        j = right(times, send, i, min(n, i + max_batch))
        m = j - i
        service = med[m] * exp(sig[m] * z[len(starts)])
        free = send + service
        busy += service
        starts.append(i)
        ends.append(free)
        i = j
    sizes = np.diff(np.append(starts, n))
    finish = np.repeat(np.asarray(ends), sizes)
    keep = int(n * warmup_share)
    return Simulated(finish[keep:] - t[keep:], sizes, busy, float(finish.max() - t[0]))


def poisson_arrivals(rate: float, count: int, seed: int = 0) -> np.ndarray:
    """`count` arrival times of a Poisson process at `rate` per second."""
    return np.cumsum(np.random.default_rng(seed).exponential(1.0 / rate, count))


def split_randomly(arrivals_s, weights, seed: int = 0) -> list[np.ndarray]:
    """A load balancer that sends each request to GPU g with probability weights[g] / sum(weights)."""
    t = np.asarray(arrivals_s, dtype=float)
    w = np.asarray(weights, dtype=float)
    choice = np.random.default_rng(seed).choice(len(w), size=len(t), p=w / w.sum())
    order = np.argsort(choice, kind="stable")
    cuts = np.searchsorted(choice[order], np.arange(1, len(w)))
    return [t[part] for part in np.split(order, cuts)]
