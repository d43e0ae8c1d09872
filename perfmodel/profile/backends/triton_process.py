"""The life of a local Triton server: start the server program, wait until it is ready, stop it.

The server program (triton_server.py) runs in its own session, so a Ctrl-C in the terminal reaches
only the profiler, which then stops the server itself. Stopping is SIGTERM (the program stops
Triton cleanly), a bounded wait, then SIGKILL for every process of the server's tree that is still
alive (tritonserver, the Python backend stub and its helpers), and finally the removal of what a
killed server leaves behind: the private workspace, Triton's model copy in /tmp and the Python
backend's shared-memory regions. Every wait has a bound.
"""

from __future__ import annotations

import importlib.util
import json
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from perfmodel.errors import BackendError, DeviceError
from perfmodel.profile.backends.triton_server import TOKEN_ENV
from perfmodel.profile.failures import log_cause
from perfmodel.profile.lifetime import OwnedChild, child_environment, owned_tempdir, remove_stale

WORKSPACE_PREFIX = "perfmodel-triton-"


@dataclass(frozen=True)
class ServerSettings:
    """What the local server serves and how it runs the model (the in-process TorchOptions, as flags)."""

    model: str  # --model as given: a built-in name or a TorchScript path
    device: str = "cpu"
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    threads: int | None = None
    max_batch_size: int = 64
    seed: int = 0
    model_name: str | None = None
    dynamic_batching: bool = False  # Triton's batcher joins requests (the open-loop --rate mode)
    max_queue_delay_us: int = 0
    preferred_batch_sizes: tuple[int, ...] = ()
    cpus: tuple[int, ...] = ()  # the CPU cores the server runs on (--server-cpus); () for all

    def arguments(self) -> list[str]:
        args = [
            "--model",
            self.model,
            "--device",
            self.device,
            "--precision",
            self.precision,
            "--max-batch-size",
            str(self.max_batch_size),
            "--seed",
            str(self.seed),
        ]
        if self.channels_last:
            args.append("--channels-last")
        if self.compile:
            args.append("--compile")
        if self.threads is not None:
            args += ["--threads", str(self.threads)]
        if self.model_name:
            args += ["--model-name", self.model_name]
        if self.dynamic_batching:
            args += [
                "--dynamic-batching",
                "--max-queue-delay-us",
                str(self.max_queue_delay_us),
                "--preferred-batch-sizes",
                ",".join(str(b) for b in self.preferred_batch_sizes),
            ]
        if self.cpus:
            args += ["--cpus", ",".join(map(str, self.cpus))]
        return args


@dataclass(frozen=True)
class ServerInfo:
    """A ready server: where it listens and what it reported."""

    pid: int
    host: str
    http_port: int
    grpc_port: int
    model_name: str
    access_token: str
    start_ms: float  # from launching the program until the model answered ready (the user's wait)
    model_load_ms: float  # building the torch model alone
    threads: int
    provenance: dict = field(default_factory=dict)

    def url(self, protocol: str) -> str:
        return f"{self.host}:{self.http_port if protocol == 'http' else self.grpc_port}"


class LocalTritonServer(OwnedChild):
    """`with LocalTritonServer(settings) as server:` starts a server on this machine and always stops it.

    It binds 127.0.0.1 unless told another address of this machine (an experiment's veth link).
    """

    def __init__(
        self,
        settings: ServerSettings,
        start_timeout_s: float = 180.0,
        stop_timeout_s: float = 30.0,
        host: str = "127.0.0.1",
    ):
        self.settings = settings
        self.host = host
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.info: ServerInfo | None = None
        self.directory: Path | None = None
        self._proc: subprocess.Popen | None = None
        self._log = None
        self._leftovers: set[Path] = set()
        self._started: list[psutil.Process] = []  # the tree when ready: its members may outlive a killed parent

    def start(self) -> ServerInfo:
        if importlib.util.find_spec("pytriton") is None:
            raise DeviceError(
                "the local Triton server needs nvidia-pytriton: in perfmodel's clone, pip install '.[triton]' "
                "(it needs numpy<2), or measure a running server with `url`."
            )
        try:
            return self._start()
        except BaseException:  # an error or Ctrl-C while starting: leave nothing behind
            self.stop()
            raise

    def _start(self) -> ServerInfo:
        remove_stale(WORKSPACE_PREFIX)  # the workspaces of runs that were killed before they could clean up
        self.directory = owned_tempdir(WORKSPACE_PREFIX)
        ready_file = self.directory / "ready.json"
        token = secrets.token_urlsafe(24)
        env = child_environment(str(Path(__file__).resolve().parents[3]))  # the server imports this same perfmodel
        env[TOKEN_ENV] = token  # in the environment, not on the command line that `ps` shows
        self._log = open(self.directory / "server.log", "wb")
        t0 = time.perf_counter()
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "perfmodel.profile.backends.triton_server",
                *self.settings.arguments(),
                "--host",
                self.host,
                "--workspace",
                str(self.directory / "pytriton"),
                "--ready-file",
                str(ready_file),
                "--exit-with-parent",
                "--owned-dir",
                str(self.directory),
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        deadline = t0 + self.start_timeout_s
        while not ready_file.exists():
            if self._proc.poll() is not None and not ready_file.exists():
                raise DeviceError(f"the local Triton server did not start ({self._log_tail()}).")
            if time.perf_counter() > deadline:
                raise DeviceError(
                    f"the local Triton server was not ready within {self.start_timeout_s:g} s ({self._log_tail()}); "
                    "allow more time with `server_timeout_s`."
                )
            time.sleep(0.05)
        ready = json.loads(ready_file.read_text())
        if "error" in ready:  # the program said why it could not serve
            if ready.get("exit_code") == 2:
                raise DeviceError(ready["error"])
            raise BackendError(f"the local Triton server did not start: {ready['error']}.")
        self._remember_leftovers()
        self.info = ServerInfo(
            pid=self._proc.pid,
            host=ready["host"],
            http_port=ready["http_port"],
            grpc_port=ready["grpc_port"],
            model_name=ready["model_name"],
            access_token=token,
            start_ms=(time.perf_counter() - t0) * 1e3,
            model_load_ms=ready["model_load_ms"],
            threads=ready["threads"],
            provenance=ready["provenance"],
        )
        return self.info

    def _remember_leftovers(self) -> None:
        """Note the server's processes, and Triton's copy of the Python model in /tmp/folderXXXXXX
        (outside our workspace), so that stop() finds them even after the server program was killed."""
        self._started = self._tree()
        for proc in self._started:
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                continue
            if cmdline and cmdline[0].endswith("triton_python_backend_stub") and len(cmdline) > 1:
                model_file = Path(cmdline[1])  # <copy>/<version>/model.py
                copy = model_file.parent.parent
                if model_file.name == "model.py" and copy.parent == Path("/tmp") and copy.name.startswith("folder"):
                    self._leftovers.add(copy)

    def _tree(self) -> list[psutil.Process]:
        if self._proc is None:
            return []
        try:
            root = psutil.Process(self._proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _log_tail(self) -> str:
        """The line of the server's log that says what went wrong (never a traceback frame)."""
        if self.directory is None:
            return "no log"
        try:
            text = (self.directory / "server.log").read_text(errors="replace")
        except OSError:
            return "no log"
        return log_cause(text[-16384:], 600) or "no output"

    def stop(self) -> None:
        """Stop the server and remove everything it made. Safe to call twice; bounded in time."""
        interrupted = None
        if self._proc is not None:
            tree = self._tree()
            try:
                if self._proc.poll() is None:
                    self._proc.send_signal(signal.SIGTERM)
                    self._proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                pass
            except KeyboardInterrupt as exc:  # a second Ctrl-C: skip the graceful wait, still clean up
                interrupted = exc
            self._kill(self._started + tree + self._tree())
            for region in Path("/dev/shm").glob(f"pytrtion{self._proc.pid}-*"):  # pytriton's spelling
                region.unlink(missing_ok=True)
            self._proc = None
            self._started = []
        if self._log is not None:
            self._log.close()
            self._log = None
        self._remove_leftovers()
        if interrupted is not None:
            raise interrupted

    @staticmethod
    def _kill(procs: list[psutil.Process]) -> None:
        alive = []
        for proc in procs:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    proc.kill()
                    alive.append(proc)
            except psutil.Error:
                pass
        psutil.wait_procs(alive, timeout=5)

    def _remove_leftovers(self) -> None:
        for path in self._leftovers:
            shutil.rmtree(path, ignore_errors=True)
        self._leftovers.clear()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
