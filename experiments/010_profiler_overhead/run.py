"""Does the profiler report what a bare timing loop sees, in the median and in the tail, with its monitor on?

For each case (model, input size, batch) and each round, two arms run one after the other, each in a
fresh process, on the same model (same seed) and the same three input batches:

  bare      a plain loop: perf_counter_ns around model(x) under one inference_mode, N calls; nothing else runs;
  profiler  `perfmodel.run_profile` of that one point, exactly as a sweep measures it: the measuring worker
            process times N calls while the hardware monitor samples in its own process (every 250 ms on a
            CPU since 130998d, 50 ms on a GPU; bare+thread below reads every 50 ms).

A third arm shows why the monitor is a process of its own: the bare loop with the monitor's readings
taken on a thread of the timing process (as the profiler did before), `bare+thread`.

Per round the ratios arm/bare of the median, p90 and p99 are taken; the table gives their median over
the rounds and their range. The order of the arms alternates between rounds, so that drifts in the
machine's load hit all of them alike; the load average is recorded before and after.

    python experiments/010_profiler_overhead/run.py            # writes a new results/<date>-<machine>-<commit>/
    python experiments/010_profiler_overhead/run.py --skip-auto # keeps the latest earlier run's auto_results.csv
    python experiments/010_profiler_overhead/run.py --quick    # 3 rounds, no files written
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, finish_results, new_results, perfmodel  # noqa: E402
from perfmodel.models import resolve_model  # noqa: E402
from perfmodel.profile import ProfileConfig, StabilityRule, run_profile  # noqa: E402
from perfmodel.profile.provenance import cpu_name  # noqa: E402
from perfmodel.torch_runner import TorchOptions, TorchRunner  # noqa: E402

# (model, input px, batch, calls per arm and round): ~0.1 ms, ~0.7 ms and ~40 ms calls on one CPU thread
CASES = [("tiny", 32, 1, 5000), ("tiny", 64, 16, 2000), ("resnet50", 64, 1, 200)]
STATS = ("p50", "p90", "p99")


def bare_loop(model_name: str, size: int, batch: int, calls: int, monitor_thread: bool) -> dict:
    """The bare arm, in this (fresh) process: N timed calls and their percentiles in ms."""
    import torch

    runner = TorchRunner(resolve_model(model_name), TorchOptions(threads=1))
    runner.load()
    inputs = runner.inputs(batch, size)
    model = runner.model
    stop = threading.Event()
    if monitor_thread:  # the old design: the monitor's readings on a thread of the timing process
        sampler = _InProcessSampler()
        threading.Thread(target=sampler.run, args=(stop,), daemon=True).start()
    samples = np.empty(calls)
    with torch.inference_mode():
        for i in range(5):
            model(inputs[i % 3])
        for i in range(calls):
            t0 = time.perf_counter_ns()
            model(inputs[i % 3])
            samples[i] = time.perf_counter_ns() - t0
    stop.set()
    samples /= 1e6
    return {stat: float(np.percentile(samples, q)) for stat, q in zip(STATS, (50, 90, 99))}


class _InProcessSampler:
    """What one monitor reading does (psutil over this process tree, system CPU), every 50 ms, on a thread."""

    def run(self, stop: threading.Event) -> None:
        import psutil

        me = psutil.Process()
        while not stop.wait(0.05):
            psutil.cpu_percent(interval=None)
            for proc in [me, *me.children(recursive=True)]:
                proc.memory_info()


def run_bare(model_name: str, size: int, batch: int, calls: int, monitor_thread: bool) -> dict:
    request = json.dumps([model_name, size, batch, calls, monitor_thread])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run(
        [sys.executable, __file__, "--bare-loop", request], capture_output=True, text=True, check=True, env=env
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_profiler(model_name: str, size: int, batch: int, calls: int) -> dict:
    """One point through the real sweep (measuring worker + monitor process), exactly N timed calls."""
    rule = StabilityRule(rel_ci=1e-9, min_samples=calls, max_samples=calls, max_time_s=600, warmup_calls=5)
    config = ProfileConfig(model=model_name, batch_sizes=(batch,), input_sizes=(size,), warmup="in-process", rule=rule)
    with tempfile.TemporaryDirectory() as tmp:
        row = run_profile(config, Path(tmp) / "p.csv").iloc[0]
    assert row["status"] == "ok" and row["samples"] == calls, row.get("error")
    return {"p50": row["latency_p50_ms"], "p90": row["latency_p90_ms"], "p99": row["latency_p99_ms"]}


def overhead(model_name: str, size: int, batch: int, calls: int, rounds: int) -> list[dict]:
    arms = {
        "bare": lambda: run_bare(model_name, size, batch, calls, monitor_thread=False),
        "profiler": lambda: run_profiler(model_name, size, batch, calls),
        "bare+thread": lambda: run_bare(model_name, size, batch, calls, monitor_thread=True),
    }
    rows = []
    for r in range(rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        measured = {arm: arms[arm]() for arm in order}
        for arm in ("profiler", "bare+thread"):
            rows.append(
                {
                    "model": model_name,
                    "input_size": size,
                    "batch_size": batch,
                    "calls": calls,
                    "round": r,
                    "arm": arm,
                    **{f"bare_{s}_ms": measured["bare"][s] for s in STATS},
                    **{f"{s}_ms": measured[arm][s] for s in STATS},
                    **{f"{s}_ratio": measured[arm][s] / measured["bare"][s] for s in STATS},
                }
            )
        print(
            f"{model_name} {size}px b{batch} round {r}: "
            + ", ".join(
                f"{arm} p50/p90/p99 x{measured[arm]['p50'] / measured['bare']['p50']:.3f}/"
                f"{measured[arm]['p90'] / measured['bare']['p90']:.3f}/"
                f"{measured[arm]['p99'] / measured['bare']['p99']:.3f}"
                for arm in ("profiler", "bare+thread")
            ),
            flush=True,
        )
    return rows


def summarise(rounds: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (model, size, batch, calls, arm), g in rounds.groupby(
        ["model", "input_size", "batch_size", "calls", "arm"], sort=False
    ):
        row = {
            "model": model,
            "input px": size,
            "batch": batch,
            "calls": calls,
            "arm": arm,
            "rounds": len(g),
            "bare median ms": g["bare_p50_ms"].median(),
        }
        for s in STATS:
            row[f"{s} ratio"] = g[f"{s}_ratio"].median()
            row[f"{s} range"] = f"{g[f'{s}_ratio'].min():.3f}-{g[f'{s}_ratio'].max():.3f}"
        out.append(row)
    return pd.DataFrame(out)


def time_auto(model_name: str, size: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "auto.csv"
        t0 = time.perf_counter()
        perfmodel("profile", "--model", model_name, "--batch-sizes", "auto", "--input-sizes", size, "--out", out)
        seconds = time.perf_counter() - t0
        df = pd.read_csv(out)
    ok = df[df["status"] == "ok"]
    return {
        "model": model_name,
        "input_size": size,
        "wall_s": seconds,
        "points": len(df),
        "largest_batch": int(ok["batch_size"].max()),
        "statuses": ",".join(sorted(set(df["status"]))),
    }


def markdown(df: pd.DataFrame) -> str:
    cell = lambda v: f"{v:.4g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=at_least_one, default=11)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--skip-auto",
        action="store_true",
        help="keep the auto timings of the latest earlier run (its auto_results.csv)",
    )
    parser.add_argument("--bare-loop", default=None, help=argparse.SUPPRESS)  # the bare arm's own process
    args = parser.parse_args()
    if args.bare_loop:
        print(json.dumps(bare_loop(*json.loads(args.bare_loop))))
        return
    load_before = os.getloadavg()
    rounds = pd.DataFrame(
        [row for m, s, b, n in CASES for row in overhead(m, s, b, n, 3 if args.quick else args.rounds)]
    )
    load_after = os.getloadavg()
    table = summarise(rounds)
    earlier = sorted((HERE / "results").glob("*/auto_results.csv"))  # folders sort by date
    auto_source = "measured in this run"
    if args.skip_auto and earlier:
        autos = pd.read_csv(earlier[-1])
        auto_source = f"copied from {earlier[-1].relative_to(HERE)} (--skip-auto): not measured in this run"
    else:
        autos = pd.DataFrame([] if args.quick else [time_auto("tiny", 64), time_auto("resnet50", 64)])
    import torch

    machine = f"{cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, 1 thread"
    loads = (
        f"load average (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
        f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}"
    )
    print(machine)
    print(loads)
    print(table.to_string(index=False))
    if len(autos):
        print(autos.to_string(index=False))
    if not args.quick:
        out = new_results(HERE)
        rounds.to_csv(out / "rounds.csv", index=False)
        table.to_csv(out / "results.csv", index=False)
        autos.to_csv(out / "auto_results.csv", index=False)
        (out / "results.md").write_text(
            f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {machine}; {loads}.\n\n"
            "Ratios to a bare loop in its own process (median over rounds, and range), for the median (p50), p90 "
            "and p99 of N calls. `profiler`: the sweep's measuring worker with the hardware monitor on (its own "
            "process); `bare+thread`: the bare loop with the monitor's readings on a thread of the timing process "
            "(the earlier design):\n\n"
            + markdown(table)
            + f"\n\n`perfmodel profile --batch-sizes auto` (CPU defaults; {auto_source}):\n\n"
            + markdown(autos)
            + "\n"
        )
        finish_results(out)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
