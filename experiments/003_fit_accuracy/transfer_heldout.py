"""GPUs never profiled, judged on published curves perfmodel was never tuned on (issues 25 and 40).

    python experiments/003_fit_accuracy/transfer_heldout.py           # 3-5 minutes on 2 loaded cores

1. Learns the GPU effects (perfmodel.fitting.gpu_effects) from the library: profiles/reference/ and the
   collections of profiles/published/ that split.csv marks `tuning`.
2. Tuning set: each tuning collection predicted with effects learned without it, by the method and by
   every one-line guess (the nearest GPU copied; scaled by the ratio of peak FLOP/s, of memory bandwidth,
   of the slower roof), one source at a time. Per regime (launch-bound: the source on its floor,
   compute-bound), the guess with the least median error there becomes the `choice` a transfer uses.
   The order of same-stack ratios (other ways of serving measured on both GPUs) is compared here too.
3. Held out (split.csv's other collections, never used to choose or fit anything): every guess and the
   chosen combination, one source and leave one GPU out, per regime; and same-stack transfers (each way
   of serving scaled by the others of its collection measured on both GPUs).
4. This project's own same-stack pair, H200 -> H100 (profiles/h200-, h100-resnet50-torch-fp16.csv),
   never used for tuning: through the specifications alone, every guess, and same-stack with the same
   model at the other input sizes standing in for other models (leave one input size out).
5. Writes perfmodel/data/gpu_effects.json (coefficients, choice, the guesses' errors per regime, the
   held-out errors per number of sources and for same-stack transfers), transfer.md and
   transfer_points.csv.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import log, no_options  # noqa: E402
from perfmodel.errors import PerfmodelWarning  # noqa: E402
from perfmodel.files import atomic_write_text  # noqa: E402
from perfmodel.fitting.gpu_effects import EFFECTS_FILE, GpuEffects, learn  # noqa: E402
from perfmodel.fitting.gpu_specs import load_gpu_specs  # noqa: E402
from perfmodel.fitting.traffic import shipped_traffic  # noqa: E402
from perfmodel.fitting.transfer import validate  # noqa: E402
from perfmodel.fitting.transfer_curves import curves_of, ways_of_serving  # noqa: E402
from perfmodel.fitting.transfer_guesses import GUESSES, REGIMES  # noqa: E402
from perfmodel.schema import load_profile  # noqa: E402

KEYS = ("collection", "model", "backend")
QUANTILES = 201  # the held-out errors are shipped as this many evenly spaced quantiles
ORDERS = {  # ways of serving measured on both GPUs, taken in this order for a same-stack ratio
    "backend and family, then family, then any": ("backend and family", "family", "any"),
    "any": ("any",),
    "family only": ("family",),
    "backend only": ("backend",),
}
PAIR = ("h200", "h100")  # this project's same-stack pair: source, target


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
    for values, rows in ways_of_serving(frame[frame["status"] == "ok"], list(KEYS)):
        curves += curves_of(rows, specs, "latency_ms", way=tuple(values.items()))
    floor, busy, summary = learn(curves)
    summary["collections"] = sorted(frame["collection"].unique())
    return GpuEffects(floor, busy, summary, {})


def evaluate(frame, specs, effects, split: str, hows=("chosen", *GUESSES), logo=True, keys=KEYS) -> list[dict]:
    """validate() rows for every guess in `hows`, one source (and leave one GPU out), labelled."""
    rows = []
    kinds = (("one source", True), ("leave one GPU out", False)) if logo else (("one source", True),)
    for how in hows:
        for kind, one_source in kinds:
            for row in validate(frame, specs, keys, effects, one_source=one_source, how=how):
                rows.append({**row, "split": split, "kind": kind, "how": how, "sources": len(row["from"])})
    return rows


def evaluate_same_stack(frame, specs, effects, split: str, order=None, logo=True, keys=KEYS) -> list[dict]:
    rows = []
    kinds = (("one source", True), ("leave one GPU out", False)) if logo else (("one source", True),)
    extra = {} if order is None else {"order": order}
    for kind, one_source in kinds:
        for row in validate(frame, specs, keys, effects, one_source=one_source, same_stack=True, **extra):
            rows.append({**row, "split": split, "kind": kind, "how": "same-stack", "sources": len(row["from"])})
    return rows


def points(rows: list[dict]) -> pd.DataFrame:
    """One row per predicted point: |error| %, regime, and what predicted it."""
    out = []
    for r in rows:
        for i, (e, regime) in enumerate(zip(r["transfer_errors"], r["regimes"])):
            out.append(
                {
                    **{k: r[k] for k in ("split", "kind", "how", "collection", "model", "backend", "family")},
                    **{k: r[k] for k in ("hardware", "precision")},
                    "from": " ".join(r["from"]),
                    "point": i,
                    "regime": regime,
                    "predicted_over_measured_minus_1": e,
                    "abs_pct": abs(e) * 100.0,
                }
            )
    return pd.DataFrame(out)


def per_regime(frame: pd.DataFrame) -> dict:
    """how -> {regime or 'all': {"median_pct", "points"}} over the points given."""
    out = {}
    for how, part in frame.groupby("how", sort=False):
        cells = {"all": part}
        cells.update({r: part[part["regime"] == r] for r in REGIMES})
        out[how] = {
            name: {"median_pct": round(float(cell["abs_pct"].median()), 1), "points": int(len(cell))}
            for name, cell in cells.items()
            if len(cell)
        }
    return out


def choose(table: dict, guesses=GUESSES) -> dict:
    """Per regime, the guess with the least median error (the method on a tie)."""
    return {r: min(guesses, key=lambda g: (table[g][r]["median_pct"], g != "method")) for r in REGIMES}


def counted(rows: list[dict]) -> list[dict]:
    """The rows of ways of serving whose model's memory traffic was counted (perfmodel/data/model_traffic.json)."""
    return [r for r in rows if r["model"] in shipped_traffic()]


def summary(rows: list[dict]) -> dict:
    if not rows:
        return {}
    medians = np.array([r["median_pct"] for r in rows])
    errors = np.abs(np.concatenate([r["transfer_errors"] for r in rows])) * 100
    return {
        "curves": len(rows),
        "curve_median_pct": round(float(np.median(medians)), 1),
        "curve_p90_pct": round(float(np.percentile(medians, 90)), 1),
        "points": int(len(errors)),
        "median_pct": round(float(np.median(errors)), 1),
        "p90_pct": round(float(np.percentile(errors, 90)), 1),
    }


def shipped_errors(members: list[dict]) -> dict:
    errors = np.concatenate([r["transfer_errors"] for r in members])
    quantiles = np.quantile(errors, np.linspace(0, 1, QUANTILES))
    return {**summary(members), "errors": [round(float(v), 4) for v in quantiles]}


def by_sources(rows: list[dict], same_stack: list[dict]) -> dict:
    """The held-out errors per number of source GPUs (1: one-source pairs; 2, 3+: leave one GPU out), and of
    same-stack transfers from one source."""
    groups = {
        "1": [r for r in rows if r["kind"] == "one source"],
        "2": [r for r in rows if r["kind"] == "leave one GPU out" and r["sources"] == 2],
        "3+": [r for r in rows if r["kind"] == "leave one GPU out" and r["sources"] >= 3],
        "same-stack": [r for r in same_stack if r["kind"] == "one source"],
    }
    return {key: shipped_errors(members) for key, members in groups.items() if members}


def pair_rows(effects: GpuEffects, specs: dict) -> list[dict]:
    """H200 -> H100 (this project's profiles): every guess through the specifications, and same-stack with
    the model at the other input sizes standing in for other models (each input size left out in turn)."""
    source, target = PAIR
    frame = pd.concat([load_profile(ROOT / "profiles" / f"{h}-resnet50-torch-fp16.csv") for h in PAIR])
    frame = frame.assign(collection="this project")
    rows = [r for r in evaluate(frame, specs, effects, "pair", logo=False) if r["from"] == [source]]
    by_size = frame.assign(model=frame["model"] + "@" + frame["input_size"].astype(str))
    rows += [r for r in evaluate_same_stack(by_size, specs, effects, "pair", logo=False) if r["from"] == [source]]
    for r in rows:
        assert r["hardware"] == target
    return rows


def regime_table(table: dict, hows: list[str], title: str) -> list[str]:
    lines = [f"| {title} | launch-bound % (points) | compute-bound % (points) | all % (points) |", "|---|---|---|---|"]
    for how in hows:
        if how not in table:
            continue
        cells = [table[how].get(r) for r in (*REGIMES, "all")]
        lines.append(
            f"| {how} | " + " | ".join("-" if c is None else f"{c['median_pct']} ({c['points']})" for c in cells) + " |"
        )
    return lines


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


GUESS_NAMES = {
    "chosen": "**perfmodel (the guess chosen per regime)**",
    "same-stack": "**perfmodel, same stack** (ratio of other ways of serving on both GPUs)",
    "method": "GPU effects in both regimes",
    "traffic": "counted memory traffic (compute-bound; the GPU effects' floor)",
    "copy": "nearest GPU copied",
    "peak": "x peak FLOP/s ratio",
    "bandwidth": "x memory bandwidth ratio",
    "roofline": "x the slower roof's ratio",
}


def named(table_: dict) -> dict:
    return {GUESS_NAMES.get(k, k): v for k, v in table_.items()}


def main() -> None:
    no_options(__doc__)
    warnings.simplefilter("ignore", PerfmodelWarning)
    specs = load_gpu_specs()
    frame = load_collections()
    library = frame[frame["role"] != "held-out"]
    held_out = frame[frame["role"] == "held-out"]
    log("learning the GPU effects from the library")
    effects = effects_from(library, specs)

    log("tuning set: every guess, one source, each collection with effects learned without it")
    tuning, tuning_same, withouts = [], {name: [] for name in ORDERS}, {}
    for collection in sorted(frame.loc[frame["role"] == "tuning", "collection"].unique()):
        without = withouts[collection] = effects_from(library[library["collection"] != collection], specs)
        part = frame[frame["collection"] == collection]
        tuning += evaluate(part, specs, without, "tuning", hows=GUESSES, logo=False)
        for name, order in ORDERS.items():
            tuning_same[name] += evaluate_same_stack(part, specs, without, "tuning", order, logo=False)
    tuning_table = per_regime(points(tuning))
    choice = choose(tuning_table, [g for g in GUESSES if g != "traffic"])
    # the models whose traffic was counted: the tuning collections have none, so the library's reference
    # tables (each predicted with effects learned without it) are the tuning set for them
    log("tuning set, counted models: the reference tables, each with effects learned without it")
    for collection in sorted(frame.loc[frame["role"] == "reference", "collection"].unique()):
        without = withouts[collection] = effects_from(library[library["collection"] != collection], specs)
        part = frame[frame["collection"] == collection]
        tuning += evaluate(part, specs, without, "tuning", hows=GUESSES, logo=False)
    counted_table = per_regime(points(counted(tuning)))
    counted_choice = choose(counted_table)
    order_table = {name: per_regime(points(rows).assign(how=name))[name] for name, rows in tuning_same.items()}
    effects = GpuEffects(effects.floor, effects.busy, effects.learned_from, {}, choice, {}, counted_choice)
    tuning_chosen = []
    for collection, without in withouts.items():
        without = GpuEffects(without.floor, without.busy, without.learned_from, {}, choice, {}, counted_choice)
        part = frame[frame["collection"] == collection]
        tuning_chosen += evaluate(part, specs, without, "tuning", hows=("chosen",))
    tuning_collections = set(frame.loc[frame["role"] == "tuning", "collection"])
    published = [r for r in tuning_chosen if r["collection"] in tuning_collections]
    tuning_table.update(per_regime(points([r for r in published if r["kind"] == "one source"])))
    counted_table.update(per_regime(points([r for r in counted(tuning_chosen) if r["kind"] == "one source"])))
    tuning_table["same-stack"] = order_table["backend and family, then family, then any"]

    log(f"held out: every guess, the choice {choice}, and same-stack transfers")
    held = evaluate(held_out, specs, effects, "held-out")
    held_same = evaluate_same_stack(held_out, specs, effects, "held-out")
    held_points = points(held + held_same)
    held_table = per_regime(held_points[held_points["kind"] == "one source"])
    held_counted = per_regime(points([r for r in counted(held + held_same) if r["kind"] == "one source"]))
    held_logo = per_regime(held_points[held_points["kind"] == "leave one GPU out"])

    log("this project's H200 -> H100")
    pair = pair_rows(effects, specs)
    pair_table = per_regime(points(pair))

    shipped = GpuEffects(
        effects.floor,
        effects.busy,
        effects.learned_from,
        by_sources([r for r in held if r["how"] == "chosen"], held_same),
        choice,
        {
            "tuning": tuning_table,
            "held-out": held_table,
            "tuning, counted models": counted_table,
            "held-out, counted models": held_counted,
        },
        counted_choice,
    )
    atomic_write_text(EFFECTS_FILE, json.dumps(shipped.to_dict(), indent=1) + "\n")
    shown = [r for r in tuning_chosen + held + held_same + pair if r["how"] in ("chosen", "same-stack")]
    everything = points(shown)  # the other guesses' points are many: their medians are in the tables
    everything.drop(columns=["abs_pct"]).to_csv(HERE / "transfer_points.csv", index=False, float_format="%.4g")

    hows = ["chosen", "same-stack", *GUESSES]
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
        "Errors: |predicted / measured - 1| at every measured batch of the target, in %. A point is "
        "launch-bound where the source GPU sits on its floor at that work (u < 0.5 on its roofline fit), "
        "compute-bound elsewhere. Medians over points.",
        "",
        "## 1. The guesses per regime, and the choice (tuning set: each collection with effects learned "
        "without it, one source)",
        "",
        *regime_table(named(tuning_table), [GUESS_NAMES[h] for h in hows], "guess"),
        "",
        f"Chosen per regime (least median error here): {choice}.",
        "",
        "Models whose memory traffic was counted (perfmodel/data/model_traffic.json), where the traffic guess can "
        "be used: the reference tables (DeepLearningExamples' ResNet-50 and EfficientNet-B0), each with effects "
        "learned without it, one source:",
        "",
        *regime_table(named(counted_table), [GUESS_NAMES[h] for h in hows], "guess"),
        "",
        f"Chosen per regime for them: {counted_choice}.",
        "",
        "Same-stack ratios on the tuning set, by which other ways of serving are taken (the first kind that has any):",
        "",
        *regime_table(order_table, list(ORDERS), "ways taken"),
        "",
        "## 2. Held out: one source",
        "",
        *regime_table(named(held_table), [GUESS_NAMES[h] for h in hows], "guess"),
        "",
        "Of these, the models whose memory traffic was counted (mxnet-perf's CNNs, ViT-B/16, Swin-T):",
        "",
        *regime_table(named(held_counted), [GUESS_NAMES[h] for h in hows], "guess"),
        "",
        "## 3. Held out: leave one GPU out (each GPU predicted from all the others of its way of serving)",
        "",
        *regime_table(named(held_logo), [GUESS_NAMES[h] for h in hows], "guess"),
        "",
        "## 4. This project's H200 -> H100 (ResNet-50 eager fp16, never used for tuning)",
        "",
        "Same stack here: the H200 -> H100 ratio measured on the other two input sizes of the same model "
        "(each size left out in turn), standing in for other models profiled on both machines.",
        "",
        *regime_table(named(pair_table), [GUESS_NAMES[h] for h in hows], "guess"),
        "",
    ]
    chosen_held = [r for r in held if r["how"] == "chosen"]
    for title, rows in (
        ("held-out, one source, the chosen guess", [r for r in chosen_held if r["kind"] == "one source"]),
        ("held-out, leave one GPU out, the chosen guess", [r for r in chosen_held if r["kind"] != "one source"]),
        ("held-out, same stack, one source", [r for r in held_same if r["kind"] == "one source"]),
    ):
        out += [f"## {title}", "", "Per collection:", "", *table(rows, "collection"), ""]
        out += ["Per GPU predicted:", "", *table(rows, "hardware"), ""]
    out += ["## Held-out errors shipped (perfmodel/data/gpu_effects.json)", ""]
    for key, s in shipped.held_out.items():
        out.append(f"- {key}: " + ", ".join(f"{k} {v}" for k, v in s.items() if k != "errors"))
    atomic_write_text(HERE / "transfer.md", "\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
