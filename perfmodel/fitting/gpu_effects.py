"""What changes from one GPU to another, learned once from every published curve perfmodel ships.

A latency curve has two regimes: the floor of small batches (launches, the framework, small kernels)
and the busy part, where time grows with the batch. Moving a way of serving (model, backend,
precision) from GPU A to GPU B changes each regime by its own power law of the GPUs' specifications,

    log(y_B(w) / y_A(w)) = (1 - u(w)) * floor . (x_B - x_A)  +  u(w) * busy . (x_B - x_A),
    x = log(peak FLOP/s at the precision, memory bandwidth, L2 size),

where w = b * (s/224)^2 and u(w) = (c w)^k / (f^k + (c w)^k) is how busy GPU A is at w, read off A's
own roofline fit (floor f, slope c, sharpness k). `floor` and `busy` are learned by robust (soft-L1)
least squares on the log ratios of every pair of GPUs that ran the same way of serving at the same
batch, pooled over every model, framework and GPU of the library: the way of serving is its own
efficiency term (each pair is a ratio within one way, so what the way achieves cancels). SM count
and the fp32 clock rate were tried as further features and made the tuning-set error worse
(experiments/003_fit_accuracy, transfer.md).

The library is NVIDIA DeepLearningExamples' tables (profiles/reference/) and the collections of
profiles/published/ marked `tuning` in split.csv; the held-out collections are never used here.
`perfmodel/data/gpu_effects.json` holds the learned coefficients and the held-out errors, per number
of source GPUs; experiments/003_fit_accuracy/transfer_heldout.py rebuilds it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from perfmodel.errors import InputError, PredictorFormatError
from perfmodel.fitting.gpu_specs import GpuSpec
from perfmodel.fitting.regressors import MonotonePiecewiseLinear, RooflineRegression

EFFECTS_FILE = Path(__file__).resolve().parents[1] / "data" / "gpu_effects.json"
FEATURES = ("log peak FLOP/s at the precision", "log memory bandwidth", "log L2 size")
# The rate a precision runs at: float32 in tf32 where the GPU has it (as NVIDIA's containers and
# cuDNN do by default); int8 and fp16 fall back to the next rate a GPU without them runs at.
RATE_ORDER = {
    "fp32": ("tf32", "fp32"),
    "tf32": ("tf32", "fp32"),
    "fp16": ("fp16", "fp32"),
    "bf16": ("bf16", "fp16", "fp32"),
    "int8": ("int8", "fp16", "fp32"),
}


@dataclass(frozen=True)
class Curve:
    """One GPU's measured latency curve of one way of serving: its roofline fit (where the floor hands
    over to the busy part), and the measured points themselves as a non-decreasing curve of the work
    (`measured`: what a transfer carries, cliffs included)."""

    way: tuple
    hardware: str
    precision: str
    spec: GpuSpec
    estimator: RooflineRegression
    b: np.ndarray
    s: np.ndarray
    y: np.ndarray
    measured: MonotonePiecewiseLinear | None = None
    host_floor: bool = False  # the GPU was mostly idle on the floor (measured utilisation): the host sets it
    # the model's counted memory traffic at this precision: (bytes per unit of work, fixed bytes), or None
    # where the model was not counted (perfmodel.fitting.traffic)
    traffic: tuple[float, float] | None = None


def rate(spec: GpuSpec, precision: str) -> float:
    """The peak rate (TFLOP/s or TOP/s) a precision runs at on this GPU."""
    for candidate in RATE_ORDER.get(precision, (precision,)):
        if spec.runs(candidate):
            return float(spec.peak_tflops(candidate))
    raise InputError(f"{spec.hardware} has no rate for {precision} in the GPU table.")


def features(spec: GpuSpec, precision: str) -> np.ndarray:
    return np.log([rate(spec, precision), spec.memory_bandwidth_gbs, spec.l2_mb])


def busy_fraction(estimator: RooflineRegression, w: np.ndarray) -> np.ndarray:
    """u(w): 0 where the curve sits on its floor, 1 where it grows linearly with the work."""
    f, c, k = estimator.floor_, estimator.slope_, estimator.sharpness_
    ratio = np.clip(k * (np.log(np.maximum(c * w, 1e-300)) - np.log(f)), -700, 700)
    return 1.0 / (1.0 + np.exp(-ratio))


def design(source: Curve, spec: GpuSpec, precision: str, w: np.ndarray) -> np.ndarray:
    """Rows (len(w), 2 * len(FEATURES)) of the log-ratio model from `source` to the GPU `spec`."""
    d = features(spec, precision) - features(source.spec, source.precision)
    u = busy_fraction(source.estimator, w)[:, None]
    return np.hstack([(1.0 - u) * d, u * d])


@dataclass(frozen=True)
class GpuEffects:
    floor: tuple[float, ...]
    busy: tuple[float, ...]
    learned_from: dict
    # "1", "2", "3+" source GPUs, and "same-stack" (scaled by other ways measured on both GPUs) ->
    # {"errors": signed predicted/measured - 1 as evenly spaced quantiles, and their summary}
    held_out: dict
    # per regime ("launch-bound", "compute-bound"), the guess a transfer uses there: "method" (these
    # effects) or a one-line baseline, whichever had the least error on the tuning collections
    choice: dict = field(default_factory=lambda: {"launch-bound": "method", "compute-bound": "method"})
    # per split ("tuning", "held-out"), per guess, per regime: the median |error| % and points
    baselines: dict = field(default_factory=dict)
    # the same, for ways of serving whose model's memory traffic was counted (the "traffic" guess can be used)
    counted_choice: dict = field(default_factory=dict)

    def log_ratio(self, source: Curve, spec: GpuSpec, precision: str, w: np.ndarray) -> np.ndarray:
        return design(source, spec, precision, w) @ np.array([*self.floor, *self.busy])

    def expected(self, sources: int | str) -> dict:
        """The held-out errors of transfers from this many source GPUs (the nearest measured count), or
        of those scaled by other ways of serving measured on both GPUs (sources="same-stack")."""
        if sources == "same-stack" and "same-stack" in self.held_out:
            return {"sources": "same-stack", **self.held_out["same-stack"]}
        counts = sorted((k for k in self.held_out if k.rstrip("+").isdigit()), key=lambda k: int(k.rstrip("+")))
        n = 1 if sources == "same-stack" else sources
        key = next((k for k in counts if (k.endswith("+") and n >= int(k[:-1])) or k == str(n)), None)
        return {"sources": key or counts[-1], **self.held_out[key or counts[-1]]}

    def to_dict(self) -> dict:
        return {
            "features": list(FEATURES),
            "floor": list(self.floor),
            "busy": list(self.busy),
            "learned_from": self.learned_from,
            "choice": self.choice,
            "counted_choice": self.counted_choice,
            "baselines": self.baselines,
            "held_out": self.held_out,
        }


@lru_cache(maxsize=1)
def shipped_effects() -> GpuEffects:
    """The coefficients learned from the library, and their held-out errors (perfmodel/data/gpu_effects.json)."""
    try:
        data = json.loads(EFFECTS_FILE.read_text())
        effects = GpuEffects(
            tuple(float(v) for v in data["floor"]),
            tuple(float(v) for v in data["busy"]),
            data["learned_from"],
            data["held_out"],
            data.get("choice") or {"launch-bound": "method", "compute-bound": "method"},
            data.get("baselines") or {},
            data.get("counted_choice") or {},
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PredictorFormatError(f"{EFFECTS_FILE} cannot be read ({exc}); reinstall perfmodel.") from None
    if len(effects.floor) != len(FEATURES) or len(effects.busy) != len(FEATURES):
        raise PredictorFormatError(f"{EFFECTS_FILE} has {len(effects.floor)} coefficients, not {len(FEATURES)}.")
    return effects


def learn(curves: list[Curve]) -> tuple[tuple[float, ...], tuple[float, ...], dict]:
    """floor and busy coefficients from every ordered pair of GPUs within each way of serving, at the
    batches (works) both measured; each pair weighs the same whatever its number of points."""
    from scipy.optimize import least_squares

    ways: dict[tuple, list[Curve]] = {}
    for curve in curves:
        ways.setdefault(curve.way, []).append(curve)
    rows, targets, weights, pairs = [], [], [], 0
    for members in ways.values():
        for source in members:
            measured = dict(zip(source.b * (source.s / 224.0) ** 2, source.y))
            for target in members:
                if target.hardware == source.hardware:
                    continue
                w = target.b * (target.s / 224.0) ** 2
                both = np.array([v in measured for v in w])
                if not both.any():
                    continue
                rows.append(design(source, target.spec, target.precision, w[both]))
                targets.append(np.log(target.y[both] / np.array([measured[v] for v in w[both]])))
                weights.append(np.full(both.sum(), 1.0 / np.sqrt(both.sum())))
                pairs += 1
    if not rows:
        raise InputError("no way of serving in the library ran on two GPUs at a common batch size.")
    A, z, sw = np.vstack(rows), np.concatenate(targets), np.concatenate(weights)
    fit = least_squares(lambda p: sw * (A @ p - z), np.zeros(A.shape[1]), loss="soft_l1", f_scale=0.1)
    n = len(FEATURES)
    summary = {"ways": len(ways), "curves": len(curves), "pairs": pairs, "points": int(len(z))}
    return tuple(float(v) for v in fit.x[:n]), tuple(float(v) for v in fit.x[n:]), summary
