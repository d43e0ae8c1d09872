"""The held-out splits that judge a latency model on a GPU curve, and the linear baseline beside it.

    between   fit on every other power of two (1, 4, 16, 64, 256), predict the batch sizes skipped;
    beyond    fit on batch sizes <= 64, predict 128 and 256.

The baseline is the straight line latency = a + c * batch (ordinary least squares), what serving
frameworks' adaptive batchers fit. Used by experiments/003_fit_accuracy and the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

SPLITS = {
    "between": "fit on batch 1, 4, 16, 64, 256; predict the powers of two between them",
    "beyond": "fit on batch <= 64; predict 128 and 256",
}
Fitter = Callable[[np.ndarray, np.ndarray, np.ndarray], Callable[[np.ndarray, np.ndarray], np.ndarray]]


def split_masks(b: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """split name -> (train, test) masks over the batch sizes b of one curve."""
    b = np.asarray(b, dtype=float)
    power = (b >= 1) & (np.log2(b) == np.round(np.log2(b))) & (b <= 256)
    kept = np.isin(b, [1, 4, 16, 64, 256])
    return {"between": (kept, power & ~kept), "beyond": (b <= 64, np.isin(b, [128, 256]))}


def latency_curves(frame: pd.DataFrame) -> Iterator[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(group name, b, s, latency) per (hardware, model, backend, precision) group's 'ok' rows."""
    ok = frame[frame["status"] == "ok"]
    for key, rows in ok.groupby(["hardware", "model", "backend", "precision"], sort=True):
        rows = rows.sort_values(["input_size", "batch_size"])
        yield (
            "/".join(key),
            rows["batch_size"].to_numpy(dtype=float),
            rows["input_size"].to_numpy(dtype=float),
            rows["latency_ms"].to_numpy(dtype=float),
        )


def linear_baseline(b: np.ndarray, s: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """latency = a + c * batch per input size, by ordinary least squares."""
    lines = {}
    for size in np.unique(s):
        at = s == size
        design = np.column_stack([np.ones(int(at.sum())), b[at]])
        lines[float(size)] = np.linalg.lstsq(design, y[at], rcond=None)[0]

    def predict(qb, qs):
        qb, qs = np.broadcast_arrays(np.asarray(qb, dtype=float), np.asarray(qs, dtype=float))
        return np.array([lines[float(size)][0] + lines[float(size)][1] * x for x, size in zip(qb.ravel(), qs.ravel())])

    return predict


def split_errors(frame: pd.DataFrame, fitters: dict[str, Fitter]) -> pd.DataFrame:
    """One row per (curve, split, method, held-out batch): measured, predicted, |error| %."""
    rows = []
    for name, b, s, y in latency_curves(frame):
        for split, (train, test) in split_masks(b).items():
            if not test.any() or len(np.unique(b[train])) < 3:
                continue
            for method, fitter in fitters.items():
                predicted = fitter(b[train], s[train], y[train])(b[test], s[test])
                for bi, si, yi, pi in zip(b[test], s[test], y[test], predicted):
                    rows.append(
                        {
                            "curve": name,
                            "split": split,
                            "method": method,
                            "batch_size": int(bi),
                            "input_size": int(si),
                            "measured_ms": float(yi),
                            "predicted_ms": float(pi),
                            "error_pct": float(abs(pi - yi) / yi * 100),
                        }
                    )
    return pd.DataFrame(rows)


def summary(errors: pd.DataFrame) -> pd.DataFrame:
    """Median, mean, 90th percentile and worst |error| % per (split, method)."""
    grouped = errors.groupby(["split", "method"])["error_pct"]
    return pd.DataFrame(
        {
            "median": grouped.median(),
            "mean": grouped.mean(),
            "p90": grouped.quantile(0.9),
            "worst": grouped.max(),
            "points": grouped.size(),
        }
    ).reset_index()


def two_batch_size_line_errors(frame: pd.DataFrame, signed: bool = False) -> dict[str, np.ndarray]:
    """% errors of the straight line through two batch sizes of a curve (what `fit` makes of a profile with two):
    'between' at the batch sizes between the two, 'beyond' at those above the larger, up to twice it.
    Every pair of batch sizes of every curve (one input size) counts once. By default |line - measured| /
    measured; signed: measured / line - 1, the sign and base of a predictor's error samples (> 0 where the
    truth was slower than the line)."""
    out = {"between": [], "beyond": []}
    for _, b, s, y in latency_curves(frame):
        for size in np.unique(s):
            at = s == size
            bs, ys = b[at], y[at]
            for i in range(len(bs)):
                for j in range(len(bs)):
                    if not bs[i] < bs[j]:
                        continue
                    slope = (ys[j] - ys[i]) / (bs[j] - bs[i])
                    line = ys[i] + slope * (bs - bs[i])
                    # a line falling to 0 or below predicts nothing (fit's prediction stops at 0): left out
                    kept = line > 0
                    error = np.full_like(ys, np.nan)
                    error[kept] = (
                        (ys[kept] / line[kept] - 1.0) * 100.0
                        if signed
                        else (np.abs(line[kept] - ys[kept]) / ys[kept] * 100.0)
                    )
                    out["between"].extend(error[kept & (bs > bs[i]) & (bs < bs[j])])
                    out["beyond"].extend(error[kept & (bs > bs[j]) & (bs <= 2 * bs[j])])
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}
