"""Nothing outlives the profiler: child processes that die with it, temporary folders that name their owner.

- A child (a warm-up or measuring worker, the monitor, the Triton server program) calls
  `exit_with_parent()` first thing: on Linux the kernel kills it when the profiler dies
  (PR_SET_PDEATHSIG), even by SIGKILL; where it holds a folder to remove first, a watch thread
  notices the parent is gone within a fraction of a second, removes the folder and exits.
- A temporary folder made with `owned_tempdir()` records its owner's PID and start time, so that
  the next run can remove the folders of runs that died without cleaning up (`remove_stale()`).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

OWNER_FILE = "owner.pid"
_PR_SET_PDEATHSIG = 1


def exit_with_parent(cleanup: Callable[[], None] | None = None, poll_s: float = 0.2) -> None:
    """End this process when the process that started it ends.

    Without `cleanup`, the kernel sends SIGKILL at the parent's death (Linux). With it, a daemon
    thread polls the parent and runs `cleanup` before exiting, which a SIGKILL would not allow.
    """
    parent = os.getppid()
    if cleanup is None and sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the watch thread below does the job
            pass
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent:
                try:
                    if cleanup is not None:
                        cleanup()
                finally:
                    os._exit(1)

    threading.Thread(target=watch, name="perfmodel-parent-watch", daemon=True).start()


def owned_tempdir(prefix: str) -> Path:
    """A new folder in the temp directory that names this process as its owner."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    me = psutil.Process()
    (path / OWNER_FILE).write_text(f"{me.pid} {me.create_time():.3f}\n")
    return path


def remove_stale(prefix: str) -> list[Path]:
    """Remove the temp folders `prefix*` whose owner process is gone; return what was removed.

    A folder without an owner file is left alone: it may be another program's, or still being made.
    """
    removed = []
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            pid, started = (path / OWNER_FILE).read_text().split()
            pid, started = int(pid), float(started)
        except (OSError, ValueError):
            continue
        try:  # the same PID with another start time is another process: the owner is gone
            alive = abs(psutil.Process(pid).create_time() - started) < 0.05
        except psutil.Error:
            alive = False
        if not alive:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
