"""Import torchvision on a torch build its compiled ops do not match.

torchvision registers its Python-side op implementations against the schemas `torchvision::nms` and
`torchvision::qnms`, which normally come from its compiled extension. On a CPU-only torch whose ABI
does not match torchvision's extension, that extension does not load, the schemas are missing and
`import torchvision` fails. perfmodel only needs the model architectures (plain PyTorch modules), so
it defines the two schemas itself when they are missing. Nothing else in perfmodel imports
torchvision directly.
"""

from __future__ import annotations

_SCHEMAS = {
    "torchvision::nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "torchvision::qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


def import_torchvision():
    import torch

    for name, schema in _SCHEMAS.items():
        namespace, op = name.split("::")
        if not hasattr(getattr(torch.ops, namespace), op):
            torch.library.define(name, schema)
    import torchvision

    return torchvision
