"""The hardware monitor: GPU (NVML) and host (psutil) counters, sampled in a separate process.

A reading costs about 2 ms of interpreter time (psutil walks /proc, NVML calls). Taken on a thread
of the process that times the calls, it held the interpreter often enough to move the p90 and p99 of
a 0.1 ms call by 40% or more; so the sampler is its own process (`python -m perfmodel.profile.monitor`)
and the profiler only talks to it between points: `window()` marks where a point starts and
`summary(mark)` returns min/avg/max of every counter since. Without NVML (no GPU, no driver) the GPU
counters stay empty and the monitor says so once.

Which GPU: the one torch calls `cuda:N`, found in NVML by its UUID (or PCI address), never by N. NVML
numbers every GPU of the machine in PCI order; torch numbers only those CUDA_VISIBLE_DEVICES shows, fastest
first unless CUDA_DEVICE_ORDER=PCI_BUS_ID. When NVML has no GPU of that UUID or address, the GPU counters
stay empty, with a warning, rather than come from another GPU.

Besides the hardware, the monitor can watch named processes ("roles"): `watch("server", pid)` adds
`server_rss_mb_max`, `server_cpu_avg` and `server_cpu_max` (CPU in percent of one core).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import psutil

from perfmodel.errors import BackendError, PerfmodelWarning
from perfmodel.profile.lifetime import child_environment, end_child
from perfmodel.schema import HARDWARE_COUNTERS

GPU_COUNTERS = ("gpu_util", "gpu_mem_used_mb", "power_w", "temp_c", "sm_clock_mhz")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_START_TIMEOUT_S = 60.0
# Without a GPU the monitor shares the very cores being timed: at 20 Hz it took 10% of one of a 2-core
# VM's cores (psutil walks /proc for the process tree every reading), at 4 Hz about a fifth of that.
CPU_INTERVAL_S = 0.25


@dataclass(frozen=True)
class GpuId:
    """A torch CUDA device in the terms NVML finds it by: its UUID ("GPU-..."), its PCI address."""

    device: str  # "cuda:1", for messages
    uuid: str | None
    pci_bus_id: str | None  # NVML's form, "00000000:3B:00.0"


def gpu_id(device: str) -> GpuId:
    """Which GPU torch's `device` ("cuda:N") is (imports torch). Reading the properties creates no CUDA
    context (no process in nvidia-smi, torch 2.10 + CUDA 13, unslothai/unsloth-zoo#1053), so the GPU's
    memory counter does not count this process."""
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    uuid = str(getattr(props, "uuid", "") or "")  # torch writes it without NVML's "GPU-"
    uuid = (uuid if uuid.startswith("GPU-") else f"GPU-{uuid}") if uuid else None
    pci = [getattr(props, f"pci_{part}_id", None) for part in ("domain", "bus", "device")]  # newer torch only
    pci_bus_id = None if None in pci else "{:08X}:{:02X}:{:02X}.0".format(*pci)
    return GpuId(device, uuid, pci_bus_id)


@dataclass(frozen=True)
class GpuInfo:
    name: str
    driver: str
    memory_mb: float


class _Nvml:
    """The few NVML reads the monitor needs, behind one object that can fail to exist."""

    def __init__(self, gpu: GpuId):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self.handle = None
        ways = ((gpu.uuid, pynvml.nvmlDeviceGetHandleByUUID), (gpu.pci_bus_id, pynvml.nvmlDeviceGetHandleByPciBusId))
        for key, find in ways:
            if key is not None and self.handle is None:
                try:
                    self.handle = find(key)
                except pynvml.NVMLError:
                    pass
        if self.handle is None:
            self.close()
            raise LookupError(
                f"NVML has no GPU with {gpu.device}'s UUID ({gpu.uuid or 'unknown'}) or PCI address "
                f"({gpu.pci_bus_id or 'unknown'})"
            )

    def info(self) -> GpuInfo:
        n = self._nvml
        name = n.nvmlDeviceGetName(self.handle)
        driver = n.nvmlSystemGetDriverVersion()
        memory = n.nvmlDeviceGetMemoryInfo(self.handle).total / 2**20
        return GpuInfo(_text(name), _text(driver), memory)

    def read(self) -> dict[str, float]:
        n, h = self._nvml, self.handle
        values = {}
        for key, read in (
            ("gpu_util", lambda: n.nvmlDeviceGetUtilizationRates(h).gpu),
            ("gpu_mem_used_mb", lambda: n.nvmlDeviceGetMemoryInfo(h).used / 2**20),
            ("power_w", lambda: n.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ("temp_c", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            ("sm_clock_mhz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
        ):
            try:
                values[key] = float(read())
            except n.NVMLError:  # a counter this GPU does not support stays empty
                values[key] = float("nan")
        return values

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def open_nvml(gpu: GpuId | None) -> tuple[_Nvml | None, str | None]:
    """NVML for this GPU, or None and the reason it is unavailable."""
    if gpu is None:
        return None, None
    try:
        return _Nvml(gpu), None
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded ...
        return None, f"{type(exc).__name__}: {exc}".strip()


# ---------------------------------------------------------------------------------------------
# The sampler (runs in the monitor process)


class _Sampler:
    def __init__(self, gpu: GpuId | None, interval_s: float, host_pid: int, roles: dict[str, list]):
        self.interval_s = interval_s
        self.host_pid = host_pid
        self.nvml, self.reason = open_nvml(gpu)
        self.roles = {name: (pid, tree) for name, (pid, tree) in roles.items()}
        self.samples: list[dict[str, float]] = []
        self.lock = threading.Lock()
        self._procs: dict[int, psutil.Process] = {}  # cpu_percent needs the same object between readings
        self._me = os.getpid()
        psutil.cpu_percent(interval=None)  # the first reading is meaningless; prime it

    def _proc(self, pid: int) -> psutil.Process:
        return self._procs.setdefault(pid, psutil.Process(pid))

    def _tree(self, pid: int) -> list[psutil.Process]:
        try:
            root = self._proc(pid)
            return [root, *(self._proc(c.pid) for c in root.children(recursive=True) if c.pid != self._me)]
        except psutil.Error:
            return []

    def sample(self) -> dict[str, float]:
        values = {c: math.nan for c in HARDWARE_COUNTERS}
        if self.nvml is not None:
            values.update(self.nvml.read())
        values["cpu_util"] = psutil.cpu_percent(interval=None)
        values["host_rss_mb"] = _usage(self._tree(self.host_pid), cpu=False)[0]
        for name, (pid, tree) in self.roles.items():
            procs = [] if pid is None else self._tree(pid) if tree else self._tree(pid)[:1]
            rss, cpu = _usage(procs) if procs else (math.nan, math.nan)
            values[f"{name}_rss_mb"], values[f"{name}_cpu"] = rss, cpu
        return values

    def run(self) -> None:
        while True:
            reading = self.sample()
            with self.lock:
                self.samples.append(reading)
            time.sleep(self.interval_s)

    def summary(self, since: int) -> dict[str, float]:
        with self.lock:
            window = self.samples[since:]
        if not window:  # a point shorter than one interval: take one reading now
            window = [self.sample()]
        out = {}
        for counter in HARDWARE_COUNTERS:
            out.update(_stats(counter, [s[counter] for s in window], ("min", "avg", "max")))
        for name in self.roles:
            out.update(_stats(f"{name}_rss_mb", [s[f"{name}_rss_mb"] for s in window], ("max",)))
            out.update(_stats(f"{name}_cpu", [s[f"{name}_cpu"] for s in window], ("avg", "max")))
        return out


def _stats(name: str, values: list[float], which: tuple[str, ...]) -> dict[str, float]:
    x = np.array(values, dtype=float)
    x = x[~np.isnan(x)]
    fns = {"min": np.min, "avg": np.mean, "max": np.max}
    return {f"{name}_{stat}": float(fns[stat](x)) if len(x) else math.nan for stat in which}


def _usage(procs: list[psutil.Process], cpu: bool = True) -> tuple[float, float]:
    rss = load = 0.0
    for proc in procs:
        try:
            rss += proc.memory_info().rss
            if cpu:
                load += proc.cpu_percent(interval=None)
        except psutil.Error:
            pass
    return rss / 2**20, load


def _serve(config: dict) -> None:
    from perfmodel.profile.lifetime import exit_with_parent

    exit_with_parent()
    gpu = GpuId(**config["gpu"]) if config["gpu"] else None
    sampler = _Sampler(gpu, config["interval_s"], config["host_pid"], config["roles"])
    info = asdict(sampler.nvml.info()) if sampler.nvml is not None else None
    _answer({"nvml": sampler.nvml is not None, "reason": sampler.reason, "gpu": info})
    threading.Thread(target=sampler.run, daemon=True).start()
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "mark":
            with sampler.lock:
                _answer({"mark": len(sampler.samples)})
        elif request["op"] == "summary":
            _answer(sampler.summary(request["since"]))
        elif request["op"] == "watch":
            sampler.roles[request["role"]] = (request["pid"], request["tree"])
            _answer({})
    if sampler.nvml is not None:
        sampler.nvml.close()


def _answer(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# The profiler's side


class HardwareMonitor:
    """`with HardwareMonitor(gpu_id("cuda:0")) as monitor:` samples every `interval_s` in its own process.

    `host_rss_mb` counts this process with its children (workers, a local server; not the monitor).
    `roles` name processes to watch from the start: {"client": (pid, False)} watches one process,
    {"server": (None, True)} declares a role (its columns stay empty until `watch()` names its pid).
    """

    def __init__(
        self,
        gpu: GpuId | None = None,
        interval_s: float = 0.05,
        roles: dict[str, tuple[int | None, bool]] | None = None,
    ):
        self.gpu = gpu
        self.interval_s = interval_s
        self.roles = dict(roles or {})
        self._proc: subprocess.Popen | None = None
        self._info: GpuInfo | None = None
        self._has_gpu = False

    @property
    def has_gpu_counters(self) -> bool:
        return self._has_gpu

    def gpu_info(self) -> GpuInfo | None:
        return self._info

    def __enter__(self) -> HardwareMonitor:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        config = {
            "gpu": asdict(self.gpu) if self.gpu is not None else None,
            "interval_s": self.interval_s,
            "host_pid": os.getpid(),
            "roles": {k: list(v) for k, v in self.roles.items()},
        }
        env = child_environment(_PACKAGE_ROOT)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "perfmodel.profile.monitor", json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            start_new_session=True,
        )
        try:
            ready = self._ask(None, timeout_s=_START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        self._has_gpu = ready["nvml"]
        self._info = GpuInfo(**ready["gpu"]) if ready["gpu"] else None
        if self.gpu is not None and not self._has_gpu:
            warnings.warn(
                f"GPU counters are not available ({ready['reason']}); the gpu_* columns stay empty and the sweep "
                "goes on.",
                PerfmodelWarning,
                stacklevel=2,
            )

    def _ask(self, request: dict | None, timeout_s: float = 10.0) -> dict:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            raise BackendError("the hardware monitor process is not running.")
        if request is not None:
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
        line = _read_line(proc, timeout_s)
        if line is None:
            raise BackendError(f"the hardware monitor process did not answer within {timeout_s:g} s.")
        return json.loads(line)

    def watch(self, role: str, pid: int | None, tree: bool = True) -> None:
        """Count `pid` (with its children when `tree`) as `role` from now on."""
        self.roles[role] = (pid, tree)
        self._ask({"op": "watch", "role": role, "pid": pid, "tree": tree})

    def window(self) -> int:
        """A mark to pass to `summary` later: the counters from now on."""
        return self._ask({"op": "mark"})["mark"]

    def summary(self, since: int) -> dict[str, float]:
        """min/avg/max of every counter since the mark, as profile columns (NaN when no sample)."""
        return self._ask({"op": "summary", "since": since})

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            end_child(proc)
        finally:
            proc.stdout.close()


def _read_line(proc: subprocess.Popen, timeout_s: float) -> str | None:
    """One line from the process's stdout, or None after `timeout_s` (or at its end)."""
    import select

    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    if not ready:
        return None
    line = proc.stdout.readline()
    return line or None


if __name__ == "__main__":
    _serve(json.loads(sys.argv[1]))
