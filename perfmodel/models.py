"""The models perfmodel can profile: named architectures with random weights, or a user's file.

Weights are random (seeded): inference time does not depend on the values of the weights, and
nothing has to be downloaded. `resolve_model` only checks the name or the file and imports no torch,
so the CLI can reject a bad --model before doing any work.
"""

from __future__ import annotations

import functools
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import InputError

BUILTIN_MODELS = ("resnet50", "efficientnet_b0", "tiny")


@dataclass(frozen=True)
class ModelSpec:
    """What to load: a built-in architecture by name, or a TorchScript file."""

    name: str
    path: str | None = None  # a TorchScript file; None for a built-in model

    def describe(self) -> str:
        return self.path if self.path else self.name


def resolve_model(spec: str) -> ModelSpec:
    """Turn the --model argument into a ModelSpec, or say clearly why it cannot be one."""
    spec = spec.strip()
    if spec in BUILTIN_MODELS:
        return ModelSpec(spec)
    looks_like_file = os.sep in spec or spec.endswith((".pt", ".pth", ".ts", ".jit"))
    if not looks_like_file:
        raise InputError(
            f"unknown model {spec!r}: choose one of {', '.join(BUILTIN_MODELS)}, or give the path of a TorchScript "
            "file (.pt)."
        )
    problem = model_file_problem(spec)
    if problem is not None:
        raise InputError(f"model file {spec} {problem}: give the path of a TorchScript file saved with torch.jit.save.")
    return ModelSpec(Path(spec).stem, str(Path(spec)))


def model_file_problem(path: str) -> str | None:
    """Why `path` cannot be a model file ('is a directory', 'does not exist', 'cannot be read'), or None."""
    if os.path.isdir(path):
        return "is a directory"
    if not os.path.isfile(path):
        return "does not exist"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def import_model_code(spec: ModelSpec):
    """Import the code that builds the model (torchvision for its architectures), once per process:
    TorchRunner.start does it before the load is timed, as a serving process does when it starts."""
    if spec.path is None and spec.name != "tiny":
        from perfmodel._torchvision import import_torchvision

        return import_torchvision()
    return None


def build_model(spec: ModelSpec, seed: int = 0, device="cpu"):
    """Return the model as a torch.nn.Module (eval mode, float32) built on `device`: its random weights
    are initialised there, from `seed`. On "meta" nothing is allocated or initialised (the weights are
    to be assigned from a file); a TorchScript file is read straight to `device`."""
    import torch

    torch.manual_seed(seed)
    if spec.path is not None:
        try:
            with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; users still have such files
                warnings.simplefilter("ignore", DeprecationWarning)
                model = torch.jit.load(spec.path, map_location=device)
        except Exception as exc:  # torch raises several kinds for a file that is not TorchScript
            raise InputError(f"cannot load {spec.path} as a TorchScript model: {_load_failure(exc)}.") from None
        return model.eval()
    with torch.device(device):
        model = (
            _tiny_cnn_class()()
            if spec.name == "tiny"
            else getattr(import_model_code(spec).models, spec.name)(weights=None)
        )
    return model.eval()


def _load_failure(exc: Exception) -> str:
    """Why torch.jit.load refused a file, in one clause that says how to make one it takes.

    torch's own message for a file that is not TorchScript goes on for several sentences and calls the file
    corrupted; the usual cause is a checkpoint from torch.save (a zip archive too, without TorchScript's code).
    """
    text = str(exc).strip()
    if "PytorchStreamReader" in text and "constants.pkl" in text:
        return (
            "it holds no TorchScript code (a checkpoint or state_dict saved with torch.save has none); "
            "save the model with torch.jit.save(torch.jit.script(model), path)"
        )
    if "PytorchStreamReader" in text:
        return "it is not the zip archive torch.jit.save writes, or it is cut short; save the model with torch.jit.save"
    reason = text.splitlines()[0].split(". ")[0].rstrip(".") if text else type(exc).__name__
    return f"{reason}; save the model with torch.jit.save"


@functools.cache
def _tiny_cnn_class():
    import torch.nn as nn

    class TinyCNN(nn.Module):
        """A small CNN for tests and quick tries: two strided convolutions, pooling, a classifier."""

        def __init__(self, classes: int = 10):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 8, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.Conv2d(8, 16, 3, stride=2, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
            )
            self.classifier = nn.Linear(16, classes)

        def forward(self, x):
            return self.classifier(self.features(x).flatten(1))

    return TinyCNN


def __getattr__(name: str):
    # TinyCNN is built lazily so that importing this module does not import torch.
    if name == "TinyCNN":
        return _tiny_cnn_class()
    raise AttributeError(name)
