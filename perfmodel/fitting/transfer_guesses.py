"""The ratio that carries a latency curve from a profiled GPU to another, per regime (perfmodel.fitting.transfer
says how it is used): the guesses (the GPU effects' `method`, `traffic`, the one-line BASELINES), the one chosen
per regime on the tuning collections, and the same-stack ratios other ways of serving measured on both GPUs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.fitting.gpu_effects import Curve, GpuEffects, busy_fraction, features, rate
from perfmodel.fitting.gpu_specs import GpuSpec
from perfmodel.fitting.regressors import MonotonePiecewiseLinear

REGIMES = ("launch-bound", "compute-bound")
# The one-line guesses every transfer is compared with (and falls back to, per regime, where one did better
# on the tuning collections).
BASELINES = {
    "copy": "the nearest profiled GPU's curve copied unchanged",
    "peak": "scaled by the ratio of peak FLOP/s at the precision",
    "bandwidth": "scaled by the ratio of memory bandwidth",
    "roofline": "scaled by the slower of the target's two roofs (peak FLOP/s, bandwidth), the model at the "
    "source's ridge point",
}
GUESSES = ("method", "traffic", *BASELINES)
# The order in which other ways of serving measured on both GPUs are taken for a same-stack ratio (the
# first kind that has any): chosen on the tuning collections (experiments/003_fit_accuracy, transfer.md).
SAME_STACK_ORDER = ("backend and family", "family", "any")


@dataclass(frozen=True)
class SameStack:
    """The log ratios target / source measured on other ways of serving on the same two GPUs."""

    floor: float | None  # on the source's floor (None: no such point measured)
    busy: float | None
    ways: tuple[str, ...]
    points: int


def regime(u: np.ndarray) -> np.ndarray:
    """'launch-bound' where the source GPU sits on its floor at that work (u < 0.5), else 'compute-bound'."""
    return np.where(np.asarray(u) < 0.5, REGIMES[0], REGIMES[1])


def guess_ratios(
    guess: str, source: Curve, spec: GpuSpec, precision: str, effects: GpuEffects, w: np.ndarray
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """(L_floor, L_busy): one guess's log ratio target / source on the floor and on the busy part (at the
    works w: the traffic guess depends on them)."""
    peak = float(np.log(rate(source.spec, source.precision) / rate(spec, precision)))
    bandwidth = float(np.log(source.spec.memory_bandwidth_gbs / spec.memory_bandwidth_gbs))
    if guess in ("method", "traffic"):
        d = features(spec, precision) - features(source.spec, source.precision)
        floor = 0.0 if source.host_floor else float(np.dot(effects.floor, d))
        if guess == "traffic" and source.traffic is not None:
            m = memory_share(source, w)
            return floor, np.log((1.0 - m) * np.exp(peak) + m * np.exp(bandwidth))
        return floor, float(np.dot(effects.busy, d))
    value = {"copy": 0.0, "peak": peak, "bandwidth": bandwidth, "roofline": max(peak, bandwidth)}[guess]
    return value, value


def memory_share(source: Curve, w: np.ndarray) -> np.ndarray:
    """The share of the source's measured time at the works w that the model's counted memory traffic
    takes at the source's full memory bandwidth (at most 1): the part a faster memory shortens."""
    per_work, fixed = source.traffic
    seconds = (per_work * np.asarray(w, dtype=float) + fixed) / (source.spec.memory_bandwidth_gbs * 1e9)
    return np.clip(seconds * 1e3 / measured(source).evaluate(w, 224.0), 0.0, 1.0)


def log_ratio(
    source: Curve,
    spec: GpuSpec,
    precision: str,
    w: np.ndarray,
    effects: GpuEffects,
    how: str = "chosen",
    same_stack: SameStack | None = None,
) -> np.ndarray:
    """log(target / source) at the works w: per regime the chosen guess (how="chosen") or one guess of
    GUESSES, replaced by the same-stack ratio of a regime where one was measured."""
    if how == "chosen":
        choice = chosen_guesses(source, effects)
        floor = guess_ratios(choice[REGIMES[0]], source, spec, precision, effects, w)[0]
        busy = guess_ratios(choice[REGIMES[1]], source, spec, precision, effects, w)[1]
    else:
        floor, busy = guess_ratios(how, source, spec, precision, effects, w)
    if same_stack is not None:
        floor = floor if same_stack.floor is None else same_stack.floor
        busy = busy if same_stack.busy is None else same_stack.busy
    u = busy_fraction(source.estimator, w)
    return (1.0 - u) * floor + u * busy


def chosen_guesses(source: Curve, effects: GpuEffects) -> dict:
    """Per regime, the guess a transfer from `source` uses: those chosen for models whose memory traffic
    was counted, where it was and a choice was made for them, else those chosen for all."""
    return effects.counted_choice if source.traffic is not None and effects.counted_choice else effects.choice


def measured(curve: Curve) -> MonotonePiecewiseLinear:
    """A curve's points as a non-decreasing function of the work (fitted here if the Curve was made without)."""
    if curve.measured is not None:
        return curve.measured
    return MonotonePiecewiseLinear().fit(np.column_stack([curve.b, curve.s]), curve.y)


def same_stack_ratios(
    curves: dict[tuple, list[Curve]],
    way: dict,
    source: str,
    target: str,
    stack: list[str],
    order: tuple[str, ...] = SAME_STACK_ORDER,
    published: dict[tuple, dict[str, frozenset]] | None = None,
) -> SameStack | None:
    """The log ratios target / source on the floor and the busy part, measured on the other ways of serving
    profiled on both GPUs with the same `stack` columns (collection, serving mode): in SAME_STACK_ORDER, those
    of the same backend and precision family if any, else of the same family, else any. With `published` (per
    way of serving, per GPU, its documents: transfer_curves.publications), only ways published on both GPUs in
    the document `way`'s source rows were: another publication measured other machines and software."""
    same = [k for k in curves if dict(k) != way and all(dict(k)[c] == way[c] for c in stack)]
    if published is not None:
        home = published[tuple(way.items())].get(source)
        same = [k for k in same if published[k].get(source) == home and published[k].get(target) == home]
    kinds = {
        "backend and family": [
            k for k in same if dict(k)["family"] == way["family"] and dict(k).get("backend") == way.get("backend")
        ],
        "family": [k for k in same if dict(k)["family"] == way["family"]],
        "backend": [k for k in same if dict(k).get("backend") == way.get("backend")],
        "any": same,
    }
    tiers = [kinds[name] for name in order]
    for tier in tiers:
        ratios, used = [], []
        for key in tier:
            on_source = [c for c in curves[key] if c.hardware == source]
            on_target = [c for c in curves[key] if c.hardware == target]
            for a in on_source:
                for b in on_target:
                    work = b.b * (b.s / 224.0) ** 2
                    ratios.append((np.log(b.y / measured(a).evaluate(work, 224.0)), busy_fraction(a.estimator, work)))
            if on_source and on_target:
                used.append("/".join(str(dict(key)[c]) for c in ("model", "backend") if c in dict(key)))
        if ratios:
            lr = np.concatenate([r for r, _ in ratios])
            u = np.concatenate([u for _, u in ratios])
            floor, busy = lr[u < 0.5], lr[u >= 0.5]
            return SameStack(
                float(np.median(floor)) if len(floor) else None,
                float(np.median(busy)) if len(busy) else None,
                tuple(sorted(set(used))),
                int(len(lr)),
            )
    return None
