"""How many images one GPU finishes by a time limit: numpy over every candidate batch size at once.

For a fixed (GPU type, input-size class, batch size b) the best number of further batches t is the
largest that fits, so one GPU's best contribution is max_b (t_b + 1) * b (docs/design.md, section 5). That
column-wise maximum is all the optimization models need; no solver ever sees the candidates.
"""

from __future__ import annotations

import math

import numpy as np

from solvers.batch_problem import MAX_COUNT, Problem

# Floor at the deadline: (1.7 - 1.0) / 0.1 is 6.999... in floating point. A finish time over the limit
# by at most this much (relative; absolute in seconds below 1 s) counts as on time, here and in every re-check.
TOLERANCE = 1e-9


def fits(finish, limit: float):
    """Whether `finish` (seconds, scalar or array) is within `limit`, up to the floating-point tolerance."""
    return np.asarray(finish) <= limit + TOLERANCE * max(1.0, abs(limit))


class Columns:
    """Every candidate of every (GPU type k, input-size class s) pair, in flat arrays grouped by pair."""

    def __init__(self, problem: Problem) -> None:
        self.n_types, self.n_sizes = len(problem.gpu_types), len(problem.sizes)
        parts: list[tuple] = []
        self.start = np.zeros(self.n_types * self.n_sizes, dtype=np.int64)
        self.stop = np.zeros(self.n_types * self.n_sizes, dtype=np.int64)
        self.labels: list[str] = []
        position = 0
        for k, gpu in enumerate(problem.gpu_types):
            load = problem.load_of(gpu)
            limit = problem.max_batches_of(gpu)
            for s, size in enumerate(problem.sizes):
                pair = k * self.n_sizes + s
                self.start[pair] = position
                c = gpu.for_size(size)
                if c is not None and len(c):
                    n = len(c)
                    parts.append(
                        (
                            c.batch_size,
                            c.latency_s,
                            c.warmup_s,
                            np.full(n, load),
                            np.full(n, math.inf if limit is None else float(limit)),
                        )
                    )
                    self.labels.extend(c.labels)
                    position += n
                self.stop[pair] = position
        columns = [np.concatenate(p) for p in zip(*parts)] if parts else [np.zeros(0)] * 5
        self.batch = columns[0].astype(np.int64)
        self.latency, self.warmup, self.load, self.max_batches = (a.astype(float) for a in columns[1:])
        # No GPU need do more than MAX_COUNT images (no class asks for more): capping its batches there keeps
        # images = batches x b exact in int64 and float64, however long the deadline and short the latency.
        self.max_batches = np.minimum(self.max_batches, np.floor(MAX_COUNT / np.maximum(self.batch, 1)) + 1)
        self.first = self.load + self.warmup  # when the first batch is done

    def pair(self, k: int, s: int) -> slice:
        """The candidates of GPU type k for input-size class s."""
        i = k * self.n_sizes + s
        return slice(int(self.start[i]), int(self.stop[i]))

    def batches_by(self, limit: float, where: slice = slice(None)) -> np.ndarray:
        """Per candidate: the most batches one GPU finishes by `limit` (0 where not even the first)."""
        first, latency = self.first[where], self.latency[where]
        with np.errstate(over="ignore"):  # a tiny latency and a long limit: inf batches, clipped below
            further = np.floor(np.clip((limit - first) / latency + TOLERANCE, -2.0, self.max_batches[where]))
        further = np.where(fits(first + further * latency, limit), further, further - 1)
        return np.clip(np.minimum(further + 1, self.max_batches[where]), 0, None).astype(np.int64)

    def pair_capacity(self, k: int, s: int, limit: float) -> int:
        """The most images one GPU of type k finishes for class s by `limit`."""
        where = self.pair(k, s)
        if where.stop == where.start:
            return 0
        return int(np.max(self.batches_by(limit, where) * self.batch[where]))

    def capacity(self, limit: float) -> np.ndarray:
        """[type, size]: the most images one GPU of each type finishes for each size by `limit`."""
        images = self.batches_by(limit) * self.batch
        cap = np.zeros(self.n_types * self.n_sizes, dtype=np.int64)
        nonempty = self.stop > self.start
        if nonempty.any():
            cap[nonempty] = np.maximum.reduceat(images, self.start[nonempty])
        return cap.reshape(self.n_types, self.n_sizes)

    def first_finish(self) -> np.ndarray:
        """[type, size]: the earliest a GPU can finish its first batch (load + warm-up); inf where no candidate."""
        out = np.full(self.n_types * self.n_sizes, math.inf)
        nonempty = self.stop > self.start
        if nonempty.any():
            out[nonempty] = np.minimum.reduceat(self.first, self.start[nonempty])
        return out.reshape(self.n_types, self.n_sizes)

    def saturation_time(self) -> float:
        """A time after which no capacity grows any more (every GPU at its batch limit), or inf."""
        if not len(self.batch) or np.isinf(self.max_batches).any():
            return math.inf
        return float(np.max(self.first + (self.max_batches - 1) * self.latency))

    def best_column(self, k: int, s: int, images: int, limit: float) -> int | None:
        """The candidate of (k, s) that finishes `images` images earliest, if any does by `limit`.

        The last batch may hold fewer images; it is timed as a full batch (padded), which is exact for
        static-shape engines and an upper bound otherwise. Ties go to the larger batch (fewer calls).
        """
        where = self.pair(k, s)
        if where.stop == where.start:
            return None
        b = self.batch[where]
        needed = -(-images // b)
        ok = needed <= self.batches_by(limit, where)
        if not ok.any():
            return None
        finish = np.where(ok, self.finish_at(np.arange(where.start, where.stop), needed), math.inf)
        return where.start + int(np.lexsort((-b, finish))[0])

    def finish_at(self, column, batches):
        """Finish time of `batches` batches on `column`: load + warm-up (first batch) + further latencies."""
        return self.first[column] + (np.asarray(batches) - 1) * self.latency[column]


def needs(problem: Problem) -> np.ndarray:
    """Images per input-size class; inf for 'as many as possible'."""
    return np.array([math.inf if problem.images[s] is None else problem.images[s] for s in problem.sizes], float)


def availability(problem: Problem) -> np.ndarray:
    """GPUs per type; inf for 'as many as needed'."""
    return np.array([math.inf if t.count is None else t.count for t in problem.gpu_types], float)


def clip(cap: np.ndarray, need: np.ndarray) -> np.ndarray:
    """A GPU never needs to do more than its class's images: keeps coefficients small, changes nothing."""
    out = np.array(cap, dtype=np.int64)
    for s, n in enumerate(need):
        if not math.isinf(n):
            out[:, s] = np.minimum(out[:, s], int(n))
    return out
