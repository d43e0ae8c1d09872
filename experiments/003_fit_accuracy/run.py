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

    python experiments/003_fit_accuracy/run.py           # writes results.json and results.md here
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

import perfmodel
from perfmodel.errors import PerfmodelWarning
from perfmodel.fitting import Predictor
from perfmodel.fitting.predictor import QUANTITIES
from perfmodel.fitting.synthetic import DEFAULT_BATCH_SIZES, GpuLikeCurve, gpu_like_profile
from perfmodel.profile.provenance import cpu_name

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
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
        half = perfmodel.fit(profile[profile["batch_size"] <= 256], families=("linear", "piecewise", "tree")).groups[0]
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
            rows.append({
                "seed": seed, "quantity": quantity, "family": report["family"], "features": report["features"],
                "cv_mape": report["cv_mape"], "cv_max_error": report["cv_max_error"],
                "report_batch_2x_mape": report["extrapolation"]["batch_2x"]["mape"],
                "report_batch_half_mape": report["extrapolation"]["batch_half"]["mape"],
                "report_input_size_mape": report["extrapolation"]["input_size"]["mape"],
                "truth_inside_mape": mape(pred, true), "truth_inside_worst": worst(pred, true),
                "truth_2x_family": half.report[quantity]["family"],
                "truth_2x_mape": mape(pred2, true2), "truth_2x_worst": worst(pred2, true2),
                "fit_seconds": fit_s,
            })
        mb = group.max_batch(np.array(SIZES, dtype=float))
        rows.append({"seed": seed, "quantity": "max_batch", "predicted": mb.tolist(),
                     "true": CURVE.max_batch(np.array(SIZES)).tolist(),
                     "smallest_oom": [dict(group.oom_batches).get(s) for s in SIZES]})
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
                rows.append({
                    "profile": path.name, "group": group.name, "quantity": quantity, "family": report["family"],
                    "features": report.get("features"), "rows": report.get("rows"),
                    "batch_sizes": list(group.batch_sizes), "input_sizes": list(group.input_sizes),
                    "cv_mape": report.get("cv_mape"), "cv_max_error": report.get("cv_max_error"),
                    "selection": {k: v["lobo_mape"] for k, v in report.get("selection", {}).items()},
                    **{f"{k}_mape": v.get("mape") for k, v in extrapolation.items()},
                    **{f"{k}_worst": v.get("max_error") for k, v in extrapolation.items()},
                    "fit_seconds": fit_s,
                })
    return rows


def speed(repeats: int) -> list[dict]:
    profile = gpu_like_profile(CURVE, batch_sizes=BATCHES, input_sizes=SIZES, noise=0.01, seed=0)
    rng = np.random.default_rng(0)
    b = rng.integers(1, 1025, N_QUERIES).astype(float)
    s_few = rng.choice(np.array(SIZES, dtype=float), N_QUERIES)
    s_any = rng.uniform(160, 288, N_QUERIES)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("linear", "piecewise", "tree"):
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
                rows.append({"family": family, "query": name, "queries": N_QUERIES, "median_s": float(np.median(times)),
                             "min_s": float(np.min(times)), "repeats": repeats, "load_ms": load_ms,
                             "features": group.report["latency_ms"]["features"]})
    return rows


def fmt(value, digits=2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def write_markdown(results: dict) -> str:
    lines = ["# 003 fit accuracy: results", "", f"machine: {results['machine']}", ""]
    lines += [f"load average (1, 5, 15 min) before: {results['load_before']}, after: {results['load_after']}", ""]
    lines += ["## Synthetic GPU-like curve (1% noise), per seed", "",
              "| quantity | seed | family | features | CV MAPE % | CV worst % | report x2 MAPE % | truth inside MAPE % | truth inside worst % | truth 2x MAPE % | truth 2x worst % |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["synthetic"]:
        if r["quantity"] == "max_batch":
            continue
        lines.append(f"| {r['quantity']} | {r['seed']} | {r['family']} | {' + '.join(r['features']) or '-'} | {fmt(r['cv_mape'])} | "
                     f"{fmt(r['cv_max_error'])} | {fmt(r['report_batch_2x_mape'])} | {fmt(r['truth_inside_mape'])} | "
                     f"{fmt(r['truth_inside_worst'])} | {fmt(r['truth_2x_mape'])} | {fmt(r['truth_2x_worst'])} |")
    lines += ["", "max_batch at 160, 224, 288 px (predicted / true / smallest measured oom):", ""]
    for r in results["synthetic"]:
        if r["quantity"] == "max_batch":
            lines.append(f"- seed {r['seed']}: {r['predicted']} / {r['true']} / {r['smallest_oom']}")
    lines += ["", "## Shipped CPU profiles", ""]
    if not results["shipped"]:
        lines.append("(no profiles/cpu-*.csv found)")
    else:
        lines += ["| profile | quantity | family | features | rows | CV MAPE % | CV worst % | batch x2 MAPE % | batch x2 worst % | batch half MAPE % | input size MAPE % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in results["shipped"]:
            lines.append(f"| {r['profile']} | {r['quantity']} | {r['family']} | {' + '.join(r['features'] or []) or '-'} | {r['rows']} | "
                         f"{fmt(r['cv_mape'])} | {fmt(r['cv_max_error'])} | {fmt(r.get('batch_2x_mape'))} | {fmt(r.get('batch_2x_worst'))} | "
                         f"{fmt(r.get('batch_half_mape'))} | {fmt(r.get('input_size_mape'))} |")
    lines += ["", f"## Speed: {N_QUERIES:,} queries on a loaded predictor (numpy, one thread)", "",
              "| family | query | median s | min s | repeats | load ms |", "|---|---|---|---|---|---|"]
    for r in results["speed"]:
        lines.append(f"| {r['family']} | {r['query']} | {r['median_s']:.3f} | {r['min_s']:.3f} | {r['repeats']} | {r['load_ms']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    results = {
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, numpy {np.__version__}",
        "load_before": load_before,
        "synthetic": synthetic([0, 1] if args.quick else [0, 1, 2, 3, 4]),
        "shipped": shipped(),
        "speed": speed(3 if args.quick else 7),
    }
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (HERE / "results.md").write_text(write_markdown(results))
    print(write_markdown(results))


if __name__ == "__main__":
    sys.exit(main())
