"""Where and with what a profile was measured: the provenance columns repeated in every row."""

from __future__ import annotations

import datetime as _dt
import platform
import re

import psutil

from perfmodel._version import __version__
from perfmodel.schema import SCHEMA_VERSION


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def hardware_key(device_name: str, is_gpu: bool) -> str:
    """A short pool key from a device name: 'NVIDIA H100 80GB HBM3' -> 'h100'; any CPU -> 'cpu'."""
    if not is_gpu:
        return "cpu"
    name = device_name.upper().replace("NVIDIA", "").replace("GEFORCE", "").replace("TESLA", "")
    match = re.search(r"\b([A-Z]{1,3}\s?\d{2,4}[A-Z]?)\b", name)
    key = match.group(1) if match else name.strip().split()[0] if name.strip() else "gpu"
    return re.sub(r"[^a-z0-9]+", "", key.lower()) or "gpu"


def now_utc() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def torch_provenance(device: str) -> dict[str, object]:
    """Provenance of an in-process torch measurement on `device` (imports torch)."""
    import torch

    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        name, memory_mb, cuda = props.name, props.total_memory / 2**20, torch.version.cuda
    else:
        name, memory_mb, cuda = cpu_name(), psutil.virtual_memory().total / 2**20, ""
    return {
        "device_name": name,
        "device_memory_mb": memory_mb,
        "cuda": cuda or "",
        "torch": torch.__version__,
        "perfmodel": __version__,
        "host": platform.node(),
        "schema_version": SCHEMA_VERSION,
    }
