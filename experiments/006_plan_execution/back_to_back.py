"""006, part 2 — does the machine hold still from a profile to the run planned from it, a minute later?

run.py's plans miss by up to +-20% where the same plan, on the same profile, was +-3% an hour before.
This separates what perfmodel predicts from what the machine does. Each round, for each model:

  1. profile the one batch size the plans use (`perfmodel profile`, one point, fresh);
  2. plan one worker for 90% of what it finishes in the deadline (`perfmodel plan --json`);
  3. run it (`perfmodel run PLAN --synthetic --json`);
  4. profile the same point again.

Per round: the profile's median before and after (how far the machine moved in that minute, with no
perfmodel prediction involved), the run's steady batch (median) against both, and the makespan error.

    python experiments/006_plan_execution/back_to_back.py                 # CPU: 4 rounds, about 12 minutes
    python experiments/006_plan_execution/back_to_back.py --device cuda   # on a GPU machine

Writes back-to-back.csv (one row per round and model) and back-to-back.md.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import pandas as pd
from run import CPU_MODELS, GPU_MODELS, HERE, SHARE, _machine, capacity, hardware_of, log

from experiments.lab import at_least_one, finish_results, new_results, perfmodel

BATCH = {"cpu": 32, "cuda": 128}  # what the planner chose for nearly every plan of run.py


def profile_point(model: str, size: int, batch: int, device: str, out: Path) -> dict:
    out.unlink(missing_ok=True)
    perfmodel(
        "profile", "--model", model, "--device", device, "--input-sizes", size, "--batch-sizes", batch, "--out", out
    )
    row = pd.read_csv(out).iloc[0]
    return {
        "p50_ms": float(row["latency_p50_ms"]),
        "ci_rel": float(row["latency_ci_rel"]),
        "samples": int(row["samples"]),
        "at": str(row["created_at"]),
    }


def one_round(model: str, size: int, batch: int, device: str, deadline: float, work: Path, k: int) -> dict:
    before = profile_point(model, size, batch, device, work / f"{model}-{k}-before.csv")
    hardware = hardware_of(work / f"{model}-{k}-before.csv")
    images = int(SHARE[1] * capacity(work / f"{model}-{k}-before.csv", size, deadline, hardware, []))
    plan = work / f"{model}-{k}-plan.json"
    plan.write_text(
        perfmodel(
            "plan",
            "--images",
            images,
            "--deadline",
            f"{deadline}s",
            "--profile",
            work / f"{model}-{k}-before.csv",
            "--input-size",
            size,
            "--pool",
            f"{hardware}=1",
            "--json",
        ).stdout
    )
    run = json.loads(perfmodel("run", plan, "--synthetic", "--json").stdout)
    (work / f"{model}-{k}-run.json").write_text(json.dumps(run, indent=1))
    after = profile_point(model, size, batch, device, work / f"{model}-{k}-after.csv")
    worker = run["workers"][0]
    steady = statistics.median(end - start for start, end in worker["timeline"]["batches"][1:])
    row = {
        "round": k,
        "model": model,
        "input_size": size,
        "batch_size": worker["batch_size"],
        "profile_at": before["at"],
        "load_avg_1m": run["load_avg_1m"][0],
        "before_ms": before["p50_ms"],
        "before_ci_rel": before["ci_rel"],
        "before_samples": before["samples"],
        "run_batch_ms": steady * 1000,
        "after_ms": after["p50_ms"],
        "after_ci_rel": after["ci_rel"],
        "after_before": after["p50_ms"] / before["p50_ms"],
        "run_before": steady * 1000 / before["p50_ms"],
        "predicted_s": run["predicted_makespan_s"],
        "measured_s": run["measured_makespan_s"],
        "error_rel": run["error_rel"],
    }
    log(
        f"{model} round {k}: profile {before['p50_ms']:.0f} ms, run {steady * 1000:.0f} ms, profile again "
        f"{after['p50_ms']:.0f} ms; makespan {run['error_rel']:+.1%}"
    )
    return row


def _ci(value: float) -> str:
    return "too few calls to bound" if math.isnan(value) else f"+-{value:.0%}"


def table(rows: pd.DataFrame) -> str:
    lines = [
        "| round | model | profile at (UTC) | profile ms (ci) | run batch ms | profile after ms | after / before "
        "| run / before | makespan error | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows.itertuples():
        lines.append(
            f"| {r.round} | {r.model} {r.input_size} px b{r.batch_size} | {r.profile_at[11:19]} | "
            f"{r.before_ms:.0f} ({_ci(r.before_ci_rel)}) | {r.run_batch_ms:.0f} | {r.after_ms:.0f} | "
            f"{r.after_before:.2f} | {r.run_before:.2f} | {r.error_rel:+.1%} | {r.load_avg_1m:.2f} |"
        )
    lines += [
        "",
        "| model | rounds | after / before: range | run / before: range | makespan error: median abs, range |",
        "|---|---|---|---|---|",
    ]
    for model, g in rows.groupby("model", sort=False):
        lines.append(
            f"| {model} | {len(g)} | {g.after_before.min():.2f}-{g.after_before.max():.2f} | "
            f"{g.run_before.min():.2f}-{g.run_before.max():.2f} | {g.error_rel.abs().median():.1%}, "
            f"{g.error_rel.min():+.1%} to {g.error_rel.max():+.1%} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=at_least_one, default=4)
    ap.add_argument("--deadline", type=float, default=25.0, help="seconds per plan (default: 25)")
    ap.add_argument(
        "--results", type=Path, default=None, help="folder for the results (default: a new one in results/)"
    )
    args = ap.parse_args()
    kind = "cpu" if args.device == "cpu" else "cuda"
    out = args.results or new_results(HERE, device=args.device)
    work = HERE / "work" / "back-to-back"
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    started = time.strftime("%Y-%m-%d %H:%M")
    rows = [
        one_round(model, size, BATCH[kind], args.device, args.deadline, work, k)
        for k in range(1, args.rounds + 1)
        for model, size in (CPU_MODELS if kind == "cpu" else GPU_MODELS).items()
    ]
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "back-to-back.csv", index=False)
    header = (
        f"Machine: {_machine(args.device)}; {started} to "
        f"{time.strftime('%H:%M')}; deadline {args.deadline:g} s per plan.\n\n"
    )
    (out / "back-to-back.md").write_text(header + table(frame))
    if (out / "run.json").exists():
        finish_results(out)
    print(header + table(frame))


if __name__ == "__main__":
    main()
