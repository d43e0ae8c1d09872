"""Predicting a GPU nobody profiled from one or more profiled GPUs plus the GPUs' specifications.

For each way of serving (model, backend, precision family, and the serving-mode columns), each
source GPU's latency curve is fitted with the roofline shape without intercept (floor f, slope c,
sharpness k) and carried to the target by the GPU effects learned once over every published curve
perfmodel ships (perfmodel.fitting.gpu_effects: the floor and the busy part each scale with a power
law of peak FLOP/s at the precision, memory bandwidth and L2 size). With several source GPUs the
carried curves are averaged in log space, each weighted by how near its specifications are to the
target's. The target's curve is the roofline fitted to that
prediction on a grid of batches up to twice the largest measured.

A float32 model runs in tf32 on GPUs that have it (as NVIDIA's containers do by default), in fp32
elsewhere; fp16/bf16 and int8 transfer within their own precision.

The error to expect is the one measured on published curves never used for tuning
(experiments/003_fit_accuracy, stored with the coefficients), for the number of source GPUs. With 2
or more sources, each is also predicted from the others (leave one GPU out) and reported. When the
target itself was profiled, its measurements are left out of the fit and check the prediction.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pandas as pd

from perfmodel.errors import InputError
from perfmodel.fitting.folds import percent_errors
from perfmodel.fitting.gpu_effects import Curve, GpuEffects, features, rate, shipped_effects
from perfmodel.fitting.gpu_specs import GpuSpec
from perfmodel.fitting.predictor import QUANTITIES, GroupPredictor, QuantityModel
from perfmodel.fitting.regressors import RooflineRegression
from perfmodel.fitting.selection import measured_region

PRECISION_FAMILIES = {"fp32": "float32", "tf32": "float32", "fp16": "half", "bf16": "half", "int8": "int8"}
TRANSFERRED = ("latency_ms", "latency_p99_ms")
METHOD = (
    "each source's roofline carried by GPU effects learned over every published curve shipped "
    "(floor and busy part: power laws of peak FLOP/s at the precision, memory bandwidth, L2; "
    "perfmodel/data/gpu_effects.json); several sources averaged in log space, "
    "the nearer in specifications weighing more"
)
GRID_POINTS = 48
# Sources are weighted by exp(-distance / scale), distance between the log specifications; 1 was
# chosen on the library (DLE leave-one-GPU-out 21.7% -> 11.6% median, tuning collections 11.6% -> 11.4%).
SOURCE_DISTANCE_SCALE = 1.0


def target_precision(family: str, source_precisions: list[str], spec: GpuSpec) -> str | None:
    """The precision a way of serving runs in on the target GPU, or None if the GPU lacks it."""
    if family == "float32":
        return "tf32" if spec.runs("tf32") else "fp32"
    candidates = [p for p in sorted(set(source_precisions), key=source_precisions.count, reverse=True) if spec.runs(p)]
    return candidates[0] if candidates else None


def predict_curve(
    sources: list[Curve], spec: GpuSpec, precision: str, effects: GpuEffects | None = None
) -> RooflineRegression:
    """The target's latency curve: every source carried to `spec`, averaged in log space, as a roofline."""
    effects = effects or shipped_effects()
    works = np.concatenate([c.b * (c.s / 224.0) ** 2 for c in sources])
    w = np.geomspace(max(works.min(), 1e-3), 2.0 * works.max(), GRID_POINTS)
    s = np.full_like(w, 224.0)
    logs = np.array([np.log(c.estimator.evaluate(w, s)) + effects.log_ratio(c, spec, precision, w) for c in sources])
    # the nearer a source's specifications to the target's, the more it counts (a source with the
    # target's own specifications: e^2.3 = 10x one that differs 10x in one of them)
    distance = np.array([np.linalg.norm(features(spec, precision) - features(c.spec, c.precision)) for c in sources])
    weights = np.exp(-distance / SOURCE_DISTANCE_SCALE)
    y = np.exp(weights @ logs / weights.sum())
    return RooflineRegression(intercept=False).fit(np.column_stack([w, s]), y)


def leave_one_gpu_out(sources: list[Curve], effects: GpuEffects | None = None) -> list[tuple[Curve, np.ndarray]]:
    """Each source curve with the signed % errors (measured / predicted - 1) of its points when predicted
    from the curves of the other GPUs (needs one other GPU or more)."""
    out = []
    for held in sources:
        others = [c for c in sources if c.hardware != held.hardware]
        if not others:
            continue
        model = predict_curve(others, held.spec, held.precision, effects)
        out.append((held, (held.y / model.evaluate(held.b, held.s) - 1.0) * 100.0))
    return out


def transfer_groups(
    ok: pd.DataFrame, specs: dict[str, GpuSpec], target: str, keys: list[str], effects: GpuEffects | None = None
) -> tuple[list[GroupPredictor], list[str]]:
    """GroupPredictors for `target` from the 'ok' rows of other hardware, and notes on what was skipped.

    keys: the group columns other than hardware and precision (model, backend, and serving modes).
    """
    if target not in specs:
        raise InputError(
            f"no specification for {target!r} in the GPU table (it has {', '.join(sorted(specs))}); "
            "add a row for it (perfmodel/data/gpu_specs.csv, or --gpu-specs FILE)."
        )
    effects = effects or shipped_effects()
    spec = specs[target]
    groups, notes, only_target = [], [], []
    for values, rows in _ways_of_serving(ok, keys):
        # named by the precisions the profiles say (tf32, fp32), not by the family that groups them
        precisions = " and ".join(sorted(set(rows["precision"])))
        name = "/".join([*(str(values[k]) for k in keys if values[k] != ""), precisions])
        own = rows[rows["hardware"] == target]
        others = rows[rows["hardware"] != target]
        by_quantity = {q: _sources(others, specs, q) for q in TRANSFERRED}
        sources = by_quantity["latency_ms"]
        if not sources and others.empty:
            only_target.append(name)
            continue
        if not sources:
            notes.append(
                f"{name}: no other profiled GPU with a known specification and two or more batch sizes "
                f"(profiled on {', '.join(sorted(set(others['hardware'])))})."
            )
            continue
        precision = target_precision(values["family"], [c.precision for c in sources], spec)
        if precision is None:
            source_precisions = " or ".join(sorted({c.precision for c in sources}))
            notes.append(f"{name}: {target} has no {source_precisions} rate in the GPU table.")
            continue
        groups.append(_transferred_group(values, keys, target, spec, precision, by_quantity, own, effects))
    if only_target:  # said once for every such way of serving: the reason and the remedy are the same
        notes.append(
            f"{', '.join(only_target)}: {target} is the only GPU {'it was' if len(only_target) == 1 else 'they were'} "
            "profiled on, and a target is left out of its own transfer; name another GPU with --target-hardware, "
            f"or fit without --target-hardware to use {target}'s own measurements."
        )
    return groups, notes


def validate(
    frame: pd.DataFrame,
    specs: dict[str, GpuSpec],
    keys: tuple[str, ...] = ("model", "backend"),
    effects: GpuEffects | None = None,
    one_source: bool = False,
) -> list[dict]:
    """Every GPU of every way of serving profiled on 2 or more GPUs predicted from the others (leave one GPU
    out), or, with one_source, from each other GPU alone: one row per prediction, with its errors."""
    rows = []
    for values, part in _ways_of_serving(frame[frame["status"] == "ok"], list(keys)):
        curves = _sources(part, specs, "latency_ms")
        for held in curves:
            others = [c for c in curves if c.hardware != held.hardware]
            for sources in [[c] for c in others] if one_source else [others] if others else []:
                model = predict_curve(sources, held.spec, held.precision, effects)
                ratio = model.evaluate(held.b, held.s) / held.y
                rows.append(
                    {
                        **{k: values[k] for k in keys},
                        "family": values["family"],
                        "hardware": held.hardware,
                        "precision": held.precision,
                        "from": sorted(c.hardware for c in sources),
                        "points": int(len(ratio)),
                        "median_pct": float(np.median(np.abs(ratio - 1.0)) * 100.0),
                        "max_pct": float(np.max(np.abs(ratio - 1.0)) * 100.0),
                        "errors_pct": [round(float(v), 2) for v in (1.0 / ratio - 1.0) * 100.0],
                        "transfer_errors": [round(float(v), 4) for v in ratio - 1.0],
                    }
                )
    return rows


def _ways_of_serving(ok: pd.DataFrame, keys: list[str]):
    frame = ok.assign(family=ok["precision"].map(PRECISION_FAMILIES))
    frame = frame[frame["family"].notna()]
    for values, rows in frame.groupby([*keys, "family"], sort=True):
        yield dict(zip([*keys, "family"], values if isinstance(values, tuple) else (values,))), rows


def curves_of(rows: pd.DataFrame, specs: dict[str, GpuSpec], quantity: str, way: tuple = ()) -> list[Curve]:
    """One roofline-fitted Curve per (hardware, precision) of a way of serving's rows, for GPUs of the table."""
    curves = []
    for (hardware, precision), part in rows.groupby(["hardware", "precision"], sort=True):
        spec = specs.get(hardware)
        part = part.groupby(["batch_size", "input_size"], as_index=False)[quantity].median()
        y = part[quantity].to_numpy(dtype=float)
        usable = np.isfinite(y) & (y > 0)
        if spec is None or part["batch_size"][usable].nunique() < 2:
            continue
        try:
            rate(spec, precision)
        except InputError:
            continue
        b = part["batch_size"].to_numpy(dtype=float)[usable]
        s = part["input_size"].to_numpy(dtype=float)[usable]
        estimator = RooflineRegression(intercept=False).fit(np.column_stack([b, s]), y[usable])
        curves.append(Curve(way, hardware, precision, spec, estimator, b, s, y[usable]))
    return curves


_sources = curves_of


def _transferred_group(
    values: dict,
    keys: list[str],
    target: str,
    spec: GpuSpec,
    precision: str,
    by_quantity: dict[str, list[Curve]],
    own: pd.DataFrame,
    effects: GpuEffects,
) -> GroupPredictor:
    sources = by_quantity["latency_ms"]
    expected = effects.expected(len({c.hardware for c in sources}))
    transfer_errors = [float(v) for v in expected["errors"]]
    # measured / predicted - 1, the sign error_quantile and the rest of the predictor file use
    errors = [round((1.0 / (1.0 + r) - 1.0) * 100.0, 2) for r in transfer_errors]
    validation = (
        f"held out: transfers from {expected['sources']} source GPU(s) on published curves never used for "
        f"tuning ({expected['curves']} curves; experiments/003_fit_accuracy)"
    )
    loo = leave_one_gpu_out(sources, effects)
    models = {}
    b_all = np.concatenate([c.b for c in sources])
    s_all = np.concatenate([c.s for c in sources])
    region = _common_region(sources, spec)
    for quantity in QUANTITIES:
        curves = by_quantity.get(quantity, [])
        if not curves:
            reason = (
                "not transferred: a GPU never profiled has no warm-up or memory model"
                if quantity not in TRANSFERRED
                else f"not transferred: no source GPU has {quantity}"
            )
            models[quantity] = QuantityModel(None, {"family": None, "reason": reason, "rows": 0})
            continue
        models[quantity] = QuantityModel(
            predict_curve(curves, spec, precision, effects),
            {
                "family": "roofline",
                "features": [],
                # the source GPUs' points: the target's own, if profiled, were left out (checked_against_target)
                "rows": int(sum(len(c.y) for c in curves)),
                "rows_from": [f"{c.hardware} {c.precision}" for c in curves],
                "transferred": True,
                "training_range": {
                    "batch_size": [float(b_all.min()), float(b_all.max())],
                    "input_size": [float(s_all.min()), float(s_all.max())],
                },
                "measured": region,
                # nothing of the target was cross-validated: its error is the held-out transfer error
                # (transfer.expected_error, transfer.errors_pct), never under the cv_ keys
                "cv_mape": None,
                "cv_max_error": None,
                "cv_points": 0,
                "cv_errors_pct": [],
                "transfer_error": {
                    "median_pct": expected["median_pct"],
                    "p90_pct": expected["p90_pct"],
                    "sources": expected["sources"],
                    "what": "held-out error of transfers on published curves never used for tuning",
                },
                "selection": {},
                "extrapolation": {},
            },
        )
    checked = None
    own_y = own[own["precision"] == precision] if len(own) else own
    if len(own_y):
        model = models["latency_ms"].estimator
        measured = own_y["latency_ms"].to_numpy(dtype=float)
        pred = model.evaluate(own_y["batch_size"].to_numpy(dtype=float), own_y["input_size"].to_numpy(dtype=float))
        err = percent_errors(pred, measured)
        checked = {
            "points": int(len(err)),
            "median_pct": float(np.median(err)),
            "max_pct": float(np.max(err)),
            "errors_pct": [round(float(v), 2) for v in (measured / pred - 1.0) * 100.0],
        }
    transfer = {
        "target": target,
        "target_name": spec.name,
        "precision": precision,
        "from": [
            {
                "hardware": c.hardware,
                "precision": c.precision,
                "floor_ms": c.estimator.floor_,
                "slope_ms_per_image": c.estimator.slope_,
            }
            for c in sources
        ],
        "transfer_sources": sorted({c.hardware for c in sources}),
        "method": METHOD,
        "coefficients": {"floor": list(effects.floor), "busy": list(effects.busy)},
        "validation": validation,
        "expected_error": {k: v for k, v in expected.items() if k != "errors"},
        # signed predicted / measured - 1 of the held-out transfers (evenly spaced quantiles of them)
        "transfer_errors": transfer_errors,
        "errors_pct": errors,
        "median_pct": expected["median_pct"],
        "per_gpu": {
            f"{c.hardware} {c.precision}": {
                "points": int(len(e)),
                "median_pct": float(np.median(np.abs(e))),
                "max_pct": float(np.max(np.abs(e))),
            }
            for c, e in loo
        },
        "checked_against_target": checked,
        "spec_source": spec.source,
    }
    largest = {int(size): int(hi) for size, _, hi in region}
    key = {k: values[k] for k in keys if values[k] != ""}
    key = {
        "hardware": target,
        **{k: key[k] for k in ("model", "backend") if k in key},
        "precision": precision,
        **{k: v for k, v in key.items() if k not in ("model", "backend")},
    }
    return GroupPredictor(
        key=MappingProxyType(key),
        batch_sizes=tuple(sorted({int(b) for c in sources for b in c.b if b <= max(largest.values())})),
        input_sizes=tuple(sorted(largest)),
        models=MappingProxyType(models),
        ok_batches=tuple(sorted(largest.items())),
        provenance=MappingProxyType({"device_name": spec.name, "transferred_from": [c.hardware for c in sources]}),
        transfer=MappingProxyType(transfer),
    )


def _common_region(sources: list[Curve], spec: GpuSpec) -> list[list[float]]:
    """Per input size measured on every source, the batches measured on all of them.

    The target's memory use was never measured: its largest batch is the largest that ran on a
    source with no more memory than the target, a source with more memory counting only in
    proportion (so 256 on a 40 GB GPU stands for 102 on a 16 GB one), and never above what every
    source ran.
    """
    regions = [
        {size: (lo, hi, hi * min(1.0, spec.memory_gb / c.spec.memory_gb)) for size, lo, hi in measured_region(c.b, c.s)}
        for c in sources
    ]
    common = set.intersection(*(set(r) for r in regions))
    if not common:
        raise InputError("the source GPUs share no measured input size; profile them at a common size.")
    out = []
    for size in sorted(common):
        lo = max(r[size][0] for r in regions)
        hi = max(np.floor(min(min(r[size][1] for r in regions), max(r[size][2] for r in regions))), 1.0)
        out.append([float(size), float(min(lo, hi)), float(hi)])
    return out
