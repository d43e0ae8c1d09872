"""011, part 0 — How far does a CPU's speed move between a profile and a run, minutes apart?

A profile point is timed for about 10 s, and its drift probe sees the machine for 20 s: both see
seconds. A plan is run minutes or hours after its profile. This script measures the part of the error
that neither sees: the same points (ResNet-50 at 64 px and EfficientNet-B0 at 96 px, batches 8 and 32,
one worker) profiled again and again, each repeat a new `perfmodel profile` process, and reports the
spread of each point's median over the repeats (the standard deviation of its logarithm, i.e. a relative
spread), less the part the point's own 95% interval already accounts for (a plan counts that one as the
profile's error). planning/drift.py's CPU_LEVEL default is the median of these spreads.

    python experiments/011_deadline_calibration/level.py              # 6 repeats, ~6 min on 2 cores
    python experiments/011_deadline_calibration/level.py --repeats 3
    python experiments/011_deadline_calibration/level.py --tables-only results/DIR

Writes level.csv (every repeat's point) and level.md in a new results/<date>-<machine>-<commit>/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, finish_results, log, new_results, perfmodel  # noqa: E402

POINTS = {"resnet50": 64, "efficientnet_b0": 96}
BATCHES = "8,32"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=at_least_one, default=6)
    parser.add_argument("--tables-only", type=Path, metavar="DIR", help="level.md again from DIR/level.csv")
    args = parser.parse_args()
    if args.tables_only:
        write_tables(args.tables_only, pd.read_csv(args.tables_only / "level.csv"))
        return 0
    out = new_results(HERE)
    rows = []
    for repeat in range(args.repeats):
        for model, size in POINTS.items():
            csv = out / f"repeat-{repeat}-{model}.csv"
            log(f"repeat {repeat}: {model}")
            perfmodel(
                "profile",
                "--model",
                model,
                "--input-sizes",
                size,
                "--batch-sizes",
                BATCHES,
                "--drift-probe",
                "0",
                "--out",
                csv,
            )
            frame = pd.read_csv(csv)
            for r in frame.itertuples():
                rows.append(
                    {
                        "repeat": repeat,
                        "model": model,
                        "batch_size": r.batch_size,
                        "latency_ms": r.latency_ms,
                        "latency_ci_rel": r.latency_ci_rel,
                        "load_avg_1m": r.load_avg_1m,
                        "created_at": r.created_at,
                    }
                )
            csv.unlink()
    runs = pd.DataFrame(rows)
    runs.to_csv(out / "level.csv", index=False)
    write_tables(out, runs)
    finish_results(out)
    print(out)
    return 0


def write_tables(out: Path, runs: pd.DataFrame) -> None:
    spread = (
        runs.assign(log=np.log(runs["latency_ms"]))
        .groupby(["model", "batch_size"])
        .agg(repeats=("log", "size"), rel_sd=("log", "std"), ci_rel_median=("latency_ci_rel", "median"))
        .reset_index()
    )
    # the point's own interval is a 95% one (1.96 sd); what is left is the speed's change between processes
    spread["beyond_ci"] = np.sqrt(np.maximum(spread["rel_sd"] ** 2 - (spread["ci_rel_median"] / 1.96) ** 2, 0))
    lines = [
        "# 011 part 0 — a CPU point's median, profiled again and again",
        "",
        f"{len(runs)} points, load average {runs['load_avg_1m'].min():.2f}-{runs['load_avg_1m'].max():.2f}.",
        "",
        "| model | batch | repeats | spread of the median (sd of log) | the point's own 95% CI (median) | "
        "spread beyond that CI |",
        "|---|---|---|---|---|---|",
    ]
    for r in spread.itertuples():
        lines.append(
            f"| {r.model} | {r.batch_size} | {r.repeats} | {r.rel_sd:.3f} | {r.ci_rel_median:.3f} | {r.beyond_ci:.3f} |"
        )
    lines += [
        "",
        f"Median over the points of the spread beyond the CI: **{spread['beyond_ci'].median():.3f}** "
        f"(range {spread['beyond_ci'].min():.3f}-{spread['beyond_ci'].max():.3f}); of the whole spread "
        f"{spread['rel_sd'].median():.3f}.",
        "",
        "A repeat's points did not move together (see level.csv): the change belongs to the process and the "
        "minute, not to one machine-wide speed.",
        "",
    ]
    (out / "level.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    raise SystemExit(main())
