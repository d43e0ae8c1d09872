"""The largest-batch search: double from 1 until a batch does not fit, then bisect.

Generic over `measure(batch_size) -> row`, so the sweep decides how a point is measured (or taken
from a file being resumed) and this module only decides which batch size comes next. With a
tolerance, the bisection stops once the gap between the largest batch that ran and the smallest
that did not is within that fraction of the former (10%: about three points fewer per input size
at GPU batch sizes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SearchResult:
    rows: list[dict]
    largest_ok: int | None  # the largest batch size that ran (None if even 1 did not)
    reason: str  # why the search stopped, for the user


def search_batch_sizes(
    measure: Callable[[int], dict], max_batch_size: int, max_call_ms: float | None, tolerance: float = 0.0
) -> SearchResult:
    rows: list[dict] = []

    def run(b: int) -> dict:
        row = measure(b)
        rows.append(row)
        return row

    largest_ok, failed_at = 0, None
    b = 1
    while True:
        row = run(b)
        if row["status"] != "ok":
            failed_at = b
            break
        largest_ok = b
        if max_call_ms is not None and row["latency_ms"] > max_call_ms:
            return SearchResult(
                rows, b, f"a call at batch {b} took {row['latency_ms']:.0f} ms (over `max_call_ms` {max_call_ms:g})"
            )
        if b >= max_batch_size:
            return SearchResult(rows, b, f"reached `max_batch_size` {max_batch_size}")
        b = min(2 * b, max_batch_size)

    if row["status"] == "error":
        return SearchResult(rows, largest_ok or None, f"batch {b} failed: {row.get('error') or 'error'}")
    lo, hi = largest_ok, failed_at  # lo fits (or is 0), hi does not
    while hi - lo > _gap(lo, tolerance):
        mid = (lo + hi) // 2
        row = run(mid)
        if row["status"] == "ok":
            lo = mid
        elif row["status"] == "oom":
            hi = mid
        else:
            return SearchResult(rows, lo or None, f"batch {mid} failed: {row.get('error') or 'error'}")
    if lo == 0:
        return SearchResult(rows, None, "even batch 1 does not fit in memory")
    within = f" (within `search_tolerance` {tolerance:.0%})" if hi - lo > 1 else ""
    return SearchResult(rows, lo, f"batch {hi} does not fit; {lo} is the largest that does{within}")


def _gap(lo: int, tolerance: float) -> int:
    """The widest gap the bisection may leave: 1 (exact), or `tolerance` of the largest batch that ran."""
    return max(1, math.floor(tolerance * lo))


def search_points_bound(max_batch_size: int, tolerance: float = 0.0) -> int:
    """The most points one search can measure: every doubling up to the cap, then a full bisection."""
    return _doublings(max_batch_size) + search_bisections_bound(max_batch_size, tolerance)


def search_bisections_bound(max_batch_size: int, tolerance: float = 0.0) -> int:
    """The most points the bisection can measure, after a doubling that did not fit."""
    doublings = _doublings(max_batch_size)
    lo = 2 ** (doublings - 2) if doublings > 1 else 0  # the largest power of two below the cap
    bisections = 0
    gap = lo  # after doubling, the unknown range is (lo, 2 lo)
    while gap > _gap(lo, tolerance):
        gap = math.ceil(gap / 2)
        bisections += 1
    return bisections


def _doublings(max_batch_size: int) -> int:
    return math.ceil(math.log2(max_batch_size)) + 1 if max_batch_size > 1 else 1
