"""A worker's fixed costs, loading the model and its first call (the warm-up), as measured samples.

A plan's worker pays both once, before its batches; on a GPU they are seconds (ResNet-50 on an H100:
loads of 6.1-8.9 s, first calls 2.0-2.4 s), most of a short deadline. A profile holds one sample of
each per *process* that measured it, never one per row:
- the load: rows that name the same `load_process` carry that process's one load_ms. Files written
  before the column existed: one sample per distinct load_ms value (the profiler wrote the measuring
  worker's one load into every row it measured; a fresh process's load is its own row's).
- the first call: each row whose warm-up was timed in a fresh process (every warmup_method but
  in-process, same-server and running-server) holds one, as its excess over the steady batch time
  (warmup_ms - latency_ms, at least 0): the planned batch's own warm-up time is the centre, the
  samples give its spread (pooled over batch and input sizes, where the excess barely moves on a GPU).

Where a source has fewer than two samples, the spread (and with none, on a GPU, the value too) is a
stated default from this project's own GPU measurements (`DEFAULT_LOADS_MS`, `DEFAULT_FIRST_CALLS_MS`).

The load `perfmodel run` counts is build and weights, in a process that has already imported torch and
the model's code and opened its device (perfmodel/loading.py, issue 37). Profiles the torch profiler wrote
before that split (`counted_import`) timed the import of torchvision, and on a GPU the CUDA context, inside
load_ms: seconds that run pays before its clock. Plans still count those loads as measured (they kept all
15 deadlines of the H200's calibration; counting the load as run does has not yet been validated against
runs, see CHANGELOG.md), and say that they count more than run takes. Their first calls keep their
meaning: the old load had opened the CUDA context (moving the model) before the first call's clock, as the
new start does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOAD_PROCESS = "load_process"  # the profile column naming the process whose load_ms (and warm-up) a row holds
NOT_FRESH = ("in-process", "same-server", "running-server")  # warm-up methods whose first call is no fresh process's

# This project's GPU measurements, one value per process: `perfmodel profile` of ResNet-50 (eager fp16,
# fresh warm-up processes at batch 1 and 256 of each input size) on an H100 80GB HBM3 (2026-11-27,
# profiles/h100-resnet50-torch-fp16.csv) and an H200 (2026-11-26, profiles/h200-resnet50-torch-fp16.csv),
# and of EfficientNet-B0 on that H200 (experiments/008_gpu_campaign/results/h200/h200-efficientnet_b0-torch-fp16.csv).
# Loads: the six (two) fresh processes' and the measuring worker's, all measured before the load split:
# the import of torchvision and the CUDA context inside (module docstring), which `perfmodel run` does
# before its clock. First calls: the fresh processes' warm-up beyond the steady batch (the same meaning
# before and after the split). tests/test_fixed_costs.py reads them again from those files.
_H100 = "this project's H100 (ResNet-50, profiles/h100-resnet50-torch-fp16.csv)"
_H200 = "this project's H200 (ResNet-50 and EfficientNet-B0, profiles/h200-resnet50-torch-fp16.csv and experiments/008)"
_ANY_GPU = "this project's GPUs (ResNet-50 on an H100 and an H200, EfficientNet-B0 on the H200)"
DEFAULT_LOADS_MS = {
    _H100: (6785.29, 6097.69, 8055.83, 8891.27, 8211.17, 7343.34, 6267.22),
    _H200: (4046.05, 5706.58, 4876.54, 5285.15, 3851.64, 4043.22, 4844.83, 4236.25, 3764.55, 4587.67),
}
# Loads as `perfmodel run` counts them (build + weights; the imports and the CUDA context before the clock),
# the only ones measured so far: ResNet-50 fp16 channels-last, eager and with CUDA graphs, on the H200
# (2026-11-28, experiments/008_gpu_campaign/results/h200/h200-resnet50-torch-channels-last-fp16.csv and
# h200-resnet50-torch-channels-last-cuda-graphs-fp16.csv: in each the two fresh warm-up processes' and the
# measuring worker's); run's own workers took 45-81 ms in the 15 calibration runs of that day. Used only
# to say how much more load than run takes a plan from a profile of the old load counts, not yet as a default.
SPLIT_LOADS_MS = (54.6579, 49.1821, 45.8914, 81.5501, 53.5532, 88.6872)
SPLIT_LOADS_FROM = "the H200's loads measured as run counts them"
DEFAULT_FIRST_CALLS_MS = {
    _H100: (2027.32, 2243.58, 2275.47, 2269.93, 2139.17, 2281.11),
    _H200: (1501.63, 1583.8, 1164.15, 1223.95, 1266.05, 1610.33, 4280.88, 4025.91),
}
_DEFAULT_FOR = {"h100": _H100, "h200": _H200}  # a GPU type measured here; any other GPU takes them all


def is_cpu(hardware: str) -> bool:
    return hardware.startswith("cpu")


@dataclass(frozen=True)
class Samples:
    """Measured values of one fixed cost, one per process, in seconds, and where they come from."""

    values_s: tuple[float, ...]
    source: str

    @property
    def count(self) -> int:
        return len(self.values_s)

    @property
    def median_s(self) -> float:
        return float(np.median(self.values_s))

    @property
    def mean_s(self) -> float:
        return float(np.mean(self.values_s))

    @property
    def sd_s(self) -> float:
        """The spread of the next process's value: the samples' sd (n - 1) widened by sqrt(1 + 1/n),
        since their mean is known from n of them only; 0 below two samples."""
        n = self.count
        return float(np.std(self.values_s, ddof=1)) * math.sqrt(1 + 1 / n) if n >= 2 else 0.0

    @property
    def rel_sd(self) -> float:
        return self.sd_s / self.mean_s if self.mean_s > 0 else 0.0

    def span(self) -> str:
        if self.count == 1:
            return f"{self.values_s[0]:.3g} s"
        return f"{min(self.values_s):.3g}-{max(self.values_s):.3g} s"


def default_samples(hardware: str, what: str) -> Samples | None:
    """The stated default for a GPU type ('load' or 'first call'): that type's measurements where this
    project has them, else every GPU's it has; None for a CPU (its profiles measure their own)."""
    if is_cpu(hardware):
        return None
    table = DEFAULT_LOADS_MS if what == "load" else DEFAULT_FIRST_CALLS_MS
    if hardware in _DEFAULT_FOR:
        return Samples(tuple(v / 1000 for v in table[_DEFAULT_FOR[hardware]]), _DEFAULT_FOR[hardware])
    return Samples(tuple(v / 1000 for values in table.values() for v in values), _ANY_GPU)


@dataclass(frozen=True)
class FixedCost:
    """One fixed cost of a hardware type as a plan counts it: the source's own samples, and the default
    that stands in where they are too few (fewer than two for the spread; none for the value)."""

    what: str  # "load" or "first call"
    own: Samples
    default: Samples | None = None
    # The first call's value per batch size comes from the warm-up times (a profile's, a predictor's
    # model) where they were measured; its samples then give only its spread.
    per_batch: bool = False
    # The loads among `own` measured before the load split, which counted the import (module docstring).
    counted_import: Samples | None = None

    def more_load_s(self) -> float | None:
        """About how much more load than run takes a plan counts for the import (more_load_s below); a
        cost without a default is a CPU's."""
        if self.counted_import is None:
            return None
        return more_load_s(self.counted_import, on_gpu=self.default is not None)

    @property
    def guessed(self) -> bool:
        """No sample of its own: the value itself is the default's (a guess where it has one)."""
        return self.own.count == 0

    @property
    def spread_guessed(self) -> bool:
        return self.own.count < 2

    def _basis(self) -> Samples | None:
        return self.default if self.guessed else self.own

    @property
    def median_s(self) -> float:
        basis = self._basis()
        return basis.median_s if basis is not None else 0.0

    @property
    def mean_s(self) -> float:
        basis = self._basis()
        return basis.mean_s if basis is not None else 0.0

    def sd_at(self, value_s: float) -> float:
        """The spread of a value of this cost: the own samples', or with fewer than two, the default's
        relative spread at this value (0 where there is no default: a CPU)."""
        if not self.spread_guessed:
            return self.own.sd_s
        return self.default.rel_sd * value_s if self.default is not None else 0.0

    def to_dict(self) -> dict:
        basis = self._basis()
        return {
            "median_s": None if self.per_batch and self.guessed else self.median_s,
            "mean_s": self.mean_s,
            "sd_s": self.sd_at(self.mean_s),
            "samples": self.own.count,
            "range_s": None if basis is None else [min(basis.values_s), max(basis.values_s)],
            "from": self.own.source if self.own.count else None,
            "described": self.describe(),
            "load_includes_import": None
            if self.counted_import is None
            else {
                "from": self.counted_import.source,
                "samples": self.counted_import.count,
                "range_s": [min(self.counted_import.values_s), max(self.counted_import.values_s)],
                "more_than_run_takes_s": self.more_load_s(),
            },
            "default": None
            if not self.spread_guessed or self.default is None
            else {
                "for": "the value and its spread" if self.guessed and not self.per_batch else "the spread",
                "from": self.default.source,
                "samples": self.default.count,
                "median_s": self.default.median_s,
                "rel_sd": self.default.rel_sd,
            },
        }

    def describe(self) -> str:
        """'7.34 s (median of 7 processes, 6.1-8.89 s, sd 1.13 s)', or what stands in for it, and what
        became of loads that counted the import."""
        return self._described() + self._import_note()

    def _import_note(self) -> str:
        if self.counted_import is None:
            return ""
        return f"; {import_counted(self.counted_import, self.more_load_s())}"

    def _described(self) -> str:
        if self.guessed and self.default is None:
            return "0 s (none measured)" if not self.per_batch else "as measured per batch size; no spread known"
        sd = self.sd_at(self.mean_s)
        if self.per_batch:  # the value per batch size comes from the warm-up times: say where its spread comes from
            if not self.spread_guessed:
                return (
                    f"as measured per batch size, with the spread of {_processes(self.own.count)}' excess over a "
                    f"steady batch ({self.own.span()}, sd {sd:.2g} s)"
                )
            if self.default is None:
                return "as measured per batch size; no spread known"
            guess = f"{self.default.rel_sd:.0%}, as on {self.default.source}"
            return f"as measured per batch size; its spread a guess ({guess})"
        value = f"{self.median_s:.3g} s" + (" beyond a steady batch" if self.what == "first call" else "")
        if self.guessed:
            return (
                f"{value}, sd {sd:.2g} s: a guess, none measured; the median of "
                f"{_processes(self.default.count)} ({self.default.span()}) on {self.default.source}"
            )
        n = self.own.count
        line = f"{value} ({'median of ' if n > 1 else ''}{_processes(n)}"
        line += f", {self.own.span()}" if n > 1 else ""
        if not self.spread_guessed:
            return line + f", sd {sd:.2g} s)"
        if self.default is None:
            return line + "; no spread known)"
        return line + f"; sd {sd:.2g} s, a guess: the spread on {self.default.source})"


def more_load_s(old: Samples, on_gpu: bool) -> float | None:
    """About how much more load than run takes loads that counted the import are: on a GPU their median less
    that of SPLIT_LOADS_MS; None on a CPU (none measured there as run counts it)."""
    return max(old.median_s - float(np.median(SPLIT_LOADS_MS)) / 1000, 0.0) if on_gpu else None


def import_counted(old: Samples, more_s: float | None) -> str:
    """What loads measured before the load split mean for a plan, and the fix, in a clause."""
    more = (
        f"about {more_s:.2g} s more load than run takes ({SPLIT_LOADS_FROM}: {min(SPLIT_LOADS_MS) / 1000:.2g}-"
        f"{max(SPLIT_LOADS_MS) / 1000:.2g} s)"
        if more_s is not None
        else "more load than run takes, by the import's share"
    )
    return (
        f"the loads of {old.source} ({_processes(old.count)}, {old.span()}) counted the import of the model's "
        f"code, which perfmodel run does before its clock: plans from it count {more}; profile again (a fresh "
        "warm-up process measures the load as run counts it)"
    )


def _processes(n: int) -> str:
    return f"{n} process{'es' if n != 1 else ''}"


# -- samples from profile rows ---------------------------------------------------------------------


def _finite(rows, column: str) -> np.ndarray:
    if column not in rows.columns:
        return np.full(len(rows), np.nan)
    return rows[column].to_numpy(dtype=float, na_value=np.nan)


def _process_keys(rows) -> list[str]:
    """Who measured each row's load: its load_process where given, else its load_ms value (see above),
    within its profile file where the frame says (`profile_file`)."""
    files = rows["profile_file"].astype(str).tolist() if "profile_file" in rows.columns else [""] * len(rows)
    named = rows[LOAD_PROCESS].tolist() if LOAD_PROCESS in rows.columns else [None] * len(rows)
    loads = _finite(rows, "load_ms")
    keys = []
    for file, name, load in zip(files, named, loads):
        text = "" if name is None or (isinstance(name, float) and math.isnan(name)) else str(name).strip()
        keys.append(f"{file}\0process\0{text}" if text and text != "<NA>" else f"{file}\0load\0{load!r}")
    return keys


# A fresh process's time until its first call returned, in parts (docs/profile.md, "Where the load goes"),
# as the profile format names them (schema.py lists them from here: this module stays free of pandas).
LOAD_PART_COLUMNS = (
    "start_python_ms",  # the interpreter and perfmodel's imports
    "start_import_ms",  # torch and the model's code (torchvision)
    "start_device_ms",  # the device's context
    "load_build_ms",  # load_ms = load_build_ms + load_weights_ms
    "load_weights_ms",
    "cold_start_ms",  # the whole: start_* + load_ms + warmup_ms + the messages between them
)
# The columns the torch profiler has written beside load_ms since the load split (issue 37): a row naming
# its load's process, or a fresh process's parts, measured the load as `perfmodel run` counts it.
SPLIT_LOAD_COLUMNS = (LOAD_PROCESS, *LOAD_PART_COLUMNS)


def counted_import(rows) -> np.ndarray:
    """Per row: whether its load_ms counted the import of the model's code (and on a GPU the CUDA context),
    as perfmodel's torch profiler measured it before the load split: a row it wrote (`perfmodel` names the
    version) with a load_ms but none of SPLIT_LOAD_COLUMNS. Rows by hand or by other tools (Triton's
    load is its server's start) are taken as the format describes load_ms, as run counts it."""
    n = len(rows)
    if "load_ms" not in rows.columns or "perfmodel" not in rows.columns:
        return np.zeros(n, dtype=bool)
    by_perfmodel = rows["perfmodel"].astype("string").fillna("").str.strip().ne("").to_numpy(dtype=bool)
    backend = rows["backend"].astype("string").fillna("") if "backend" in rows.columns else None
    torch = np.ones(n, dtype=bool) if backend is None else backend.str.startswith("torch").to_numpy(dtype=bool)
    split = np.zeros(n, dtype=bool)
    for column in SPLIT_LOAD_COLUMNS:
        if column == LOAD_PROCESS and column in rows.columns:
            split |= rows[column].astype("string").fillna("").str.strip().ne("").to_numpy(dtype=bool)
        elif column != LOAD_PROCESS:
            split |= np.isfinite(_finite(rows, column))
    return np.isfinite(_finite(rows, "load_ms")) & by_perfmodel & torch & ~split


def import_counted_loads_ms(rows) -> list[float]:
    """The load times (ms) of the rows whose load counted the import (`counted_import`), one per process."""
    return load_samples_ms(rows[counted_import(rows)])


def load_samples_ms(rows) -> list[float]:
    """The load times of a profile's rows (ms), one per process that measured one (module docstring)."""
    loads = _finite(rows, "load_ms")
    seen: dict[str, float] = {}
    for key, load in zip(_process_keys(rows), loads):
        if np.isfinite(load) and load >= 0:
            seen.setdefault(key, float(load))
    return list(seen.values())


def first_call_samples_ms(rows) -> list[float]:
    """The first calls of a profile's rows beyond their steady batch time (ms), one per fresh process
    that timed one: status ok, warm-up measured, by a method that starts a fresh process."""
    warmup, latency = _finite(rows, "warmup_ms"), _finite(rows, "latency_ms")
    methods = rows["warmup_method"].astype(str).tolist() if "warmup_method" in rows.columns else [""] * len(rows)
    status = rows["status"].astype(str).tolist() if "status" in rows.columns else ["ok"] * len(rows)
    seen: dict[str, float] = {}
    for i, key in enumerate(_process_keys(rows)):
        if status[i] == "ok" and np.isfinite(warmup[i]) and np.isfinite(latency[i]) and methods[i] not in NOT_FRESH:
            seen.setdefault(f"{key}\0{i}" if "\0load\0" in key else key, max(float(warmup[i] - latency[i]), 0.0))
    return list(seen.values())
