"""011, part 2 — Where did a run's time go against its plan? Per worker, from the runs run.py kept.

For every run's JSON in DIR/runs/ and its plan in DIR/plans/: each worker's median batch time against the
plan's (the profile's point), its load and warm-up against the plan's, the time between its batches
(outside the model: the record sent, the next batch taken), its finish against the plan's arithmetic,
and the run's makespan against the plan's predicted p50. Medians per number of workers and batch size.

    python experiments/011_deadline_calibration/where.py results/DIR     # writes DIR/where.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def workers(folder: Path) -> pd.DataFrame:
    rows = []
    for path in sorted((folder / "runs").glob("*.json")):
        run = json.loads(path.read_text())
        plan = json.loads((folder / "plans" / path.name.replace("-steal", "")).read_text())
        p50 = plan["makespan_quantiles_s"]["p50"]
        for w in run["workers"]:
            batches = np.asarray(w["timeline"]["batches"], float).reshape(-1, 2)
            between = batches[1:, 0] - batches[:-1, 1]
            rows.append(
                {
                    "run": path.stem,
                    "workers": len(run["workers"]),
                    "batch_size": w["batch_size"],
                    "batch": w["batch_s"]["measured"] / w["batch_s"]["predicted"],
                    "load_s": w["load_s"]["measured"] - w["load_s"]["predicted"],
                    "warmup_s": w["warmup_s"]["measured"] - w["warmup_s"]["predicted"],
                    "between_ms": float(np.median(between)) * 1e3 if len(between) else np.nan,
                    "finish": w["finish_s"]["measured"] / w["finish_s"]["predicted"],
                    "makespan": run["measured_makespan_s"] / p50,
                }
            )
    return pd.DataFrame(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="a results folder of run.py (with runs/ and plans/)")
    args = parser.parse_args()
    frame = workers(args.folder)
    if frame.empty:
        raise SystemExit(f"{args.folder / 'runs'} holds no run's JSON: run run.py first.")
    columns = ["batch", "load_s", "warmup_s", "between_ms", "finish", "makespan"]
    table = frame.groupby(["workers", "batch_size"]).agg(n=("run", "size"), **{c: (c, "median") for c in columns})
    lines = [
        f"# 011 part 2 — where a run's time went against its plan ({len(frame)} workers, "
        f"{frame['run'].nunique()} runs)",
        "",
        "Medians. batch, finish, makespan: measured / planned (makespan against the predicted p50); load and "
        "warm-up: measured - planned, s; between: ms between two batches (outside the model).",
        "",
        "| workers | batch size | workers run | batch | load s | warm-up s | between ms | finish | makespan |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (count, size), r in table.iterrows():
        lines.append(
            f"| {count} | {size} | {int(r.n)} | {r.batch:.3f} | {r.load_s:+.2f} | {r.warmup_s:+.2f} | "
            f"{r.between_ms:.1f} | {r.finish:.3f} | {r.makespan:.3f} |"
        )
    lines.append("")
    (args.folder / "where.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
