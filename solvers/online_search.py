"""The search for one GPU type: the option, max_batch and delay that hold the highest rate within the SLO.

Per option, every candidate max_batch with delay 0 (or the smallest delay allowed) in order of its
peak rate (full batches back to back; no setting holds more), each ruled out by one look at the best
rate found so far or searched by regula falsi on the rate; then the other delays at the best max_batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solvers.online_batcher import Batcher, bracket_root, normal_cdf
from solvers.online_problem import OnlineGpuType, OnlineProblem, ServiceTimes

RATE_TOLERANCE = 1e-3  # per-GPU capacities are found to this relative precision
MAX_REQUESTS = 1024  # max_batch candidates above this many requests are left out (the model's cost grows with it)
DELAY_SHARES = (0.25, 0.5, 1.0)  # automatic max_queue_delay candidates, times one request's service


@dataclass(frozen=True)
class Setting:
    """One GPU type's best way to serve: option, max_batch (images), delay, and what one GPU then holds."""

    option: int  # index into the type's options
    max_batch: int  # images, Triton's max_batch_size
    requests: int  # requests per batch at most: max_batch // request_size
    delay_s: float
    capacity_per_s: float  # the highest per-GPU rate (requests/s) that meets the SLO
    peak_per_s: float  # requests/s with every batch full: where the queue grows without end


def best_setting(gpu: OnlineGpuType, problem: OnlineProblem, slo_s: float | None = None) -> Setting | None:
    """The option, max_batch and delay with the highest per-GPU rate within the SLO; None if none meets it."""
    slo = problem.slo_s if slo_s is None else slo_s
    best: Setting | None = None
    options = sorted(range(len(gpu.options)), key=lambda i: -peak_rate(gpu.options[i], problem.request_size))
    for i in options:
        found = _best_for_option(gpu.options[i], i, problem, slo, best)
        if found is not None and (best is None or found.capacity_per_s > best.capacity_per_s):
            best = found
    return best


def _best_for_option(option: ServiceTimes, index: int, problem: OnlineProblem, slo: float, best: Setting | None):
    k, target = problem.request_size, problem.target
    sizes = candidates(option, k)
    delays = sorted(problem.delays_s) if problem.delays_s is not None else None
    first = 0.0 if delays is None else delays[0]  # the delay the max_batch candidates are compared at
    if not sizes or fastest(option, problem) + first >= slo:
        return None
    median, sigma = option.per_request(k, max(sizes) // k)
    slo -= option.overhead_s  # what is left of the SLO for the server's queue and batch
    floor = best.capacity_per_s if best is not None else 0.0
    found: Setting | None = None
    configs = sorted(((b, b // k) for b in sizes), key=lambda c: -c[1] / _mean(median, sigma, c[1]))
    for b, m in configs:  # highest peak first: a setting cannot hold more than its peak
        peak = m / _mean(median, sigma, m)
        if peak <= floor * (1 + RATE_TOLERANCE):
            break
        rate = _capacity(m, first, median, sigma, slo, target, floor, peak)
        if rate is not None and rate > floor:
            floor, found = rate, Setting(index, b, m, first, rate, peak)
    if found is None:
        return None
    others = [share * median[1] for share in DELAY_SHARES] if delays is None else delays[1:]
    for delay in others:  # then the other delays at that max_batch
        rate = _capacity(found.requests, delay, median, sigma, slo, target, found.capacity_per_s, found.peak_per_s)
        if rate is not None and rate > found.capacity_per_s * (1 + RATE_TOLERANCE):
            found = Setting(index, found.max_batch, found.requests, delay, rate, found.peak_per_s)
    return found


def _capacity(
    m: int, delay: float, median, sigma, slo: float, target: float, floor: float, peak: float
) -> float | None:
    """The highest rate in (floor, peak) at which P(latency > slo) <= target; None if not above floor.

    The log of the tail share against the rate is smooth and rising: regula falsi (bracket_root) finds
    the crossing in a handful of model evaluations; the answer returned always meets the SLO.
    """

    def gap(rate: float) -> float:
        return math.log(max(Batcher(rate, m, delay, median, sigma).tail(slo), 1e-300)) - math.log(target)

    hi, g_hi = peak, -math.log(target)  # at the peak the queue grows without end: every request is late
    if floor > 0:  # only a rate above the floor is worth finding: one look decides most settings
        lo = floor * (1 + 2 * RATE_TOLERANCE)
        if lo >= hi:
            return None
        g_lo = gap(lo)
        if g_lo > 0:
            return None
    else:  # most settings hold between a quarter of their peak and all of it: look there first
        lo = peak / 2
        g_lo = gap(lo)
        while g_lo > 0:
            hi, g_hi, lo = lo, g_lo, lo / 4
            if lo < peak * 1e-9:
                return None
            g_lo = gap(lo)
    return bracket_root(gap, lo, g_lo, hi, g_hi, RATE_TOLERANCE)[0]


def fastest(option: ServiceTimes, problem: OnlineProblem) -> float:
    """The latency at the percentile of a request alone on an idle GPU: no SLO below it can be met."""
    median, sigma = option.per_request(problem.request_size, 1)
    return float(median[1] * math.exp(sigma[1] * normal_quantile(problem.percentile / 100.0))) + option.overhead_s


def normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(normal_cdf(mid)) < p else (lo, mid)
    return (lo + hi) / 2


def _mean(median, sigma, m: int) -> float:
    return float(median[m] * math.exp(sigma[m] ** 2 / 2))


def candidates(option: ServiceTimes, request_size: int) -> list[int]:
    """The max_batch settings (images) searched: at least one request, at most MAX_REQUESTS."""
    return [b for b in option.max_batches if request_size <= b <= MAX_REQUESTS * request_size]


def peak_rate(option: ServiceTimes, request_size: int) -> float:
    """The most requests/s any candidate max_batch can take (every batch full): no setting holds more."""
    sizes = candidates(option, request_size)
    if not sizes:
        return 0.0
    median, sigma = option.per_request(request_size, max(sizes) // request_size)
    return max((b // request_size) / _mean(median, sigma, b // request_size) for b in sizes)
