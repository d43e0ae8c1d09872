"""Open-loop load on a Triton server: `perfmodel profile --backend triton --rate 50,100,200/s`.

This is perf_analyzer's request-rate mode. Per rate, send times follow a Poisson process (seeded);
one sender thread sends each request at its time with the client's asynchronous API and never waits
for an answer, so a slow server cannot slow the sender (a fixed concurrency would). The first
`warmup_s` seconds are not counted, the next `duration_s` are. A request's latency runs from when
it was sent to its answer, as perf_analyzer counts it; how late the sender was against its schedule
is recorded beside it (sender_lag_p99_ms: a busy client machine shows there, not in the latency). Triton's
statistics before and after the counted window give the batches the server
formed (executions, images per execution, the largest). The server kept up when it answered as
many requests per second as were sent (within 5%), nothing failed, and the median latency of the
window's last third is within twice that of its first third (no growing queue).

The local server runs with Triton's dynamic batcher on: --max-batch-size and --max-queue-delay, or the
settings of a config.pbtxt (--triton-config, e.g. one `perfmodel plan --mode online` wrote). One row
per (protocol, input size, request size = --batch-sizes, rate), in the profile CSV contract:
`rate_per_s` (asked), `achieved_rate_per_s`, `kept_up`, `server_batch_mean`, `server_batch_max`,
`server_executions`, `server_compute_ms` (the model instance's busy time per execution),
`server_busy_share` (the share of the window it was busy), `sender_lag_p99_ms`, `requests_failed`, and the server's
batcher settings
`server_max_batch` and `server_max_queue_delay_ms`.
"""

from __future__ import annotations

import math
import os
import platform
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from perfmodel._version import __version__
from perfmodel.errors import BackendError, InputError, PerfmodelError
from perfmodel.models import resolve_model
from perfmodel.profile.backends.triton_client import (
    ADMIN_TIMEOUT_S,
    ServerConnection,
    Workload,
    _inputs,
    is_timeout,
    make_client,
    random_batches,
)
from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings
from perfmodel.profile.backends.triton_server import TOKEN_ENV
from perfmodel.profile.backends.triton_stats import batch_statistics
from perfmodel.profile.config import Estimate, SweepEvent
from perfmodel.profile.output import ProfileOutput
from perfmodel.profile.provenance import now_utc
from perfmodel.profile.timing import LatencySummary
from perfmodel.schema import SCHEMA_VERSION

MODE = "open-loop"
DEFAULT_MAX_BATCH = 64
MAX_IN_FLIGHT = 20_000  # a server this far behind is not keeping up: stop sending
KEPT_UP_RATE = 0.95
GROWTH_LIMIT = 2.0
POLL_S = 0.25
# The most requests one rate may send (warm-up and window). The schedule is drawn in chunks as it is sent
# (--rate 1e9/s once built all of it up front and took the machine's 24 GiB), but each request sent keeps
# ~25 bytes (when due, how late, when answered, failed) for the exact percentiles: this bounds those.
MAX_REQUESTS_PER_RATE = 2_000_000
CHUNK = 65_536  # send times drawn, and per-request figures allocated, this many at a time


def warmup_for(duration_s: float) -> float:
    """The uncounted warm-up before each rate's window: a fifth of it, 1 to 5 s."""
    return max(1.0, min(5.0, duration_s / 5))


def check_rates(rates, duration_s: float) -> None:
    """Refuse, before anything starts, a rate at which no request is due within the window, or one that would
    send more than MAX_REQUESTS_PER_RATE requests."""
    span = warmup_for(duration_s) + duration_s
    for rate in rates:
        if rate * duration_s < 1:
            raise InputError(
                f"`rates` {rate:.3g}/s over `duration_s` {duration_s:g} s: fewer than one request would be due in the "
                "measured window; give a higher rate or a longer `duration_s`."
            )
        if rate * span > MAX_REQUESTS_PER_RATE:
            raise InputError(
                f"`rates` {rate:.3g}/s over {span:g} s (`duration_s` {duration_s:g} s and its warm-up) would schedule "
                f"{rate * span:,.3g} requests, more than the {MAX_REQUESTS_PER_RATE:,} one rate may send: give at "
                f"most {MAX_REQUESTS_PER_RATE / span:,.0f}/s, or a shorter `duration_s`."
            )


@dataclass(frozen=True)
class RateResult:
    """One rate's measurement over the counted window."""

    latency: LatencySummary | None  # of the requests sent in the window and answered
    offered_per_s: float  # requests sent in the window / its length
    achieved_per_s: float  # answers that came during the window / its length
    sent: int
    answered: int
    failed: int
    lag_p99_ms: float  # how late the sender was, 99th percentile
    growth: float  # median latency of the window's last third / its first third
    stopped_early: bool  # too many requests in flight: the server was far behind
    first_error: str | None

    @property
    def kept_up(self) -> bool:
        return (
            not self.stopped_early
            and self.failed == 0
            and self.achieved_per_s >= KEPT_UP_RATE * self.offered_per_s
            and self.growth <= GROWTH_LIMIT
        )


def arrivals(rate_per_s: float, span_s: float, seed: int) -> Iterator[np.ndarray]:
    """Poisson send times in [0, span_s), in chunks of CHUNK (the last shorter), drawn only as they are asked
    for: the schedule's memory does not grow with rate x span. Each chunk's first gap carries the time so far,
    so the times are those of one cumulative sum over one draw (numpy draws the same gaps chunked or not)."""
    rng = np.random.default_rng(seed)
    last = 0.0
    while True:
        gaps = rng.exponential(1.0 / rate_per_s, CHUNK)
        gaps[0] += last
        times = np.cumsum(gaps)
        last = float(times[-1])
        if last >= span_s:
            times = times[: np.searchsorted(times, span_s)]
            if len(times):
                yield times
            return
        yield times


def send_times(rate_per_s: float, span_s: float, seed: int) -> np.ndarray:
    """Poisson send times in [0, span_s), all at once (arrivals' chunks joined)."""
    return np.concatenate([np.empty(0), *arrivals(rate_per_s, span_s, seed)])


class _Column:
    """One figure per request sent, in blocks of CHUNK added as the schedule is drawn; an answer's callback
    (another thread) writes only requests already sent, whose block exists."""

    def __init__(self, fill, dtype=float):
        self.fill, self.dtype, self.blocks = fill, dtype, []

    def grow(self, n: int) -> None:
        self.blocks.append(np.full(n, self.fill, dtype=self.dtype))

    def __setitem__(self, i: int, value) -> None:
        self.blocks[i // CHUNK][i % CHUNK] = value

    def head(self, n: int) -> np.ndarray:
        return np.concatenate([np.empty(0, dtype=self.dtype), *self.blocks])[:n]


@dataclass(frozen=True)
class Requests:
    """Every request of an open-loop run: seconds from its start (NaN: never answered)."""

    schedule: np.ndarray  # when each was due
    sent: np.ndarray  # when it went out (the sender may run late)
    answered: np.ndarray
    failed: np.ndarray  # bool
    stopped_early: bool
    first_error: str | None


def run_open_loop(
    workload: Workload,
    rate_per_s: float,
    warmup_s: float,
    duration_s: float,
    seed: int = 0,
    on_window: Callable[[str], None] | None = None,
    abort: Callable[[], str | None] | None = None,
) -> RateResult:
    """Send `workload`'s requests at `rate_per_s` for warmup_s + duration_s; measure the last duration_s.

    `on_window('start' | 'end')` is called (from a timer thread) when the counted window opens and closes,
    e.g. to read the server's statistics. `abort` is asked now and then; a reason ends the load.
    """
    return summarize(
        send_open_loop(workload, rate_per_s, warmup_s, duration_s, seed, on_window, abort), warmup_s, duration_s
    )


def send_open_loop(
    workload: Workload,
    rate_per_s: float,
    warmup_s: float,
    duration_s: float,
    seed: int = 0,
    on_window: Callable[[str], None] | None = None,
    abort: Callable[[], str | None] | None = None,
) -> Requests:
    """run_open_loop's load, every request kept (for an experiment that looks at each)."""
    due, answered_at, failed, lag = _Column(np.nan), _Column(np.nan), _Column(False, bool), _Column(0.0)

    def schedule() -> Iterator[float]:  # each chunk's figures exist before its first request goes out
        for times in arrivals(rate_per_s, warmup_s + duration_s, seed):
            for column in (answered_at, failed, lag):
                column.grow(len(times))
            due.blocks.append(times)
            yield from times

    errors: list[str] = []
    done = queue.SimpleQueue()
    clock = time.perf_counter
    inputs = _inputs(workload)

    def answer(i: int, error) -> None:
        answered_at[i] = clock()
        if error is not None:
            failed[i] = True
            if not errors:
                errors.append(str(error).strip().splitlines()[0][:300] if str(error).strip() else type(error).__name__)
        done.put(i)

    sender = _grpc_sender if workload.protocol == "grpc" else _http_sender
    start = clock() + 0.05
    timers = []
    if on_window is not None:
        for name, at in (("start", warmup_s), ("end", warmup_s + duration_s)):
            timer = threading.Timer(max(0.0, start + at - clock()), on_window, args=(name,))
            timer.daemon = True
            timer.start()
            timers.append(timer)
    try:
        sent, stopped = sender(workload, inputs, schedule(), start, lag, answer, done, abort or (lambda: None))
    finally:
        for timer in timers:
            timer.join(ADMIN_TIMEOUT_S * 2)
    return Requests(
        due.head(sent),
        due.head(sent) + lag.head(sent),
        answered_at.head(sent) - start,
        failed.head(sent),
        stopped,
        errors[0] if errors else None,
    )


def _pace(target: float) -> None:
    wait = target - time.perf_counter()
    if wait > 0:
        time.sleep(wait)


def _grpc_sender(workload, inputs, schedule, start, lag, answer, done, abort) -> tuple[int, bool]:
    client = make_client("grpc", workload.url, workload.request_timeout_s)
    in_flight, stopped, sent = 0, False, 0
    try:
        for i, t in enumerate(schedule):
            _pace(start + t)
            lag[i] = time.perf_counter() - (start + t)
            client.async_infer(
                workload.model_name,
                inputs[i % len(inputs)],
                callback=lambda result, error, i=i: answer(i, error),
                client_timeout=workload.request_timeout_s,
            )
            sent, in_flight = i + 1, in_flight + 1
            while not done.empty():
                done.get_nowait()
                in_flight -= 1
            if i % 256 == 0:
                _check(abort)
            if in_flight > MAX_IN_FLIGHT:
                stopped = True
                break
        _drain(done, in_flight, workload.request_timeout_s, abort)
    finally:
        client.close()
    return sent, stopped


def _http_sender(workload, inputs, schedule, start, lag, answer, done, abort) -> tuple[int, bool]:
    import asyncio

    import tritonclient.http.aio as aio

    async def main() -> tuple[int, bool]:
        client = aio.InferenceServerClient(workload.url, conn_limit=1000, conn_timeout=workload.request_timeout_s)
        tasks: set = set()

        async def one(i: int) -> None:
            try:
                await asyncio.wait_for(
                    client.infer(workload.model_name, inputs[i % len(inputs)]), workload.request_timeout_s
                )
                answer(i, None)
            except Exception as exc:  # a failed or timed-out request is counted, not raised
                answer(i, exc)

        sent, stopped = 0, False
        try:
            for i, t in enumerate(schedule):
                await asyncio.sleep(max(0.0, start + t - time.perf_counter()))  # also lets due requests go out
                lag[i] = time.perf_counter() - (start + t)
                task = asyncio.ensure_future(one(i))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                sent = i + 1
                if i % 256 == 0:
                    _check(abort)
                if len(tasks) > MAX_IN_FLIGHT:
                    stopped = True
                    break
            if tasks:
                await asyncio.wait(list(tasks), timeout=workload.request_timeout_s + 5)
        finally:
            for task in list(tasks):
                task.cancel()
            await client.close()
        return sent, stopped

    return asyncio.run(main())


def _drain(done, in_flight: int, timeout_s: float, abort) -> None:
    """Wait for the answers still out; each is bounded by the request timeout."""
    deadline = time.perf_counter() + timeout_s + 5
    while in_flight > 0 and time.perf_counter() < deadline:
        try:
            done.get(timeout=POLL_S)
            in_flight -= 1
        except queue.Empty:
            _check(abort)


def _check(abort) -> None:
    reason = abort()
    if reason:
        raise BackendError(reason)


def summarize(requests: Requests, warmup_s: float, duration_s: float) -> RateResult:
    """The counted window (after warmup_s, for duration_s) of an open-loop run."""
    schedule, sent, answered, failed = requests.schedule, requests.sent, requests.answered, requests.failed
    lag = sent - schedule
    end = warmup_s + duration_s
    window = (schedule >= warmup_s) & (schedule < end)
    ok = window & ~failed & np.isfinite(answered)
    latency_ms = (answered[ok] - sent[ok]) * 1000
    during = np.isfinite(answered) & ~failed & (answered >= warmup_s) & (answered < end)
    growth = math.nan
    if ok.sum() >= 3:
        order = np.argsort(schedule[ok])
        parts = np.array_split(latency_ms[order], 3)
        growth = float(np.median(parts[2]) / np.median(parts[0])) if np.median(parts[0]) > 0 else math.nan
    return RateResult(
        latency=LatencySummary.from_samples(latency_ms, 0.01) if len(latency_ms) else None,
        offered_per_s=float(window.sum()) / duration_s,
        achieved_per_s=float(during.sum()) / duration_s,
        sent=int(window.sum()),
        answered=int(ok.sum()),
        failed=int((window & (failed | ~np.isfinite(answered))).sum()),
        lag_p99_ms=float(np.percentile(lag[window], 99) * 1000) if window.any() else math.nan,
        growth=growth if math.isfinite(growth) else math.inf,
        stopped_early=requests.stopped_early,
        first_error=requests.first_error,
    )


# ---------------------------------------------------------------------------------------------
# The sweep


@dataclass(frozen=True)
class Batching:
    """The local server's dynamic batcher."""

    max_batch_size: int
    max_queue_delay_us: int
    preferred_batch_sizes: tuple[int, ...] = ()


def sweep_rates(config, opts, output: ProfileOutput, notify, hardware: str, monitor_factory) -> None:
    """`--backend triton --rate ...` into `output`: every (protocol, input size, request size, rate) as one row.

    Called by triton_backend.sweep, which gives the server's pool key and the monitor to open."""
    spec = resolve_model(config.model)
    batching = opts.batching or Batching(DEFAULT_MAX_BATCH, 0)
    too_big = [b for b in config.batch_sizes if b > batching.max_batch_size]
    if too_big:
        raise InputError(
            f"request size {too_big[0]} is above the server's max batch size {batching.max_batch_size}: "
            "give smaller `batch_sizes` or a larger `max_batch_size`."
        )
    points = []
    for protocol, size, batch, rate in (
        (p, s, b, r) for p in opts.protocols for s in config.input_sizes for b in config.batch_sizes for r in opts.rates
    ):
        identity = {
            "hardware": hardware,
            "model": spec.name,
            "backend": f"triton-{protocol}",
            "precision": config.precision,
            "architecture": opts.resolved_architecture,
            "protocol": protocol,
            "mode": MODE,
            "input_size": size,
            "batch_size": batch,
            "rate_per_s": rate,
            "server_max_batch": batching.max_batch_size,
            "server_max_queue_delay_ms": batching.max_queue_delay_us / 1000,
        }
        points.append((identity, output.get(identity)))
    per_point_s = opts.duration_s + warmup_for(opts.duration_s)
    notify(SweepEvent("start", total=len(points), message=Estimate(len(points), False, per_point_s, 0).describe()))
    done = 0
    for identity, row in points:  # what the file already holds
        if row is not None:
            done += 1
            notify(
                SweepEvent(
                    "point",
                    done,
                    len(points),
                    identity["input_size"],
                    identity["batch_size"],
                    row["status"],
                    True,
                    f"{identity['protocol']} {identity['rate_per_s']:g}/s",
                )
            )
    pending = [identity for identity, row in points if row is None]
    if not pending:
        return
    server = None
    with monitor_factory() as monitor:
        try:
            urls, model_name, token, provenance, load_ms, server = _target(config, opts, spec, batching, monitor)
            inputs = {}
            for protocol in opts.protocols:
                with ServerConnection(protocol, urls[protocol], token) as conn:
                    inputs[protocol] = conn.check_model(model_name)
            for identity in pending:
                protocol, size, batch, rate = (
                    identity[k] for k in ("protocol", "input_size", "batch_size", "rate_per_s")
                )
                model_input = inputs[protocol]
                dtype = np.float16 if model_input.datatype == "FP16" else np.float32
                workload = Workload(
                    protocol,
                    urls[protocol],
                    model_name,
                    model_input.name,
                    model_input.datatype,
                    "async",
                    1,
                    random_batches(batch, size, dtype, seed=config.seed),
                    opts.request_timeout_s,
                )
                row = {
                    **identity,
                    **_measure(workload, rate, opts, monitor, token, server, config.seed + done),
                    "load_ms": load_ms,
                    "threads": provenance.get("threads"),
                    "perfmodel": __version__,
                    "host": platform.node(),
                    "schema_version": SCHEMA_VERSION,
                    "created_at": now_utc(),
                    "server_version": model_input.server_version,
                    **{k: v for k, v in provenance.items() if k != "threads"},
                }
                output.add(row)
                done += 1
                notify(
                    SweepEvent("point", done, len(points), size, batch, row["status"], False, f"{protocol} {rate:g}/s")
                )
        finally:
            if server is not None:
                server.stop()


def _target(config, opts, spec, batching: Batching, monitor):
    """The server to load: a running one (--url) or a local one with the dynamic batcher on."""
    if opts.url is not None:
        return (
            {opts.protocols[0]: opts.url},
            opts.server_model or spec.name,
            os.environ.get(TOKEN_ENV),
            {"device_name": "", "torch": ""},
            math.nan,
            None,
        )
    settings = ServerSettings(
        model=spec.path or spec.name,
        device=config.device,
        precision=config.precision,
        channels_last=config.channels_last,
        compile=config.compile,
        threads=config.threads,
        max_batch_size=batching.max_batch_size,
        seed=config.seed,
        model_name=opts.server_model,
        cpus=opts.server_cpus,
        dynamic_batching=True,
        max_queue_delay_us=batching.max_queue_delay_us,
        preferred_batch_sizes=batching.preferred_batch_sizes,
    )
    server = LocalTritonServer(settings, start_timeout_s=opts.server_timeout_s)
    info = server.start()
    monitor.watch("server", info.pid)
    provenance = {**info.provenance, "threads": info.threads}
    return (
        {p: info.url(p) for p in ("http", "grpc")},
        info.model_name,
        info.access_token,
        provenance,
        info.start_ms,
        server,
    )


def _measure(workload: Workload, rate: float, opts, monitor, token, server, seed: int) -> dict:
    url, model = workload.url, workload.model_name
    stats: dict = {}
    taken: dict[str, float] = {}

    def snapshot(key: str) -> None:
        with ServerConnection(workload.protocol, url, token) as conn:
            stats[key] = conn.model_statistics(model)
        taken[key] = time.monotonic()

    def died() -> str | None:
        return "the server process exited" if server is not None and not server.is_alive() else None

    _warm(workload)
    warmup_s = warmup_for(opts.duration_s)
    mark = monitor.window()
    try:
        result = run_open_loop(workload, rate, warmup_s, opts.duration_s, seed=seed, on_window=snapshot, abort=died)
    except PerfmodelError:
        raise
    except Exception as exc:
        if died():
            raise BackendError(f"the Triton server stopped serving at {rate:g} requests/s ({exc}).") from None
        return {"status": "error", "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}", **monitor.summary(mark)}
    counters = monitor.summary(mark)
    if died():
        raise BackendError(f"the Triton server stopped serving at {rate:g} requests/s.")
    row = {
        "load_avg_1m": os.getloadavg()[0],
        "samples": result.answered,
        "achieved_rate_per_s": result.achieved_per_s,
        "kept_up": str(result.kept_up).lower(),
        "sender_lag_p99_ms": result.lag_p99_ms,
        "requests_failed": result.failed,
        "throughput_ips": result.achieved_per_s * workload.batch_size,
        **batch_statistics(stats.get("start"), stats.get("end"), taken.get("end", 0.0) - taken.get("start", math.inf)),
        **counters,
        "memory_mb": counters.get("gpu_mem_used_mb_max" if monitor.has_gpu_counters else "server_rss_mb_max", math.nan),
    }
    if result.latency is None:
        reason = result.first_error or "no request was answered"
        if result.first_error and is_timeout(Exception(result.first_error)):
            reason = f"requests took longer than the request timeout of {workload.request_timeout_s:g} s"
        return {**row, "status": "error", "error": reason}
    row.update(result.latency.columns())
    del row["stable"]  # the closed-loop rule's verdict; here the window's length decides the sample
    row["status"] = "ok"
    if result.first_error:
        row["error"] = f"{result.failed} request(s) failed, the first: {result.first_error}"
    return row


def _warm(workload: Workload, count: int = 5) -> None:
    """A few requests before the clock starts: the first calls at a batch size are slower."""
    client = make_client(workload.protocol, workload.url, workload.request_timeout_s)
    try:
        for batch in _inputs(workload)[:count]:
            client.infer(workload.model_name, batch)
    finally:
        client.close()
