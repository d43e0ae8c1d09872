"""Choosing a model family per quantity by cross-validation, and measuring its error.

The family with the lowest leave-one-batch-size-out MAPE wins. Its folds include holding out the
smallest and the largest batch size (one step of extrapolation), so a family that cannot
extrapolate, like the tree baseline, does not win on interpolation alone. The report then gives:
  cv_*              held-out points of the interior batch sizes only: error inside the measured range;
  extrapolation     refits on part of the data and tests on the rest (see `extrapolation_splits`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.fitting.folds import batch_folds, percent_errors, summarise
from perfmodel.fitting.regressors import FAMILIES, _Estimator

DEFAULT_FAMILIES: tuple[str, ...] = ("linear", "piecewise", "tree")


@dataclass(frozen=True)
class QuantityFit:
    estimator: _Estimator
    report: dict


def fit_quantity(b: np.ndarray, s: np.ndarray, y: np.ndarray, families: tuple[str, ...] = DEFAULT_FAMILIES) -> QuantityFit:
    """Cross-validate each family on (b, s) -> y, refit the best on all points, and report its errors."""
    b, s, y = (np.asarray(v, dtype=float) for v in (b, s, y))
    X = np.column_stack([b, s])
    folds = batch_folds(b)
    held_out = {name: _cross_val_predict(FAMILIES[name], X, y, folds) for name in families}
    scores = {name: _mape(pred, y) for name, pred in held_out.items()}
    best = min(families, key=lambda name: (scores[name] is None, scores[name] or 0.0))
    estimator = FAMILIES[best]().fit(X, y)

    interior = np.zeros(len(y), dtype=bool)
    for fold in (f for f in folds if f.interior):
        interior |= fold.test
    cv = summarise(percent_errors(held_out[best][interior], y[interior]))
    report = {
        "family": best,
        "features": list(getattr(estimator, "features_", ())),
        "rows": int(len(y)),
        "training_range": {"batch_size": [float(b.min()), float(b.max())], "input_size": [float(s.min()), float(s.max())]},
        "cv_mape": cv["mape"],
        "cv_max_error": cv["max_error"],
        "cv_points": cv["points"],
        "selection": {name: {"lobo_mape": scores[name]} for name in families},
        "extrapolation": {
            name: _extrapolate(FAMILIES[best], X, y, train, description)
            for name, (train, description) in extrapolation_splits(b, s).items()
        },
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
        return {"split": description, "mape": None, "max_error": None, "points": 0,
                "note": "not enough batch sizes on one side of the split"}
    pred = family().fit(X[train], y[train]).predict(X[test])
    return {"split": description, **summarise(percent_errors(pred, y[test]))}


def _cross_val_predict(family: type[_Estimator], X: np.ndarray, y: np.ndarray, folds) -> np.ndarray:
    """Held-out prediction of every point whose batch size was left out (NaN without folds)."""
    pred = np.full(len(y), np.nan)
    for fold in folds:
        pred[fold.test] = family().fit(X[~fold.test], y[~fold.test]).predict(X[fold.test])
    return pred


def _mape(pred: np.ndarray, y: np.ndarray) -> float | None:
    done = ~np.isnan(pred)
    return float(np.mean(percent_errors(pred[done], y[done]))) if done.any() else None
