"""The memory traffic of a model, counted on the CPU: the bytes its operators read and write per image.

A GPU kernel takes at least its bytes over the memory bandwidth. A framework that runs a model operator
by operator (eager PyTorch, and most engines for most operators) reads each operator's inputs and weights
from memory and writes its outputs back. Run on torch's "meta" device (shapes, no data, no arithmetic),
every operator the model dispatches is counted that way: views move nothing and are skipped, an in-place
operator reads and writes its tensor. Counted at batch 1 and 2, the difference is the traffic per image
(activations), the rest is fixed (weights). Elements are counted, not bytes: a precision's element size
(ELEMENT_BYTES) turns them into bytes.

Which of a transfer's guesses uses it: perfmodel.fitting.transfer ("traffic"). The counts of the models
perfmodel ships or was judged on are in perfmodel/data/model_traffic.json (written by
experiments/003_fit_accuracy/model_traffic.py); a model not in it is not counted, and the transfer says so.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from perfmodel.errors import PredictorFormatError

TRAFFIC_FILE = Path(__file__).resolve().parents[1] / "data" / "model_traffic.json"
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "int8": 1}


def builders() -> dict:
    """Model name (as profiles and published collections name it) -> (torchvision builder, its input sizes)."""
    from perfmodel._torchvision import import_torchvision

    models = import_torchvision().models
    return {
        "resnet50": (models.resnet50, (224, 320, 448)),
        "resnet152": (models.resnet152, (224,)),
        "efficientnet_b0": (models.efficientnet_b0, (224,)),
        "alexnet": (models.alexnet, (224,)),
        "vgg16": (models.vgg16, (224,)),
        "inception-v3": (lambda: models.inception_v3(init_weights=False), (299,)),
        "vit-b16": (lambda: models.vit_b_16(image_size=384), (384,)),
        "swin-tiny-v1": (models.swin_t, (224,)),
        "swin-tiny-v2": (models.swin_v2_t, (256,)),
    }


def count_elements(build, input_size: int, batch: int) -> int:
    """Elements every non-view operator of the model reads and writes, for one call at (batch, input_size)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Counter(TorchDispatchMode):
        elements = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view:
                tensors = tree_flatten((args, kwargs, out))[0]
                self.elements += sum(t.numel() for t in tensors if isinstance(t, torch.Tensor))
            return out

    with torch.device("meta"):
        model = build().eval()
    x = torch.empty(batch, 3, input_size, input_size, device="meta")
    with torch.inference_mode(), Counter() as counter:
        model(x)
    return int(counter.elements)


def count(build, input_sizes) -> dict:
    """{"per_image": {size: elements}, "fixed": elements}: the traffic per image at each input size, and what
    does not grow with the batch (weights), the median over the sizes."""
    per_image, fixed = {}, []
    for size in input_sizes:
        one, two = count_elements(build, size, 1), count_elements(build, size, 2)
        per_image[str(size)] = two - one
        fixed.append(2 * one - two)
    return {"per_image": per_image, "fixed": int(sorted(fixed)[len(fixed) // 2])}


@lru_cache(maxsize=1)
def shipped_traffic() -> dict:
    try:
        return json.loads(TRAFFIC_FILE.read_text())["models"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PredictorFormatError(f"{TRAFFIC_FILE} cannot be read ({exc}); reinstall perfmodel.") from None


def traffic_bytes(model: str, precision: str) -> tuple[float, float] | None:
    """(bytes per unit of work w = b * (s/224)^2, fixed bytes) of a counted model at a precision, or None."""
    counted = shipped_traffic().get(str(model))
    if counted is None or precision not in ELEMENT_BYTES:
        return None
    size = ELEMENT_BYTES[precision]
    per_work = sorted(n / (int(s) / 224.0) ** 2 for s, n in counted["per_image"].items())
    return size * per_work[len(per_work) // 2], size * float(counted["fixed"])
