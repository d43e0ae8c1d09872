"""011 — Does loading a model take longer when a second worker loads at the same time?

Plain processes (no Ray), one torch thread each, the model built as `perfmodel run`'s workers build it
(TorchRunner.load): alone, beside a neighbour running batches (as `--alongside 1` profiles it), and two
loading at the same instant (as a two-worker run starts). Four rounds; prints each load in ms.

    python experiments/011_deadline_calibration/coload.py efficientnet_b0     # ~2 min on 2 cores
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 4
START_AFTER_S = 6.0  # every process has imported torch by then


def _runner(model: str):
    sys.path.insert(0, str(ROOT))
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    torch.set_num_threads(1)
    return TorchRunner(ModelSpec(model, None), TorchOptions(device="cpu", threads=1), 0)


def build(start_at: float, out, model: str) -> None:
    runner = _runner(model)
    while time.time() < start_at:
        time.sleep(0.001)
    out.put(runner.load())


def busy(stop_at: float, model: str) -> None:
    import torch

    runner = _runner(model)
    runner.load()
    x = torch.randn(16, 3, 96, 96)
    with torch.inference_mode():
        while time.time() < stop_at:
            runner.model(x)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from perfmodel.models import BUILTIN_MODELS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", default="efficientnet_b0", choices=BUILTIN_MODELS)
    model = parser.parse_args().model  # a model no process can build would leave this one waiting forever
    mp.set_start_method("spawn")
    for round_ in range(ROUNDS):
        for case in ("alone", "busy", "two"):
            out, start = mp.Queue(), time.time() + START_AFTER_S
            processes = [mp.Process(target=build, args=(start, out, model))]
            if case == "two":
                processes.append(mp.Process(target=build, args=(start, out, model)))
            if case == "busy":
                processes.append(mp.Process(target=busy, args=(start + 8, model)))
            for p in processes:
                p.start()
            loads = [out.get() for _ in range(2 if case == "two" else 1)]
            for p in processes:
                p.join()
            print(round_, case, [round(ms) for ms in loads], f"load {os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
