"""Host memory measurement and limits for CPU profiling (Linux /proc and rlimits).

On a GPU the allocator's peak is the memory measure and a real out-of-memory error ends the batch
growth. On a CPU there is neither, so the profiler (1) resets and reads the kernel's peak resident
set size (VmHWM) around each point, and (2) caps the process's data segment with RLIMIT_DATA while a
point runs, so that a batch too large for the memory budget fails with a real allocation error,
which the profiler treats as out-of-memory, instead of swapping the machine or waking the OOM killer.
"""

from __future__ import annotations

import contextlib
import resource
from collections.abc import Iterator


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mb() -> float:
    kb = _status_kb("VmRSS")
    if kb is None:  # not Linux: the lifetime peak is the best there is
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return kb / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0). False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    kb = _status_kb("VmHWM")
    if kb is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return kb / 1024


@contextlib.contextmanager
def data_limit(extra_mb: float | None) -> Iterator[None]:
    """Allow the process about `extra_mb` MiB more memory than it has now, then restore the limit.

    RLIMIT_DATA counts reserved, not only resident, memory, so the limit is set relative to the
    current data segment size; a soft limit can always be raised back up to the hard limit.
    """
    vm_data_kb = _status_kb("VmData")
    if extra_mb is None or vm_data_kb is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = vm_data_kb * 1024 + int(extra_mb * 2**20)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
