"""011, part 0b — How far does a run's batch time fall from its profile's, the point fixed?

level.py compares profiles with profiles. A plan is judged by `perfmodel run`, in a Ray actor, minutes
after its profile. This script measures that directly, with no choice for the planner to make: each
point (ResNet-50 at 64 px, EfficientNet-B0 at 96 px; batches 8, 16, 32) is profiled, then planned alone
(a one-row profile, relaxed, one worker, 10 s, P = 0.5) and run with `perfmodel run --synthetic`, twice;
the whole is repeated with a new profile. For each run: the run's median batch time over the profile's
median, its load time over the profile's load_ms, its makespan over the plan's p50.

    python experiments/011_deadline_calibration/against_run.py               # ~10 min on 2 cores
    python experiments/011_deadline_calibration/against_run.py --tables-only results/DIR

Writes against_run.csv and against_run.md in a new results/<date>-<machine>-<commit>/.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, finish_results, log, new_results, perfmodel  # noqa: E402

POINTS = {"resnet50": 64, "efficientnet_b0": 96}
BATCHES = "8,16,32"
DEADLINE_S = 10


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profiles", type=at_least_one, default=2, help="profiles per model (default 2)")
    parser.add_argument("--runs", type=at_least_one, default=2, help="runs per point and profile (default 2)")
    parser.add_argument("--tables-only", type=Path, metavar="DIR", help="against_run.md from DIR/against_run.csv")
    args = parser.parse_args()
    if args.tables_only:
        write_tables(args.tables_only, pd.read_csv(args.tables_only / "against_run.csv"))
        return 0
    out = new_results(HERE)
    rows = []
    for repeat in range(args.profiles):
        for model, size in POINTS.items():
            csv = out / f"profile-{repeat}-{model}.csv"
            log(f"profile {repeat}: {model}")
            perfmodel("profile", "--model", model, "--input-sizes", size, "--batch-sizes", BATCHES, "--out", csv)
            frame = pd.read_csv(csv)
            for point in frame[frame["status"] == "ok"].itertuples():
                one = out / f"one-{repeat}-{model}-{point.batch_size}.csv"
                frame[frame["batch_size"] == point.batch_size].to_csv(one, index=False)
                plan_path = one.with_suffix(".json")
                plan = perfmodel(
                    "plan", "--profile", one, "--mode", "relaxed", "--pool", "cpu=1", "--deadline",
                    f"{DEADLINE_S}s", "--input-size", size, "--confidence", "0.5", "--json",
                ).stdout  # fmt: skip
                plan_path.write_text(plan)
                p50 = json.loads(plan)["makespan_quantiles_s"]["p50"]
                for run in range(args.runs):
                    log(f"  batch {point.batch_size}, run {run}")
                    result = json.loads(perfmodel("run", plan_path, "--synthetic", "--json").stdout)
                    worker = result["workers"][0]
                    rows.append(
                        {
                            "profile": repeat,
                            "model": model,
                            "batch_size": point.batch_size,
                            "run": run,
                            "profile_batch_ms": point.latency_ms,
                            "run_batch_ms": worker["batch_s"]["measured"] * 1e3,
                            "profile_load_s": point.load_ms / 1e3,
                            "run_load_s": worker["load_s"]["measured"],
                            "plan_p50_s": p50,
                            "run_makespan_s": result["measured_makespan_s"],
                            "load_avg_1m": result["load_avg_1m"][0],
                        }
                    )
                    pd.DataFrame(rows).to_csv(out / "against_run.csv", index=False)  # a cut run keeps its rows
    runs = pd.DataFrame(rows)
    write_tables(out, runs)
    finish_results(out)
    print(out)
    return 0


def write_tables(out: Path, runs: pd.DataFrame) -> None:
    runs = runs.assign(
        batch=np.log(runs["run_batch_ms"] / runs["profile_batch_ms"]),
        makespan=np.log(runs["run_makespan_s"] / runs["plan_p50_s"]),
        load=runs["run_load_s"] - runs["profile_load_s"],
    )
    per_point = runs.groupby(["model", "batch_size", "profile"])["batch"].mean()
    # a run's own part: the spread of a point's runs around their mean (the profile held fixed)
    within = runs["batch"] - runs.groupby(["model", "batch_size", "profile"])["batch"].transform("mean")
    n = runs.groupby(["model", "batch_size", "profile"])["batch"].transform("size")
    run_sd = float(np.sqrt((within**2).sum() / max(len(runs) - per_point.size, 1)))
    lines = [
        "# 011 part 0b — a run's batch time against its profile's, the point fixed",
        "",
        f"{len(runs)} runs of {per_point.size} profiled points, load average "
        f"{runs['load_avg_1m'].min():.2f}-{runs['load_avg_1m'].max():.2f} at their starts.",
        "",
        "| model | batch | profile | runs | run / profile batch time (geometric mean) | load: run - profile (s) |",
        "|---|---|---|---|---|---|",
    ]
    for (model, batch, repeat), group in runs.groupby(["model", "batch_size", "profile"]):
        lines.append(
            f"| {model} | {batch} | {repeat} | {len(group)} | {np.exp(group['batch'].mean()):.3f} | "
            f"{group['load'].mean():+.2f} |"
        )
    lines += [
        "",
        f"- Batch time, run over profile: geometric mean **{np.exp(runs['batch'].mean()):.3f}** "
        f"(median {np.exp(runs['batch'].median()):.3f}), sd of the log {runs['batch'].std():.3f} over all runs; "
        f"of a run around its point's other runs {run_sd:.3f} (pooled, {int((n > 1).sum())} runs).",
        f"- Makespan over the plan's p50 (P = 0.5): geometric mean {np.exp(runs['makespan'].mean()):.3f}, "
        f"sd of the log {runs['makespan'].std():.3f}.",
        f"- Load, run minus profile: median {runs['load'].median():+.2f} s (range {runs['load'].min():+.2f} to "
        f"{runs['load'].max():+.2f} s).",
        "",
    ]
    (out / "against_run.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
