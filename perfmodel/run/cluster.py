"""Where a plan runs: a local Ray that perfmodel starts and stops (127.0.0.1, no dashboard), or an
existing cluster given by --address. Also: what each worker reserves, and refusing a cluster that lacks it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import InputError, PerfmodelError
from perfmodel.run.keeper import ray_settings, remove_stale_folders

TEMP_PREFIX = "perfmodel-ray-"
CONNECT_TIMEOUT_S = 5.0
DEFAULT_RAY_ADDRESS_FILE = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
# One token for every local Ray of this process: Ray reads RAY_AUTH_TOKEN once, when its driver first
# connects, so a second run in the same process (a scheduler calling run_plan again) must use the same one.
_TOKEN = secrets.token_hex(32)


class ClusterError(PerfmodelError):
    """Ray could not be started or reached (exit code 1; an unreachable --address is an InputError)."""


@dataclass(frozen=True)
class Reservation:
    """What one worker asks Ray for: CPUs, GPUs and custom resources (e.g. {"h100": 1})."""

    num_cpus: float
    num_gpus: float
    resources: dict[str, float]

    def actor_options(self) -> dict:
        options = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.resources:
            options["resources"] = dict(self.resources)
        return options


def local_gpus() -> dict[str, int]:
    """This machine's GPUs by hardware key ('h100': 2), from NVML; {} without GPUs or NVML."""
    try:
        import pynvml

        from perfmodel.profile.provenance import hardware_key
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU
        return {}
    try:
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
    finally:
        pynvml.nvmlShutdown()
    return dict(Counter(hardware_key(n, True) for n in names))


class LocalRay:
    """A Ray cluster on this machine for one run, kept by perfmodel.run.keeper (see there why)."""

    def __init__(self, num_cpus: int | None = None, gpus: dict[str, int] | None = None):
        self.num_cpus = num_cpus or os.cpu_count() or 1
        self.gpus = dict(gpus or {})
        self.process: subprocess.Popen | None = None
        self.temp_dir: Path | None = None
        self.address: str | None = None
        self.settings = ray_settings(_TOKEN)

    def nodes(self) -> list[dict]:
        """The one node it will have, as ray.nodes() describes it: checked against before it starts."""
        return [{"Alive": True, "Resources": {"CPU": self.num_cpus, "GPU": sum(self.gpus.values()), **self.gpus}}]

    def start(self) -> str:
        base = Path(tempfile.gettempdir())
        remove_stale_folders(base, TEMP_PREFIX)
        self.temp_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=base))
        command = [
            sys.executable,
            "-m",
            "perfmodel.run.keeper",
            "--temp-dir",
            str(self.temp_dir),
            "--num-cpus",
            str(self.num_cpus),
            "--num-gpus",
            str(sum(self.gpus.values())),
        ]
        if self.gpus:
            command += ["--resources", json.dumps(self.gpus)]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
            env=_with_our_path(self.settings),
        )
        line = self.process.stdout.readline().strip()  # the keeper gives up by itself after 120 s
        if not line.startswith("ready "):
            self.stop()
            reason = line.partition(" ")[2] or "the keeper exited without a word"
            raise ClusterError(f"could not start a local Ray: {reason}.")
        self.address = line.split(" ", 1)[1]
        return self.address

    def stop(self) -> None:
        """Ask the keeper to stop Ray and remove its folder; wait for it."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:  # should not happen: kill it, the folder goes at the next start
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self.process = None


def _with_our_path(settings: dict[str, str]) -> dict[str, str]:
    """The keeper and Ray's workers import this perfmodel: the one the driver imported."""
    env = {**os.environ, **settings}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def connect(address: str, settings: dict[str, str] | None = None) -> None:
    """Connect this process to the Ray cluster at `address` as its driver; `settings` are a local
    Ray's (LocalRay.settings), set before Ray is imported, which reads some of them once."""
    os.environ.update(settings or {})
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    try:
        with _as_first_import(settings):
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"could not connect to Ray at {address}: {first_line(exc)}.") from None
    _quiet_error_listener()


@contextlib.contextmanager
def _as_first_import(settings: dict[str, str] | None):
    """Connect to a local Ray as if Ray had been imported after `settings` were set. A process that
    imported Ray before (or ran its own ray.init) has read two of them already, and then retried our GCS
    for minutes: it would look for it at the machine's network address rather than 127.0.0.1, with
    the auth token of ~/.ray/auth_token rather than ours."""
    if not settings:
        yield
        return
    from ray._private import ray_constants

    try:
        from ray._raylet import AuthenticationTokenLoader

        AuthenticationTokenLoader.instance().reset_cache()  # reads RAY_AUTH_TOKEN again
    except (ImportError, AttributeError):  # another Ray version: one token per process still serves
        pass
    cluster = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # as RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes it at import
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = cluster  # a later ray.init of the caller's own is as before


def _quiet_error_listener() -> None:
    """Ray's driver prints the cluster's error messages (e.g. "A worker died ...") on stdout, even with
    log_to_driver=False; stdout carries our results (--json). perfmodel reports a dead worker itself."""
    import ray._private.worker as ray_worker

    if hasattr(ray_worker, "print_to_stdstream"):
        ray_worker.print_to_stdstream = lambda data, ignore_prefix=False: None


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, for a one-sentence error."""
    text = str(exc).strip()
    return text.splitlines()[0].rstrip(".") if text else type(exc).__name__


def resolve_address(address: str) -> str:
    """--address as Ray's GCS host:port (or a ray:// URL), checked to answer within seconds."""
    given = address
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
        if not address and DEFAULT_RAY_ADDRESS_FILE.is_file():
            address = DEFAULT_RAY_ADDRESS_FILE.read_text().strip()
        if not address:
            raise InputError(
                "--address auto found no running Ray cluster (no RAY_ADDRESS, no "
                f"{DEFAULT_RAY_ADDRESS_FILE}): start one with `ray start --head`, or leave --address out "
                "to run on a local Ray that perfmodel starts."
            )
    host, port = _host_port(address, given)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise InputError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}): check --address "
            "(host:port of the head node's GCS, e.g. 10.0.0.2:6379)."
        ) from None
    return address


def _host_port(address: str, given: str) -> tuple[str, int]:
    rest = address.split("://", 1)[1] if "://" in address else address
    host, _, port = rest.rstrip("/").rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"--address {given!r} is not host:port (e.g. 10.0.0.2:6379, ray://10.0.0.2:10001, or auto).")
    return host.strip("[]"), int(port)


def reservations(hardware_types: dict[str, int], device: str, cluster_nodes: list[dict]) -> dict[str, Reservation]:
    """What each worker of each hardware type reserves, checked against what the cluster has.

    cpu workers: one CPU (and one torch thread). GPU types, on --device cuda: one GPU, one CPU for its
    image decoding, and the type itself, as a custom resource named after it ({"h100": 1}) or, where the
    nodes carry none, Ray's accelerator label (accelerator_type:H100). With --device cpu a GPU type's
    workers run on one CPU each, as a dry run of the plan's mechanics.
    """
    alive = [n.get("Resources", {}) for n in cluster_nodes if n.get("Alive", True)]
    total_cpus = sum(r.get("CPU", 0) for r in alive)
    need_cpus = sum(hardware_types.values())
    if need_cpus > total_cpus:
        raise InputError(
            f"the plan needs {need_cpus} CPU(s), one per worker, but the Ray cluster has "
            f"{total_cpus:g}: re-plan with a smaller --pool (e.g. --pool "
            f"{next(iter(hardware_types))}={int(total_cpus)}), or run on a larger cluster."
        )
    out = {}
    for name, count in hardware_types.items():
        if name == "cpu" or device == "cpu":
            out[name] = Reservation(1, 0, {})
            continue
        label = f"accelerator_type:{name.upper()}"
        by_custom = sum(min(r.get(name, 0), r.get("GPU", 0)) for r in alive)
        by_label = sum(r.get("GPU", 0) for r in alive if label in r)
        if by_custom >= count:
            out[name] = Reservation(1, 1, {name: 1})
        elif by_label >= count:
            out[name] = Reservation(1, 1, {label: 0.001})
        else:
            has = max(by_custom, by_label)
            raise InputError(
                f"the plan needs {count} {name} GPU(s) but the Ray cluster has {has:g} (Ray resource "
                f'"{name}" with a GPU, or a GPU on a node labelled "{label}"): start its nodes with '
                f"--resources '{{\"{name}\": N}}', or re-plan for the GPUs it has."
            )
    return out


def wait_for_actors(refs: list, timeout_s: float, what: str) -> list:
    """ray.get with a timeout that names what did not come."""
    import ray

    t0 = time.monotonic()
    try:
        return ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        raise ClusterError(
            f"{what} did not happen within {time.monotonic() - t0:.0f} s; the cluster may lack the "
            "resources the workers asked for."
        ) from None
