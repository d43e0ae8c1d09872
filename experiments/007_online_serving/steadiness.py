"""007 — Does one core of this machine hold its speed from one second to the next?

    python experiments/007_online_serving/steadiness.py [--core 1] [--seconds 60] [--results DIR]

The queueing model behind online plans lets each batch's service time vary at random around the
calibrated median, independently of the batch before. A machine whose speed moves for seconds at a time
breaks that: near capacity, a few seconds at 30% slower build a queue that takes seconds more to drain.
This times one fixed computation (the tiny CNN on a batch of 8 at 64 px, one torch thread, pinned to
--core, as the 007 server runs) back to back for --seconds, alone, and reports each second's median
call against the median of all, with the hypervisor's steal time of that core in the same second
(/proc/stat: time the VM wanted the core and the host ran something else).

Writes DIR/steadiness.csv (one row per second) and DIR/steadiness.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def steal_s(core: int) -> float:
    """The core's steal time so far (seconds), from /proc/stat."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{core} "):
            return int(line.split()[8]) * TICK_S
    return float("nan")


def main() -> None:
    import torch

    from experiments.lab import new_results
    from perfmodel.models import ModelSpec, build_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--core", type=int, default=1)
    p.add_argument("--seconds", type=int, default=60)
    p.add_argument("--results", type=Path, help="folder for the results (default: a new one in results/)")
    args = p.parse_args()
    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(1)
    model = build_model(ModelSpec("tiny")).eval()
    x = torch.randn(8, 3, 64, 64)
    rows = []
    load = os.getloadavg()[0]
    with torch.inference_mode():
        for _ in range(50):
            model(x)
        for second in range(args.seconds):
            steal0, end, times = steal_s(args.core), time.perf_counter() + 1.0, []
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                model(x)
                times.append(time.perf_counter() - t0)
            rows.append(
                {
                    "second": second,
                    "calls": len(times),
                    "median_ms": float(np.median(times) * 1000),
                    "steal_share": (steal_s(args.core) - steal0) / 1.0,
                }
            )
    frame = pd.DataFrame(rows)
    frame["ratio"] = frame.median_ms / frame.median_ms.median()
    args.results = args.results or new_results(HERE)
    args.results.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.results / "steadiness.csv", index=False, float_format="%.4g")
    q = frame.ratio.quantile([0, 0.1, 0.5, 0.9, 1.0]).to_numpy()
    slow = frame.ratio > 1.15 * q[1]  # slower than the machine's fast state (its fastest tenth) by 15%
    runs = (slow != slow.shift()).cumsum()[slow]
    longest = int(runs.value_counts().max()) if slow.any() else 0
    text = (
        f"# One core's speed, second by second: tiny CNN, batch 8 at 64 px, 1 thread on core {args.core}, "
        f"{args.seconds} s alone ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, load average {load:.2f})\n\n"
        f"Median call {frame.median_ms.median():.3f} ms. Each second's median over the median of all seconds: "
        f"min {q[0]:.2f}, 10th percentile {q[1]:.2f}, median {q[2]:.2f}, 90th {q[3]:.2f}, max {q[4]:.2f}; "
        f"the 90th over the 10th: {q[3] / q[1]:.2f}. {int(slow.sum())} of {len(frame)} seconds ran more than "
        f"15% slower than the 10th percentile, the longest stretch of them {longest} s. Steal time of the core "
        f"(hypervisor): {frame.steal_share.mean():.1%} of the seconds on "
        f"average, at most {frame.steal_share.max():.1%}.\n\n"
        "Per second (ratio to the median):\n\n" + " ".join(f"{r:.2f}" for r in frame.ratio) + "\n"
    )
    (args.results / "steadiness.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
