"""A GPU predicted from other GPUs (`perfmodel fit --target-hardware`, issue 25's transfer) against the same
GPU measured by the campaign: ResNet-50, PyTorch fp16, 224 px, the batch sizes the source covers. Prints one
row per batch size, the median and p90 |error|.

    python experiments/008_gpu_campaign/transfer_vs_measured.py            # the H200, from T4 and V100 (published)
    python experiments/008_gpu_campaign/transfer_vs_measured.py --target h100 \
        --source experiments/008_gpu_campaign/results/h200/h200-resnet50-torch-fp16.csv   # the H100, from the H200
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from perfmodel.fitting import Predictor, fit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(ROOT / "profiles/reference/dle-pytorch-resnet50.csv"))
    parser.add_argument("--target", default="h200", help="the GPU predicted and measured (default: h200)")
    parser.add_argument("--measured", help="its profile (default: results/TARGET/TARGET-resnet50-torch-fp16.csv)")
    args = parser.parse_args()
    measured_path = args.measured or HERE / "results" / args.target / f"{args.target}-resnet50-torch-fp16.csv"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"{args.target}.json"
        fit(args.source, target_hardware=(args.target,)).save(path)
        (group,) = Predictor.load(path).select(hardware=args.target, precision="fp16")
    source = pd.read_csv(args.source)
    largest = int(source["batch_size"].max())
    measured = pd.read_csv(measured_path)
    measured = measured[(measured["status"] == "ok") & (measured["input_size"] == 224)]
    measured = measured[measured["batch_size"] <= largest]
    batch = measured["batch_size"].to_numpy()
    predicted = np.asarray(group.latency_ms(batch, np.full(len(batch), 224.0)), dtype=float)
    error = predicted / measured["latency_ms"].to_numpy() - 1
    print(f"{'batch':>6} {'measured ms':>12} {'predicted ms':>13} {'error':>8}")
    for b, m, p, e in zip(batch, measured["latency_ms"], predicted, error):
        print(f"{b:>6} {m:>12.2f} {p:>13.2f} {100 * e:>+7.1f}%")
    print(
        f"median |error| {100 * np.median(np.abs(error)):.1f}%, p90 {100 * np.quantile(np.abs(error), 0.9):.1f}% "
        f"over {len(batch)} batch sizes (1 to {largest})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
