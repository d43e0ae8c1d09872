"""How accurate are perfmodel's fitted predictors, and how fast does a loaded one answer?

1. Synthetic GPU-like curve (perfmodel.fitting.synthetic: near-flat latency while a wave of 32 images
   is not full, then steps of one wave, 1% noise, oom above 16 GiB), several noise seeds:
   - the report's own numbers (cross-validated MAPE inside the range, extrapolation splits);
   - the error against the known truth: every batch size 1..largest measured, at the measured
     input sizes and at sizes between them; and, fitted on batch sizes <= 256 only, every batch
     size 257..512 (extrapolating to twice the largest measured batch).
2. The shipped CPU profiles (profiles/cpu-*.csv): the report per quantity.
3. Speed: a predictor saved to JSON and loaded again answers 10^6 random (b, s) queries;
   median of repeated runs, numpy's BLAS pinned to one thread, load average recorded.
4. Real GPU curves (profiles/reference/: NVIDIA's published tables) and launch-bound synthetic curves:
   the held-out splits of perfmodel.fitting.accuracy (between measured points: fit on batch 1, 4,
   16, 64, 256; beyond them: fit on batch <= 64, predict 128 and 256) for perfmodel's default
   selection, the roofline family alone, the previous default families (linear, piecewise, tree)
   and the straight line a + c * batch. Every held-out point goes to reference_split_errors.csv.
5. GPUs never profiled: leave each GPU out of every way of serving profiled on 2 or more GPUs and
   predict it from the others and the GPU specification table (transfer_logo.csv); and, with the shipped
   GPU effects (perfmodel/data/gpu_effects.json), the held-out published collections and this project's
   H200 -> H100 pair predicted by perfmodel and by every one-line guess (nearest GPU copied; peak FLOP/s,
   bandwidth, slower-roof ratio), per regime (launch-bound, compute-bound).

    python experiments/003_fit_accuracy/run.py           # writes results.json, results.md and the CSVs in a new
                                                          # results/<date>-<machine>-<commit>/ (experiments/lab.py)
    python experiments/003_fit_accuracy/run.py --quick   # 2 seeds, fewer repeats
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one thread, before numpy loads: timings comparable on a shared machine

import argparse
import json
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import perfmodel
from perfmodel.errors import PerfmodelWarning
from perfmodel.fitting import Predictor
from perfmodel.fitting.accuracy import SPLITS, linear_baseline, split_errors, summary
from perfmodel.fitting.gpu_specs import load_gpu_specs
from perfmodel.fitting.predictor_file import QUANTITIES
from perfmodel.fitting.selection import fit_quantity
from perfmodel.fitting.synthetic import DEFAULT_BATCH_SIZES, GpuLikeCurve, LaunchBoundCurve, gpu_like_profile
from perfmodel.fitting.transfer import validate
from perfmodel.profile.provenance import cpu_name
from perfmodel.schema import load_profiles

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, log, new_results  # noqa: E402

sys.path.insert(0, str(HERE))
import transfer_heldout  # noqa: E402

CURVE = GpuLikeCurve()
SIZES = (160, 224, 288)
BATCHES = DEFAULT_BATCH_SIZES + (384, 512, 768, 1024, 1536, 2048)  # reaches out-of-memory at 224 and 288 px
N_QUERIES = 1_000_000


def mape(pred, true) -> float:
    return float(np.mean(np.abs(pred - true) / true) * 100)


def worst(pred, true) -> float:
    return float(np.max(np.abs(pred - true) / true) * 100)


def synthetic(seeds: list[int]) -> list[dict]:
    rows = []
    for seed in seeds:
        profile = gpu_like_profile(CURVE, batch_sizes=BATCHES, input_sizes=SIZES, noise=0.01, seed=seed)
        t0 = time.perf_counter()
        group = perfmodel.fit(profile).groups[0]
        fit_s = time.perf_counter() - t0
        half = perfmodel.fit(profile[profile["batch_size"] <= 256]).groups[0]
        largest_ok = dict(group.ok_batches)
        inside = [(np.arange(1, top + 1), s) for s, top in largest_ok.items()]
        inside += [(np.arange(1, largest_ok[224] + 1), 192), (np.arange(1, largest_ok[288] + 1), 256)]
        for quantity in QUANTITIES:
            report = group.report[quantity]
            pred = np.concatenate([getattr(group, quantity)(b, s) for b, s in inside])
            true = np.concatenate([getattr(CURVE, quantity)(b, s) for b, s in inside])
            b2 = np.arange(257, 513)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PerfmodelWarning)
                pred2 = np.concatenate([getattr(half, quantity)(b2, s) for s in SIZES])
            true2 = np.concatenate([getattr(CURVE, quantity)(b2, s) for s in SIZES])
            rows.append(
                {
                    "seed": seed,
                    "quantity": quantity,
                    "family": report["family"],
                    "features": report["features"],
                    "cv_mape": report["cv_mape"],
                    "cv_max_error": report["cv_max_error"],
                    "report_batch_2x_mape": report["extrapolation"]["batch_2x"]["mape"],
                    "report_batch_half_mape": report["extrapolation"]["batch_half"]["mape"],
                    "report_input_size_mape": report["extrapolation"]["input_size"]["mape"],
                    "truth_inside_mape": mape(pred, true),
                    "truth_inside_worst": worst(pred, true),
                    "truth_2x_family": half.report[quantity]["family"],
                    "truth_2x_mape": mape(pred2, true2),
                    "truth_2x_worst": worst(pred2, true2),
                    "fit_seconds": fit_s,
                }
            )
        mb = group.max_batch(np.array(SIZES, dtype=float))
        rows.append(
            {
                "seed": seed,
                "quantity": "max_batch",
                "predicted": mb.tolist(),
                "true": CURVE.max_batch(np.array(SIZES)).tolist(),
                "smallest_oom": [dict(group.oom_batches).get(s) for s in SIZES],
            }
        )
    return rows


def shipped() -> list[dict]:
    rows = []
    for path in sorted((ROOT / "profiles").glob("cpu-*.csv")):
        t0 = time.perf_counter()
        predictor = perfmodel.fit(path)
        fit_s = time.perf_counter() - t0
        for group in predictor.groups:
            for quantity in QUANTITIES:
                report = group.report[quantity]
                extrapolation = report.get("extrapolation", {})
                rows.append(
                    {
                        "profile": path.name,
                        "group": group.name,
                        "quantity": quantity,
                        "family": report["family"],
                        "features": report.get("features"),
                        "rows": report.get("rows"),
                        "batch_sizes": list(group.batch_sizes),
                        "input_sizes": list(group.input_sizes),
                        "cv_mape": report.get("cv_mape"),
                        "cv_max_error": report.get("cv_max_error"),
                        "selection": {k: v["lobo_mape"] for k, v in report.get("selection", {}).items()},
                        **{f"{k}_mape": v.get("mape") for k, v in extrapolation.items()},
                        **{f"{k}_worst": v.get("max_error") for k, v in extrapolation.items()},
                        "fit_seconds": fit_s,
                    }
                )
    return rows


def speed(repeats: int) -> list[dict]:
    profile = gpu_like_profile(CURVE, batch_sizes=BATCHES, input_sizes=SIZES, noise=0.01, seed=0)
    rng = np.random.default_rng(0)
    b = rng.integers(1, 1025, N_QUERIES).astype(float)
    s_few = rng.choice(np.array(SIZES, dtype=float), N_QUERIES)
    s_any = rng.uniform(160, 288, N_QUERIES)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("roofline", "linear", "piecewise", "tree"):
            path = Path(tmp) / f"{family}.json"
            perfmodel.fit(profile, families=(family,)).save(path)
            t0 = time.perf_counter()
            group = Predictor.load(path).groups[0]
            load_ms = (time.perf_counter() - t0) * 1000
            calls = {
                "latency_ms(b, s)": lambda: group.latency_ms(b, s_any),
                "throughput_ips(b, s)": lambda: group.throughput_ips(b, s_any),
                "memory_mb(b, s)": lambda: group.memory_mb(b, s_any),
                "max_batch(s), 3 distinct s": lambda: group.max_batch(s_few),
                "max_batch(s), 10^6 distinct s": lambda: group.max_batch(s_any),
            }
            for name, call in calls.items():
                call()  # first call: the tree compiles its table here
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - t0)
                rows.append(
                    {
                        "family": family,
                        "query": name,
                        "queries": N_QUERIES,
                        "median_s": float(np.median(times)),
                        "min_s": float(np.min(times)),
                        "repeats": repeats,
                        "load_ms": load_ms,
                        "features": group.report["latency_ms"]["features"],
                    }
                )
    return rows


POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
PREVIOUS_DEFAULT = ("linear", "piecewise", "tree")  # perfmodel's families before the roofline


def _selection(families=None, **options):
    def fitter(b, s, y):
        if families is not None:
            options["families"] = families
        return fit_quantity(b, s, y, **options).estimator.evaluate

    return fitter


def _family(name):
    from perfmodel.fitting.regressors import FAMILIES

    def fitter(b, s, y):
        return FAMILIES[name]().fit(np.column_stack([b, s]), y).evaluate

    return fitter


METHODS = {
    "perfmodel (default selection)": _selection(),
    "roofline family": _family("roofline"),
    "lowest cross-validated error alone (no preference)": _selection(preference=1.0),
    "previous default (linear, piecewise, tree)": _selection(PREVIOUS_DEFAULT),
    "line a + c*b": linear_baseline,
}


def split_tables(frame: pd.DataFrame, label: str) -> tuple[pd.DataFrame, list[dict]]:
    errors = split_errors(frame, METHODS).assign(data=label)
    return errors, summary(errors).to_dict("records")


def reference_splits() -> tuple[pd.DataFrame, list[dict]]:
    frame = load_profiles(sorted((ROOT / "profiles" / "reference").glob("*.csv")))
    return split_tables(frame, "reference")


def launch_bound_splits(seeds: list[int]) -> tuple[pd.DataFrame, list[dict]]:
    frames = []
    for seed in seeds:
        curve = LaunchBoundCurve(floor_ms=3.0 + 2 * seed, image_ms=0.1 + 0.1 * seed, sharpness=2.0 + seed)
        frames.append(
            gpu_like_profile(
                curve, batch_sizes=POWERS, input_sizes=(224,), noise=0.01, seed=seed, hardware=f"launch-bound-{seed}"
            )
        )
    return split_tables(pd.concat(frames, ignore_index=True), "launch-bound synthetic")


def transfer_logo() -> list[dict]:
    frame = load_profiles(sorted((ROOT / "profiles" / "reference").glob("*.csv")))
    return validate(frame, load_gpu_specs())


def transfer_guesses() -> dict:
    """Per regime, the median |error| of perfmodel's transfer and of each one-line guess, one source: on the
    held-out published collections, and H200 -> H100 (with the shipped effects: nothing here is tuned)."""
    from perfmodel.fitting.gpu_effects import shipped_effects

    th, specs, effects = transfer_heldout, load_gpu_specs(), shipped_effects()
    frame = th.load_collections()
    held = frame[frame["role"] == "held-out"]
    rows = th.evaluate(held, specs, effects, "held-out", logo=False)
    rows += th.evaluate_same_stack(held, specs, effects, "held-out", logo=False)
    pair = th.pair_rows(effects, specs)
    points = th.points(rows + pair)
    tables = {
        "held-out": th.per_regime(points[points["split"] == "held-out"]),
        "h200 -> h100": th.per_regime(points[points["split"] == "pair"]),
        "choice": effects.choice,
        "counted_choice": effects.counted_choice,
    }
    return tables  # every point of the chosen guess and same-stack: transfer_points.csv (transfer_heldout.py)


def fmt(value, digits=2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def write_markdown(results: dict) -> str:
    lines = ["# 003 fit accuracy: results", "", f"machine: {results['machine']}", ""]
    lines += [f"load average (1, 5, 15 min) before: {results['load_before']}, after: {results['load_after']}", ""]
    lines += [
        "## Synthetic GPU-like curve (1% noise), per seed",
        "",
        "| quantity | seed | family | features | CV MAPE % | CV worst % | report x2 MAPE % | truth inside MAPE % | "
        "truth inside worst % | truth 2x MAPE % | truth 2x worst % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results["synthetic"]:
        if r["quantity"] == "max_batch":
            continue
        lines.append(
            f"| {r['quantity']} | {r['seed']} | {r['family']} | {' + '.join(r['features']) or '-'} | "
            f"{fmt(r['cv_mape'])} | "
            f"{fmt(r['cv_max_error'])} | {fmt(r['report_batch_2x_mape'])} | {fmt(r['truth_inside_mape'])} | "
            f"{fmt(r['truth_inside_worst'])} | {fmt(r['truth_2x_mape'])} | {fmt(r['truth_2x_worst'])} |"
        )
    lines += ["", "max_batch at 160, 224, 288 px (predicted / true / smallest measured oom):", ""]
    for r in results["synthetic"]:
        if r["quantity"] == "max_batch":
            lines.append(f"- seed {r['seed']}: {r['predicted']} / {r['true']} / {r['smallest_oom']}")
    lines += ["", "## Shipped CPU profiles", ""]
    if not results["shipped"]:
        lines.append("(no profiles/cpu-*.csv found)")
    else:
        lines += [
            "| profile | quantity | family | features | rows | CV MAPE % | CV worst % | batch x2 MAPE % | batch x2 "
            "worst % | batch half MAPE % | input size MAPE % |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in results["shipped"]:
            lines.append(
                f"| {r['profile']} | {r['quantity']} | {r['family']} | {' + '.join(r['features'] or []) or '-'} | "
                f"{r['rows']} | "
                f"{fmt(r['cv_mape'])} | {fmt(r['cv_max_error'])} | {fmt(r.get('batch_2x_mape'))} | "
                f"{fmt(r.get('batch_2x_worst'))} | "
                f"{fmt(r.get('batch_half_mape'))} | {fmt(r.get('input_size_mape'))} |"
            )
    for title, key in (
        ("Real GPU curves (profiles/reference/)", "reference"),
        ("Launch-bound synthetic curves (1% noise)", "launch_bound"),
    ):
        lines += [
            "",
            f"## Held-out splits: {title}",
            "",
            *(f"- {name}: {text}" for name, text in SPLITS.items()),
            "",
            "| split | method | median % | mean % | p90 % | worst % | points |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in results[key]:
            lines.append(
                f"| {r['split']} | {r['method']} | {r['median']:.2f} | {r['mean']:.2f} | {r['p90']:.1f} | "
                f"{r['worst']:.1f} | {r['points']} |"
            )
    if results.get("reference_worst_curves"):
        lines += [
            "",
            "Worst held-out error per reference curve, perfmodel (default selection), %:",
            "",
            "| curve | between | beyond |",
            "|---|---|---|",
        ]
        for r in results["reference_worst_curves"]:
            lines.append(f"| {r['curve']} | {fmt(r.get('between'), 1)} | {fmt(r.get('beyond'), 1)} |")
    logo = results.get("transfer", [])
    if logo:
        lines += [
            "",
            "## GPUs never profiled: leave one GPU out (profiles/reference/)",
            "",
            "| model | backend | precision family | GPU left out (precision) | predicted from | points | median % "
            "| worst % |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in logo:
            lines.append(
                f"| {r['model']} | {r['backend']} | {r['family']} | {r['hardware']} ({r['precision']}) | "
                f"{', '.join(r['from'])} | {r['points']} | {r['median_pct']:.1f} | {r['max_pct']:.1f} |"
            )
        errors = np.abs(np.concatenate([r["errors_pct"] for r in logo]))
        lines += [
            "",
            f"All points: median {np.median(errors):.1f}%, mean {np.mean(errors):.1f}%, "
            f"worst {np.max(errors):.1f}% ({len(errors)} points); median of the per-GPU-and-way medians "
            f"{np.median([r['median_pct'] for r in logo]):.1f}%.",
            "",
            "| GPU | median of its medians % | ways of serving |",
            "|---|---|---|",
        ]
        for hardware in sorted({r["hardware"] for r in logo}):
            mine = [r["median_pct"] for r in logo if r["hardware"] == hardware]
            lines.append(f"| {hardware} | {np.median(mine):.1f} | {len(mine)} |")
    guesses = results.get("transfer_guesses")
    if guesses:
        lines += [
            "",
            "## GPUs never profiled: perfmodel beside the one-line guesses, per regime (one source)",
            "",
            f"Shipped GPU effects; the guess used per regime (chosen on the tuning collections): {guesses['choice']}; "
            "for models whose memory traffic was counted (chosen on the reference tables): "
            f"{guesses['counted_choice']}. "
            "Median |predicted / measured - 1| %, (points).",
        ]
        for title, key in (
            ("held-out published collections", "held-out"),
            ("this project's H200 -> H100 (ResNet-50 eager fp16)", "h200 -> h100"),
        ):
            lines += ["", f"### {title}", ""]
            lines += transfer_heldout.regime_table(
                transfer_heldout.named(guesses[key]),
                [transfer_heldout.GUESS_NAMES[h] for h in ("chosen", "same-stack", *transfer_heldout.GUESSES)],
                "guess",
            )
    lines += [
        "",
        f"## Speed: {N_QUERIES:,} queries on a loaded predictor (numpy, one thread)",
        "",
        "| family | query | median s | min s | repeats | load ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in results["speed"]:
        lines.append(
            f"| {r['family']} | {r['query']} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['repeats']} | "
            f"{r['load_ms']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    out = new_results(HERE, device="cpu")
    load_before = [round(x, 2) for x in os.getloadavg()]
    log(f"writing to {out}; held-out splits of the real GPU curves and the launch-bound ones")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfmodelWarning)
        reference_errors, reference_table = reference_splits()
        launch_errors, launch_table = launch_bound_splits([0, 1] if args.quick else [0, 1, 2, 3, 4])
    errors = pd.concat([reference_errors, launch_errors], ignore_index=True)
    errors.to_csv(out / "reference_split_errors.csv", index=False, float_format="%.4g")
    chosen = reference_errors[reference_errors["method"] == "perfmodel (default selection)"]
    worst = chosen.groupby(["curve", "split"])["error_pct"].max().unstack()
    log("GPUs never profiled: leave one GPU out")
    logo = transfer_logo()
    pd.DataFrame([{k: v for k, v in r.items() if k != "errors_pct"} for r in logo]).to_csv(
        out / "transfer_logo.csv", index=False, float_format="%.4g"
    )
    log("GPUs never profiled: held out and H200 -> H100, beside the one-line guesses")
    guesses = transfer_guesses()
    log("the synthetic GPU-like curve, the shipped profiles, a loaded predictor's speed")
    results = {
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}",
        "load_before": load_before,
        "synthetic": synthetic([0, 1] if args.quick else [0, 1, 2, 3, 4]),
        "shipped": shipped(),
        "reference": reference_table,
        "reference_worst_curves": [
            {"curve": c, **{k: (None if pd.isna(v) else float(v)) for k, v in row.items()}}
            for c, row in worst.iterrows()
        ],
        "launch_bound": launch_table,
        "transfer": logo,
        "transfer_guesses": guesses,
        "speed": speed(3 if args.quick else 7),
    }
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "results.md").write_text(write_markdown(results))
    finish_results(out)
    print(write_markdown(results))
    print(f"written to {out}")


if __name__ == "__main__":
    sys.exit(main())
