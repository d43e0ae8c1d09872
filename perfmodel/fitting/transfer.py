"""Predicting a GPU nobody profiled, from profiles of other GPUs plus their specifications (the method of
Lattuada et al., 2022: docs/design.md).

For each way of serving (model, backend, precision family, and the serving-mode columns), every
source GPU's latency curve is fitted with the roofline shape without intercept,

    latency(b, s) = (f^k + (c * b * (s/224)^2)^k)^(1/k),

and the target's curve is built from them:
  - c, the time per image once the GPU is busy, is a linear regression on hardware features, as in
    Lattuada et al., with the form of a roofline: c = alpha / peak FLOP/s + beta / memory bandwidth,
    alpha, beta >= 0 (non-negative least squares on relative error), the peak taken at the
    precision the curve ran in;
  - f, the floor of small batches (launches, framework, host), does not scale with the GPU: the
    geometric mean of the sources' floors; k, the sharpness: their median.
A float32 model runs in tf32 on GPUs that have it (as NVIDIA's containers do by default), in fp32
elsewhere; fp16/bf16 and int8 transfer within their own precision.

The error is measured leaving one GPU out: each source predicted from the others (with 3 or more
sources); with 2 sources, the leave-one-GPU-out errors of every way of serving in the same profiles
that has 3 or more stand for it. When the target itself was profiled, its measurements are left out
of the fit and the prediction is checked against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import pandas as pd

from perfmodel.errors import InputError
from perfmodel.fitting.folds import percent_errors
from perfmodel.fitting.gpu_specs import GpuSpec
from perfmodel.fitting.predictor import QUANTITIES, GroupPredictor, QuantityModel
from perfmodel.fitting.regressors import RooflineRegression
from perfmodel.fitting.selection import measured_region

PRECISION_FAMILIES = {"fp32": "float32", "tf32": "float32", "fp16": "half", "bf16": "half", "int8": "int8"}
TRANSFERRED = ("latency_ms", "latency_p99_ms")
METHOD = (
    "c = alpha/peak FLOP/s + beta/memory bandwidth (non-negative least squares on relative error); "
    "floor = geometric mean of the sources' floors; sharpness = their median"
)


@dataclass(frozen=True)
class SourceCurve:
    hardware: str
    precision: str
    spec: GpuSpec
    estimator: RooflineRegression
    b: np.ndarray
    s: np.ndarray
    y: np.ndarray

    @property
    def features(self) -> np.ndarray:
        return np.array([1.0 / self.spec.peak_tflops(self.precision), 1.0 / self.spec.memory_bandwidth_gbs])


def target_precision(family: str, source_precisions: list[str], spec: GpuSpec) -> str | None:
    """The precision a way of serving runs in on the target GPU, or None if the GPU lacks it."""
    if family == "float32":
        return "tf32" if spec.runs("tf32") else "fp32"
    candidates = [p for p in sorted(set(source_precisions), key=source_precisions.count, reverse=True) if spec.runs(p)]
    return candidates[0] if candidates else None


def predict_roofline(sources: list[SourceCurve], spec: GpuSpec, precision: str) -> tuple[RooflineRegression, dict]:
    """The target's roofline built from the source curves, and the regression's coefficients."""
    from scipy.optimize import nnls

    slopes = np.array([c.estimator.slope_ for c in sources])
    X = np.array([c.features for c in sources])
    coef, _ = nnls(X / slopes[:, None], np.ones(len(sources)))
    target = np.array([1.0 / spec.peak_tflops(precision), 1.0 / spec.memory_bandwidth_gbs])
    model = RooflineRegression(intercept=False)
    model.floor_ = float(np.exp(np.mean(np.log([c.estimator.floor_ for c in sources]))))
    model.intercept_ = 0.0
    model.slope_ = float(max(target @ coef, 1e-12))
    model.sharpness_ = float(np.median([c.estimator.sharpness_ for c in sources]))
    model.n_features_in_ = 2
    return model, {"alpha": float(coef[0]), "beta": float(coef[1])}


def leave_one_gpu_out(sources: list[SourceCurve]) -> list[tuple[SourceCurve, np.ndarray]]:
    """Each source curve with the signed % errors of its measured points when predicted from the curves of
    the other GPUs (needs 2 or more other GPUs; empty otherwise)."""
    out = []
    for held in sources:
        others = [c for c in sources if c.hardware != held.hardware]
        if len({c.hardware for c in others}) < 2:
            continue
        model, _ = predict_roofline(others, held.spec, held.precision)
        out.append((held, (held.y / model.evaluate(held.b, held.s) - 1.0) * 100.0))
    return out


def transfer_groups(
    ok: pd.DataFrame, specs: dict[str, GpuSpec], target: str, keys: list[str], pooled_errors: list[float] | None = None
) -> tuple[list[GroupPredictor], list[str]]:
    """GroupPredictors for `target` from the 'ok' rows of other hardware, and notes on what was skipped.

    keys: the group columns other than hardware and precision (model, backend, and serving modes).
    pooled_errors: leave-one-GPU-out errors standing for ways of serving with only 2 sources.
    """
    if target not in specs:
        raise InputError(
            f"no specification for {target!r} in the GPU table (it has {', '.join(sorted(specs))}); "
            "add a row for it (perfmodel/data/gpu_specs.csv, or --gpu-specs FILE)."
        )
    spec = specs[target]
    groups, notes = [], []
    for values, rows in _ways_of_serving(ok, keys):
        name = "/".join(str(v) for v in values.values() if v != "")
        own = rows[rows["hardware"] == target]
        by_quantity = {q: _sources(rows[rows["hardware"] != target], specs, q) for q in TRANSFERRED}
        sources = by_quantity["latency_ms"]
        if len({c.hardware for c in sources}) < 2:
            notes.append(
                f"{name}: {len({c.hardware for c in sources})} profiled GPU(s) with a known specification; "
                "a transfer needs 2 or more."
            )
            continue
        precision = target_precision(values["family"], [c.precision for c in sources], spec)
        if precision is None:
            notes.append(f"{name}: {target} has no {values['family']} rate in the GPU table.")
            continue
        groups.append(_transferred_group(values, keys, target, spec, precision, by_quantity, own, pooled_errors))
    return groups, notes


def pooled_leave_one_gpu_out(
    ok: pd.DataFrame, specs: dict[str, GpuSpec], keys: list[str], exclude: str | None = None
) -> list[float]:
    """Leave-one-GPU-out latency errors (signed %) of every way of serving with 3 or more source GPUs."""
    rows = ok[ok["hardware"] != exclude] if exclude else ok
    return [e for r in validate(rows, specs, tuple(keys)) for e in r["errors_pct"]]


def validate(
    frame: pd.DataFrame, specs: dict[str, GpuSpec], keys: tuple[str, ...] = ("model", "backend")
) -> list[dict]:
    """Leave one GPU out of every way of serving profiled on 3 or more GPUs: one row per GPU left out,
    with its latency errors when predicted from the others (the figure the transfer's error stands on)."""
    rows = []
    for values, part in _ways_of_serving(frame[frame["status"] == "ok"], list(keys)):
        sources = _sources(part, specs, "latency_ms")
        for source, errors in leave_one_gpu_out(sources):
            rows.append(
                {
                    **{k: values[k] for k in keys},
                    "family": values["family"],
                    "hardware": source.hardware,
                    "precision": source.precision,
                    "from": sorted({c.hardware for c in sources if c.hardware != source.hardware}),
                    "points": int(len(errors)),
                    "median_pct": float(np.median(np.abs(errors))),
                    "max_pct": float(np.max(np.abs(errors))),
                    "errors_pct": [round(float(v), 2) for v in errors],
                }
            )
    return rows


def _ways_of_serving(ok: pd.DataFrame, keys: list[str]):
    frame = ok.assign(family=ok["precision"].map(PRECISION_FAMILIES))
    frame = frame[frame["family"].notna()]
    for values, rows in frame.groupby([*keys, "family"], sort=True):
        yield dict(zip([*keys, "family"], values if isinstance(values, tuple) else (values,))), rows


def _sources(rows: pd.DataFrame, specs: dict[str, GpuSpec], quantity: str) -> list[SourceCurve]:
    curves = []
    for (hardware, precision), part in rows.groupby(["hardware", "precision"], sort=True):
        spec = specs.get(hardware)
        y = part[quantity].to_numpy(dtype=float)
        usable = np.isfinite(y) & (y > 0)
        if spec is None or not spec.runs(precision) or part["batch_size"][usable].nunique() < 2:
            continue
        b = part["batch_size"].to_numpy(dtype=float)[usable]
        s = part["input_size"].to_numpy(dtype=float)[usable]
        estimator = RooflineRegression(intercept=False).fit(np.column_stack([b, s]), y[usable])
        curves.append(SourceCurve(hardware, precision, spec, estimator, b, s, y[usable]))
    return curves


def _transferred_group(
    values: dict,
    keys: list[str],
    target: str,
    spec: GpuSpec,
    precision: str,
    by_quantity: dict[str, list[SourceCurve]],
    own: pd.DataFrame,
    pooled_errors: list[float] | None,
) -> GroupPredictor:
    sources = by_quantity["latency_ms"]
    loo = leave_one_gpu_out(sources)
    if loo:
        errors, validation = (
            [round(float(v), 2) for _, e in loo for v in e],
            f"leave one GPU out over the {len({c.hardware for c in sources})} source GPUs",
        )
    elif pooled_errors:
        errors, validation = (
            list(pooled_errors),
            ("leave one GPU out over every way of serving in these profiles with 3 or more GPUs (this one has 2)"),
        )
    else:
        errors, validation = [], "not validated: 2 source GPUs, and no way of serving in these profiles has 3"
    models, coefficients = {}, {}
    b_all = np.concatenate([c.b for c in sources])
    s_all = np.concatenate([c.s for c in sources])
    region = _common_region(sources, spec)
    for quantity in QUANTITIES:
        curves = by_quantity.get(quantity, [])
        if len({c.hardware for c in curves}) < 2:
            reason = (
                "not transferred: a GPU never profiled has no warm-up or memory model"
                if quantity not in TRANSFERRED
                else f"not transferred: fewer than 2 source GPUs have {quantity}"
            )
            models[quantity] = QuantityModel(None, {"family": None, "reason": reason, "rows": 0})
            continue
        model, coefficients[quantity] = predict_roofline(curves, spec, precision)
        summary = _summary(errors)
        models[quantity] = QuantityModel(
            model,
            {
                "family": "roofline",
                "features": [],
                "rows": int(sum(len(c.y) for c in curves)),
                "transferred": True,
                "training_range": {
                    "batch_size": [float(b_all.min()), float(b_all.max())],
                    "input_size": [float(s_all.min()), float(s_all.max())],
                },
                "measured": region,
                "cv_mape": summary["mape"],
                "cv_max_error": summary["max_error"],
                "cv_points": summary["points"],
                "cv_errors_pct": errors,
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
        "method": METHOD,
        "coefficients": coefficients,
        "validation": validation,
        "errors_pct": errors,
        "median_pct": _summary(errors)["median"],
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


def _common_region(sources: list[SourceCurve], spec: GpuSpec) -> list[list[float]]:
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


def _summary(errors: list[float]) -> dict:
    if not errors:
        return {"mape": None, "max_error": None, "points": 0, "median": None}
    values = np.abs(np.asarray(errors, dtype=float))
    return {
        "mape": float(np.mean(values)),
        "max_error": float(np.max(values)),
        "points": int(len(values)),
        "median": float(np.median(values)),
    }
