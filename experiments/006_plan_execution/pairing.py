"""006 — Are two CPU workers slower together, and is it Ray?

    python experiments/006_plan_execution/pairing.py [--model resnet50] [--size 64] [--batch 16]
        [--seconds 15] [--rounds 3] [--plan PLAN.json] [--results DIR]

Two-worker CPU plans ran 8-20% slower than planned while one-worker plans held (run 5). This times the
same loop (the model on one thread, batch after batch of random inputs, as `perfmodel run --synthetic`
does) four ways, interleaved round by round so that the machine's drift falls on all of them alike:
one plain process, two plain processes at once, one Ray actor, two Ray actors at once, and, with
`--plan` (a plan of the same model, size and batch), `perfmodel run PLAN --synthetic` itself (the
median of its workers' model time per batch). Every worker loads, warms up, then waits for a common
start time, so that a pair overlaps for the whole window.

Writes DIR/pairing.csv (one row per worker per way per round: median and quartiles of the batch time)
and DIR/pairing.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from experiments.lab import at_least_one, new_results  # noqa: E402

WAYS = ["1 process", "2 processes", "1 Ray actor", "2 Ray actors"]
WARMUP_BATCHES = 5
LOAD_S = 8.0  # the common start is this far after the workers are launched (loads take 1-3 s here)


def time_batches(model: str, size: int, batch: int, start_at: float, seconds: float) -> dict:
    """Load the model, warm it up, wait for `start_at`, then run batches for `seconds`; their times in s."""
    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    runner = TorchRunner(ModelSpec(model, None), TorchOptions(device="cpu", threads=1))
    runner.load()
    inputs = runner.inputs(batch, size)
    times = []
    with runner.inference():
        for k in range(WARMUP_BATCHES):
            runner.model(inputs[k % len(inputs)])
        time.sleep(max(0.0, start_at - time.time()))
        end = start_at + seconds
        while time.time() < end:
            t0 = time.perf_counter()
            runner.model(inputs[len(times) % len(inputs)])
            times.append(time.perf_counter() - t0)
    return {"pid": os.getpid(), "late_s": max(0.0, time.time() - end), "times": times}


def plain(count: int, args) -> list[dict]:
    start_at = time.time() + LOAD_S
    child = [
        sys.executable,
        __file__,
        "--child",
        str(start_at),
        "--model",
        args.model,
        "--size",
        str(args.size),
        "--batch",
        str(args.batch),
        "--seconds",
        str(args.seconds),
    ]
    procs = [subprocess.Popen(child, stdout=subprocess.PIPE, text=True) for _ in range(count)]
    try:
        return [json.loads(p.communicate()[0]) for p in procs]
    finally:
        for p in procs:
            p.kill()


def with_ray(count: int, args) -> list[dict]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        actor = ray.remote(num_cpus=1)(Timer)
        actors = [actor.remote() for _ in range(count)]
        ray.get([a.ready.remote() for a in actors])  # the actors' processes are up before the clock
        start_at = time.time() + LOAD_S
        return ray.get([a.run.remote(args.model, args.size, args.batch, start_at, args.seconds) for a in actors])
    finally:
        ray.shutdown()


def perfmodel_run(plan: Path) -> list[dict]:
    from perfmodel.run import RunOptions, read_run_plan, run_plan

    result = run_plan(read_run_plan(plan), RunOptions(synthetic=True), lambda event: None).to_dict()
    return [{"median_ms": w["model_s_median"] * 1e3, "batches": w["batches_done"]} for w in result["workers"]]


def summary(times: list[float]) -> dict:
    ms = [t * 1e3 for t in times]
    q1, median, q3 = statistics.quantiles(ms, n=4)
    return {"median_ms": median, "q1_ms": q1, "q3_ms": q3, "batches": len(ms)}


class Timer:
    def ready(self) -> bool:
        return True

    def run(self, *a):
        return time_batches(*a)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--child", type=float, help=argparse.SUPPRESS)
    p.add_argument("--model", default="resnet50")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--rounds", type=at_least_one, default=3)
    p.add_argument("--plan", type=Path, help="also time `perfmodel run PLAN --synthetic` (same model, size, batch)")
    p.add_argument("--results", type=Path, help="folder for the results (default: a new one in results/)")
    args = p.parse_args()
    if args.child is not None:
        print(json.dumps(time_batches(args.model, args.size, args.batch, args.child, args.seconds)))
        return
    args.results = args.results or new_results(HERE)
    args.results.mkdir(parents=True, exist_ok=True)
    ways = WAYS + (["perfmodel run"] if args.plan else [])
    rows = []
    for r in range(args.rounds):
        for way in ways:
            load = os.getloadavg()[0]
            count = 2 if way.startswith("2") else 1
            if way == "perfmodel run":
                workers = perfmodel_run(args.plan)
            else:
                workers = [summary(w["times"]) for w in (with_ray if "Ray" in way else plain)(count, args)]
            for k, w in enumerate(workers):
                rows.append({"round": r, "way": way, "worker": k, **w, "load_avg_1m": load})
                print(
                    f"round {r} {way:13s} worker {k}: {w['median_ms']:6.1f} ms median of {w['batches']} batches, "
                    f"load {load:.2f}",
                    flush=True,
                )
    frame = pd.DataFrame(rows)
    frame.to_csv(args.results / "pairing.csv", index=False)
    alone = frame[frame.way == "1 process"].median_ms.median()
    lines = [
        f"# Two workers together vs one alone: {args.model} {args.size} px batch {args.batch}, 1 thread each",
        "",
        f"{args.rounds} rounds, {args.seconds:.0f} s of batches per way per round, interleaved. "
        f"Machine: {os.cpu_count()} cores. Ratio = median batch / median of '1 process'.",
        "",
        "| way | median batch (ms), per round and worker | median | ratio |",
        "|---|---|---|---|",
    ]
    for way in ways:
        part = frame[frame.way == way]
        each = ", ".join(f"{v:.1f}" for v in part.median_ms)
        lines.append(f"| {way} | {each} | {part.median_ms.median():.1f} | {part.median_ms.median() / alone:.3f} |")
    (args.results / "pairing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
