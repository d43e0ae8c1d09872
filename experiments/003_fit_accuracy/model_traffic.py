"""The memory traffic of the models perfmodel ships or was judged on, counted on the CPU (issue 40).

    python experiments/003_fit_accuracy/model_traffic.py   # a few seconds; writes perfmodel/data/model_traffic.json

Each model is built from torchvision on torch's meta device and run once at batch 1 and 2 per input size
(perfmodel.fitting.traffic.count): the elements every operator reads and writes, per image and fixed.
A transfer's "traffic" guess (perfmodel.fitting.transfer) reads them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.lab import log, no_options  # noqa: E402
from perfmodel.files import atomic_write_text  # noqa: E402
from perfmodel.fitting.traffic import TRAFFIC_FILE, builders, count  # noqa: E402


def main() -> None:
    no_options(__doc__)
    import torch

    from perfmodel._torchvision import import_torchvision

    torchvision = import_torchvision()
    models = {}
    for name, (build, sizes) in builders().items():
        models[name] = count(build, sizes)
        log(f"{name}: {models[name]}")
    data = {
        "what": "elements every non-view operator reads and writes in one call (torch meta device): per image "
        "at each input size, and fixed (weights); bytes = elements x the precision's element size",
        "counted_with": f"torch {torch.__version__}, torchvision {torchvision.__version__}",
        "models": models,
    }
    atomic_write_text(TRAFFIC_FILE, json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
