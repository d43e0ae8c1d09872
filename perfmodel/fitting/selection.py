"""Choosing a model family per quantity by cross-validation, and measuring its error.

The family with the lowest leave-one-batch-size-out MAPE wins (the roofline shape unless another
family beats its error by 10%: PREFERENCE), among those that stay stable past the data
(`unstable_past_data`: a tree ensemble extrapolates flat, a log or quadratic term can bend the wrong
way). The folds include holding out the smallest and the largest batch size (one step of
extrapolation), so a family that cannot extrapolate does not win on interpolation alone. The report
then gives:
  cv_*              held-out points of the interior batch sizes only: error inside the measured range;
  cv_errors_pct     those points' signed errors, 100 * (measured - predicted) / predicted: positive
                    where the truth was slower than predicted (what a deadline margin must cover);
  extrapolation     refits on part of the data and tests on the rest (see `extrapolation_splits`),
                    with the same signed errors;
  measured          per input size, the smallest and largest batch size fitted (the region measured).
With two batch sizes there is nothing to hold out: the fit is the line through them, and `fit` adds to
its latency report `reference_errors`, the errors of such lines on published curves (TWO_BATCH_SIZE_FILE).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from perfmodel.errors import InputError, PredictorFormatError
from perfmodel.fitting.folds import batch_folds, percent_errors, summarise
from perfmodel.fitting.predictor_file import reference_errors_ok
from perfmodel.fitting.regressors import FAMILIES, _Estimator

DEFAULT_FAMILIES: tuple[str, ...] = ("roofline", "linear", "piecewise", "tree")
# The roofline is the shape GPU curves have; another family must beat its cross-validated error by
# 10% to be chosen instead (on the published curves of profiles/reference/, letting the lowest error
# win alone chose piecewise fits that extrapolated worse: experiments/003_fit_accuracy). It is also
# the family chosen when every family offered is unstable past the data.
PREFERRED_FAMILY = "roofline"
PREFERENCE = 1.1
# What the code needs, said the same way wherever a profile has too few batch sizes: a fit needs two; the
# cross-validated error needs a batch size strictly between the smallest and largest (three at least, one
# held-out batch size); five give three held-out batch sizes inside the range and a fit on those up to
# half the largest tested beyond it (batch_2x).
BATCH_SIZE_ADVICE = (
    "profile five or more batch sizes for a trustworthy error (three is the least that measures one, "
    "on a single held-out batch size)"
)
# Two batch sizes leave nothing to choose or check a family with: the fit is the straight line through them.
TWO_BATCH_SIZES = (
    "fitted on two batch sizes: a straight line through them, and no batch size is left to measure its error; "
    "on the published GPU curves of profiles/reference/ such a line misses the batch sizes between its two by a "
    "median {between}% (90th percentile {between_p90}%) and those up to twice the larger by a median {beyond}% "
    "(90th percentile {beyond_p90}%; experiments/003_fit_accuracy); the predictor carries those errors of its "
    "median latency for plan's deadline probability. To measure its own: " + BATCH_SIZE_ADVICE + "."
)
# Measured by experiments/003_fit_accuracy/two_batch_sizes.py (accuracy.two_batch_size_line_errors on
# profiles/reference/, every pair of batch sizes of the 35 curves); tests/fitting/test_fit_few_points.py checks that the
# file still matches what it measures.
TWO_BATCH_SIZE_FILE = Path(__file__).resolve().parents[1] / "data" / "two_batch_size_errors.json"
TWO_BATCH_SIZE_QUANTILES = 201  # the signed errors ship as this many evenly spaced quantiles
TWO_BATCH_SIZE_ORIGIN = (
    "errors of the straight line through two batch sizes on the published GPU curves of profiles/reference/ "
    "(every pair of batch sizes; experiments/003_fit_accuracy/two_batch_sizes.py), not measured on this profile"
)


def two_batch_size_errors_of(frame) -> dict:
    """What perfmodel/data/two_batch_size_errors.json holds, measured on the profiles in `frame`: per region
    ('between' the two batch sizes, 'beyond' the larger up to twice it) the points, the median and 90th
    percentile of |line - measured| / measured in %, and the signed 100 x (measured / line - 1) as
    TWO_BATCH_SIZE_QUANTILES evenly spaced quantiles."""
    from perfmodel.fitting.accuracy import two_batch_size_line_errors

    absolute, signed = two_batch_size_line_errors(frame), two_batch_size_line_errors(frame, signed=True)
    out = {"origin": TWO_BATCH_SIZE_ORIGIN}
    for region in ("between", "beyond"):
        quantiles = np.quantile(signed[region], np.linspace(0.0, 1.0, TWO_BATCH_SIZE_QUANTILES))
        out[region] = {
            "points": int(len(absolute[region])),
            "median_pct": round(float(np.median(absolute[region])), 1),
            "p90_pct": round(float(np.quantile(absolute[region], 0.9)), 1),
            "errors_pct": [round(float(v), 2) for v in quantiles],
        }
    return out


@lru_cache(maxsize=1)
def two_batch_size_errors() -> dict:
    """The shipped errors of the line through two batch sizes (perfmodel/data/two_batch_size_errors.json)."""
    try:
        data = json.loads(TWO_BATCH_SIZE_FILE.read_text())
    except (OSError, ValueError) as exc:
        raise PredictorFormatError(f"{TWO_BATCH_SIZE_FILE} cannot be read ({exc}); reinstall perfmodel.") from None
    if not reference_errors_ok(data):
        raise PredictorFormatError(
            f"{TWO_BATCH_SIZE_FILE} is damaged (an empty or non-finite error list); reinstall perfmodel."
        )
    return data


def two_batch_size_note() -> str:
    data = two_batch_size_errors()
    return TWO_BATCH_SIZES.format(
        between=f"{data['between']['median_pct']:.2g}",
        between_p90=f"{data['between']['p90_pct']:.2g}",
        beyond=f"{data['beyond']['median_pct']:.2g}",
        beyond_p90=f"{data['beyond']['p90_pct']:.2g}",
    )


@dataclass(frozen=True)
class QuantityFit:
    estimator: _Estimator
    report: dict


def fit_quantity(
    b: np.ndarray,
    s: np.ndarray,
    y: np.ndarray,
    families: tuple[str, ...] = DEFAULT_FAMILIES,
    preference: float = PREFERENCE,
) -> QuantityFit:
    """Cross-validate each family on (b, s) -> y, refit the best on all points, and report its errors.

    preference: how much lower another family's cross-validated error must be, as a factor, to be
    chosen over the roofline (1 chooses by the error alone).
    """
    b, s, y = (np.asarray(v, dtype=float) for v in (b, s, y))
    X = np.column_stack([b, s])
    if len(np.unique(b)) < 3:
        return _line_through_two(X, y)
    folds = batch_folds(b)
    held_out = {name: _cross_val_predict(FAMILIES[name], X, y, folds) for name in families}
    scores = {name: _mape(pred, y) for name, pred in held_out.items()}
    ranked = sorted(
        families,
        key=lambda name: (
            scores[name] is None,
            (scores[name] or 0.0) * (1.0 if name == PREFERRED_FAMILY else preference),
        ),
    )
    selection = {name: {"lobo_mape": scores[name]} for name in families}
    best, estimator = None, None
    for name in ranked:
        candidate = _fit_or_none(FAMILIES[name], X, y)
        if candidate is None:
            selection[name]["refused"] = "cannot be fitted to these points"
            continue
        reason = unstable_past_data(candidate, b, s)
        if reason is None:
            best, estimator = name, candidate
            break
        selection[name]["refused"] = reason
    if best is None:  # every family offered bends past the data: the roofline shape does not
        fitted = [n for n in ranked if "cannot be fitted" not in selection[n].get("refused", "")]
        if not fitted:
            raise InputError(f"no model family ({', '.join(families)}) can be fitted to these points.")
        best = PREFERRED_FAMILY if PREFERRED_FAMILY in fitted else fitted[0]
        estimator = FAMILIES[best]().fit(X, y)
        if best not in held_out:
            held_out[best] = _cross_val_predict(FAMILIES[best], X, y, folds)

    interior = np.zeros(len(y), dtype=bool)
    for fold in (f for f in folds if f.interior):
        interior |= fold.test
    cv = summarise(percent_errors(held_out[best][interior], y[interior]))
    report = {
        "family": best,
        "features": list(getattr(estimator, "features_", ())),
        "rows": int(len(y)),
        "training_range": {
            "batch_size": [float(b.min()), float(b.max())],
            "input_size": [float(s.min()), float(s.max())],
        },
        "cv_mape": cv["mape"],
        "cv_max_error": cv["max_error"],
        "cv_points": cv["points"],
        "cv_errors_pct": _signed(held_out[best][interior], y[interior]),
        "measured": measured_region(b, s),
        "selection": selection,
        "extrapolation": {
            name: _extrapolate(FAMILIES[best], X, y, train, description)
            for name, (train, description) in extrapolation_splits(b, s).items()
        },
    }
    return QuantityFit(estimator, report)


def _line_through_two(X: np.ndarray, y: np.ndarray) -> QuantityFit:
    """The straight line (intercept + slope x work) through two batch sizes, with the error it is known to have."""
    from perfmodel.fitting.regressors import FeatureLinearRegression

    b, s = X[:, 0], X[:, 1]
    if len(np.unique(b)) < 2:
        raise InputError(f"a fit needs at least two batch sizes; {BATCH_SIZE_ADVICE}.")
    estimator = FeatureLinearRegression(candidates=["b*p"]).fit(X, y)
    report = {
        "family": "linear",
        "features": list(estimator.features_),
        "rows": int(len(y)),
        "training_range": {
            "batch_size": [float(b.min()), float(b.max())],
            "input_size": [float(s.min()), float(s.max())],
        },
        "cv_mape": None,
        "cv_max_error": None,
        "cv_points": 0,
        "cv_errors_pct": [],
        "measured": measured_region(b, s),
        "selection": {},
        "extrapolation": {},
        "note": two_batch_size_note(),
    }
    return QuantityFit(estimator, report)


def extrapolation_splits(b: np.ndarray, s: np.ndarray) -> dict[str, tuple[np.ndarray, str]]:
    """The training masks of the extrapolation tests (the test set is the rest), with a description.

    batch_2x    fit on batch sizes <= half the largest, test up to twice the largest fitted;
    batch_half  fit on batch sizes <= the median batch size, test on the larger ones;
    input_size  fit on the smaller input sizes, test on the largest (needs >= 2 input sizes).
    """
    batches, sizes = np.unique(b), np.unique(s)
    median = float(np.median(batches))
    splits = {
        "batch_2x": (b <= batches[-1] / 2, f"fit on batch <= {batches[-1] / 2:g}, test on the larger"),
        "batch_half": (b <= median, f"fit on batch <= {median:g} (the median), test on the larger"),
    }
    if len(sizes) >= 2:
        splits["input_size"] = (s < sizes[-1], f"fit on input size < {sizes[-1]:g}, test on {sizes[-1]:g}")
    return splits


def _extrapolate(family: type[_Estimator], X: np.ndarray, y: np.ndarray, train: np.ndarray, description: str) -> dict:
    test = ~train
    if not test.any() or len(np.unique(X[train, 0])) < 2:
        return {
            "split": description,
            "mape": None,
            "max_error": None,
            "points": 0,
            "note": "not enough batch sizes on one side of the split",
        }
    model = _fit_or_none(family, X[train], y[train])
    if model is None:
        return {
            "split": description,
            "mape": None,
            "max_error": None,
            "points": 0,
            "note": "cannot be fitted on this side",
        }
    pred = model.predict(X[test])
    return {"split": description, **summarise(percent_errors(pred, y[test])), "errors_pct": _signed(pred, y[test])}


def _cross_val_predict(family: type[_Estimator], X: np.ndarray, y: np.ndarray, folds) -> np.ndarray:
    """Held-out prediction of every point whose batch size was left out (NaN without folds)."""
    pred = np.full(len(y), np.nan)
    for fold in folds:
        model = _fit_or_none(family, X[~fold.test], y[~fold.test])
        if model is not None:  # a fold the family cannot be fitted on (one work left) predicts nothing
            pred[fold.test] = model.predict(X[fold.test])
    return pred


def _fit_or_none(family: type[_Estimator], X: np.ndarray, y: np.ndarray) -> _Estimator | None:
    """The family fitted to (X, y), or None where these points cannot determine it: the roofline needs
    two different works b x (s/224)^2, and 1024 at 224 px and 256 at 448 px are one."""
    try:
        return family().fit(X, y)
    except InputError:
        return None


def unstable_past_data(estimator, b: np.ndarray, s: np.ndarray) -> str | None:
    """Why a fitted model cannot be trusted beyond the largest batch measured, or None if it can.

    At each measured input size, with B its largest batch: the model must not decrease anywhere up
    to 4B; its time per extra image from B to 2B must be at least half its own from B/2 to B (a
    tree ensemble, flat past the data, fails this: it would have the throughput grow without end);
    and at most twice the average time per image at B (no term may blow up past the data).
    """
    for size in np.unique(s):
        top = float(np.max(b[s == size]))
        grid = np.linspace(1.0, 4.0 * top, 257)
        curve = estimator.evaluate(grid, np.full_like(grid, size))
        if not np.all(np.isfinite(curve)) or np.any(np.diff(curve) < -1e-6 * np.abs(curve[:-1])):
            return f"decreases with the batch size below 4x the largest measured ({4 * top:g}) at {size:g} px"
        if top < 2:
            continue
        half, at, double = estimator.evaluate(np.array([top / 2, top, 2 * top]), np.full(3, size))
        inside, beyond = (at - half) / (top / 2), (double - at) / top
        if beyond < 0.5 * inside:
            return (
                f"flattens past the data at {size:g} px: {beyond:.3g} per image from batch {top:g} to {2 * top:g}, "
                f"against {inside:.3g} below it"
            )
        if at > 0 and beyond > 2.0 * at / top:
            return f"grows past the data at {size:g} px faster than twice the time per image measured at batch {top:g}"
    return None


def measured_region(b: np.ndarray, s: np.ndarray) -> list[list[float]]:
    """[[input size, smallest batch, largest batch], ...] that a quantity was fitted on."""
    return [[float(size), float(np.min(b[s == size])), float(np.max(b[s == size]))] for size in np.unique(s)]


def _signed(pred: np.ndarray, y: np.ndarray) -> list[float]:
    """100 * (measured - predicted) / predicted per point, rounded to 0.01 %: > 0 where the prediction was low."""
    pred = np.asarray(pred, dtype=float)
    done = np.isfinite(pred) & (pred > 0)
    return [round(float(v), 2) for v in (np.asarray(y, dtype=float)[done] / pred[done] - 1.0) * 100.0]


def _mape(pred: np.ndarray, y: np.ndarray) -> float | None:
    done = ~np.isnan(pred)
    return float(np.mean(percent_errors(pred[done], y[done]))) if done.any() else None
