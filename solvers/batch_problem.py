"""The planning problem as plain numbers (seconds, images, GPU counts), validated when built.

    GpuType        a kind of GPU: how many there are, its price, and per input-size class its Candidates
    Candidates     the batch sizes one GPU type can run for one input size, with latency and warm-up
    Problem        the GPU types, the images per input-size class, the deadline, the mode and objective

Times follow [serving-models] (docs/design.md): a GPU's first batch takes `warmup_s` (it replaces that batch's
latency), each
further batch `latency_s`, and the model is loaded once before the first batch (`load_s`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from solvers.errors import ProblemError

MODES = ("soft", "relaxed")
OBJECTIVES = ("gpus", "cost")
# The largest image count, GPU count or batch size a problem may hold (a trillion): counts stay exact
# in float64 and int64 with room to spare, and HiGHS, which takes a coefficient of 1e15 for infinite,
# solves models whose coefficients reach it without numerical trouble.
MAX_COUNT = 10**12


@dataclass(frozen=True, eq=False)
class Candidates:
    """The candidate batch sizes of one GPU type for one input-size class.

    Batch sizes above `max_batch` (the largest that fits in memory) are dropped when built. `labels`
    names each candidate (e.g. "torch fp16"), so one type may offer several backends or precisions.
    """

    input_size: int
    batch_size: Sequence[int] | np.ndarray
    latency_s: Sequence[float] | np.ndarray
    warmup_s: Sequence[float] | np.ndarray
    max_batch: int | None = None
    labels: Sequence[str] | None = None

    def __post_init__(self) -> None:
        where = f"candidates for input size {self.input_size}"
        _check_whole(self.input_size, f"{where}: input_size", minimum=1)
        b = np.asarray(self.batch_size, dtype=float).ravel()
        lat = np.asarray(self.latency_s, dtype=float).ravel()
        warm = np.asarray(self.warmup_s, dtype=float).ravel()
        labels = tuple("" for _ in b) if self.labels is None else tuple(str(x) for x in self.labels)
        if not (len(b) == len(lat) == len(warm) == len(labels)):
            raise ProblemError(f"{where}: batch_size, latency_s, warmup_s and labels must have the same length.")
        if np.any(~np.isfinite(b) | (b < 1) | (b != np.round(b)) | (b > MAX_COUNT)):
            raise ProblemError(f"{where}: every batch size must be a whole number from 1 to {MAX_COUNT:,}.")
        if np.any(~np.isfinite(lat) | (lat <= 0)):
            raise ProblemError(f"{where}: every latency must be a finite number of seconds > 0.")
        if np.any(~np.isfinite(warm) | (warm < 0)):
            raise ProblemError(f"{where}: every warm-up must be a finite number of seconds >= 0.")
        if self.max_batch is not None:
            _check_whole(self.max_batch, f"{where}: max_batch", minimum=0, maximum=MAX_COUNT)
            keep = b <= self.max_batch
            b, lat, warm = b[keep], lat[keep], warm[keep]
            labels = tuple(x for x, k in zip(labels, keep) if k)
        for name, value in (("batch_size", b.astype(np.int64)), ("latency_s", lat), ("warmup_s", warm)):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "input_size", int(self.input_size))

    def __len__(self) -> int:
        return len(self.batch_size)


@dataclass(frozen=True, eq=False)
class GpuType:
    """One kind of GPU in the pool. `count` None means as many as needed (the answer says how many).

    `load_s` and `max_batches` override the problem's defaults for this type when given.
    `max_batches` is the most batches one GPU runs, first included: M_i + 1 in [serving-models].
    """

    name: str
    count: int | None
    candidates: Sequence[Candidates]
    cost_per_hour: float | None = None
    load_s: float | None = None
    max_batches: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ProblemError("every GPU type needs a non-empty name.")
        where = f"GPU type {self.name!r}"
        if self.count is not None:
            _check_whole(self.count, f"{where}: count", minimum=0, maximum=MAX_COUNT)
            object.__setattr__(self, "count", int(self.count))
        candidates = tuple(self.candidates)
        if not all(isinstance(c, Candidates) for c in candidates):
            raise ProblemError(f"{where}: candidates must be Candidates objects.")
        sizes = [c.input_size for c in candidates]
        if len(set(sizes)) != len(sizes):
            raise ProblemError(f"{where}: each input size may have only one Candidates entry; merge them.")
        object.__setattr__(self, "candidates", candidates)
        _check_optional_number(self.cost_per_hour, f"{where}: cost_per_hour")
        _check_optional_number(self.load_s, f"{where}: load_s")
        if self.max_batches is not None:
            _check_whole(self.max_batches, f"{where}: max_batches", minimum=1, maximum=MAX_COUNT)

    def for_size(self, input_size: int) -> Candidates | None:
        return next((c for c in self.candidates if c.input_size == input_size), None)


@dataclass(frozen=True, eq=False)
class Problem:
    """What to plan. `images` maps input size to image count; None (relaxed mode only) means 'as many as possible'.

    soft: every image by the deadline, with the fewest GPUs (objective 'gpus') or the lowest cost ('cost').
    relaxed: as many images as possible by the deadline with the GPUs given; then the fewest GPUs
    (or the lowest cost) that still do that many.
    The plan must finish by deadline_s * (1 - margin). mip_rel_gap None: 0 (proven optimal) for the
    fewest GPUs; HiGHS's default 1e-4 for cost and for relaxed mode's images, knapsack-like objectives
    where proving 0 can take minutes on thousands of GPUs (the gap proved is reported).
    """

    gpu_types: Sequence[GpuType]
    images: Mapping[int, int | None]
    deadline_s: float
    mode: str = "soft"
    objective: str = "gpus"
    margin: float = 0.0
    load_s: float = 0.0
    max_batches: int | None = None
    mip_rel_gap: float | None = None
    time_limit_s: float = 10.0
    sizes: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        types = tuple(self.gpu_types)
        if not types or not all(isinstance(t, GpuType) for t in types):
            raise ProblemError("give at least one GpuType.")
        names = [t.name for t in types]
        if len(set(names)) != len(names):
            raise ProblemError(f"GPU type names must be unique; got {', '.join(names)}.")
        object.__setattr__(self, "gpu_types", types)

        if self.mode not in MODES:
            raise ProblemError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}.")
        if self.objective not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {', '.join(OBJECTIVES)}, not {self.objective!r}.")
        if not isinstance(self.images, Mapping) or not self.images:
            raise ProblemError("images must map each input size to an image count, e.g. {224: 100000}.")
        images: dict[int, int | None] = {}
        for size, count in self.images.items():
            _check_whole(size, "an input size in images", minimum=1)
            if count is None:
                if self.mode != "relaxed":
                    raise ProblemError(f"input size {size}: an image count is needed in soft mode.")
            else:
                _check_whole(count, f"image count for input size {size}", minimum=0, maximum=MAX_COUNT)
                count = int(count)
            images[int(size)] = count
        if sum(c for c in images.values() if c) > MAX_COUNT:
            raise ProblemError(f"the image counts add up to more than {MAX_COUNT:,}; plan the work in parts.")
        object.__setattr__(self, "images", images)
        object.__setattr__(self, "sizes", tuple(sorted(images)))

        if not (isinstance(self.deadline_s, (int, float)) and math.isfinite(self.deadline_s) and self.deadline_s > 0):
            raise ProblemError(f"the deadline must be a finite number of seconds > 0, not {self.deadline_s!r}.")
        if not (isinstance(self.margin, (int, float)) and 0 <= self.margin < 1):
            raise ProblemError(f"the margin must be a fraction in [0, 1), not {self.margin!r}.")
        _check_optional_number(self.load_s, "load_s")
        if self.max_batches is not None:
            _check_whole(self.max_batches, "max_batches", minimum=1, maximum=MAX_COUNT)
        if self.mip_rel_gap is not None:
            _check_optional_number(self.mip_rel_gap, "mip_rel_gap")
        if not (isinstance(self.time_limit_s, (int, float)) and self.time_limit_s > 0):
            raise ProblemError("time_limit_s must be a number of seconds > 0.")

        if self.objective == "cost":
            unpriced = [t.name for t in types if t.cost_per_hour is None and t.count != 0]
            if unpriced:
                raise ProblemError(f"the cost objective needs a price per GPU-hour for {', '.join(unpriced)}.")
        if any(c is None for c in images.values()):
            unlimited = [t.name for t in types if t.count is None]
            if unlimited:
                raise ProblemError(
                    "with no image count, relaxed mode needs a GPU count for every type "
                    f"({', '.join(unlimited)} {'has' if len(unlimited) == 1 else 'have'} none)."
                )

    @property
    def usable_s(self) -> float:
        """The time the plan may take: the deadline less the safety margin."""
        return self.deadline_s * (1.0 - self.margin)

    def load_of(self, gpu: GpuType) -> float:
        return self.load_s if gpu.load_s is None else gpu.load_s

    def max_batches_of(self, gpu: GpuType) -> int | None:
        return self.max_batches if gpu.max_batches is None else gpu.max_batches

    @property
    def rel_gap(self) -> float:
        if self.mip_rel_gap is not None:
            return self.mip_rel_gap
        return 1e-4 if self.objective == "cost" or self.mode == "relaxed" else 0.0


def _check_whole(value, what: str, minimum: int, maximum: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, float, np.floating)):
        raise ProblemError(f"{what} must be a whole number >= {minimum}, not {value!r}.")
    if not math.isfinite(value) or value != int(value) or value < minimum:
        raise ProblemError(f"{what} must be a whole number >= {minimum}, not {value!r}.")
    if maximum is not None and value > maximum:
        raise ProblemError(f"{what} must be at most {maximum:,}, not {value:,}.")


def _check_optional_number(value, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ProblemError(f"{what} must be a number >= 0, not {value!r}.")
    if not math.isfinite(value) or value < 0:
        raise ProblemError(f"{what} must be a finite number >= 0, not {value!r}.")
