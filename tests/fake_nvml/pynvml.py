"""A stand-in for pynvml (NVIDIA's NVML bindings) on a machine without GPUs: the GPUs it reports are the
JSON list in FAKE_NVML_GPUS, in NVML's order, e.g. [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aa",
"pci": "00000000:1B:00.0", "util": 7}]. Tests put its folder first on sys.path (or PYTHONPATH, for a
child process such as the hardware monitor)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1


class NVMLError(Exception):
    pass


def _gpus() -> list[dict]:
    return json.loads(os.environ.get("FAKE_NVML_GPUS", "[]"))


def nvmlInit():
    pass


def nvmlShutdown():
    pass


def nvmlSystemGetDriverVersion():
    return "999.99"


def nvmlDeviceGetCount():
    return len(_gpus())


def nvmlDeviceGetHandleByIndex(index):
    if not 0 <= index < len(_gpus()):
        raise NVMLError("Invalid Argument")
    return index


def _find(key: str, value: str) -> int:
    for i, gpu in enumerate(_gpus()):
        if gpu[key].upper() == value.upper():
            return i
    raise NVMLError("Not Found")


def nvmlDeviceGetHandleByUUID(uuid):
    return _find("uuid", uuid)


def nvmlDeviceGetHandleByPciBusId(bus_id):
    return _find("pci", bus_id)


def nvmlDeviceGetName(handle):
    return _gpus()[handle]["name"]


def nvmlDeviceGetUUID(handle):
    return _gpus()[handle]["uuid"]


def nvmlDeviceGetPciInfo(handle):
    return SimpleNamespace(busId=_gpus()[handle]["pci"].encode())


def nvmlDeviceGetMemoryInfo(handle):
    return SimpleNamespace(total=80 * 2**30, used=_gpus()[handle].get("mem_used_mb", 0) * 2**20)


def nvmlDeviceGetUtilizationRates(handle):
    return SimpleNamespace(gpu=_gpus()[handle].get("util", 0))


def nvmlDeviceGetPowerUsage(handle):
    return 100_000


def nvmlDeviceGetTemperature(handle, sensor):
    return 40


def nvmlDeviceGetClockInfo(handle, clock):
    return 1980
