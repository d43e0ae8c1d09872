"""Import torchvision whether or not its compiled ops match the installed torch.

torchvision registers Python-side op implementations against the schemas `torchvision::nms` and
`torchvision::qnms`, which normally come from its compiled extension (`torchvision/_C.so`).

- Where torch and torchvision match (a CUDA machine with its own torchvision), that extension loads
  and defines the schemas itself. Nothing may define them before it: a second definition makes the
  extension's static initializer throw, and the process aborts (SIGABRT).
- Where they do not match (torch 2.13 CPU with torchvision 0.28 here), the extension does not load,
  the schemas are missing and `import torchvision` fails. perfmodel only needs the model
  architectures (plain PyTorch modules), so it defines the missing schemas itself.

So: load torchvision's own extension first, exactly as torchvision would, and define only what is
still missing afterwards. Nothing else in perfmodel imports torchvision directly.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

from perfmodel.errors import InputError

_SCHEMAS = {
    "torchvision::nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "torchvision::qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


def _extension_path() -> str | None:
    """torchvision's compiled extension (`_C`), found the way torchvision finds it; None if absent."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    loaders = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    found = importlib.machinery.FileFinder(str(Path(spec.origin).parent), loaders).find_spec("_C")
    return found.origin if found is not None else None


def import_torchvision():
    import torch

    if importlib.util.find_spec("torchvision") is None:
        raise InputError(
            "the resnet50 and efficientnet_b0 models need torchvision: install the torchvision "
            "that matches your torch (pip install torchvision), or profile a TorchScript file."
        )
    path = _extension_path()
    if path is not None:
        try:
            torch.ops.load_library(path)  # torchvision loads it again later: dlopen returns the same handle
        except (ImportError, OSError):  # built for another torch: its ops stay missing
            pass
    for name, schema in _SCHEMAS.items():
        namespace, op = name.split("::")
        if not hasattr(getattr(torch.ops, namespace), op):
            torch.library.define(name, schema)
    import torchvision

    return torchvision
