"""González Vidal et al. [2] redone: EfficientNet-B0 latency and memory over input size x mini-batch size, with and
without warm-up, and which monitored quantities best predict the warm-up (first-inference) time.

Every point is measured by perfmodel's own profiler with the warm-up in a fresh worker process; the
sweep is repeated (--repeats) so the warm-up, a single sample per process, gets a distribution.

    python experiments/002_efficientnet_input_batch/run.py                      # CPU, small sizes
    python experiments/002_efficientnet_input_batch/run.py --device cuda \\
        --input-sizes 224,320,448,512 --batch-sizes 1,2,4,8,16,32,64,128,256 --repeats 3   # a GPU

Writes, in a new folder results/<date>-<machine>-<commit>/, <hardware>-repeat<N>.csv (the profiles) and
<hardware>-summary.csv; and the tables printed at the end (pasted into README.md by hand, with the machine named).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from experiments.lab import at_least_one, finish_results, log, new_results  # noqa: E402
from perfmodel.profile import ProfileConfig, StabilityRule, run_profile  # noqa: E402
from perfmodel.profile.grid import parse_batch_sizes, parse_input_sizes  # noqa: E402
from perfmodel.schema import load_profile  # noqa: E402

RESULTS = HERE / "results"  # main() sets this run's own folder in it


def sweep(args) -> pd.DataFrame:
    frames = []
    for repeat in range(args.repeats):
        out = RESULTS / f"{args.tag}-repeat{repeat}.csv"
        config = ProfileConfig(
            model="efficientnet_b0",
            device=args.device,
            batch_sizes=parse_batch_sizes(args.batch_sizes),
            input_sizes=parse_input_sizes(args.input_sizes),
            precision=args.precision,
            rule=StabilityRule(max_time_s=args.max_time_per_point),
        )
        run_profile(config, out, on_progress=lambda e, r=repeat: _progress(e, r, args.repeats))
        frames.append(load_profile(out).assign(repeat=repeat))
    return pd.concat(frames, ignore_index=True)


def _progress(event, repeat: int, repeats: int) -> None:
    if event.kind == "point":
        log(
            f"repeat {repeat + 1}/{repeats}: {event.input_size} px, batch {event.batch_size} {event.status} "
            f"({event.done}/{event.total})"
        )


def summarise(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["status"] == "ok"]
    g = ok.groupby(["input_size", "batch_size"])
    summary = pd.DataFrame(
        {
            "latency_ms": g["latency_ms"].median(),
            "first_call_ms": g["warmup_ms"].median(),
            "first_call_ms_min": g["warmup_ms"].min(),
            "first_call_ms_max": g["warmup_ms"].max(),
            "memory_mb": g["memory_mb"].median(),
            "images_per_s": g["throughput_ips"].median(),
        }
    ).reset_index()
    summary["warmup_over_latency"] = summary["first_call_ms"] / summary["latency_ms"]
    return summary


def warmup_feature_importance(df: pd.DataFrame) -> pd.Series:
    """Permutation importance of each monitored quantity (and the grid) for predicting warmup_ms."""
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.inspection import permutation_importance

    ok = df[df["status"] == "ok"].copy()
    ok["pixels"] = ok["input_size"] ** 2
    ok["batch_pixels"] = ok["batch_size"] * ok["pixels"]
    counters = [c for c in ok.columns if c.endswith(("_min", "_avg", "_max")) and not c.startswith("latency")]
    features = ["batch_size", "input_size", "pixels", "batch_pixels", "load_ms", "load_avg_1m", *counters]
    features = [f for f in features if f in ok.columns and ok[f].notna().all() and ok[f].nunique() > 1]
    x, y = ok[features].to_numpy(float), np.log(ok["warmup_ms"].to_numpy(float))
    forest = RandomForestRegressor(n_estimators=300, min_samples_leaf=2, random_state=0).fit(x, y)
    result = permutation_importance(forest, x, y, n_repeats=20, random_state=0)
    return pd.Series(result.importances_mean, index=features).sort_values(ascending=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--input-sizes", default="32,64,96,128")
    parser.add_argument("--batch-sizes", default="1,2,4,8,16")
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--repeats", type=at_least_one, default=3)
    parser.add_argument("--max-time-per-point", type=float, default=5.0)
    parser.add_argument("--tag", default=None, help="file name prefix (default: the device)")
    args = parser.parse_args()
    args.tag = args.tag or args.device.replace(":", "")
    global RESULTS
    RESULTS = new_results(HERE, device=args.device)
    df = sweep(args)
    summary = summarise(df)
    summary.to_csv(RESULTS / f"{args.tag}-summary.csv", index=False)
    importance = warmup_feature_importance(df)
    importance.rename("permutation_importance").to_csv(RESULTS / f"{args.tag}-warmup-importance.csv")
    finish_results(RESULTS)
    pd.set_option("display.width", 200)
    print(
        f"device: {df['device_name'].iloc[0]}; load average during the sweep "
        f"{df['load_avg_1m'].min():.2f}-{df['load_avg_1m'].max():.2f}; {args.repeats} repeats; os load now "
        f"{os.getloadavg()[0]:.2f}"
    )
    print("\nlatency (ms, median of repeats) by input size (rows) and batch size (columns):")
    print(summary.pivot(index="input_size", columns="batch_size", values="latency_ms").round(2).to_string())
    print("\nfirst call (warm-up, ms, median of repeats):")
    print(summary.pivot(index="input_size", columns="batch_size", values="first_call_ms").round(1).to_string())
    print("\nmemory (MiB):")
    print(summary.pivot(index="input_size", columns="batch_size", values="memory_mb").round(0).to_string())
    print("\nwarm-up time predictors (permutation importance on a random forest for log warmup_ms):")
    print(importance.head(15).round(4).to_string())
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
