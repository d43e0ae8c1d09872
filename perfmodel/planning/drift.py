"""How much a machine's speed moves over time, and what that does to a run of a given length.

A batch time is not independent of the one before: a shared VM's core runs 20% slow for seconds at a
time (experiments/007, steadiness.py). We model the speed as a stationary process around its median
with relative standard deviation `rel_sd` and correlation time `corr_s` (Ornstein-Uhlenbeck: the
correlation between two instants dt apart is exp(-dt / corr_s)). A run of W seconds sees the average of
that process over W, whose spread shrinks as W grows past corr_s: `run_rel_sd`.

`perfmodel profile` measures both figures with a short probe (`analyse_probe`, columns drift_rel_sd and
drift_corr_s); profiles without them (published, imported, older files) get a stated default below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NOT_IN_PROFILE = "(not in it)"  # how a Drift's source says that a figure is the default's
PROBE_WINDOW_S = 0.5  # the probe's calls are grouped into windows this long; the window medians are compared


@dataclass(frozen=True)
class Drift:
    rel_sd: float  # relative standard deviation of the machine's speed
    corr_s: float  # its correlation time, seconds (inf: one speed for the whole run)
    source: str  # where the figures come from

    def run_rel_sd(self, seconds: float) -> float:
        """The relative standard deviation of the average speed over a run of `seconds`."""
        if self.rel_sd <= 0 or seconds <= 0 or math.isinf(self.corr_s):
            return self.rel_sd
        if self.corr_s <= 0:  # no correlation at all: the speed's moves average out over any run
            return 0.0
        x = seconds / self.corr_s
        return self.rel_sd * math.sqrt(2.0 * (x - 1.0 + math.exp(-x)) / (x * x))

    @property
    def partly_default(self) -> bool:
        """A profile gave one of the two figures, the hardware's default the other (from_rows)."""
        return NOT_IN_PROFILE in self.source

    def to_dict(self) -> dict:
        return {
            "rel_sd": self.rel_sd,
            "corr_s": None if math.isinf(self.corr_s) else self.corr_s,
            "source": self.source,
        }


# A shared 2-core VM (this project's CPU machine): one core timed for 90 s, each second's median over the
# median of all (experiments/007_online_serving/results-run-e/steadiness.csv): relative sd 0.141 of the
# per-second ratios, lag-1 correlation 0.554, so corr_s = -1 / ln(0.554) = 1.69 s.
CPU_DEFAULT = Drift(0.141, 1.69, "default for CPUs: a shared 2-core VM's per-second speed (experiments/007 steadiness)")
# GPUs: the serving-architecture paper (shared/seeds/001) found a GPU's throughput from run to run within
# 0.5%; with nothing measured on the time scale, the whole run is taken to share one speed (corr_s inf).
GPU_DEFAULT = Drift(0.005, math.inf, "default for GPUs: run-to-run throughput within 0.5% (serving-architecture paper)")
# A CPU process's speed also differs from another's on a scale that neither a profile point (~10 s) nor
# the probe (20 s) sees: a plan runs in new processes, minutes or hours after the profile, and the profile's
# own process was one draw of the same kind. Two measurements on this project's 2-core VM:
# - a profile point against itself: the same points profiled again and again, each repeat a new process,
#   45 s apart (experiments/011 level.py, results/2026-11-25-amd-epyc-8d83586478): the spread of a point's
#   median over 6 repeats beyond its own confidence interval, median over 4 points (ResNet-50,
#   EfficientNet-B0; batches 8, 32) = 0.084 (0.066-0.131); the points of one repeat did not move together.
# - a run against its profile: 12 points profiled, each run twice as a one-point plan by `perfmodel run`
#   (experiments/011 against_run.py, results/2026-11-26-amd-epyc-5cc6310080): the run's median batch over the
#   profile's, sd of the log 0.142 over 24 runs (mean +1.8%, no bias to speak of), of which a run around its
#   point's other run 0.106; the 10 s runs' own drift (probe: 0.076, 1.3 s) accounts for 0.036 of that,
#   which leaves 0.10 to the run's process.
# So a CPU plan charges the point its profile's level (CPU_POINT_LEVEL, shared by the workers planned from
# that point) and each worker its own (CPU_LEVEL), both for the whole run.
CPU_LEVEL = Drift(
    0.10,
    math.inf,
    "default for CPUs: a run's batch time against its profile's, the point fixed (experiments/011 against_run)",
)
CPU_POINT_LEVEL = Drift(
    0.084, math.inf, "default for CPUs: a point's median, profiled again in a new process (experiments/011 level)"
)


COLUMNS = ("drift_rel_sd", "drift_corr_s")  # what `perfmodel profile`'s probe writes on every row


def default_for(hardware: str) -> Drift:
    return CPU_DEFAULT if hardware.startswith("cpu") else GPU_DEFAULT


def level_for(hardware: str) -> Drift | None:
    """A worker's own speed against its profile's for a whole run, which the probe cannot see (CPUs), or None."""
    return CPU_LEVEL if hardware.startswith("cpu") else None


def point_level_for(hardware: str) -> Drift | None:
    """How far a profiled point's process ran from the usual speed (CPUs: one draw, like a worker's), or None."""
    return CPU_POINT_LEVEL if hardware.startswith("cpu") else None


def from_rows(frame, hardware: str) -> Drift | None:
    """The drift a profile's probe measured (the median over the rows that have each figure), or None. A
    profile with only one of the two figures (written by hand) takes the other from the hardware's default,
    and its source says so."""
    medians = {}
    for column in COLUMNS:
        values = frame[column].dropna() if column in frame.columns else ()
        if len(values):
            medians[column] = float(np.median(values))
    if not medians:
        return None
    default = default_for(hardware)
    rel_sd = medians.get("drift_rel_sd", default.rel_sd)
    corr_s = medians.get("drift_corr_s", default.corr_s)
    source = "measured by perfmodel profile's drift probe"
    if len(medians) == 1:
        (given,) = medians
        (missing,) = set(COLUMNS) - {given}
        source = f"{given} from the profile; {missing} {NOT_IN_PROFILE} from the {default.source}"
    return Drift(rel_sd, corr_s, source)


def analyse_probe(ends_s, durations_s, window_s: float = PROBE_WINDOW_S) -> tuple[float, float] | None:
    """(rel_sd, corr_s) from a probe: one fixed call repeated, with each call's end time and duration.

    The calls are grouped into windows of `window_s`; each window's median over the median of all is
    the speed of that window. Their spread includes the calls' own noise (a median of m calls of
    relative sd c has sd about 1.25 c / sqrt(m)), which is subtracted. The correlation time comes from
    the windows' lag-1 correlation. Returns None with fewer than 8 windows (too short to tell).
    """
    ends, durations = np.asarray(ends_s, float), np.asarray(durations_s, float)
    if len(ends) < 16:
        return None
    index = np.floor((ends - ends[0]) / window_s).astype(int)
    medians, counts = [], []
    for w in range(index.max() + 1):  # windows in time order; a window with no call end is skipped
        calls = durations[index == w]
        if len(calls):
            medians.append(np.median(calls))
            counts.append(len(calls))
    if len(medians) < 8:
        return None
    ratio = np.asarray(medians) / np.median(durations)
    call_rel_sd = float(np.std(durations / np.median(durations)))
    noise = (1.25 * call_rel_sd) ** 2 / float(np.mean(counts))
    rel_sd = math.sqrt(max(float(np.var(ratio, ddof=1)) - noise, 0.0))
    x = ratio - ratio.mean()
    rho = float(np.sum(x[:-1] * x[1:]) / np.sum(x * x)) if np.any(x) else 0.0
    # corr_s from rho = exp(-window / corr_s); rho <= 0: no correlation beyond one window
    corr_s = -window_s / math.log(rho) if 0 < rho < 1 else window_s
    return rel_sd, corr_s
