"""The keeper of a local Ray: starts it, and makes sure nothing of it outlives `perfmodel run`.

    python -m perfmodel.run.keeper --temp-dir DIR --num-cpus N [--num-gpus G --gpu-ids IDS] [--resources JSON]
                                   [--nodes JSON]

with ray_settings(token) in its environment (perfmodel.run.cluster.LocalRay does this). --nodes adds
further nodes on this machine, each its own raylet with its own resources (`ray start --address`, as on a
real cluster): [{"num_cpus": 1, "num_gpus": 1, "resources": {"h100": 1}, "gpu_ids": ["GPU-5e0f..."]}, ...].
A node's GPU IDs (--gpu-ids for the head) become its raylet's CUDA_VISIBLE_DEVICES: the GPUs Ray hands its
workers. perfmodel run puts each GPU type of a machine on a node of its own; tests and experiments add nodes
to place workers by type and to lose a node (kill its processes) while a plan runs.

Why a separate process: Ray ties its GCS and raylet to the process that started them (the kernel's
parent-death signal), but the agents the raylet starts outlive a SIGKILLed driver by a minute or more,
and Ray leaves its session folder behind. The keeper runs in its own session (a Ctrl-C on the terminal
does not reach it), is a child subreaper (every orphaned Ray process becomes its child), and gets
SIGTERM when its parent dies. Then, or when `perfmodel run` asks (SIGTERM), it stops `ray start`, kills
every process left under it, removes the temporary folder and exits.

Protocol: it prints one line `node <n> <pid>` per further node (the `ray start` process under which
all of that node's processes run; n counts from 1, the head is node 0), then `ready <gcs address>` once
every node has started; or `failed <reason>` and exits 1.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
START_TIMEOUT_S = 120.0
OWNER_FILE = "owner.pid"  # the PID of the keeper, so that a later run can remove a folder whose keeper died


def ray_settings(token: str) -> dict[str, str]:
    """The environment of a local Ray and its driver: every server bound to 127.0.0.1, no usage report
    over the network, token authentication with a token of this process only (never written to disk,
    unlike Ray's default ~/.ray/auth_token), and workers at the priority the profiler measured at."""
    return {
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # on Linux this makes the node address the loopback one
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        # Ray starts workers at nice 15, below its own processes and the driver: on a machine whose cores
        # the plan gives to the workers, every other process would then go first (seen in experiment 006).
        "RAY_worker_niceness": "0",
    }


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class Keeper:
    def __init__(self, temp_dir: Path, parent: int):
        self.temp_dir = temp_dir
        self.parent = parent
        self.ray: subprocess.Popen | None = None
        self.nodes: list[subprocess.Popen] = []  # the further nodes' `ray start` processes
        self.stopping = False

    def start(self, args) -> str:
        """Start `ray start --head --block` and return the GCS address once it is written."""
        command = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            "--port",
            "0",
            "--node-ip-address",
            "127.0.0.1",
            "--include-dashboard",
            "false",
            "--disable-usage-stats",
            "--num-cpus",
            str(args.num_cpus),
            "--num-gpus",
            str(args.num_gpus),
            "--temp-dir",
            str(self.temp_dir),
            "--object-store-memory",
            str(args.object_store_mb * 2**20),
            "--log-style",
            "record",
        ]
        if importlib.util.find_spec("grpc") is not None:  # Ray starts its client server only with grpcio, and
            # would put it on port 10001, the same for every cluster on the machine; without grpcio a port is an error
            command += ["--ray-client-server-port", str(_free_port())]
        if args.resources:
            command += ["--resources", args.resources]
        self.ray = self._popen(command, "ray-start.log", args.gpu_ids.split(",") if args.gpu_ids else [])
        address_file = self.temp_dir / "ray_current_cluster"
        return self._until(
            self.ray,
            "ray-start.log",
            lambda: address_file.read_text().strip() if address_file.is_file() else "",
        )

    def add_node(self, address: str, node: dict, number: int) -> int:
        """Start a further node (its own raylet) that joins the head at `address`; returns its PID."""
        command = [
            sys.executable,
            "-m",
            "perfmodel.run.raynode",
            "start",
            "--address",
            address,
            "--block",
            "--node-ip-address",
            "127.0.0.1",
            "--disable-usage-stats",
            "--num-cpus",
            str(node.get("num_cpus", 1)),
            "--num-gpus",
            str(node.get("num_gpus", 0)),
            "--temp-dir",
            str(self.temp_dir),
            "--object-store-memory",
            str(node.get("object_store_mb", 128) * 2**20),
            # every node on this machine needs its own agent port (the default one is fixed)
            "--dashboard-agent-listen-port",
            str(_free_port()),
            "--log-style",
            "record",
        ]
        if node.get("resources"):
            command += ["--resources", json.dumps(node["resources"])]
        log = f"ray-start-node{number}.log"
        process = self._popen(command, log, node.get("gpu_ids") or [])
        self.nodes.append(process)
        started = self.temp_dir / log
        self._until(process, log, lambda: "Ray runtime started" in started.read_text(errors="replace"))
        return process.pid

    def _popen(self, command: list[str], log: str, gpu_ids: list[str]) -> subprocess.Popen:
        out = open(self.temp_dir / log, "wb")
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_TOKEN_PATH")}
        if gpu_ids:  # Ray gives each worker one of these, as its CUDA_VISIBLE_DEVICES
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_ids)
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env)

    def _until(self, process: subprocess.Popen, log: str, done):
        """Wait until done() is true (returns its value), `ray start` fails, or time runs out."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and not self.stopping:
            if process.poll() is not None:
                raise RuntimeError(f"ray start exited with code {process.returncode}: {self._log_tail(log)}")
            value = done()
            if value:
                return value
            time.sleep(0.1)
        raise RuntimeError(
            "stopped while starting" if self.stopping else f"Ray did not start within {START_TIMEOUT_S:.0f} s"
        )

    def _log_tail(self, log: str) -> str:
        try:
            lines = (self.temp_dir / log).read_text(errors="replace").strip().splitlines()
        except OSError:
            return "no log"
        errors = [line for line in lines if "error" in line.lower()]
        return (errors or lines or ["no output"])[-1].strip()

    def wait(self) -> None:
        """Until asked to stop, the parent dies (SIGTERM by the kernel, or noticed), or Ray exits."""
        while not self.stopping:
            if os.getppid() != self.parent or (self.ray is not None and self.ray.poll() is not None):
                return
            time.sleep(0.2)

    def stop(self) -> None:
        """Stop Ray (`ray start` stops what it started), then kill whatever is left under this process."""
        import psutil

        for process in [*self.nodes, self.ray]:  # the further nodes first: the head's GCS outlives them
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
        me = psutil.Process()
        for attempt in range(3):  # agents started late can still appear while the first ones go
            left = me.children(recursive=True)
            if not left:
                break
            for p in left:
                _signal(p, signal.SIGTERM if attempt == 0 else signal.SIGKILL)
            psutil.wait_procs(left, timeout=3)
        _reap()
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _signal(process, sig) -> None:
    try:
        process.send_signal(sig)
    except Exception:  # gone already
        pass


def _reap() -> None:
    """Collect the exit status of orphans that were given to this subreaper (no zombies left)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="perfmodel.run.keeper")
    parser.add_argument("--temp-dir", required=True)
    parser.add_argument("--num-cpus", type=int, required=True)
    parser.add_argument("--num-gpus", type=int, default=0)
    parser.add_argument("--gpu-ids", default="", help="the head's GPUs, as its CUDA_VISIBLE_DEVICES names them")
    parser.add_argument("--resources", default="")
    parser.add_argument("--object-store-mb", type=int, default=256)
    parser.add_argument("--nodes", default="[]", help="further nodes, a JSON list (see the module's docstring)")
    args = parser.parse_args(argv)
    if args.resources:
        json.loads(args.resources)  # fail here, not inside Ray
    nodes = json.loads(args.nodes)

    parent = os.getppid()
    keeper = Keeper(Path(args.temp_dir), parent)

    def on_signal(signum, frame):
        keeper.stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides; it tells us with SIGTERM
    signal.signal(signal.SIGHUP, on_signal)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    try:
        (keeper.temp_dir / OWNER_FILE).write_text(str(os.getpid()))
    except FileNotFoundError:  # the driver stopped (a signal while it started us) and removed the folder
        return 1
    try:
        if os.getppid() != parent:  # the parent died before the death signal was armed
            return 1
        try:
            address = keeper.start(args)
            for number, node in enumerate(nodes, 1):
                _tell(f"node {number} {keeper.add_node(address, node, number)}")
        except Exception as exc:  # report and clean up; the driver turns this into one sentence
            _tell(f"failed {exc}")
            return 1
        _tell(f"ready {address}")
        keeper.wait()
        return 0
    finally:
        keeper.stop()


def _tell(line: str) -> None:
    """One protocol line to the driver. A driver killed (SIGKILL) while Ray started has closed the pipe: the
    keeper then only cleans up, silently (a BrokenPipeError traceback reached the terminal), and its stdout
    goes to /dev/null so that the interpreter's last flush finds no closed pipe either."""
    try:
        print(line, flush=True)
    except (BrokenPipeError, ValueError, OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def remove_stale_folders(base: Path, prefix: str) -> None:
    """Remove the temporary folders of keepers that died without cleaning up (their owner PID is gone)."""
    for folder in base.glob(f"{prefix}*"):
        try:
            owner = int((folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue  # not ours, or still being set up
        if not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    sys.exit(main())
