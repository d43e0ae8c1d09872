"""The profiler's side of a worker (worker.py): start it, ask it, bound every wait, stop it.

A worker runs in its own session (a Ctrl-C in the terminal reaches only the profiler, which then
stops its workers itself) and dies with the profiler (lifetime.py). With `--compile`, each worker
gets its own Inductor/Triton cache folder and temp folder (where Inductor keeps its C++ precompiled
headers), removed when it ends: a fresh worker's compilation is then really fresh, nothing of an
earlier point's reused, so `warmup_ms` means the same with and without --compile.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perfmodel.profile.failures import log_cause
from perfmodel.profile.lifetime import OwnedChild, child_environment, end_child, owned_tempdir
from perfmodel.profile.worker import EXIT_REQUEST, REPLY_FD_ENV, SCRATCH_ENV

SCRATCH_PREFIX = "perfmodel-worker-"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # so that the worker imports this same perfmodel


class WorkerProcess(OwnedChild):
    """One worker program. `request()` never raises for the worker's sake: a worker that dies or
    hangs is an answer too ({"status": "failed", "kind": "died" or "timeout", "error": ...})."""

    def __init__(self, own_compile_cache: bool = False):
        self.own_compile_cache = own_compile_cache
        self.scratch: Path | None = None
        self.started_at: float | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._replies: int | None = None
        self._buffer = b""

    def start(self) -> None:
        env = child_environment(_PACKAGE_ROOT)
        if self.own_compile_cache:
            self.scratch = owned_tempdir(SCRATCH_PREFIX)
            env[SCRATCH_ENV] = str(self.scratch)
            env["TORCHINDUCTOR_CACHE_DIR"] = str(self.scratch / "inductor")
            env["TRITON_CACHE_DIR"] = str(self.scratch / "triton")
            # Inductor keeps its C++ precompiled headers in the temp folder, outside the cache above and
            # for every later process (torch 2.13: $TMPDIR/torchinductor_<user>/precompiled_headers).
            (self.scratch / "tmp").mkdir()
            env["TMPDIR"] = str(self.scratch / "tmp")
        read_end, write_end = os.pipe()
        env[REPLY_FD_ENV] = str(write_end)
        self._log = tempfile.TemporaryFile()  # already unlinked: nothing is left behind, however we end
        try:
            self.started_at = time.monotonic()
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "perfmodel.profile.worker"],
                stdin=subprocess.PIPE,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
                env=env,
                start_new_session=True,
            )
        except BaseException:
            os.close(read_end)
            self.stop()
            raise
        finally:
            os.close(write_end)
        self._replies = read_end

    def request(self, message: dict, timeout_s: float, setting: str) -> dict:
        """Send one request and wait for its answer, at most `timeout_s` (then the worker is killed).

        `setting` names the parameter that sets the limit, for the message (`call_timeout_s`)."""
        if not self.is_alive():
            return self._died()
        try:
            self._proc.stdin.write((json.dumps(message) + "\n").encode())
            self._proc.stdin.flush()
        except OSError:
            return self._died()
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.stop()
                return {
                    "status": "failed",
                    "kind": "timeout",
                    "error": f"the worker did not answer within {timeout_s:g} s ({setting}) and was stopped",
                }
            ready, _, _ = select.select([self._replies], [], [], min(remaining, 1.0))
            if ready:
                chunk = os.read(self._replies, 1 << 16)
                if not chunk:
                    return self._died()
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def _died(self) -> dict:
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # alive but deaf: its pipe closed
                self._proc.kill()
                code = self._proc.wait(timeout=10)
        tail = self.log_tail()
        why = "did not start" if code is None else _exit_reason(code)
        self.stop()
        return {
            "status": "failed",
            "kind": "died",
            "error": f"the worker process {why}" + (f": {tail}" if tail else ""),
        }

    def log_tail(self) -> str:
        """The line of the worker's output that says what went wrong, if any."""
        if self._log is None:
            return ""
        try:
            self._log.seek(max(0, self._log.seek(0, os.SEEK_END) - 16384))
            return log_cause(self._log.read().decode(errors="replace"))
        except (OSError, ValueError):
            return ""

    def stop(self) -> None:
        """End the worker (stdin closed, a short wait, then SIGKILL) and remove its folder. Safe twice."""
        proc, self._proc = self._proc, None
        try:
            if proc is not None:
                try:
                    proc.stdin.write((json.dumps(EXIT_REQUEST) + "\n").encode())
                    proc.stdin.flush()
                except OSError:  # it is gone already
                    pass
                end_child(proc)
        finally:
            self._close_files()

    def _close_files(self) -> None:
        if self._replies is not None:
            os.close(self._replies)
            self._replies = None
        if self._log is not None:
            self._log.close()
            self._log = None
        self._buffer = b""
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None


def _exit_reason(returncode: int) -> str:
    if returncode < 0:
        hint = " (out of host memory?)" if returncode == -9 else ""
        return f"was killed by signal {-returncode}{hint}"
    return f"exited with code {returncode}"
