"""Where a plan runs: a local Ray that perfmodel starts and stops (127.0.0.1, no dashboard), or an
existing cluster given by --address. Also: what each worker reserves, and refusing a cluster that lacks it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from perfmodel.errors import InputError, PerfmodelError, first_line
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


def local_gpus() -> dict[str, list[str]]:
    """The GPUs a local run may use, by hardware key, each named as a worker's CUDA_VISIBLE_DEVICES will
    name it: {"h100": ["GPU-5e0f...", ...]}, or the entries of CUDA_VISIBLE_DEVICES where it is set (only
    the GPUs it shows). {} without GPUs or NVML; an InputError where it shows none of them, or where NVML
    cannot tell the type of a GPU it numbers."""
    try:
        import pynvml
    except ImportError:
        return {}
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no GPU
        return {}
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name, uuid, pci = (
                pynvml.nvmlDeviceGetName(handle),
                pynvml.nvmlDeviceGetUUID(handle),
                pynvml.nvmlDeviceGetPciInfo(handle).busId,
            )
            gpus.append(NvmlGpu(*(v.decode() if isinstance(v, bytes) else str(v) for v in (name, uuid, pci))))
    finally:
        pynvml.nvmlShutdown()
    out: dict[str, list[str]] = {}
    for gpu, name in visible_gpus(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("CUDA_DEVICE_ORDER")):
        out.setdefault(gpu.type, []).append(name)
    return out


@dataclass(frozen=True)
class NvmlGpu:
    name: str  # "NVIDIA H100 80GB HBM3"
    uuid: str  # "GPU-5e0f..."
    pci_bus_id: str  # "00000000:3B:00.0"

    @property
    def type(self) -> str:
        from perfmodel.profile.provenance import hardware_key

        return hardware_key(self.name, True)


def visible_gpus(gpus: list[NvmlGpu], setting: str | None, order: str | None) -> list[tuple[NvmlGpu, str]]:
    """Each GPU that CUDA_VISIBLE_DEVICES=`setting` shows, with the entry that names it, read as CUDA reads
    it: up to the first entry that names no GPU (-1, MIG-..., a typo); a number counts in CUDA's order,
    PCI bus order with CUDA_DEVICE_ORDER=PCI_BUS_ID and otherwise fastest first (which NVML cannot tell
    apart where the GPUs differ); GPU-... is a GPU's UUID or its start. Unset: every GPU, by UUID."""
    if setting is None:
        return [(g, g.uuid) for g in gpus]
    by_bus = sorted(gpus, key=lambda g: g.pci_bus_id.upper())
    types = sorted({g.type for g in gpus})
    out = []
    for entry in (e.strip() for e in setting.split(",")):
        if re.fullmatch(r"[0-9]{1,4}", entry) and int(entry) < len(gpus):
            if len(types) > 1 and (order or "").strip().upper() != "PCI_BUS_ID":
                raise InputError(
                    f"CUDA_VISIBLE_DEVICES={setting} numbers the GPUs of a node with {' and '.join(types)} "
                    "GPUs fastest first, which does not tell which is which: set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                    "(nvidia-smi's numbers), or name the GPUs by UUID (nvidia-smi -L)."
                )
            out.append((by_bus[int(entry)], entry))
            continue
        match = [g for g in gpus if entry.startswith("GPU-") and g.uuid.startswith(entry)]
        if len(match) != 1:
            break
        out.append((match[0], entry))
    if gpus and not out:
        raise InputError(
            f"CUDA_VISIBLE_DEVICES={setting!r} shows none of this machine's {len(gpus)} GPUs: unset it, or "
            "name the GPUs to use (their numbers, or UUIDs from nvidia-smi -L)."
        )
    return out


@dataclass(frozen=True)
class NodeSpec:
    """A further node of a local cluster: its own raylet on this machine, with its own resources."""

    num_cpus: int = 1
    num_gpus: int = 0
    resources: dict[str, float] = field(default_factory=dict)  # e.g. {"h100": 1}
    gpu_ids: tuple[str, ...] = ()  # its raylet's CUDA_VISIBLE_DEVICES: the GPUs Ray gives its workers

    def resources_as_ray_lists_them(self) -> dict[str, float]:
        return {"CPU": self.num_cpus, "GPU": self.num_gpus, **self.resources}


class LocalRay:
    """A Ray cluster on this machine for one run, kept by perfmodel.run.keeper (see there why).

    `gpus` are local_gpus(). Ray gives a worker that reserves a GPU any GPU of its node, whatever type the
    worker also reserves; so on a machine with GPUs of several types each type is a node of its own (its
    raylet sees only those GPUs, with one CPU per GPU), the first type's GPUs on the head.
    `nodes` adds further nodes (tests, experiments): a cluster of several raylets on one machine, each
    with its own resources, any of which lose_node() can take away as a crashed machine would go.
    """

    def __init__(
        self, num_cpus: int | None = None, gpus: dict[str, list[str]] | None = None, nodes: list[NodeSpec] = ()
    ):
        self.num_cpus = num_cpus or os.cpu_count() or 1
        types = [(name, tuple(ids)) for name, ids in (gpus or {}).items() if ids]
        self.head_gpus = types[0][1] if types else ()
        self.head_resources = {types[0][0]: len(self.head_gpus)} if types else {}
        by_type = [NodeSpec(len(ids), len(ids), {name: len(ids)}, ids) for name, ids in types[1:]]
        self.extra_nodes = [*nodes, *by_type]
        self.node_pids: dict[int, int] = {}  # further node number (1, 2, ...) -> its `ray start` PID
        self.process: subprocess.Popen | None = None
        self.temp_dir: Path | None = None
        self.address: str | None = None
        self.settings = ray_settings(_TOKEN)

    def nodes(self) -> list[dict]:
        """Its nodes, as ray.nodes() describes them: checked against before it starts."""
        head = NodeSpec(self.num_cpus, len(self.head_gpus), self.head_resources)
        return [{"Alive": True, "Resources": n.resources_as_ray_lists_them()} for n in [head, *self.extra_nodes]]

    def start(self) -> str:
        base = Path(tempfile.gettempdir())
        remove_stale_folders(base, TEMP_PREFIX)
        self.temp_dir = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=base))
        try:
            return self._start()
        except BaseException:  # an interrupt before the keeper owns the folder: stop() removes it
            self.stop()
            raise

    def _start(self) -> str:
        command = [
            sys.executable,
            "-m",
            "perfmodel.run.keeper",
            "--temp-dir",
            str(self.temp_dir),
            "--num-cpus",
            str(self.num_cpus),
            "--num-gpus",
            str(len(self.head_gpus)),
        ]
        if self.head_gpus:
            command += ["--resources", json.dumps(self.head_resources), "--gpu-ids", ",".join(self.head_gpus)]
        if self.extra_nodes:
            command += ["--nodes", json.dumps([asdict(n) for n in self.extra_nodes])]
        with _signals_after():  # an interrupt inside Popen would lose the keeper it started: stop() must know it
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                text=True,
                start_new_session=True,
                env=_with_our_path(self.settings),
            )
        line = self.process.stdout.readline().strip()  # the keeper gives up by itself after 120 s
        while line.startswith("node "):
            _, number, pid = line.split()
            self.node_pids[int(number)] = int(pid)
            line = self.process.stdout.readline().strip()
        if not line.startswith("ready "):
            self.stop()
            reason = line.partition(" ")[2] or "the keeper exited without a word"
            raise ClusterError(f"could not start a local Ray: {reason}.")
        self.address = line.split(" ", 1)[1]
        return self.address

    def lose_node(self, number: int) -> None:
        """Kill every process of further node `number` at once (SIGKILL), as a machine that is lost goes:
        its raylet, its agents and the workers on it. The keeper removes what is left when the run ends."""
        import psutil

        try:
            root = psutil.Process(self.node_pids[number])
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for p in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()

    def stop(self) -> None:
        """Ask the keeper to stop Ray and remove its folder; wait for it. The folder is removed here too: a
        keeper stopped within a few tenths of a second of its start dies before it can (its SIGTERM handler
        not yet set), leaving a folder without its owner file, which no later run would remove."""
        removable = True
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(60)
                except subprocess.TimeoutExpired:  # should not happen: kill it, the folder goes at the next start
                    self.process.kill()
                    self.process.wait()
                    removable = False  # Ray may still be running in it
            if self.process.stdout:
                self.process.stdout.close()
            self.process = None
        if removable and self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


@contextlib.contextmanager
def _signals_after():
    """Hold SIGINT and SIGTERM (their Python handlers) until the block ends, then handle them: a Ctrl-C or
    SIGTERM while Popen waited for the keeper's exec raised inside Popen, which then returned no process
    to stop, and the keeper lived on. Only the main thread receives signals (and may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: held.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)  # None: not set from Python
        for s in dict.fromkeys(held):
            signal.raise_signal(s)


@contextlib.contextmanager
def sigterm_kept():
    """Keep this process's SIGTERM handler through ray.init and ray.shutdown. ray.init sets Ray's own: a
    Python one that exits with code 15 (set as the call starts), and a native one that prints a stack dump
    and aborts; ray.shutdown sets the native one back to the default action (death, no output), while
    signal.getsignal still names ours. A SIGTERM in ray.init, or at any time after ray.shutdown, would end
    `perfmodel run` without its result or its sentence. Holding the signal back (blocking it) does not
    help: any other thread (numpy's) would take it. So the driver gets no native handler (Ray's
    RAY_DISABLE_FAILURE_SIGNAL_HANDLER, read as its core worker starts; the cost: no C++ stack dump should
    the driver crash inside Ray), ours is set again at the OS level after the block, and a SIGTERM that
    Ray's Python handler turned into an exit is handed to ours."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
        yield
        return
    from ray._private import ray_constants

    ours = signal.getsignal(signal.SIGTERM)
    native = getattr(ray_constants, "RAY_DISABLE_FAILURE_SIGNAL_HANDLER", False)
    ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    try:
        yield
    except SystemExit as exc:  # Ray's handler: ours decides what a SIGTERM does
        if exc.code != signal.SIGTERM:
            raise
        signal.signal(signal.SIGTERM, signal.SIG_DFL if ours is None else ours)
        signal.raise_signal(signal.SIGTERM)
        raise  # ours did not end the block (it ignores SIGTERM): Ray's exit, as it would have been
    finally:
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = native
        signal.signal(signal.SIGTERM, signal.SIG_DFL if ours is None else ours)  # None: not set from Python


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
        with _as_first_import(settings), sigterm_kept():
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


def resolve_address(address: str) -> str:
    """`address` as Ray's GCS host:port (or a ray:// URL), checked to answer within seconds."""
    given = address
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS", "")
        if not address and DEFAULT_RAY_ADDRESS_FILE.is_file():
            address = DEFAULT_RAY_ADDRESS_FILE.read_text().strip()
        if not address:
            raise InputError(
                "`address` auto found no running Ray cluster (no RAY_ADDRESS, no "
                f"{DEFAULT_RAY_ADDRESS_FILE}): start one with `ray start --head`, or leave `address` out "
                "to run on a local Ray that perfmodel starts."
            )
    host, port = _host_port(address, given)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise InputError(
            f"no Ray cluster answers at {address} ({exc.strerror or exc}): check `address` "
            "(host:port of the head node's GCS, e.g. 10.0.0.2:6379)."
        ) from None
    _check_ray_answers(address, host, port)
    return address


def _check_ray_answers(address: str, host: str, port: int) -> None:
    """An open port is not yet Ray: something else listening there (a web server, the dashboard, a silent
    listener) would keep ray.init retrying for minutes. Ask it as Ray's driver would, within seconds: the
    GCS for its cluster ID (an authentication error is an answer too), a ray:// server for a gRPC channel."""
    if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):  # a TLS cluster: Ray's own check only
        return
    try:
        import grpc
    except ImportError:  # no Ray either: the run says so later
        return
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    with grpc.insecure_channel(target) as channel:
        if address.startswith("ray://"):
            try:
                grpc.channel_ready_future(channel).result(timeout=CONNECT_TIMEOUT_S)
                return
            except grpc.FutureTimeoutError:
                why = f"no gRPC answer within {CONNECT_TIMEOUT_S:g} s"
        else:
            try:
                channel.unary_unary("/ray.rpc.NodeInfoGcsService/GetClusterId")(b"", timeout=CONNECT_TIMEOUT_S)
                return
            except grpc.RpcError as exc:
                # an answer from a gRPC server: Ray's (authenticated, or a version without this call: let
                # ray.init judge it; another gRPC server is then refused by Ray within about 20 s)
                if exc.code() in (
                    grpc.StatusCode.UNAUTHENTICATED,
                    grpc.StatusCode.PERMISSION_DENIED,
                    grpc.StatusCode.UNIMPLEMENTED,
                ):
                    return
                why = exc.code().name.lower().replace("_", " ")
    raise InputError(
        f"{address} does not answer as a Ray cluster ({why}): something else listens there; check `address` "
        "(host:port of the head node's GCS, e.g. 10.0.0.2:6379, or ray://host:10001 of its Ray Client server)."
    )


def _host_port(address: str, given: str) -> tuple[str, int]:
    rest = address.split("://", 1)[1] if "://" in address else address
    host, _, port = rest.rstrip("/").rpartition(":")
    if not host or not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:  # '²'.isdigit() is True
        raise InputError(f"`address` {given!r} is not host:port (e.g. 10.0.0.2:6379, ray://10.0.0.2:10001, or auto).")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class Placement:
    """Where one worker runs: what it reserves, and the node chosen for it (None: any, on a cluster not
    started yet), with the way its hardware type was recognised there."""

    reservation: Reservation
    node_id: str | None
    by: str  # "resource" (a custom resource named after the type), "label" (accelerator_type), "cpu", "any"

    def actor_options(self) -> dict:
        options = self.reservation.actor_options()
        if self.node_id is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self.node_id, soft=False)
        return options


def place(hardware: list[str], device: str, cluster_nodes: list[dict]) -> list[Placement]:
    """Where each worker (given by its hardware type, in plan order) runs, checked against the cluster:
    an InputError of one sentence, before anything starts, when the cluster lacks what the plan needs.

    A GPU type's workers go to nodes that carry the type: a custom resource named after it ({"h100": 1},
    reserved with the GPU, so one worker per such GPU) or, on a cluster without it, Ray's
    `accelerator_type:H100` label. On device cuda each reserves one GPU and one CPU (its image
    decoding); on device cpu (a dry run) one CPU on a node of its type, or any node when no node
    carries a type at all (a plain local Ray). cpu workers reserve one CPU (one torch thread), on nodes
    without GPUs or GPU types first, so that they do not take the CPUs the GPU workers need.
    """
    alive = [n for n in cluster_nodes if n.get("Alive", True)]
    free = [dict(n.get("Resources", {})) for n in alive]
    total_cpus = sum(r.get("CPU", 0) for r in free)
    if len(hardware) > total_cpus:
        raise InputError(
            f"the plan needs {len(hardware)} CPU(s), one per worker, but the Ray cluster has "
            f"{total_cpus:g}: re-plan with a smaller `pool` (e.g. `pool` {hardware[0]}={int(total_cpus)}), "
            "or run on a larger cluster."
        )
    types = [t for t in dict.fromkeys(hardware) if t != "cpu"]
    typed = [_typed(r) for r in free]
    out: list[Placement | None] = [None] * len(hardware)
    gpu = 1 if device == "cuda" else 0
    for name in types:
        mine = [i for i, h in enumerate(hardware) if h == name]
        ways = ["resource", "label"] + (["any"] if device == "cpu" and not any(typed) else [])
        way = next((w for w in ways if sum(_units(r, w, name, gpu) for r in free) >= len(mine)), None)
        if way is None:
            whole = [n.get("Resources", {}) for n in alive]
            has = max(sum(_units(r, w, name, gpu) for r in whole) for w in ("resource", "label"))
            raise InputError(
                f"the plan needs {len(mine)} {name} GPU(s) but the Ray cluster has {has:g} (Ray resource "
                f'"{name}" with a GPU, or a GPU on a node labelled "{_label(name)}"): start its nodes with '
                f"--resources '{{\"{name}\": N}}', or re-plan for the GPUs it has."
            )
        extra = {"resource": {name: 1}, "label": {_label(name): 0.001}, "any": {}}[way]
        for i in mine:
            out[i] = Placement(Reservation(1, gpu, extra), _take(free, alive, way, name, gpu), way)
    order = sorted(range(len(free)), key=lambda k: typed[k])  # cpu workers: nodes without GPU types first
    for i, h in enumerate(hardware):
        if h == "cpu":
            node = _take([free[k] for k in order], [alive[k] for k in order], "any", h, 0)
            out[i] = Placement(Reservation(1, 0, {}), node, "cpu")
    return out


RAY_RESOURCES = {"CPU", "GPU", "memory", "object_store_memory"}


def _typed(resources: dict) -> bool:
    """Whether a node is a GPU node: a GPU, an accelerator label, or a resource of its own (a GPU type)."""
    return resources.get("GPU", 0) > 0 or any(k not in RAY_RESOURCES and not k.startswith("node:") for k in resources)


def _label(name: str) -> str:
    return f"accelerator_type:{name.upper()}"


def _units(r: dict, way: str, name: str, gpu: int) -> int:
    """How many workers of type `name` node resources `r` take, recognising the type in `way`."""
    n = min(r.get("CPU", 0), r.get("GPU", 0)) if gpu else r.get("CPU", 0)
    if way == "resource":
        n = min(n, r.get(name, 0))
    elif way == "label" and _label(name) not in r:
        n = 0
    return int(n + 1e-9)


def _take(free: list[dict], nodes: list[dict], way: str, name: str, gpu: int) -> str | None:
    """The first node with room for one more such worker; its resources are taken from `free`."""
    for r, node in zip(free, nodes):
        if _units(r, way, name, gpu) >= 1:
            r["CPU"] -= 1
            r["GPU"] = r.get("GPU", 0) - gpu
            if way == "resource":
                r[name] -= 1
            return node.get("NodeID")
    raise AssertionError("placed more workers than the nodes take")  # counted before: cannot happen


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
