"""The hardware monitor: a background sampler of GPU (NVML) and host (psutil) counters.

The profiler opens a window per measured point and gets min/avg/max of every counter over it.
Without NVML (no GPU, no driver) the GPU counters stay empty and the monitor says so once.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass

import numpy as np
import psutil

from perfmodel.errors import PerfmodelWarning
from perfmodel.schema import HARDWARE_COUNTERS


GPU_COUNTERS = ("gpu_util", "gpu_mem_used_mb", "power_w", "temp_c", "sm_clock_mhz")


@dataclass(frozen=True)
class GpuInfo:
    name: str
    driver: str
    memory_mb: float


class _Nvml:
    """The few NVML reads the monitor needs, behind one object that can fail to exist."""

    def __init__(self, index: int):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)

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


def open_nvml(gpu_index: int | None) -> tuple[_Nvml | None, str | None]:
    """NVML for this GPU, or None and the reason it is unavailable."""
    if gpu_index is None:
        return None, None
    try:
        return _Nvml(gpu_index), None
    except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded ...
        return None, f"{type(exc).__name__}: {exc}".strip()


class HardwareMonitor:
    """Samples counters every `interval_s` on a daemon thread; `window()` marks where a point starts.

    `pids` are the processes whose resident memory counts as host_rss_mb (with their children).
    """

    def __init__(self, gpu_index: int | None = None, interval_s: float = 0.05, pids: list[int] | None = None):
        self.interval_s = interval_s
        self.pids = pids or [psutil.Process().pid]
        self._nvml, reason = open_nvml(gpu_index)
        if gpu_index is not None and self._nvml is None:
            warnings.warn(
                f"GPU counters are not available ({reason}); the gpu_* columns stay empty and the sweep goes on.",
                PerfmodelWarning,
                stacklevel=2,
            )
        self._samples: list[dict[str, float]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def has_gpu_counters(self) -> bool:
        return self._nvml is not None

    def gpu_info(self) -> GpuInfo | None:
        return self._nvml.info() if self._nvml else None

    def __enter__(self) -> HardwareMonitor:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        psutil.cpu_percent(interval=None)  # the first reading is meaningless; prime it
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="perfmodel-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None

    def sample(self) -> dict[str, float]:
        """One reading of every counter (NaN where unavailable)."""
        values = {c: float("nan") for c in HARDWARE_COUNTERS}
        if self._nvml is not None:
            values.update(self._nvml.read())
        values["cpu_util"] = psutil.cpu_percent(interval=None)
        values["host_rss_mb"] = self._rss_mb()
        return values

    def _rss_mb(self) -> float:
        total = 0
        for pid in self.pids:
            try:
                proc = psutil.Process(pid)
                total += proc.memory_info().rss
                for child in proc.children(recursive=True):
                    try:
                        total += child.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            reading = self.sample()
            with self._lock:
                self._samples.append(reading)
            self._stop.wait(self.interval_s)

    def window(self) -> int:
        """A mark to pass to `summary` later: the counters from now on."""
        with self._lock:
            return len(self._samples)

    def summary(self, since: int) -> dict[str, float]:
        """min/avg/max of every counter since the mark, as profile columns (NaN when no sample)."""
        with self._lock:
            window = self._samples[since:]
        if not window:  # a point shorter than one interval: take one reading now
            window = [self.sample()]
        out = {}
        for counter in HARDWARE_COUNTERS:
            values = np.array([s[counter] for s in window], dtype=float)
            values = values[~np.isnan(values)]
            for stat, fn in (("min", np.min), ("avg", np.mean), ("max", np.max)):
                out[f"{counter}_{stat}"] = float(fn(values)) if len(values) else float("nan")
        return out
