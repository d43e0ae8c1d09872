"""How much does perfmodel's own timing loop add to the latency it reports?

Compares, in one process, on the same model object and the same input tensors:
  bare      a plain loop: perf_counter_ns around model(x) under one inference_mode, median of N calls;
  profiler  perfmodel's timed path: TorchRunner.bind() + measure_latency() with its stability rule.
Fairness on a noisy shared CPU: torch pinned to one thread; the two are interleaved (bare, profiler,
bare, profiler, ...) for several rounds so that drifts in machine load hit both alike; the ratio is
taken per round and its median reported; the load average is recorded before and after.

Also times `perfmodel profile --batch-sizes auto` end to end (the real command, fresh-process warm-up).

    python experiments/010_profiler_overhead/run.py            # writes results.csv and results.md here
    python experiments/010_profiler_overhead/run.py --quick    # fewer rounds, no auto timings
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from perfmodel.profile.backends.torch_backend import TorchOptions, TorchRunner
from perfmodel.profile.models import resolve_model
from perfmodel.profile.provenance import cpu_name
from perfmodel.profile.timing import StabilityRule, measure_latency

HERE = Path(__file__).resolve().parent
CASES = [("tiny", 32, 1), ("tiny", 64, 16), ("resnet50", 64, 1), ("resnet50", 64, 8)]


def bare_median_ms(model, inputs, n: int) -> float:
    samples = np.empty(n)
    with torch.inference_mode():
        for i in range(n):
            t0 = time.perf_counter_ns()
            model(inputs[i % len(inputs)])
            samples[i] = time.perf_counter_ns() - t0
    return float(np.median(samples)) / 1e6


def overhead(model_name: str, size: int, batch: int, rounds: int) -> dict:
    runner = TorchRunner(resolve_model(model_name), TorchOptions(threads=1))
    runner.load()
    inputs = runner.inputs(batch, size)
    call = runner.bind(inputs)
    rule = StabilityRule(max_time_s=3.0)
    with runner.inference():
        for i in range(5):
            call(i)
    ratios, bare_ms, prof_ms, samples = [], [], [], []
    for r in range(rounds):
        # Alternate which goes first (ABBA...), so that an order effect cancels out over the rounds.
        n = samples[-1] if samples else 100
        b = bare_median_ms(runner.model, inputs, n) if r % 2 else None
        with runner.inference():  # as the sweep does: entered once around the whole measurement
            summary = measure_latency(call, rule)
        if b is None:
            b = bare_median_ms(runner.model, inputs, summary.samples)  # as many calls as the profiler took
        bare_ms.append(b)
        prof_ms.append(summary.median_ms)
        samples.append(summary.samples)
        ratios.append(summary.median_ms / b)
    return {
        "model": model_name, "input_size": size, "batch_size": batch, "rounds": rounds,
        "bare_median_ms": float(np.median(bare_ms)), "profiler_median_ms": float(np.median(prof_ms)),
        "ratio_median": float(np.median(ratios)), "ratio_min": float(np.min(ratios)), "ratio_max": float(np.max(ratios)),
        "samples_per_round": int(np.median(samples)),
    }


def time_auto(model_name: str, size: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "auto.csv"
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "perfmodel", "profile", "--model", model_name, "--batch-sizes", "auto",
             "--input-sizes", str(size), "--out", str(out)],
            check=True, capture_output=True, text=True,
        )
        seconds = time.perf_counter() - t0
        df = pd.read_csv(out)
    ok = df[df["status"] == "ok"]
    return {"model": model_name, "input_size": size, "wall_s": seconds, "points": len(df),
            "largest_batch": int(ok["batch_size"].max()), "statuses": ",".join(sorted(set(df["status"])))}


def markdown(df: pd.DataFrame) -> str:
    cell = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-auto", action="store_true", help="keep auto_results.csv from an earlier run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()
    rows = [overhead(m, s, b, 3 if args.quick else args.rounds) for m, s, b in CASES]
    load_after = os.getloadavg()
    table = pd.DataFrame(rows)
    if args.skip_auto and (HERE / "auto_results.csv").exists():
        autos = pd.read_csv(HERE / "auto_results.csv")
    else:
        autos = pd.DataFrame([] if args.quick else [time_auto("tiny", 64), time_auto("resnet50", 64)])
    machine = f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, 1 thread"
    loads = f"load average (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, " \
            f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}"
    print(machine)
    print(loads)
    print(table.to_string(index=False))
    if len(autos):
        print(autos.to_string(index=False))
    if not args.quick:
        table.to_csv(HERE / "results.csv", index=False)
        autos.to_csv(HERE / "auto_results.csv", index=False)
        (HERE / "results.md").write_text(
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}; {loads}.\n\n"
            "Profiler overhead (ratio = perfmodel's median / bare loop's median, per round; median of rounds):\n\n"
            + markdown(table) + "\n\n`perfmodel profile --batch-sizes auto` (CPU defaults):\n\n"
            + markdown(autos) + "\n"
        )


if __name__ == "__main__":
    main()
