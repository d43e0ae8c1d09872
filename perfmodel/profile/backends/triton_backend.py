"""Profiling through a Triton Inference Server: the `--backend triton` sweep.

Each (input size, batch size, protocol, mode, concurrency) is one row. The server is either started
here (triton_process.py: the model in pytriton's bundled Triton, bound to 127.0.0.1) or a running
one named by --url. Per point the row holds the client-side latency distribution and throughput
(triton_client.py), the server's own queue and compute times (Triton's statistics, as differences
over the point), and the memory and CPU of client and server (ServingMonitor).

Warm-up is the first request at a batch size to a freshly started server (`warmup_method`
fresh-server: one server per input size and batch size, as the in-process profiler uses one fresh
worker per point), or the first at that batch size to the server of the whole sweep (same-server),
or to a running server (running-server, --url). Every row of one (input size, batch size) carries
the same warm-up measurement.
"""

from __future__ import annotations

import ipaddress
import math
import os
import platform
import re
import time
from dataclasses import dataclass, field

import numpy as np

from perfmodel._version import __version__
from perfmodel.errors import BackendError, InputError, PerfmodelError
from perfmodel.models import resolve_model
from perfmodel.profile.affinity import pinned_apart_from
from perfmodel.profile.backends.triton_client import (
    MODES,
    PROTOCOLS,
    ServerConnection,
    ThroughputRule,
    Workload,
    first_request_ms,
    is_timeout,
    random_batches,
    run_load,
)
from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerInfo, ServerSettings
from perfmodel.profile.backends.triton_server import TOKEN_ENV
from perfmodel.profile.backends.triton_stats import server_times_ms
from perfmodel.profile.config import Estimate, ProfileConfig, ProgressCallback, SweepEvent
from perfmodel.profile.failures import describe
from perfmodel.profile.monitor import GpuId, HardwareMonitor, gpu_id, open_nvml
from perfmodel.profile.output import ProfileOutput
from perfmodel.profile.provenance import hardware_key, now_utc
from perfmodel.schema import SCHEMA_VERSION

ARCHITECTURES = ("local-server", "remote-server")


@dataclass(frozen=True)
class TritonOptions:
    """How to reach the server and which loads to measure: ProfileConfig's `backend_options` for `backend="triton"`."""

    protocols: tuple[str, ...] = ("grpc",)
    modes: tuple[str, ...] = ("sync",)
    concurrencies: tuple[int, ...] = (1,)
    url: str | None = None  # host:port of a running server; None starts a local one
    architecture: str | None = None  # None: remote-server for a --url host off this machine, else local-server
    server_model: str | None = None  # the model's name on the server; None: the --model name
    request_timeout_s: float = 60.0
    server_timeout_s: float = 180.0  # starting a local server, until its model is ready
    window_s: float = 1.0
    rates: tuple[float, ...] = ()  # requests/s: open-loop load (triton_rate.py) instead of a concurrency
    duration_s: float = 20.0  # per rate, counted (after a warm-up of a fifth of it, 1 to 5 s)
    batching: object | None = None  # triton_rate.Batching: the local server's dynamic batcher (--rate)
    server_cpus: tuple[int, ...] = ()  # the local server's CPU cores; the load generator gets the others

    def __post_init__(self):
        for name, values, allowed in (("`protocols`", self.protocols, PROTOCOLS), ("`modes`", self.modes, MODES)):
            bad = [v for v in values if v not in allowed]
            if not values or bad:
                raise InputError(
                    f"{name}: {', '.join(bad) or 'nothing'} is not one of {', '.join(allowed)}; "
                    f"give e.g. {','.join(allowed)}."
                )
        if not self.concurrencies or any(c < 1 for c in self.concurrencies):
            raise InputError("`concurrencies` needs positive whole numbers, e.g. 1,4,16.")
        if self.architecture is not None and self.architecture not in ARCHITECTURES:
            raise InputError(f"`architecture` must be {' or '.join(ARCHITECTURES)}, not {self.architecture!r}.")
        if any(not (math.isfinite(r) and r > 0) for r in self.rates) or not self.duration_s > 0:
            raise InputError("`rates` needs request rates > 0, e.g. 50,100,200/s, and `duration_s` a time > 0.")
        if self.rates:
            from perfmodel.profile.backends.triton_rate import check_rates

            check_rates(self.rates, self.duration_s)
        if self.request_timeout_s <= 0 or self.server_timeout_s <= 0:
            raise InputError("`request_timeout_s` and `server_timeout_s` must be positive numbers of seconds.")
        if self.url is not None and self.server_cpus:
            raise InputError(
                "`server_cpus` places the server perfmodel starts; a running server (`url`) runs where "
                "it runs: leave `server_cpus` out, or `url` out."
            )
        if self.url is not None:
            split_url(self.url)
            if len(self.protocols) != 1:
                raise InputError(
                    "`url` names one server port, and a port speaks one protocol: name one protocol in `protocols` "
                    "(HTTP and gRPC listen on different ports), and run again with `resume` for the other."
                )

    @property
    def resolved_architecture(self) -> str:
        if self.architecture:
            return self.architecture
        if self.url is None:
            return "local-server"
        host = split_url(self.url)[0]
        if host == "localhost":
            return "local-server"
        try:
            return "local-server" if ipaddress.ip_address(host).is_loopback else "remote-server"
        except ValueError:  # a host name: only the user knows where it is; `architecture` says so
            return "remote-server"


def split_url(url: str) -> tuple[str, int]:
    """'host:port' -> (host, port); InputError for anything else."""
    if "://" in url:
        raise InputError(f"`url` {url}: give host:port without the scheme, e.g. 10.0.0.2:8001.")
    host, _, port = url.strip().rpartition(":")
    host = host.strip("[]")
    if not host or not re.fullmatch(r"[0-9]{1,5}", port) or not 0 < int(port) < 65536:  # not str.isdecimal: '٨
        raise InputError(f"`url` {url}: give host:port, e.g. 127.0.0.1:8001 (gRPC) or 127.0.0.1:8000 (HTTP).")
    return host, int(port)


def serving_monitor(gpu: GpuId | None) -> HardwareMonitor:
    """The hardware monitor plus the client's and the server's own resident memory and CPU.

    `host_rss_mb` counts the profiler with its children (so a local server too); `client_*` is the
    profiler alone, `server_*` the server program with its tree (tritonserver, the Python backend),
    once `monitor.watch("server", pid)` names it. CPU is in percent of one core, so it can exceed 100.
    One reading costs ~4 ms of CPU (psutil walks /proc); at 5 Hz that is ~2% of a core, taken from
    the server when both share the machine, but never from the client's timing threads: the monitor
    is its own process.
    """
    return HardwareMonitor(gpu, interval_s=0.2, roles={"client": (os.getpid(), False), "server": (None, True)})


@dataclass
class _Target:
    """The server being measured now: addresses, token, and how to tell that it died."""

    urls: dict[str, str]
    model_name: str
    access_token: str | None
    warmup_method: str
    load_ms: float
    threads: int | None
    provenance: dict
    local: LocalTritonServer | None = None
    inputs: dict = field(default_factory=dict)  # protocol -> ModelInput

    def died(self) -> str | None:
        if self.local is not None and not self.local.is_alive():
            return "the server process exited"
        return None


def _options(config: ProfileConfig) -> TritonOptions:
    opts = config.backend_options if config.backend_options is not None else TritonOptions()
    if not isinstance(opts, TritonOptions):
        raise InputError("the triton backend takes TritonOptions as its backend_options.")
    if config.batch_sizes is None:
        raise InputError(
            "a search for `batch_sizes` (auto) is for the in-process backend; with `backend` triton give a list, "
            "e.g. 1,2,4."
        )
    for setting, given in (
        ("`cuda_graphs`", config.cuda_graphs),
        (f"`compile_mode` {config.compile_mode}", config.compile_mode != "default"),
        ("`fresh_warmup_at`", config.fresh_warmup_at is not None),
        ("`search_tolerance`", config.search_tolerance > 0),
        ("`processes`", config.processes > 1),  # a served model's process is the server's, not one per point
    ):
        if given:
            raise InputError(f"{setting} is for the in-process backend; leave it out with `backend` triton.")
    return opts


def estimate(config: ProfileConfig) -> Estimate:
    opts = _options(config)
    if opts.rates:  # one server; per point a warm-up of a fifth of the duration (1 to 5 s), then the duration
        points = len(config.input_sizes) * len(config.batch_sizes) * len(opts.protocols) * len(opts.rates)
        return Estimate(points, False, opts.duration_s + max(1.0, min(5.0, opts.duration_s / 5)), 0)
    groups = len(config.input_sizes) * len(config.batch_sizes)
    points = groups * len(opts.protocols) * len(opts.modes) * len(opts.concurrencies)
    servers = groups if config.warmup == "fresh-process" and opts.url is None else 0
    return Estimate(points, False, config.rule.max_time_s + 2 * opts.window_s, servers)


def sweep(config: ProfileConfig, output: ProfileOutput, notify: ProgressCallback) -> None:
    """The `--backend triton` sweep of `config` into `output`: closed-loop (concurrency) or open-loop (--rate)."""
    opts = _options(config)
    with pinned_apart_from(opts.server_cpus):
        if not opts.rates:
            _TritonSweep(config, opts, resolve_model(config.model), output, notify).run()
            return
        from perfmodel.profile.backends.triton_rate import sweep_rates

        gpu = _local_gpu(config.device) if opts.url is None else None
        sweep_rates(
            config,
            opts,
            output,
            notify,
            config.hardware or server_hardware_key(config.device, opts.url),
            lambda: serving_monitor(gpu),
        )


def _local_gpu(device: str) -> GpuId | None:
    """The GPU a local server runs on (the server's torch numbers the GPUs as this process's does)."""
    if not device.strip().lower().startswith("cuda"):
        return None
    from perfmodel.torch_runner import check_device

    return gpu_id(check_device(device))  # no GPU here: say so, rather than blame torch


def server_hardware_key(device: str, url: str | None) -> str:
    """The pool key of the server's device: cpu, or from the local GPU's name (h100, a100 ...)."""
    if not device.strip().lower().startswith("cuda"):
        return "cpu"
    if url is not None:
        raise InputError("with `url` on a GPU server, name its pool key with `hardware` (e.g. h100).")
    nvml, reason = open_nvml(_local_gpu(device))
    if nvml is None:
        raise InputError(f"cannot read the GPU's name ({reason}); name its pool key with `hardware`.")
    try:
        return hardware_key(nvml.info().name, True)
    finally:
        nvml.close()


class _TritonSweep:
    def __init__(self, config, opts: TritonOptions, spec, output: ProfileOutput, notify):
        self.config, self.opts, self.spec, self.output, self.notify = config, opts, spec, output, notify
        self.architecture = opts.resolved_architecture
        self.is_cuda = config.device.strip().lower().startswith("cuda")
        self.hardware = config.hardware or server_hardware_key(config.device, opts.url)
        self.rule = ThroughputRule(
            window_s=opts.window_s,
            rel_ci=config.rule.rel_ci,
            min_samples=config.rule.min_samples,
            max_time_s=config.rule.max_time_s,
        )
        self.done = self.measured = 0
        self.measuring_s = 0.0  # time spent on newly measured points, for the ETA
        self.checked: set[str] = set()

    def _identity(self, protocol: str, mode: str, concurrency: int, size: int, batch: int) -> dict:
        return {
            "hardware": self.hardware,
            "model": self.spec.name,
            "backend": f"triton-{protocol}",
            "precision": self.config.precision,
            "architecture": self.architecture,
            "protocol": protocol,
            "mode": mode,
            "concurrency": concurrency,
            "input_size": size,
            "batch_size": batch,
        }

    def run(self):
        c, o = self.config, self.opts
        groups = [(size, batch) for size in c.input_sizes for batch in c.batch_sizes]
        loads = [(p, m, k) for p in o.protocols for m in o.modes for k in o.concurrencies]
        self.total = len(groups) * len(loads)
        self.notify(SweepEvent("start", total=self.total, message=estimate(c).describe()))
        gpu = _local_gpu(c.device) if self.architecture == "local-server" else None
        target: _Target | None = None
        with serving_monitor(gpu) as monitor:
            self.monitor = monitor
            try:
                for size, batch in groups:
                    pending = []
                    for load in loads:
                        identity = self._identity(*load, size, batch)
                        row = self.output.get(identity)
                        if row is not None:
                            self._announce(identity, row, resumed=True)
                        else:
                            pending.append(identity)
                    if not pending:
                        continue
                    started = time.monotonic()  # a fresh server's start counts in the ETA
                    if target is None or c.warmup == "fresh-process" and target.local is not None:
                        if target is not None:
                            target.local.stop()
                        target = self._open_target()
                    self._measure_group(target, size, batch, pending, started)
            finally:
                if target is not None and target.local is not None:
                    target.local.stop()

    def _announce(self, identity: dict, row: dict, resumed: bool) -> None:
        self.done += 1
        load = f"{identity['protocol']} {identity['mode']} x{identity['concurrency']}"
        eta = self.measuring_s / self.measured * (self.total - self.done) if self.measured else None
        self.notify(
            SweepEvent(
                "point",
                self.done,
                self.total,
                identity["input_size"],
                identity["batch_size"],
                row["status"],
                resumed,
                load,
                eta_s=eta,
            )
        )

    # -- the server ---------------------------------------------------------------------------

    def _open_target(self) -> _Target:
        c, o = self.config, self.opts
        if o.url is not None:
            target = _Target(
                urls={o.protocols[0]: o.url},
                model_name=o.server_model or self.spec.name,
                access_token=os.environ.get(TOKEN_ENV),
                warmup_method="running-server",
                load_ms=math.nan,
                threads=None,
                provenance={"device_name": "", "torch": ""},
            )
        else:
            settings = ServerSettings(
                model=self.spec.path or self.spec.name,
                device=c.device,
                precision=c.precision,
                channels_last=c.channels_last,
                compile=c.compile,
                threads=c.threads,
                max_batch_size=max(c.batch_sizes),
                seed=c.seed,
                model_name=o.server_model,
                cpus=o.server_cpus,
            )
            server = LocalTritonServer(settings, start_timeout_s=o.server_timeout_s)
            try:
                info: ServerInfo = server.start()
            except PerfmodelError as exc:
                raise self._with_resume_hint(exc) from None
            self.monitor.watch("server", info.pid)
            target = _Target(
                urls={p: info.url(p) for p in PROTOCOLS},
                model_name=info.model_name,
                access_token=info.access_token,
                warmup_method="fresh-server" if c.warmup == "fresh-process" else "same-server",
                load_ms=info.start_ms,
                threads=info.threads,
                provenance=info.provenance,
                local=server,
            )
        try:
            for protocol in o.protocols:
                with ServerConnection(protocol, target.urls[protocol], target.access_token) as conn:
                    target.inputs[protocol] = conn.check_model(target.model_name)
        except BaseException as exc:
            if target.local is not None:
                target.local.stop()
            if isinstance(exc, PerfmodelError):
                raise self._with_resume_hint(exc) from None
            raise
        return target

    def _with_resume_hint(self, exc: PerfmodelError) -> PerfmodelError:
        if not self.measured:
            return exc
        return type(exc)(f"{exc} {self.output.saved()} Run it again with `resume` to measure the rest.")

    def _fixed(self, target: _Target, protocol: str) -> dict:
        fixed = {
            "warmup_method": target.warmup_method,
            "threads": target.threads,
            "load_ms": target.load_ms,
            "server_version": target.inputs[protocol].server_version,
            "perfmodel": __version__,
            "host": platform.node(),
            "schema_version": SCHEMA_VERSION,
            **target.provenance,
        }
        backend = f"triton-{protocol}"
        if backend not in self.checked:  # once per backend: resuming must not mix two kinds of measurement
            identity = {
                "hardware": self.hardware,
                "model": self.spec.name,
                "backend": backend,
                "precision": self.config.precision,
            }
            self.output.check_resumable(identity, fixed)
            self.checked.add(backend)
        return fixed

    # -- the points ---------------------------------------------------------------------------

    def _measure_group(self, target: _Target, size: int, batch: int, pending: list[dict], started: float) -> None:
        first = pending[0]["protocol"]
        warmup = self._workload(target, first, "sync", 1, size, batch)
        try:
            warmup_ms, warmup_error = first_request_ms(warmup), None
        except Exception as exc:
            self._raise_if_dead(target, first, exc, f"{size} px, batch {batch}: the first request")
            warmup_ms, warmup_error = math.nan, self._describe(exc)
        for identity in pending:
            row = {
                **self._fixed(target, identity["protocol"]),
                **identity,
                "warmup_ms": warmup_ms,
                "load_avg_1m": os.getloadavg()[0],
                "created_at": now_utc(),
            }
            if warmup_error is not None:
                row.update(status="error", error=f"the first request failed: {warmup_error}")
            else:
                row.update(self._measure(target, identity))
            self.output.add(row)
            self.measured += 1
            self.measuring_s, started = self.measuring_s + time.monotonic() - started, time.monotonic()
            self._announce(identity, row, resumed=False)

    def _workload(self, target: _Target, protocol: str, mode: str, concurrency: int, size: int, batch: int) -> Workload:
        model_input = target.inputs[protocol]
        dtype = np.float16 if model_input.datatype == "FP16" else np.float32
        return Workload(
            protocol,
            target.urls[protocol],
            target.model_name,
            model_input.name,
            model_input.datatype,
            mode,
            concurrency,
            random_batches(batch, size, dtype, seed=self.config.seed),
            self.opts.request_timeout_s,
        )

    def _measure(self, target: _Target, identity: dict) -> dict:
        protocol, batch = identity["protocol"], identity["batch_size"]
        limit = target.inputs[protocol].max_batch_size
        if limit and batch > limit:
            return {
                "status": "error",
                "error": f"batch size {batch} is above the served model's max_batch_size {limit}",
            }
        workload = self._workload(
            target, protocol, identity["mode"], identity["concurrency"], identity["input_size"], batch
        )
        url, token, model = target.urls[protocol], target.access_token, target.model_name
        stats: dict = {}

        def snapshot(key: str) -> None:
            with ServerConnection(protocol, url, token) as conn:
                stats[key] = conn.model_statistics(model)

        snapshot("before")
        mark = self.monitor.window()
        try:
            result = run_load(workload, self.rule, on_ramp_done=lambda: snapshot("ramp"), abort=target.died)
        except Exception as exc:
            where = (
                f"{identity['input_size']} px, batch {batch}, {protocol} {identity['mode']} x{identity['concurrency']}"
            )
            self._raise_if_dead(target, protocol, exc, where)
            return {"status": "error", "error": self._describe(exc), **self.monitor.summary(mark)}
        counters = self.monitor.summary(mark)
        snapshot("after")
        latency = result.latency.columns()
        if not math.isfinite(latency["latency_ci_rel"]):  # too few requests to bound the median
            latency["latency_ci_rel"] = math.nan
        row = {
            **latency,
            "samples": result.requests,
            "stable": result.stable,
            "throughput_ips": result.throughput_ips,
            "throughput_spread_rel": result.throughput_spread_rel,
            **server_times_ms(stats.get("ramp") or stats.get("before"), stats.get("after")),
            **counters,
            "status": "ok",
        }
        row["memory_mb"] = self._memory_mb(counters)
        return row

    def _memory_mb(self, counters: dict) -> float:
        """Peak memory of serving: the GPU's used memory on CUDA, the server's resident memory on a CPU.

        NaN for a server given by --url: its processes are not ours to watch.
        """
        key = "gpu_mem_used_mb_max" if self.is_cuda else "server_rss_mb_max"
        return counters.get(key, math.nan)

    def _describe(self, exc: BaseException) -> str:
        if is_timeout(exc):
            timeout = self.opts.request_timeout_s
            return f"a request took longer than the request timeout of {timeout:g} s (`request_timeout_s`)"
        return describe(exc)

    def _raise_if_dead(self, target: _Target, protocol: str, exc: BaseException, where: str) -> None:
        """A failed request on a healthy server fails one point; on a dead server it ends the sweep."""
        problem = target.died()
        if problem is None:
            with ServerConnection(protocol, target.urls[protocol], target.access_token) as conn:
                problem = conn.problem(target.model_name)
        if problem is not None:
            raise self._with_resume_hint(
                BackendError(
                    f"the Triton server stopped serving while measuring {where}: {problem} ({self._describe(exc)})."
                )
            ) from None
