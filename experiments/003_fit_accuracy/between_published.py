"""Between measured points on published curves: perfmodel's default selection against the line a + c*b (issue 25).

    python experiments/003_fit_accuracy/between_published.py      # about 3 minutes on 2 loaded cores

Every curve (GPU, model, backend, precision, input size) with 5 or more batch sizes, of
profiles/reference/ and profiles/published/ (the split of split.csv reported apart): fit on every
other measured batch size (the first, third, ... and always the largest), predict the ones skipped,
which all lie between fitted points. For DeepLearningExamples' powers of two this is the `between`
split of perfmodel.fitting.accuracy (fit on 1, 4, 16, 64, 256). Writes between.md and between_points.csv.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE))

from transfer_heldout import load_collections  # noqa: E402

from experiments.lab import no_options  # noqa: E402
from perfmodel.files import atomic_write_text  # noqa: E402
from perfmodel.fitting.accuracy import linear_baseline  # noqa: E402
from perfmodel.fitting.selection import fit_quantity  # noqa: E402


def every_other(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(train, test) masks over sorted batch sizes: every other one and the largest are fitted."""
    index = np.arange(len(b))
    train = (index % 2 == 0) | (index == len(b) - 1)
    return train, ~train


def main() -> None:
    no_options(__doc__)
    frame = load_collections()
    ok = frame[frame["status"] == "ok"]
    rows = []
    keys = ["role", "collection", "hardware", "model", "backend", "precision", "input_size"]
    for key, part in ok.groupby(keys, sort=True):
        part = part.groupby("batch_size", as_index=False)["latency_ms"].median().sort_values("batch_size")
        b = part["batch_size"].to_numpy(dtype=float)
        y = part["latency_ms"].to_numpy(dtype=float)
        s = np.full_like(b, float(key[-1]))
        if len(b) < 5:
            continue
        train, test = every_other(b)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chosen = fit_quantity(b[train], s[train], y[train])
        default = chosen.estimator.evaluate(b[test], s[test])
        line = linear_baseline(b[train], s[train], y[train])(b[test], s[test])
        for bi, yi, d, straight in zip(b[test], y[test], default, line):
            rows.append(
                {
                    **dict(zip(keys, key)),
                    "batch_size": int(bi),
                    "family": chosen.report.get("family"),
                    "measured_ms": yi,
                    "default_pct": abs(d / yi - 1) * 100,
                    "line_pct": abs(straight / yi - 1) * 100,
                }
            )
    points = pd.DataFrame(rows)
    points.round(4).to_csv(HERE / "between_points.csv", index=False)
    load = [round(v, 2) for v in os.getloadavg()]
    out = [
        "# 003: between measured points on published curves, default selection against the line a + c*b",
        "",
        f"Written by between_published.py (load average at the end {load}; accuracy does not depend on it).",
        "Curves with 5 or more batch sizes; fit on every other one and the largest, predict the others.",
        "",
        "| split | collection | curves | points | default median % | line median % | default mean % | line mean % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (role, collection), part in [
        *points.groupby(["role", "collection"]),
        *[((r, "**all**"), p) for r, p in points.groupby("role")],
    ]:
        curves = part.groupby(["hardware", "model", "backend", "precision", "input_size"]).ngroups
        out.append(
            f"| {role} | {collection} | {curves} | {len(part)} | {part['default_pct'].median():.2f} "
            f"| {part['line_pct'].median():.2f} | {part['default_pct'].mean():.2f} | {part['line_pct'].mean():.2f} |"
        )
    out += [
        "",
        "Family chosen per split (points): "
        + ", ".join(f"{role} {dict(part['family'].value_counts())}" for role, part in points.groupby("role")),
    ]
    atomic_write_text(HERE / "between.md", "\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
