"""GPUs never profiled, judged on published curves perfmodel was never tuned on (issue 25).

    python experiments/003_fit_accuracy/transfer_heldout.py           # about a minute on 2 loaded cores

1. Learns the GPU effects (perfmodel.fitting.gpu_effects) from the library: profiles/reference/ and the
   collections of profiles/published/ that split.csv marks `tuning`, and writes them, with the held-out
   errors below, to perfmodel/data/gpu_effects.json (what `perfmodel fit --target-hardware` uses).
2. Held out (split.csv's other collections, never used to choose or fit anything): every one-source
   pair (each GPU of a way of serving predicted from each other GPU alone) and leave one GPU out (each
   predicted from all the others), with perfmodel's own code path (transfer.validate).
3. Tuning set, reported apart: each tuning collection predicted with effects learned without it; and
   DeepLearningExamples' tables (in the library: in-sample).

Writes transfer.md (tables), transfer_points.csv (every predicted point) and the JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import no_options  # noqa: E402
from perfmodel.files import atomic_write_text  # noqa: E402
from perfmodel.fitting.gpu_effects import EFFECTS_FILE, GpuEffects, learn  # noqa: E402
from perfmodel.fitting.gpu_specs import load_gpu_specs  # noqa: E402
from perfmodel.fitting.transfer import _ways_of_serving, curves_of, validate  # noqa: E402
from perfmodel.schema import load_profile  # noqa: E402

KEYS = ("collection", "model", "backend")
QUANTILES = 201  # the held-out errors are shipped as this many evenly spaced quantiles


def load_collections() -> pd.DataFrame:
    frames = []
    for path in sorted((ROOT / "profiles" / "reference").glob("*.csv")):
        frames.append(load_profile(path).assign(collection=path.stem, role="reference"))
    split = pd.read_csv(ROOT / "profiles" / "published" / "split.csv")
    for row in split.itertuples():
        frame = load_profile(ROOT / "profiles" / "published" / f"{row.collection}.csv")
        frames.append(frame.assign(collection=row.collection, role=row.role))
    return pd.concat(frames, ignore_index=True, sort=False)


def effects_from(frame: pd.DataFrame, specs: dict) -> GpuEffects:
    curves = []
    for values, rows in _ways_of_serving(frame[frame["status"] == "ok"], list(KEYS)):
        curves += curves_of(rows, specs, "latency_ms", way=tuple(values.values()))
    floor, busy, summary = learn(curves)
    summary["collections"] = sorted(frame["collection"].unique())
    return GpuEffects(floor, busy, summary, {})


def evaluate(frame: pd.DataFrame, specs: dict, effects: GpuEffects, split: str) -> list[dict]:
    rows = []
    for kind, one_source in (("one source", True), ("leave one GPU out", False)):
        for row in validate(frame, specs, KEYS, effects, one_source=one_source):
            rows.append({**row, "split": split, "kind": kind, "sources": len(row["from"])})
    return rows


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {}
    medians = np.array([r["median_pct"] for r in rows])
    points = np.abs(np.concatenate([r["transfer_errors"] for r in rows])) * 100
    return {
        "curves": len(rows),
        "curve_median_pct": round(float(np.median(medians)), 1),
        "curve_p90_pct": round(float(np.percentile(medians, 90)), 1),
        "points": int(len(points)),
        "median_pct": round(float(np.median(points)), 1),
        "p90_pct": round(float(np.percentile(points, 90)), 1),
    }


def by_sources(rows: list[dict]) -> dict:
    """The held-out errors per number of source GPUs: 1 (one-source pairs), 2, 3+ (leave one GPU out)."""
    groups = {
        "1": [r for r in rows if r["kind"] == "one source"],
        "2": [r for r in rows if r["kind"] == "leave one GPU out" and r["sources"] == 2],
        "3+": [r for r in rows if r["kind"] == "leave one GPU out" and r["sources"] >= 3],
    }
    out = {}
    for key, members in groups.items():
        if not members:
            continue
        errors = np.concatenate([r["transfer_errors"] for r in members])
        quantiles = np.quantile(errors, np.linspace(0, 1, QUANTILES))
        out[key] = {**summary(members), "errors": [round(float(v), 4) for v in quantiles]}
    return out


def table(rows: list[dict], by: str) -> list[str]:
    lines = [f"| {by} | curves | median of curve medians % | p90 % | points | point median % | point p90 % |"]
    lines.append("|---|---|---|---|---|---|---|")
    for value in sorted({str(r[by]) for r in rows}):
        s = summary([r for r in rows if str(r[by]) == value])
        lines.append(
            f"| {value} | {s['curves']} | {s['curve_median_pct']} | {s['curve_p90_pct']} | {s['points']} "
            f"| {s['median_pct']} | {s['p90_pct']} |"
        )
    s = summary(rows)
    lines.append(
        f"| **all** | {s['curves']} | **{s['curve_median_pct']}** | **{s['curve_p90_pct']}** | {s['points']} "
        f"| {s['median_pct']} | {s['p90_pct']} |"
    )
    return lines


def markdown(grid: pd.DataFrame) -> list[str]:
    lines = ["| from \\ to | " + " | ".join(grid.columns) + " |", "|---" * (len(grid.columns) + 1) + "|"]
    for name, row in grid.iterrows():
        lines.append(f"| {name} | " + " | ".join("" if pd.isna(v) else f"{v:.1f}" for v in row) + " |")
    return lines


def main() -> None:
    no_options(__doc__)
    specs = load_gpu_specs()
    frame = load_collections()
    library = frame[frame["role"] != "held-out"]
    held_out = frame[frame["role"] == "held-out"]
    effects = effects_from(library, specs)
    rows = evaluate(held_out, specs, effects, "held-out")
    for collection in sorted(frame.loc[frame["role"] == "tuning", "collection"].unique()):
        without = effects_from(library[library["collection"] != collection], specs)
        rows += evaluate(frame[frame["collection"] == collection], specs, without, "tuning")
    # DeepLearningExamples' tables are in the library the effects are learned from: in-sample, shown apart
    rows += evaluate(frame[frame["role"] == "reference"], specs, effects, "reference (in the library)")
    held = [r for r in rows if r["split"] == "held-out"]
    shipped = GpuEffects(effects.floor, effects.busy, effects.learned_from, by_sources(held))
    atomic_write_text(EFFECTS_FILE, json.dumps(shipped.to_dict(), indent=1) + "\n")

    points = [
        {
            **{k: r[k] for k in ("split", "kind", "collection", "model", "backend", "family", "hardware", "precision")},
            "from": " ".join(r["from"]),
            "point": i,
            "predicted_over_measured_minus_1": e,
        }
        for r in rows
        for i, e in enumerate(r["transfer_errors"])
    ]
    pd.DataFrame(points).to_csv(HERE / "transfer_points.csv", index=False)

    load = [round(v, 2) for v in os.getloadavg()]
    out = ["# 003: GPUs never profiled, on published curves never tuned on", ""]
    out += [f"Written by transfer_heldout.py; load average at the end {load} (accuracy does not depend on it).", ""]
    out += [
        "Effects learned from: " + ", ".join(effects.learned_from["collections"]),
        f"({effects.learned_from['curves']} curves, {effects.learned_from['pairs']} GPU pairs, "
        f"{effects.learned_from['points']} points).",
        "",
        "| coefficients | log peak FLOP/s | log memory bandwidth | log L2 |",
        "|---|---|---|---|",
        "| floor | " + " | ".join(f"{v:.3f}" for v in effects.floor) + " |",
        "| busy | " + " | ".join(f"{v:.3f}" for v in effects.busy) + " |",
        "",
        "Errors: |predicted / measured - 1| at every measured batch of the target; a curve's error is the "
        "median over its points.",
        "",
    ]
    for split in ("held-out", "tuning", "reference (in the library)"):
        for kind in ("one source", "leave one GPU out"):
            part = [r for r in rows if r["split"] == split and r["kind"] == kind]
            if not part:
                continue
            out += [f"## {split}: {kind}", "", "Per collection:", "", *table(part, "collection"), ""]
            out += ["Per GPU predicted:", "", *table(part, "hardware"), ""]
            if kind == "one source":
                pairs = pd.DataFrame(
                    [{"from": r["from"][0], "to": r["hardware"], "med": r["median_pct"]} for r in part]
                )
                grid = pairs.groupby(["from", "to"])["med"].median().unstack().round(1)
                out += ["Median of curve medians %, per pair (rows: the source GPU):", "", *markdown(grid), ""]
    out += ["## Held-out errors shipped per number of source GPUs", ""]
    for key, s in shipped.held_out.items():
        out.append(f"- {key}: " + ", ".join(f"{k} {v}" for k, v in s.items() if k != "errors"))
    atomic_write_text(HERE / "transfer.md", "\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
