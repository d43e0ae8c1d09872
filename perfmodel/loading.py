"""Loading a model onto its device: the one load that `perfmodel profile` measures and `perfmodel run`
executes (both through TorchRunner.start and TorchRunner.load), so that a plan's load is its run's.

A fresh process pays, in order (docs/profile.md, "Where the load goes"):

- start (once per process, before a run's clock, like `import torch`): the imports, torch and the
  model's own code (torchvision imports torch._dynamo, seconds on its own), then the device's context;
- build: the architecture, on the device itself, so that random weights are initialised there (a few
  kernels on a GPU rather than a second of CPU work and a copy); on the meta device (no memory, no
  initialisation) when a weights file replaces them; a TorchScript file is read straight to the device;
- weights: the weights file read straight to the device and taken as they are (assign, no copy into
  random ones), the conversion to the precision, and anything else until the device is idle;
- the first call, timed apart (warmup_ms).
"""

from __future__ import annotations

import itertools
import time

from perfmodel.errors import BackendError, InputError, first_line
from perfmodel.models import ModelSpec, build_model


def open_device(device) -> float:
    """Open the device's context (a CUDA context and its allocator; nothing on a CPU); return the ms it took.
    cuDNN's and cuBLAS's handles come later, with the first call."""
    t0 = time.perf_counter()
    if device.type == "cuda":
        import torch

        torch.empty(1, device=device)
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) * 1e3


def build(spec: ModelSpec, device, seed: int, weights: str | None):
    """The architecture in eval mode: on the meta device when built-in weights will be assigned, else
    on `device` with its random initialisation run there (a TorchScript file: read straight to it)."""
    on_meta = weights is not None and spec.path is None
    return build_model(spec, seed, "meta" if on_meta else device)


def place_weights(model, spec: ModelSpec, device, dtype, weights: str | None):
    """The model with its weights on `device` in `dtype`: a weights file's (read straight to the device),
    or the ones it was built with."""
    if weights is not None:
        state = read_weights(weights, device)
        # A built-in model was built on the meta device: it takes the file's tensors as they are.
        # A TorchScript model has its own weights already: they are overwritten (copied into).
        assign = spec.path is None
        try:
            model.load_state_dict(state, assign=assign)
        except RuntimeError as exc:
            raise InputError(f"the weights {weights} do not fit {spec.name}: {first_line(exc)}.") from None
        if any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers())):
            raise BackendError(f"{spec.name} keeps tensors outside its state_dict, which a weights file cannot give.")
    return model.to(device, dtype)


def read_weights(path: str, device) -> dict:
    """A state_dict file's tensors, read onto `device`; InputError in one sentence for anything else."""
    import torch

    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as exc:  # not a torch file, or one that needs pickled code
        raise InputError(
            f"cannot read the weights {path} ({weights_failure(path, exc)}): give a state_dict saved with "
            "torch.save(model.state_dict(), path)."
        ) from None
    if not isinstance(state, dict):
        raise InputError(f"the weights {path} are not a state_dict (a dict of tensors).")
    return state


def weights_failure(path: str, exc: Exception) -> str:
    """Why torch.load refused a weights file, in a clause: torch's own text is 'pop from empty list' for a
    CSV, or advice to load unsafely (weights_only=False) for a file holding pickled objects."""
    import pickle
    import zipfile

    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive (since torch 1.6); older ones load
        return "it is not a file written by torch.save"
    if isinstance(exc, pickle.UnpicklingError):
        return "it holds pickled objects besides tensors, e.g. a whole model saved with torch.save(model)"
    return first_line(exc)
