"""Predicting a GPU nobody profiled from one or more profiled GPUs, their specifications, and what
other ways of serving measured on both GPUs show.

For each way of serving (model, backend, precision family, and the serving-mode columns), a source
GPU's curve is carried as measured: its points as a non-decreasing curve of the work
w = b * (s/224)^2 (`Curve.measured`: throughput cliffs included, which a roofline fit smooths away).
At each work it is multiplied by a ratio with two regimes, mixed by how busy the source GPU is there
(u(w), read off the source's roofline fit: the launch-bound floor below, compute-bound above):

    log(y_target(w) / y_source(w)) = (1 - u(w)) * L_floor + u(w) * L_busy

- **Same stack.** When other ways of serving (another model: the same backend and precision family
  first, then the same family, then any) were measured on both the source and the target GPU in the
  profiles given, L_floor and L_busy are the median log ratios those show in each regime: what the
  two machines do, hosts and software included, not only their GPUs. Only ways of one measurement
  campaign count: published in the same document as the source's rows (their `source` column), or all
  one's own (no source), as one collection was in the held-out figures; a ratio another publication
  measured (other machines, another framework's floor) is no same stack.
- **Otherwise, the specifications.** Per regime, the guess that had the least error on the tuning
  collections (`GpuEffects.choice`, chosen by experiments/003_fit_accuracy/transfer_heldout.py, never
  on the held-out ones): the GPU effects learned over the library (`method`: power laws of peak FLOP/s
  at the precision, memory bandwidth and L2; perfmodel.fitting.gpu_effects) or a one-line baseline
  (`BASELINES`). For a model whose memory traffic was counted (perfmodel.fitting.traffic) the choice made on
  such models' tuning tables (`GpuEffects.counted_choice`), which may be `traffic`: the share m of the
  source's measured time that the traffic takes at the source's bandwidth scaled by the bandwidth ratio, the
  rest (the SMs' work) by the ratio of peak FLOP/s at the precision. In the method, the floor of a source
  whose GPU was mostly idle on it (the profile's measured utilisation below HOST_BOUND_UTILISATION) is the
  host's and the framework's, which no GPU specification describes: it is carried unchanged.

With several source GPUs the carried curves are averaged in log space, each weighted by how near its
specifications are to the target's (only those with a same-stack ratio, where some have one). A float32
model runs in tf32 on GPUs that have it, in fp32 elsewhere; fp16/bf16 and int8 stay themselves.

The error to expect is the one measured on published curves never used for tuning
(experiments/003_fit_accuracy, stored with the coefficients), for the number of source GPUs or for a
same-stack transfer. With 2 or more sources, each is also predicted from the others (leave one GPU out)
and reported. When the target itself was profiled, its measurements of that way are left out of the
fit and check the prediction, beside every one-line baseline.

The guesses, their choice and the same-stack ratios are perfmodel.fitting.transfer_guesses; the profile's rows
as curves, perfmodel.fitting.transfer_curves.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import numpy as np
import pandas as pd

from perfmodel.errors import InputError
from perfmodel.fitting.folds import percent_errors
from perfmodel.fitting.gpu_effects import Curve, GpuEffects, busy_fraction, features, shipped_effects
from perfmodel.fitting.gpu_specs import GpuSpec, spec_key
from perfmodel.fitting.predictor import GroupPredictor, QuantityModel
from perfmodel.fitting.predictor_file import QUANTITIES
from perfmodel.fitting.regressors import MonotonePiecewiseLinear
from perfmodel.fitting.selection import measured_region
from perfmodel.fitting.transfer_curves import curves_of, publications, ways_of_serving
from perfmodel.fitting.transfer_guesses import (
    BASELINES,
    GUESSES,
    REGIMES,
    SAME_STACK_ORDER,
    SameStack,
    chosen_guesses,
    log_ratio,
    measured,
    regime,
    same_stack_ratios,
)
from perfmodel.fixed_costs import counted_import

TRANSFERRED = ("latency_ms", "latency_p99_ms")
METHOD = (
    "each source's measured curve carried by a ratio per regime: measured on other ways of serving on the "
    "same two GPUs where the profiles have them (same stack), else the guess chosen per regime on the tuning "
    "collections (GPU effects learned over every published curve shipped: power laws of peak FLOP/s at the "
    "precision, memory bandwidth, L2; a host-bound floor carried; perfmodel/data/gpu_effects.json), for a model "
    "whose memory traffic was counted the choice made on such models (traffic: the share of the source's time "
    "that traffic takes at its bandwidth scaled by the bandwidth ratio, the rest by the peak ratio); several "
    "sources averaged in log space, the nearer in specifications weighing more"
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
    sources: list[Curve],
    spec: GpuSpec,
    precision: str,
    effects: GpuEffects | None = None,
    how: str = "chosen",
    same_stack: dict[str, SameStack] | None = None,
) -> MonotonePiecewiseLinear:
    """The target's latency curve: each source's measured curve carried to `spec` (log_ratio), averaged
    in log space, as a non-decreasing curve of the work. how="copy" copies the nearest source alone."""
    effects = effects or shipped_effects()
    same_stack = {k: v for k, v in (same_stack or {}).items() if v is not None}
    distance = {
        id(c): float(np.linalg.norm(features(spec, precision) - features(c.spec, c.precision))) for c in sources
    }
    if how == "copy":
        sources = [min(sources, key=lambda c: distance[id(c)])]
    elif how == "chosen" and any(c.hardware in same_stack for c in sources):
        sources = [c for c in sources if c.hardware in same_stack]
    works = np.concatenate([c.b * (c.s / 224.0) ** 2 for c in sources])
    w = np.unique(np.concatenate([works, np.geomspace(max(works.min(), 1e-3), 2.0 * works.max(), GRID_POINTS)]))
    logs = np.array(
        [
            np.log(np.maximum(measured(c).evaluate(w, 224.0), 1e-300))
            + log_ratio(c, spec, precision, w, effects, how, same_stack.get(c.hardware) if how == "chosen" else None)
            for c in sources
        ]
    )
    # the nearer a source's specifications to the target's, the more it counts (a source with the
    # target's own specifications: e^2.3 = 10x one that differs 10x in one of them)
    weights = np.exp(-np.array([distance[id(c)] for c in sources]) / SOURCE_DISTANCE_SCALE)
    return MonotonePiecewiseLinear.from_knots(w, np.exp(weights @ logs / weights.sum()))


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
) -> tuple[list[GroupPredictor], list[str], list[str]]:
    """GroupPredictors for `target` from the 'ok' rows of other hardware, what was skipped and why, and
    warnings on what a transfer made cannot see.

    keys: the group columns other than hardware and precision (model, backend, and serving modes).
    """
    if target not in specs:
        raise InputError(
            f"no specification for {target!r} in the GPU table (it has {', '.join(sorted(specs))}); "
            "add a row to perfmodel/data/gpu_specs.csv, or give a table of your own (`gpu_specs`)."
        )
    effects = effects or shipped_effects()
    spec = specs[target]
    ways, notes, remarks, only_target = [], [], [], []
    for values, rows in ways_of_serving(ok, keys):
        way_notes: list[str] = []
        by_quantity = {q: curves_of(rows, specs, q, tuple(values.items()), way_notes) for q in TRANSFERRED}
        ways.append((values, rows, by_quantity, way_notes))
    latency = {tuple(values.items()): q["latency_ms"] for values, _, q, _ in ways}
    published = {tuple(values.items()): publications(rows, specs) for values, rows, _, _ in ways}
    stack = [k for k in keys if k not in ("model", "backend")]
    groups = []
    for values, rows, by_quantity, way_notes in ways:
        # named by the precisions the profiles say (tf32, fp32), not by the family that groups them
        precisions = " and ".join(sorted(set(rows["precision"])))
        name = "/".join([*(str(values[k]) for k in keys if values[k] != ""), precisions])
        is_target = rows["hardware"].map(lambda h: spec_key(h, specs) == target)
        own, others = rows[is_target], rows[~is_target]
        by_quantity = {q: [c for c in curves if c.hardware != target] for q, curves in by_quantity.items()}
        sources = by_quantity["latency_ms"]
        if not sources and others.empty:
            only_target.append(name)
            continue
        if not sources:
            why = "; ".join(way_notes) or f"profiled on {', '.join(sorted(set(others['hardware'])))}"
            notes.append(f"{name}: no other profiled GPU with a known specification and two or more works ({why}).")
            continue
        remarks += [f"{name}: {n}" for n in way_notes if "disagree" in n]
        precision = target_precision(values["family"], [c.precision for c in sources], spec)
        if precision is None:
            source_precisions = " or ".join(sorted({c.precision for c in sources}))
            notes.append(f"{name}: {target} has no {source_precisions} rate in the GPU table.")
            continue
        same = {
            c.hardware: same_stack_ratios(latency, values, c.hardware, target, stack, published=published)
            for c in sources
        }
        group = _transferred_group(values, keys, target, spec, precision, by_quantity, own, effects, same)
        group = _with_load_time(group, others, specs)
        remarks += [f"{name}: {n}" for n in _warnings(group, sources, spec, precision)]
        groups.append(group)
    if only_target:  # said once for every such way of serving: the reason and the remedy are the same
        notes.append(
            f"{', '.join(only_target)}: {target} is the only GPU {'it was' if len(only_target) == 1 else 'they were'} "
            "profiled on, and a target is left out of its own transfer; name another GPU with `target_hardware`, "
            f"or fit without `target_hardware` to use {target}'s own measurements."
        )
    return groups, notes, remarks


def _with_load_time(group: GroupPredictor, others: pd.DataFrame, specs: dict[str, GpuSpec]) -> GroupPredictor:
    """The group with the model load time of the source GPU it was carried from (the nearest): loading is the
    host's, the framework's and the disk's as much as the GPU's, so it is carried, and said so; marked as
    counting the import where any of the loads it rests on did (fixed_costs.counted_import)."""
    source = group.transfer["load_from"]
    if "load_ms" not in others.columns:
        return group
    rows = others[others["hardware"].map(lambda h: spec_key(h, specs) == source)]
    values = rows["load_ms"].to_numpy(dtype=float)
    finite = np.isfinite(values)
    if not finite.any():
        return group
    load = float(np.median(values[finite]))
    counted = (load,) if counted_import(rows).any() else ()
    return dataclasses.replace(group, load_ms=load, load_counted_import_ms=counted)


def _warnings(group: GroupPredictor, sources: list[Curve], spec: GpuSpec, precision: str) -> list[str]:
    """What a transfer cannot see: a target with its source's very specifications, and sources that the
    transfer predicts from each other worse than the error it states."""
    t = group.transfer
    out = []
    if t["same_stack"] is None:
        twins = [c.hardware for c in sources if np.allclose(features(c.spec, c.precision), features(spec, precision))]
        if twins:
            out.append(
                f"{spec.hardware} has the same peak FLOP/s at {precision}, memory bandwidth and L2 as "
                f"{', '.join(sorted(set(twins)))} in the GPU table: the specifications cannot tell them apart, so the "
                "transfer is that curve unchanged; what differs between the machines (host, software, clocks) is "
                "not described. Profile one other model on both to measure it (a same-stack transfer)."
            )
    # per_gpu is the specifications' transfer among the sources: it speaks for the transfer made without a
    # same-stack ratio; a typical source (the median of theirs) worse than the error stated says it is too low
    stated = t["expected_error"]["median_pct"]
    own = {gpu: e["median_pct"] for gpu, e in t["per_gpu"].items()}
    if t["same_stack"] is None and own and np.median(list(own.values())) > stated:
        listed = ", ".join(f"{gpu} {v:.0f}%" for gpu, v in sorted(own.items()))
        out.append(
            f"predicted from each other, the source GPUs are off by more than the {stated:.0f}% median stated "
            f"({listed}, leave one GPU out): expect more than {stated:.0f}% for {spec.hardware}."
        )
    return out


def validate(
    frame: pd.DataFrame,
    specs: dict[str, GpuSpec],
    keys: tuple[str, ...] = ("model", "backend"),
    effects: GpuEffects | None = None,
    one_source: bool = False,
    how: str = "chosen",
    same_stack: bool = False,
    order: tuple[str, ...] = SAME_STACK_ORDER,
) -> list[dict]:
    """Every GPU of every way of serving profiled on 2 or more GPUs predicted from the others (leave one GPU
    out), or, with one_source, from each other GPU alone: one row per prediction, with its errors and the
    regime of each point. how: "chosen", or one guess of GUESSES for every regime. same_stack: scale by the
    ratios other ways of serving (with the same non-model keys) measured on both GPUs, where there are some
    (rows without are left out), taken in `order`."""
    effects = effects or shipped_effects()
    ok = frame[frame["status"] == "ok"]
    ways = [
        (values, curves_of(part, specs, "latency_ms", tuple(values.items())))
        for values, part in ways_of_serving(ok, list(keys))
    ]
    latency = {tuple(values.items()): curves for values, curves in ways}
    stack = [k for k in keys if k not in ("model", "backend")]
    rows = []
    for values, curves in ways:
        for held in curves:
            others = [c for c in curves if c.hardware != held.hardware]
            for sources in [[c] for c in others] if one_source else [others] if others else []:
                same = None
                if same_stack:
                    same = {
                        c.hardware: same_stack_ratios(latency, values, c.hardware, held.hardware, stack, order)
                        for c in sources
                    }
                    if not any(same.values()):
                        continue
                model = predict_curve(sources, held.spec, held.precision, effects, how, same)
                ratio = model.evaluate(held.b, held.s) / held.y
                work = held.b * (held.s / 224.0) ** 2
                u = np.mean([busy_fraction(c.estimator, work) for c in sources], axis=0)
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
                        "regimes": [str(r) for r in regime(u)],
                    }
                )
    return rows


def _transferred_group(
    values: dict,
    keys: list[str],
    target: str,
    spec: GpuSpec,
    precision: str,
    by_quantity: dict[str, list[Curve]],
    own: pd.DataFrame,
    effects: GpuEffects,
    same_stack: dict[str, SameStack | None],
) -> GroupPredictor:
    sources = by_quantity["latency_ms"]
    calibrated = {hw: r for hw, r in same_stack.items() if r is not None}
    expected = effects.expected("same-stack" if calibrated else len({c.hardware for c in sources}))
    transfer_errors = [float(v) for v in expected["errors"]]
    # measured / predicted - 1, the sign error_quantile and the rest of the predictor file use
    errors = [round((1.0 / (1.0 + r) - 1.0) * 100.0, 2) for r in transfer_errors]
    validation = (
        "held out: same-stack transfers (scaled by other ways of serving measured on both GPUs) on published "
        f"curves never used for tuning ({expected['curves']} curves; experiments/003_fit_accuracy)"
        if calibrated
        else f"held out: transfers from {expected['sources']} source GPU(s) on published curves never used for "
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
            predict_curve(curves, spec, precision, effects, same_stack=calibrated),
            {
                "family": "piecewise",
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
    own_y = own[own["precision"] == precision] if len(own) else own
    checked = _checked(models["latency_ms"].estimator, own_y, sources, spec, precision, effects) if len(own_y) else None
    nearest = min(
        sources, key=lambda c: float(np.linalg.norm(features(spec, precision) - features(c.spec, c.precision)))
    )
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
                "host_floor": c.host_floor,
            }
            for c in sources
        ],
        "transfer_sources": sorted({c.hardware for c in sources}),
        "method": METHOD,
        "coefficients": {"floor": list(effects.floor), "busy": list(effects.busy)},
        # per regime, what carried the curve there
        "guesses": {r: "same-stack" if calibrated else chosen_guesses(sources[0], effects)[r] for r in REGIMES},
        "floor": _floor_said(sources, calibrated, effects),
        "same_stack": (
            {
                hw: {
                    "ways": list(r.ways),
                    "points": r.points,
                    "floor_ratio": None if r.floor is None else round(float(np.exp(r.floor)), 4),
                    "busy_ratio": None if r.busy is None else round(float(np.exp(r.busy)), 4),
                }
                for hw, r in calibrated.items()
            }
            or None
        ),
        # the one-line guesses beside the method: their held-out (and tuning) median errors per regime
        "baselines": _baselines(sources, effects),
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
        "load_from": nearest.hardware,
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


def _floor_said(sources: list[Curve], calibrated: dict, effects: GpuEffects) -> str:
    """How the launch-bound floor reached the target, in words."""
    if any(r.floor is not None for r in calibrated.values()):
        return "scaled by the ratio other ways of serving measured on the floors of the same two machines"
    guess = chosen_guesses(sources[0], effects)[REGIMES[0]]
    host = sorted({c.hardware for c in sources if c.host_floor})
    if guess == "copy" or (guess == "method" and host):
        why = (
            "the GPU was mostly idle there (measured utilisation), so the floor is the host's and the framework's"
            if host
            else "the floor is the host's and the framework's as much as the GPU's (the guess that did best there on "
            "the tuning collections)"
        )
        carried = ", ".join(host or sorted({c.hardware for c in sources}))
        return f"carried unchanged from {carried}: {why}, which the target machine may not share"
    return "scaled by the GPU effects" if guess == "method" else f"{guess}: {BASELINES[guess]}"


def _baselines(sources: list[Curve], effects: GpuEffects) -> dict:
    """The guesses' tuning and held-out errors per regime: those of the models whose traffic was counted where
    the transfer's are (and such tables were made), else those of all."""
    tables = effects.baselines
    if sources[0].traffic is not None and "held-out, counted models" in tables:
        return {"tuning": tables["tuning, counted models"], "held-out": tables["held-out, counted models"]}
    return {k: tables[k] for k in ("tuning", "held-out") if k in tables}


def _checked(model, own: pd.DataFrame, sources: list[Curve], spec: GpuSpec, precision: str, effects: GpuEffects):
    """The transfer against the target's own measurements, beside every one-line guess, per regime."""
    b = own["batch_size"].to_numpy(dtype=float)
    s = own["input_size"].to_numpy(dtype=float)
    y = own["latency_ms"].to_numpy(dtype=float)
    work = b * (s / 224.0) ** 2
    regimes = regime(np.mean([busy_fraction(c.estimator, work) for c in sources], axis=0))

    def medians(pred: np.ndarray) -> dict:
        err = percent_errors(pred, y)
        out = {"all": round(float(np.median(err)), 2)}
        out.update({r: round(float(np.median(err[regimes == r])), 2) for r in REGIMES if (regimes == r).any()})
        return out

    pred = model.evaluate(b, s)
    err = percent_errors(pred, y)
    return {
        "points": int(len(err)),
        "median_pct": float(np.median(err)),
        "max_pct": float(np.max(err)),
        "errors_pct": [round(float(v), 2) for v in (y / pred - 1.0) * 100.0],
        "regimes": {r: int((regimes == r).sum()) for r in REGIMES},
        "by_regime": medians(pred),
        "guesses": {g: medians(predict_curve(sources, spec, precision, effects, g).evaluate(b, s)) for g in GUESSES},
    }


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
