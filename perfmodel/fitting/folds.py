"""Cross-validation folds grouped by batch size, and the percentage errors every report uses.

Holding out all points of one batch size at once (every input size) is what makes the score honest
about interpolation: a point is never predicted from its own batch size measured at another size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fold:
    test: np.ndarray  # boolean mask over the rows
    batch_size: float
    interior: bool  # the held-out batch size lies strictly between the smallest and largest kept


def batch_folds(batch: np.ndarray) -> list[Fold]:
    """Leave-one-batch-size-out folds (end folds included: they test one step of extrapolation)."""
    batch = np.asarray(batch, dtype=float)
    values = np.unique(batch)
    if len(values) < 2:
        return []
    return [Fold(batch == v, float(v), bool(values[0] < v < values[-1])) for v in values]


def percent_errors(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    """|pred - true| / true * 100, element by element."""
    true = np.asarray(true, dtype=float)
    return np.abs(np.asarray(pred, dtype=float) - true) / true * 100.0


def summarise(errors: np.ndarray) -> dict:
    """MAPE (mean percentage error) and worst percentage error of a set of held-out points."""
    errors = np.asarray(errors, dtype=float)
    if errors.size == 0:
        return {"mape": None, "max_error": None, "points": 0}
    return {"mape": float(np.mean(errors)), "max_error": float(np.max(errors)), "points": int(errors.size)}
