"""The profiler's backends, behind one small interface that sweep.py calls.

A backend is a module with two functions:

    estimate(config: ProfileConfig) -> Estimate
        how many points the sweep has and how long it may take, before anything starts;
    sweep(config: ProfileConfig, output: ProfileOutput, notify: ProgressCallback) -> None
        measure every point not yet in `output`, adding each row as it finishes (`output.add`),
        and report progress with SweepEvents.

Its own options travel in `config.backend_options`. A new backend (ONNX Runtime, say) is one new
module here and one line in BACKENDS.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from perfmodel.errors import InputError

BACKENDS = {
    "torch": "perfmodel.profile.backends.torch_sweep",
    "triton": "perfmodel.profile.backends.triton_backend",
}


def load_backend(name: str) -> ModuleType:
    if name not in BACKENDS:
        raise InputError(f"unknown backend {name!r}: choose {' or '.join(BACKENDS)}.")
    return importlib.import_module(BACKENDS[name])
