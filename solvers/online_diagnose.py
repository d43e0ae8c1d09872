"""Why no GPUs of the pool meet the SLO at the rate, and what would: more GPUs, a lower rate, a longer SLO."""

from __future__ import annotations

import math

import numpy as np

from solvers.batch_problem import MAX_COUNT
from solvers.online_problem import OnlineProblem
from solvers.online_search import best_setting, fastest, peak_rate
from solvers.online_solution import OnlineDiagnosis, percent


def diagnose(
    problem: OnlineProblem, settings, capacity: np.ndarray, avail: np.ndarray, margin: float = 0.0
) -> OnlineDiagnosis:
    """`problem` is the one searched: with a margin, already slowed by it (OnlineProblem.slowed)."""
    types = problem.gpu_types
    fast = {
        t.name: min((fastest(o, problem) for o in t.options if o.largest >= problem.request_size), default=None)
        for t in types
    }
    unservable = tuple(
        t.name
        for t, s in zip(types, settings)
        if s is None and t.count != 0 and (fast[t.name] is None or fast[t.name] >= problem.slo_s)
    )
    finite = bool(np.all(np.isfinite(avail)))
    # an unlimited type has at most MAX_COUNT GPUs (online_solve._cover): a rate beyond them is refused here
    max_rate = float(np.sum(capacity * np.minimum(avail, MAX_COUNT)))
    slo = _ms(problem.slo_s)
    within = f"within {slo} at the {_pct(problem.percentile)} percentile"
    if margin:
        within += f" with the {percent(margin)} margin (every batch {percent(margin)} slower)"
    if not np.any(avail > 0):
        reason = "the pool has no GPUs"
    elif not np.any(capacity > 0):
        best = min((v for k, v in fast.items() if v is not None), default=None)
        fastest_type = min(fast, key=lambda k: fast[k] if fast[k] is not None else math.inf)
        delay = min(problem.delays_s) if problem.delays_s is not None else 0.0
        if best is None:
            reason = f"no GPU takes requests of {problem.request_size} images (above every batch size timed)"
        elif best < problem.slo_s <= best + delay:  # the delay is the cause, not the GPUs
            reason = (
                f"the smallest max_queue_delay, {_ms(delay)}, leaves too little of the SLO: with the fastest answer "
                f"({_ms(best)}, {fastest_type}) on top of it, a request alone takes more than the {slo} asked"
            )
        else:
            reason = f"no GPU answers {within} even with a request alone: the fastest is {_ms(best)} ({fastest_type})"
    else:
        limit = "" if finite else f" (with {MAX_COUNT:,} GPUs of a type, the most perfmodel plans)"
        reason = (
            f"the pool holds at most {max_rate:,.4g} requests/s {within}{limit}, below the "
            f"{problem.rate_per_s:,.4g}/s asked"
        )
    extra: dict[str, int | None] = {}
    if finite:
        for k, t in enumerate(types):
            if t.count is None:
                continue
            extra[t.name] = (
                None if capacity[k] <= 0 else max(0, math.ceil((problem.rate_per_s - max_rate) / capacity[k] - 1e-12))
            )
    return OnlineDiagnosis(
        reason=reason,
        rate_per_s=problem.rate_per_s,
        slo_s=problem.slo_s,
        percentile=problem.percentile,
        margin=margin,
        unservable=unservable,
        fastest_s=fast,
        max_rate_per_s=max_rate if finite or np.any(capacity > 0) else None,
        extra_gpus=extra,
        min_slo_s=_smallest_slo(problem, avail, fast),
    )


def _smallest_slo(problem: OnlineProblem, avail: np.ndarray, fast: dict[str, float | None]) -> float | None:
    """The smallest SLO at which the pool holds the rate (2% precision); None when no SLO does."""
    floor = min((v for v in fast.values() if v is not None), default=None)
    if floor is None or not np.any(avail > 0):
        return None
    if not np.all(np.isfinite(avail)):
        return floor * (1 + 1e-6)  # with enough GPUs each gets almost nothing: a request alone

    def holds(slo: float) -> bool:
        capacity = np.array(
            [
                0.0 if a <= 0 or (s := best_setting(t, problem, slo)) is None else s.capacity_per_s
                for t, a in zip(problem.gpu_types, avail)
            ]
        )
        return float(np.sum(capacity * avail)) >= problem.rate_per_s

    peak = sum(a * max(peak_rate(o, problem.request_size) for o in t.options) for t, a in zip(problem.gpu_types, avail))
    if peak <= problem.rate_per_s:
        return None
    lo = max(problem.slo_s, floor)  # the SLO asked fails: that is why we are here
    hi = lo * 2
    while not holds(hi):
        lo, hi = hi, hi * 2
        if hi > 1e6:
            return None
    while hi - lo > 0.02 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.4g} ms" if seconds * 1000 >= 1000 else f"{seconds * 1000:.3g} ms"


def _pct(p: float) -> str:
    text = f"{p:g}" if float(f"{p:g}") == p else repr(float(p))  # 99.9999999, never rounded to 100
    return text + (
        "st"
        if text.endswith("1") and not text.endswith("11")
        else "nd"
        if text.endswith("2") and not text.endswith("12")
        else "rd"
        if text.endswith("3") and not text.endswith("13")
        else "th"
    )
