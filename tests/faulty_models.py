"""TorchScript models that fail the way a GPU does, for testing the profiler's CUDA paths on a CPU.

The profiler runs models in worker processes, so a fault is planted in the model file itself: the
model raises a given message (CUDA's, cuDNN's, PyTorch's own) above a batch size, or never returns.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

OOM = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB"
CUDNN_INTERNAL = "cuDNN error: CUDNN_STATUS_INTERNAL_ERROR"
NO_ENGINE = "FIND was unable to find an engine to execute this computation"
INDEX_32BIT = (
    "Expected canUse32BitIndexMath(input) && canUse32BitIndexMath(output) to be true, but got false.  "
    "(Could this error message be improved?  If so, please report an enhancement request to PyTorch.)"
)
ILLEGAL_ACCESS = (
    "CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously "
    "reported at some other API call, so the stacktrace below might be incorrect."
)


class FailsAbove(torch.nn.Module):
    """A small convolution that raises RuntimeError(message) for batches above `limit`."""

    def __init__(self, limit: int, message: str):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.limit = limit
        self.message = message

    def forward(self, x):
        if x.size(0) > self.limit:
            raise RuntimeError(self.message)
        return self.conv(x).mean(dim=(2, 3))


class LoopsAt(torch.nn.Module):
    """Never returns for a batch of exactly `batch`; other batches run normally."""

    def __init__(self, batch: int):
        super().__init__()
        self.batch = batch

    def forward(self, x):
        y = x
        while x.size(0) == self.batch:  # the result depends on the loop, so no optimizer removes it
            y = y * 1.0
        return y.mean(dim=(1, 2, 3))


class IndexesOutOfBoundsAbove(torch.nn.Module):
    """Reads past the end of its input for batches above `limit`: on a GPU, a device-side assert."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def forward(self, x):
        flat = x.flatten()
        if x.size(0) > self.limit:
            index = torch.full([1], flat.numel() * 4, dtype=torch.long, device=x.device)
            flat = flat.index_select(0, index)
        return flat.sum().expand(x.size(0))


class MeanOnly(torch.nn.Module):
    """Almost no activations: its memory is the input batch."""

    def forward(self, x):
        return x.mean(dim=(1, 2, 3))


def save(module: torch.nn.Module, directory: Path, name: str) -> str:
    path = Path(directory) / f"{name}.pt"
    with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; the profiler still reads such files
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(module), str(path))
    return str(path)


def fails_above(directory: Path, limit: int, message: str, name: str = "faulty") -> str:
    return save(FailsAbove(limit, message), directory, name)
