"""Nothing outlives the profiler: child processes that die with it, temporary folders that name their owner.

- A child (a warm-up or measuring worker, the monitor) calls `exit_with_parent()` first thing: on
  Linux the kernel kills it when the profiler dies (PR_SET_PDEATHSIG), even by SIGKILL; where it
  holds a folder (a compile cache), a watch thread notices the parent is gone within a fraction of
  a second, and the folder is removed as soon as the child has ended.
- A temporary folder made with `owned_tempdir()` records its owner's PID and start time, so that
  the next run can remove the folders of runs that died without cleaning up (`remove_stale()`).
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

OWNER_FILE = "owner.pid"
PARENT_ENV = "PERFMODEL_PARENT_PID"  # set by the parent in a child's environment (see child_environment)
_PR_SET_PDEATHSIG = 1


def exit_with_parent(owned_dir: str | None = None, poll_s: float = 0.2) -> Callable[[], None]:
    """End this process when the process that started it ends, and then remove `owned_dir`.

    Without a folder to remove, the kernel sends SIGKILL at the parent's death (Linux). With one, a
    daemon thread polls the parent; when it is gone, it starts a small remover that waits until this
    process has ended (nothing writes into the folder any more: a compilation may be running here)
    and removes the folder, and then ends this process at once.

    Returns `abandon()`, for a program that learns of its parent's death another way (its pipes close
    as the parent dies, before the kernel names a new parent): it does the same at once.
    """
    # The parent names itself: if it died before this line, getppid() would already name the reaper.
    # (Read once and dropped, so that this process's own children do not inherit it.)
    parent = int(os.environ.pop(PARENT_ENV, os.getppid()))

    def leave() -> None:
        try:
            if owned_dir is not None:
                _remove_after_exit(owned_dir)
        finally:
            os._exit(1)

    killed_by_kernel = owned_dir is None and _kill_me_with_parent()
    if os.getppid() != parent:  # the parent died before prctl took effect, or before we got here
        leave()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        leave()

    if not killed_by_kernel:  # no thread waking up in a timing process unless it is needed
        threading.Thread(target=watch, name="perfmodel-parent-watch", daemon=True).start()

    return leave


def _kill_me_with_parent() -> bool:
    """PR_SET_PDEATHSIG(SIGKILL): the kernel ends this process when its parent dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _remove_after_exit(folder: str) -> None:
    """Remove `folder` once this process has ended (a detached shell; a second pass for stragglers)."""
    script = 'while kill -0 "$1" 2>/dev/null; do sleep 0.05; done; rm -rf "$2"; sleep 1; rm -rf "$2"'
    subprocess.Popen(
        ["sh", "-c", script, "remove", str(os.getpid()), folder],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def end_child(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a child that stops when its stdin closes: close it, wait `grace_s`, then SIGKILL. Always reaped."""
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
    except KeyboardInterrupt:  # a second Ctrl-C: no more patience, still no orphan
        proc.kill()
        proc.wait(timeout=10)
        raise


class OwnedChild:
    """A child program this object starts and always stops (`with X() as child:`). Subclasses set
    self._proc in start() and clear it in stop()."""

    _proc: subprocess.Popen | None = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None


def child_environment(extra_path: str) -> dict[str, str]:
    """The environment for a child program of perfmodel: this perfmodel first on its path, and our PID."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path, env.get("PYTHONPATH")) if p)
    env[PARENT_ENV] = str(os.getpid())
    return env


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
