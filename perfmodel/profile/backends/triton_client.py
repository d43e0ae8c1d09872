"""The client side of Triton profiling: requests over HTTP or gRPC, sync or async, at a concurrency.

`run_load` keeps `concurrency` requests in flight until the throughput is steady and returns the
client-side latency distribution and the throughput in images/s:

- **sync**: `concurrency` threads, each with its own client, each sending one blocking request
  after the other;
- **async**: one thread keeps `concurrency` requests in flight with the client's asynchronous API
  (gRPC: `async_infer` with a callback; HTTP: the asyncio client, one coroutine per request in flight).

The steady-state rule (ThroughputRule) works like perf_analyzer's: completions are counted in time
windows; the first window is ramp-up and is dropped; sampling stops when the last `windows`
windows agree on the throughput within `rel_tol` and the median latency over them is known within
`rel_ci` (95% CI, as for the in-process profiler), or when `max_time_s` is spent. Every wait is
bounded by the request timeout.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from perfmodel.errors import BackendError, DeviceError, InputError
from perfmodel.profile.timing import LatencySummary, median_ci_rel

PROTOCOLS = ("http", "grpc")
MODES = ("sync", "async")
ADMIN_TIMEOUT_S = 5.0  # health, metadata and statistics calls: a live server answers at once


@dataclass(frozen=True)
class ThroughputRule:
    """When a point's throughput counts as steady. Defaults suit requests of a millisecond to a second."""

    window_s: float = 1.0
    windows: int = 3
    rel_tol: float = 0.05  # the windows' throughputs within +-5% of their mean ...
    rel_ci: float = 0.01  # ... and the median latency's 95% CI within +-1%,
    min_samples: int = 20  # over at least this many requests;
    max_time_s: float = 10.0  # or stop after this long.

    def __post_init__(self):
        if self.window_s <= 0 or self.max_time_s <= 0 or self.windows < 1:
            raise InputError("the throughput rule needs window_s > 0, max_time_s > 0 and windows >= 1.")
        if not (0 < self.rel_tol < 1 and 0 < self.rel_ci < 1):
            raise InputError("rel_tol and rel_ci must lie between 0 and 1.")


@dataclass(frozen=True)
class Workload:
    """What to send: the model and its input, the protocol, the mode and the concurrency."""

    protocol: str
    url: str
    model_name: str
    input_name: str
    datatype: str  # FP32 or FP16
    mode: str
    concurrency: int
    batches: tuple = field(repr=False)  # a few numpy image batches to rotate between (never zeros)
    request_timeout_s: float = 60.0

    def __post_init__(self):
        if self.protocol not in PROTOCOLS:
            raise InputError(f"unknown protocol {self.protocol!r}: choose http or grpc.")
        if self.mode not in MODES:
            raise InputError(f"unknown mode {self.mode!r}: choose sync or async.")
        if self.concurrency < 1:
            raise InputError("the concurrency must be a positive whole number.")

    @property
    def batch_size(self) -> int:
        return int(self.batches[0].shape[0])


@dataclass(frozen=True)
class LoadResult:
    latency: LatencySummary
    throughput_ips: float
    throughput_spread_rel: float  # (max - min) / mean of the counted windows' throughputs
    requests: int
    stable: bool


def random_batches(batch_size: int, input_size: int, dtype, count: int = 3, seed: int = 0) -> tuple:
    """A few random image batches, as the in-process profiler uses (never zeros, so nothing is flattered)."""
    rng = np.random.default_rng(seed + batch_size * 7919 + input_size)
    return tuple(rng.standard_normal((batch_size, 3, input_size, input_size)).astype(dtype) for _ in range(count))


# ---------------------------------------------------------------------------------------------
# Clients


def _module(protocol: str):
    try:
        if protocol == "grpc":
            import tritonclient.grpc as module
        else:
            import tritonclient.http as module
    except ImportError:  # the optional extra is not installed (e.g. beside numpy 2, which pytriton refuses)
        raise DeviceError(
            "`backend` triton needs the Triton client: in perfmodel's clone, pip install '.[triton]'."
        ) from None
    return module


def make_client(protocol: str, url: str, timeout_s: float, concurrency: int = 1):
    module = _module(protocol)
    if protocol == "grpc":
        return module.InferenceServerClient(url)
    return module.InferenceServerClient(
        url, concurrency=concurrency, connection_timeout=timeout_s, network_timeout=timeout_s
    )


def _inputs(workload: Workload) -> list:
    """The request inputs, serialized once, so that the loop times requests, not numpy copies."""
    module = _module(workload.protocol)
    inputs = []
    for batch in workload.batches:
        item = module.InferInput(workload.input_name, list(batch.shape), workload.datatype)
        if workload.protocol == "http":
            item.set_data_from_numpy(batch, binary_data=True)
        else:
            item.set_data_from_numpy(batch)
        inputs.append([item])
    return inputs


def _infer_kwargs(workload: Workload) -> dict:
    if workload.protocol == "grpc":
        return {"client_timeout": workload.request_timeout_s}
    return {}  # HTTP: the client's network_timeout bounds each request


def first_request_ms(workload: Workload) -> float:
    """Time one request on a new client: the warm-up when it is the first at this batch size."""
    client = make_client(workload.protocol, workload.url, workload.request_timeout_s)
    try:
        inputs = _inputs(workload)
        t0 = time.perf_counter()
        client.infer(workload.model_name, inputs[0], **_infer_kwargs(workload))
        return (time.perf_counter() - t0) * 1e3
    finally:
        client.close()


def is_timeout(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, TimeoutError) or "deadline exceeded" in text or "timed out" in text or "timeout" in text


# ---------------------------------------------------------------------------------------------
# The steady-state rule


class _Windows:
    """Collects completions into time windows and decides, at each window's end, whether to stop."""

    def __init__(self, rule: ThroughputRule, workload: Workload):
        self.rule = rule
        self.batch_size = workload.batch_size
        self.min_per_window = max(2 * workload.concurrency, 5)
        self.done = threading.Event()
        self.ramp_done = threading.Event()  # the first (ramp-up) window has closed
        self._lock = threading.Lock()
        self._start = self._window_start = time.perf_counter_ns()
        self._begun = False
        self._current: list[float] = []
        self.closed: list[tuple[float, list[float]]] = []  # (duration s, latencies ms), ramp-up first
        self.stable = False

    def begin(self) -> None:
        """Start the clock at the first request, after the driver's set-up (imports, connections)."""
        with self._lock:
            if not self._begun:
                self._begun = True
                self._start = self._window_start = time.perf_counter_ns()

    def record(self, t0_ns: int, t1_ns: int) -> None:
        with self._lock:
            if self.done.is_set():
                return
            self._current.append((t1_ns - t0_ns) / 1e6)
            elapsed = (t1_ns - self._window_start) / 1e9
            out_of_time = (t1_ns - self._start) / 1e9 >= self.rule.max_time_s
            if (elapsed >= self.rule.window_s and len(self._current) >= self.min_per_window) or out_of_time:
                self._close(t1_ns)
                if out_of_time or self._steady():
                    self.done.set()

    def _close(self, now_ns: int) -> None:
        self.closed.append(((now_ns - self._window_start) / 1e9, self._current))
        self._current = []
        self._window_start = now_ns
        self.ramp_done.set()

    def counted(self) -> list[tuple[float, list[float]]]:
        """The windows the result is computed from: the last `windows` after ramp-up (all, if fewer)."""
        after_ramp = self.closed[1:] or self.closed
        return after_ramp[-self.rule.windows :]

    def _steady(self) -> bool:
        if len(self.closed) - 1 < self.rule.windows:
            return False
        windows = self.counted()
        rates = np.array([len(lat) / duration for duration, lat in windows])
        latencies = np.sort(np.concatenate([lat for _, lat in windows]))
        self.stable = (
            len(latencies) >= self.rule.min_samples
            and bool(np.all(np.abs(rates - rates.mean()) <= self.rule.rel_tol * rates.mean()))
            and median_ci_rel(latencies) <= self.rule.rel_ci
        )
        return self.stable

    def result(self) -> LoadResult:
        with self._lock:
            if not self.closed and self._current:  # stopped by an error or the time cap inside one window
                self._close(time.perf_counter_ns())
            windows = self.counted()
        if not windows:
            raise BackendError("no request finished, so nothing could be measured.")
        latencies = np.concatenate([lat for _, lat in windows])
        rates = np.array([len(lat) / duration for duration, lat in windows if duration > 0])
        images = len(latencies) * self.batch_size
        seconds = sum(duration for duration, _ in windows)
        spread = float((rates.max() - rates.min()) / rates.mean()) if len(rates) > 1 else math.nan
        return LoadResult(
            latency=LatencySummary.from_samples(latencies, self.rule.rel_ci),
            throughput_ips=images / seconds if seconds > 0 else math.nan,
            throughput_spread_rel=spread,
            requests=len(latencies),
            stable=self.stable,
        )


# ---------------------------------------------------------------------------------------------
# The load drivers


POLL_S = 0.25  # how often a wait looks up from a request to check that the server still lives

Abort = Callable[[], "str | None"]


def run_load(
    workload: Workload, rule: ThroughputRule, on_ramp_done: Callable[[], None] | None = None, abort: Abort | None = None
) -> LoadResult:
    """Send requests until the rule says the point is steady; raise the first request error.

    `on_ramp_done` is called (from a helper thread) when ramp-up ends, e.g. to snapshot server statistics.
    `abort` is asked every POLL_S while requests are out; a reason (text) ends the load with a
    BackendError at once, instead of after the request timeout (e.g. the server process died).
    """
    windows = _Windows(rule, workload)
    check = abort or (lambda: None)
    helper = None
    if on_ramp_done is not None:

        def after_ramp() -> None:
            if windows.ramp_done.wait(rule.max_time_s + workload.request_timeout_s) and not windows.done.is_set():
                on_ramp_done()

        helper = threading.Thread(target=after_ramp, name="perfmodel-ramp", daemon=True)
        helper.start()
    try:
        if workload.mode == "sync":
            _run_sync(workload, windows, check)
        elif workload.protocol == "grpc":
            _run_async_grpc(workload, windows, check)
        else:
            _run_async_http(workload, windows, check)
    finally:
        windows.done.set()
        windows.ramp_done.set()
        if helper is not None:
            helper.join(ADMIN_TIMEOUT_S * 2)
    return windows.result()


def _check(abort: Abort) -> None:
    reason = abort()
    if reason:
        raise BackendError(reason)


def _run_sync(workload: Workload, windows: _Windows, abort: Abort) -> None:
    inputs = _inputs(workload)
    kwargs = _infer_kwargs(workload)
    errors: list[BaseException] = []
    clock = time.perf_counter_ns

    def worker(k: int) -> None:
        try:
            client = make_client(workload.protocol, workload.url, workload.request_timeout_s)
        except Exception as exc:
            errors.append(exc)
            windows.done.set()
            return
        try:
            i = k
            windows.begin()
            while not windows.done.is_set():
                t0 = clock()
                client.infer(workload.model_name, inputs[i % len(inputs)], **kwargs)
                windows.record(t0, clock())
                i += 1
        except Exception as exc:
            errors.append(exc)
            windows.done.set()
        finally:
            client.close()

    threads = [
        threading.Thread(target=worker, args=(k,), name=f"perfmodel-sync-{k}", daemon=True)
        for k in range(workload.concurrency)
    ]
    for thread in threads:
        thread.start()
    # Each request is bounded by the request timeout, and the rule by max_time_s: so is this loop.
    deadline = time.monotonic() + windows.rule.max_time_s + 2 * workload.request_timeout_s + 10
    try:
        while alive := [thread for thread in threads if thread.is_alive()]:
            if time.monotonic() > deadline:
                raise BackendError("requests did not finish within their time bound; the server may be hung.")
            _check(abort)
            alive[0].join(POLL_S)
    finally:
        windows.done.set()  # the daemon threads stop after their current request
    if errors:
        raise errors[0]


def _run_async_grpc(workload: Workload, windows: _Windows, abort: Abort) -> None:
    inputs = _inputs(workload)
    client = make_client("grpc", workload.url, workload.request_timeout_s)
    finished: queue.SimpleQueue = queue.SimpleQueue()
    clock = time.perf_counter_ns

    def submit(i: int) -> None:
        t0 = clock()
        client.async_infer(
            workload.model_name,
            inputs[i % len(inputs)],
            callback=lambda result, error: finished.put((t0, clock(), error)),
            client_timeout=workload.request_timeout_s,
        )

    try:
        windows.begin()
        for i in range(workload.concurrency):
            submit(i)
        in_flight, i = workload.concurrency, workload.concurrency
        waited = 0.0
        while in_flight:
            try:
                t0, t1, error = finished.get(timeout=POLL_S)
            except queue.Empty:
                _check(abort)
                waited += POLL_S
                if waited > workload.request_timeout_s + 5:  # the client's own deadline should have fired
                    raise BackendError(
                        "a request did not come back within its timeout; the server may be hung."
                    ) from None
                continue
            waited = 0.0
            in_flight -= 1
            if error is not None:
                raise error
            windows.record(t0, t1)
            if not windows.done.is_set():
                submit(i)
                in_flight, i = in_flight + 1, i + 1
    finally:
        client.close()


def _run_async_http(workload: Workload, windows: _Windows, abort: Abort) -> None:
    # tritonclient.http's own async_infer runs on gevent and, measured here, does not overlap
    # requests (4 in flight took as long as 4 in a row); its asyncio client (aiohttp) does.
    import asyncio

    import tritonclient.http.aio as aio

    inputs = _inputs(workload)
    clock = time.perf_counter_ns
    timeout = workload.request_timeout_s

    async def worker(client, k: int) -> None:
        i = k
        while not windows.done.is_set():
            t0 = clock()
            await asyncio.wait_for(client.infer(workload.model_name, inputs[i % len(inputs)]), timeout)
            windows.record(t0, clock())
            i += 1

    async def watch() -> None:
        while not windows.done.is_set():
            await asyncio.sleep(POLL_S)
            _check(abort)

    async def main() -> None:
        client = aio.InferenceServerClient(workload.url, conn_limit=workload.concurrency, conn_timeout=timeout)
        windows.begin()
        tasks = [asyncio.ensure_future(worker(client, k)) for k in range(workload.concurrency)]
        tasks.append(asyncio.ensure_future(watch()))
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            windows.done.set()
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            errors = [task.exception() for task in done if task.exception() is not None]
            if errors:
                raise errors[0]
        finally:
            await client.close()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# Admin calls: health, model metadata, statistics


@dataclass(frozen=True)
class ModelInput:
    """What the served model takes: the input tensor's name and type, and its largest batch."""

    name: str
    datatype: str
    max_batch_size: int
    server_version: str


class ServerConnection:
    """Health, metadata and statistics for one server port; every call is bounded by ADMIN_TIMEOUT_S."""

    def __init__(self, protocol: str, url: str, access_token: str | None = None, timeout_s: float = ADMIN_TIMEOUT_S):
        self.protocol, self.url, self.timeout_s = protocol, url, timeout_s
        self.client = make_client(protocol, url, timeout_s)
        self.headers = None
        if access_token:
            # pytriton's restricted endpoints expect this header (gRPC prefixes it with the protocol name)
            name = "triton-access-token"
            self.headers = {f"triton-grpc-protocol-{name}" if protocol == "grpc" else name: access_token}

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> ServerConnection:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, name: str, *args, **kwargs):
        if self.protocol == "grpc":
            kwargs["client_timeout"] = self.timeout_s
        return getattr(self.client, name)(*args, **kwargs)

    def check_model(self, model_name: str) -> ModelInput:
        """The model's input, once the server and the model are ready; DeviceError otherwise."""
        try:
            live = self._call("is_server_live")
        except Exception as exc:
            raise DeviceError(
                f"cannot reach a Triton server at {self.url} over {self.protocol.upper()} ({_short(exc)}): check the "
                "address and port (HTTP and gRPC listen on different ports), or leave `url` out to let perfmodel "
                "start a local server."
            ) from None
        if not live:
            if not self._speaks_triton():
                raise DeviceError(
                    f"the server at {self.url} answers, but not as a Triton server (it does not serve the KServe v2 "
                    f"{self.protocol.upper()} API): check the address and port (HTTP and gRPC listen on different "
                    "ports)."
                )
            raise DeviceError(f"the Triton server at {self.url} is not live yet; try again when it is.")
        try:
            ready = self._call("is_model_ready", model_name)
        except Exception as exc:
            ready, why = False, _short(exc)
        else:
            why = "it is not loaded, or failed to load"
        if not ready:
            raise DeviceError(
                f"the model {model_name!r} on the Triton server at {self.url} is not ready ({why}): load it on the "
                "server, or name the served model with `server_model`."
            )
        as_json = {"as_json": True} if self.protocol == "grpc" else {}
        metadata = self._call("get_model_metadata", model_name, **as_json)
        config = self._call("get_model_config", model_name, **as_json)
        config = config.get("config", config)
        inputs = metadata.get("inputs", [])
        if not inputs:
            raise DeviceError(f"the model {model_name!r} at {self.url} declares no inputs.")
        first = inputs[0]
        if first["datatype"] not in ("FP32", "FP16"):
            raise DeviceError(
                f"the model {model_name!r} at {self.url} takes {first['datatype']} input; perfmodel sends images as "
                "FP32 or FP16 N x 3 x H x W tensors."
            )
        server = self._call("get_server_metadata", **as_json)
        return ModelInput(
            first["name"],
            first["datatype"],
            int(config.get("max_batch_size", 0)),
            f"{server.get('name', 'triton')} {server.get('version', '')}".strip(),
        )

    def _speaks_triton(self) -> bool:
        """Whether the server answers Triton's server-metadata request (a Triton that is starting does)."""
        try:
            as_json = {"as_json": True} if self.protocol == "grpc" else {}
            metadata = self._call("get_server_metadata", **as_json)
        except Exception:
            return False
        return isinstance(metadata, dict) and "version" in metadata

    def problem(self, model_name: str) -> str | None:
        """Why the server cannot serve the model right now, or None when it can."""
        try:
            if not self._call("is_server_live"):
                return "the server is not live"
            if not self._call("is_model_ready", model_name):
                return f"the model {model_name!r} is no longer ready"
        except Exception as exc:
            return f"the server does not answer ({_short(exc)})"
        return None

    def model_statistics(self, model_name: str) -> dict | None:
        """Triton's statistics for the model as JSON (model_stats ...), or None where not available;
        triton_stats.py reads them."""
        try:
            kwargs = {"as_json": True} if self.protocol == "grpc" else {}
            return self._call("get_inference_statistics", model_name, headers=self.headers, **kwargs)
        except Exception:
            return None


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
