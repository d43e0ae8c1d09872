"""Online serving plans: a request rate and a latency objective in; GPUs and dynamic-batching settings out.

    from solvers.online import OnlineGpuType, OnlineProblem, ServiceTimes, solve_online
    h100 = OnlineGpuType("h100", None, [ServiceTimes(p50_s, p99_s, label="torch fp16")], cost_per_hour=4.5)
    plan = solve_online(OnlineProblem([h100], rate_per_s=400, slo_s=0.1, percentile=99))

Requests of `request_size` images arrive as a Poisson process (or as a trace of arrival times); a load
balancer sends each to a GPU at random, in proportion to what the GPU can take, so each GPU of a type
sees a Poisson stream. Each GPU runs Triton's dynamic batcher (max_batch, max_queue_delay). Per GPU
type the search finds the (max_batch, delay) with the highest per-GPU rate that still meets the SLO at
the percentile (batcher.py, the analytic model); the counts then cover the rate with the fewest GPUs
(or the lowest cost). A discrete-event simulation (simulate.py) checks every type used at its
planned rate and gives the predicted p50/p99; where it finds the SLO missed, that type's per-GPU rate
is lowered and the counts are chosen again.

Plain numbers (seconds, requests/s); no torch, no perfmodel.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from solvers.batcher import Batcher, bracket_root, normal_cdf, sigma_from
from solvers.errors import InfeasibleProblem, ProblemError
from solvers.simulate import poisson_arrivals, simulate_gpu, split_randomly

OBJECTIVES = ("gpus", "cost")
RATE_TOLERANCE = 1e-3  # per-GPU capacities are found to this relative precision
DELAY_SHARES = (0.25, 0.5, 1.0)  # automatic max_queue_delay candidates, times one request's service
CHECK_ROUNDS = 30  # at most this many simulation rounds that lower a type's rate
CHECK_STEP = 0.97  # each round lowers a failing type's per-GPU rate by 3%


@dataclass(frozen=True, eq=False)
class ServiceTimes:
    """One way to serve on a GPU type (`label`, e.g. 'torch fp16'): batch service times in seconds,
    p50_s[b - 1] and p99_s[b - 1] for a batch of b = 1 .. len images; len is the largest batch that fits.

    `max_batches` are the candidate max_batch settings (images); None: the powers of two up to the
    largest batch, and the largest batch.
    """

    p50_s: Sequence[float] | np.ndarray
    p99_s: Sequence[float] | np.ndarray
    label: str = ""
    max_batches: Sequence[int] | None = None

    def __post_init__(self) -> None:
        p50 = np.asarray(self.p50_s, dtype=float).ravel()
        p99 = np.asarray(self.p99_s, dtype=float).ravel()
        where = f"service times{f' of {self.label}' if self.label else ''}"
        if not len(p50) or len(p50) != len(p99):
            raise ProblemError(f"{where}: p50_s and p99_s need the same length, one time per batch size from 1.")
        if not (np.all(np.isfinite(p50)) and np.all(p50 > 0) and np.all(np.isfinite(p99))):
            raise ProblemError(f"{where}: every time must be a finite number of seconds > 0.")
        if np.any(p99 < p50 * (1 - 1e-9)):
            raise ProblemError(f"{where}: a p99 time is below its p50.")
        candidates = self.max_batches
        if candidates is None:
            candidates = sorted({*(2**i for i in range(int(math.log2(len(p50))) + 1)), len(p50)})
        candidates = tuple(sorted({int(b) for b in candidates}))
        if not candidates or candidates[0] < 1 or candidates[-1] > len(p50):
            raise ProblemError(f"{where}: max_batches must lie between 1 and {len(p50)}, the largest batch timed.")
        for name, value in (("p50_s", p50), ("p99_s", np.maximum(p99, p50))):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "max_batches", candidates)

    @property
    def largest(self) -> int:
        return len(self.p50_s)

    def per_request(self, request_size: int, max_requests: int) -> tuple[np.ndarray, np.ndarray]:
        """median[m], sigma[m] for a batch of m = 1 .. max_requests requests (index 0 unused)."""
        images = np.arange(1, max_requests + 1) * request_size
        p50, p99 = self.p50_s[images - 1], self.p99_s[images - 1]
        return np.concatenate([[p50[0]], p50]), np.concatenate([[0.0], sigma_from(p50, p99)])


@dataclass(frozen=True, eq=False)
class OnlineGpuType:
    """A kind of GPU: how many there are (None: as many as needed), how it can serve, its price per hour."""

    name: str
    count: int | None
    options: Sequence[ServiceTimes]
    cost_per_hour: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ProblemError("every GPU type needs a non-empty name.")
        if self.count is not None and (isinstance(self.count, bool) or int(self.count) != self.count or self.count < 0):
            raise ProblemError(f"GPU type {self.name!r}: count must be a whole number >= 0.")
        options = tuple(self.options)
        if not options or not all(isinstance(o, ServiceTimes) for o in options):
            raise ProblemError(f"GPU type {self.name!r}: give at least one ServiceTimes.")
        object.__setattr__(self, "options", options)
        if self.cost_per_hour is not None and not (math.isfinite(self.cost_per_hour) and self.cost_per_hour >= 0):
            raise ProblemError(f"GPU type {self.name!r}: cost_per_hour must be a number >= 0.")


@dataclass(frozen=True, eq=False)
class OnlineProblem:
    """What to plan. The rate is in requests/s, each request `request_size` images; the SLO in seconds,
    met by `percentile` percent of requests. `arrivals_s` (sorted arrival times, seconds) replaces the
    Poisson process in the check: with rate_per_s None the rate is the trace's own, else the trace is
    stretched or squeezed in time to that mean rate. `delays_s`: the max_queue_delay candidates (None:
    0 and 1/4, 1/2, 1 x one request's service time)."""

    gpu_types: Sequence[OnlineGpuType]
    rate_per_s: float | None
    slo_s: float
    percentile: float = 99.0
    request_size: int = 1
    objective: str = "gpus"
    arrivals_s: np.ndarray | None = None
    delays_s: Sequence[float] | None = None
    simulate: bool = True
    simulated_requests: int | None = None  # per check; None: enough for the percentile (20k to 200k)
    seed: int = 0
    input_size: int | None = None  # for the report
    trace: np.ndarray | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        types = tuple(self.gpu_types)
        if not types or not all(isinstance(t, OnlineGpuType) for t in types):
            raise ProblemError("give at least one OnlineGpuType.")
        names = [t.name for t in types]
        if len(set(names)) != len(names):
            raise ProblemError(f"GPU type names must be unique; got {', '.join(names)}.")
        object.__setattr__(self, "gpu_types", types)
        if self.objective not in OBJECTIVES:
            raise ProblemError(f"objective must be one of {', '.join(OBJECTIVES)}, not {self.objective!r}.")
        if not (_number(self.slo_s) and self.slo_s > 0):
            raise ProblemError(f"the SLO must be a finite number of seconds > 0, not {self.slo_s!r}.")
        if not (_number(self.percentile) and 0 < self.percentile < 100):
            raise ProblemError(f"the percentile must lie strictly between 0 and 100, not {self.percentile!r}.")
        if isinstance(self.request_size, bool) or int(self.request_size) != self.request_size or self.request_size < 1:
            raise ProblemError(f"the request size must be a whole number of images >= 1, not {self.request_size!r}.")
        object.__setattr__(self, "request_size", int(self.request_size))
        rate = self.rate_per_s
        if self.arrivals_s is not None:
            trace = np.asarray(self.arrivals_s, dtype=float).ravel()
            if len(trace) < 2 or not np.all(np.isfinite(trace)) or np.any(np.diff(trace) < 0) or trace[-1] <= trace[0]:
                raise ProblemError("the arrival trace needs at least two finite, sorted times spanning more than 0 s.")
            trace = trace - trace[0]
            own = (len(trace) - 1) / trace[-1]
            if rate is None:
                rate = own
            else:
                trace = trace * own / rate  # same shape, the asked mean rate
            trace.flags.writeable = False
            object.__setattr__(self, "trace", trace)
        if rate is None or not (_number(rate) and rate > 0):
            raise ProblemError(f"the rate must be a finite number of requests/s > 0, not {rate!r}.")
        object.__setattr__(self, "rate_per_s", float(rate))
        if self.delays_s is not None:
            delays = tuple(float(d) for d in self.delays_s)
            if not delays or not all(math.isfinite(d) and d >= 0 for d in delays):
                raise ProblemError("max_queue_delay candidates must be finite numbers of seconds >= 0.")
            object.__setattr__(self, "delays_s", delays)
        if self.objective == "cost":
            unpriced = [t.name for t in types if t.cost_per_hour is None and t.count != 0]
            if unpriced:
                raise ProblemError(f"the cost objective needs a price per GPU-hour for {', '.join(unpriced)}.")

    @property
    def target(self) -> float:
        """The share of requests that may take longer than the SLO."""
        return 1.0 - self.percentile / 100.0


@dataclass(frozen=True)
class Setting:
    """One GPU type's best way to serve: option, max_batch (images), delay, and what one GPU then holds."""

    option: int  # index into the type's options
    max_batch: int  # images, Triton's max_batch_size
    requests: int  # requests per batch at most: max_batch // request_size
    delay_s: float
    capacity_per_s: float  # the highest per-GPU rate (requests/s) that meets the SLO
    peak_per_s: float  # requests/s with every batch full: where the queue grows without end


@dataclass(frozen=True)
class OnlineAssignment:
    """`count` GPUs of one type with the same settings, each taking rate_per_gpu_s requests/s."""

    hardware: str
    option: str
    input_size: int | None
    count: int
    max_batch: int
    max_queue_delay_s: float
    preferred_batch_sizes: tuple[int, ...]
    rate_per_gpu_s: float
    capacity_per_gpu_s: float
    peak_per_gpu_s: float
    utilization: float  # rate per GPU / its peak (every batch full)
    predicted_p50_s: float
    predicted_p99_s: float
    predicted_s: float  # at the SLO's percentile
    analytic_s: float  # the analytic model's latency at the SLO's percentile
    simulated: bool  # the predicted_* figures come from the simulation (else from the analytic model)
    mean_batch: float  # requests per batch in the simulation (nan without it)

    def to_dict(self) -> dict:
        ms = 1000.0
        return {
            "hardware": self.hardware, "option": self.option, "input_size": self.input_size, "count": self.count,
            "max_batch": self.max_batch, "max_queue_delay_ms": self.max_queue_delay_s * ms,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "utilization": self.utilization, "predicted_p50_ms": self.predicted_p50_s * ms,
            "predicted_p99_ms": self.predicted_p99_s * ms, "predicted_ms_at_percentile": self.predicted_s * ms,
            "analytic_ms_at_percentile": self.analytic_s * ms, "simulated": self.simulated,
            "rate_per_gpu_per_s": self.rate_per_gpu_s, "capacity_per_gpu_per_s": self.capacity_per_gpu_s,
            "peak_per_gpu_per_s": self.peak_per_gpu_s, "mean_batch_requests": self.mean_batch,
        }


@dataclass(frozen=True)
class OnlinePlan:
    """GPUs and batching settings that meet the SLO. status 'optimal': the fewest GPUs (lowest cost)
    under the analytic model, confirmed by the simulation; 'feasible': the simulation asked for more
    GPUs than the model, or the cost is within `gap` of the best."""

    status: str
    objective: str
    rate_per_s: float
    slo_s: float
    percentile: float
    request_size: int
    arrivals: str  # 'poisson' or 'trace'
    assignments: tuple[OnlineAssignment, ...]
    gpus_by_type: dict[str, int]
    cost: float | None  # per hour
    capacity_per_s: float  # the highest rate these GPUs hold within the SLO
    gap: float
    solve_time_s: float

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus_by_type.values())

    def to_dict(self) -> dict:
        return {
            "status": self.status, "mode": "online", "objective": self.objective, "rate_per_s": self.rate_per_s,
            "slo_ms": self.slo_s * 1000.0, "percentile": self.percentile, "request_size": self.request_size,
            "arrivals": self.arrivals, "total_gpus": self.total_gpus, "gpus_by_type": dict(self.gpus_by_type),
            "cost": self.cost, "cost_billing": "per hour, every GPU of the plan", "capacity_per_s": self.capacity_per_s,
            "gap": self.gap, "solve_time_s": self.solve_time_s,
            "assignments": [a.to_dict() for a in self.assignments],
        }


@dataclass(frozen=True)
class OnlineDiagnosis:
    """Why no GPUs of the pool meet the SLO at the rate, and what would.

    fastest_s: per type, the latency at the percentile of a request alone (the SLO must exceed it).
    max_rate_per_s: the highest rate the pool holds within the SLO. extra_gpus: per type with a count,
    how many more of it alone (the others as given) hold the rate; None where none do. min_slo_s: the
    smallest SLO at which the pool holds the rate (None: none does, the rate is above its peak).
    """

    reason: str
    rate_per_s: float
    slo_s: float
    percentile: float
    unservable: tuple[str, ...]
    fastest_s: dict[str, float | None]
    max_rate_per_s: float | None
    extra_gpus: dict[str, int | None]
    min_slo_s: float | None

    def to_dict(self) -> dict:
        return {
            "status": "infeasible", "mode": "online", "reason": self.reason, "rate_per_s": self.rate_per_s,
            "slo_ms": self.slo_s * 1000.0, "percentile": self.percentile, "unservable": list(self.unservable),
            "fastest_ms": {k: None if v is None else v * 1000.0 for k, v in self.fastest_s.items()},
            "max_rate_per_s": self.max_rate_per_s, "extra_gpus": dict(self.extra_gpus),
            "min_slo_ms": None if self.min_slo_s is None else self.min_slo_s * 1000.0,
        }


# ---------------------------------------------------------------------------------------------
# The search for one GPU type


def best_setting(gpu: OnlineGpuType, problem: OnlineProblem, slo_s: float | None = None) -> Setting | None:
    """The option, max_batch and delay with the highest per-GPU rate within the SLO; None if none meets it."""
    slo = problem.slo_s if slo_s is None else slo_s
    best: Setting | None = None
    options = sorted(range(len(gpu.options)), key=lambda i: -_peak_rate(gpu.options[i], problem.request_size))
    for i in options:
        found = _best_for_option(gpu.options[i], i, problem, slo, best)
        if found is not None and (best is None or found.capacity_per_s > best.capacity_per_s):
            best = found
    return best


def _best_for_option(option: ServiceTimes, index: int, problem: OnlineProblem, slo: float, best: Setting | None):
    k, target = problem.request_size, problem.target
    sizes = [b for b in option.max_batches if b >= k]
    if not sizes or fastest(option, problem) >= slo:
        return None
    median, sigma = option.per_request(k, max(sizes) // k)
    floor = best.capacity_per_s if best is not None else 0.0
    found: Setting | None = None
    configs = sorted(((b, b // k) for b in sizes), key=lambda c: -c[1] / _mean(median, sigma, c[1]))
    for b, m in configs:  # highest peak first: a setting cannot hold more than its peak
        peak = m / _mean(median, sigma, m)
        if peak <= floor * (1 + RATE_TOLERANCE):
            break
        rate = _capacity(m, 0.0, median, sigma, slo, target, floor, peak)
        if rate is not None and rate > floor:
            floor, found = rate, Setting(index, b, m, 0.0, rate, peak)
    if found is None:
        return None
    single = median[1]
    delays = problem.delays_s if problem.delays_s is not None else [share * single for share in DELAY_SHARES]
    for delay in sorted(d for d in delays if d > 0):
        rate = _capacity(found.requests, delay, median, sigma, slo, target, found.capacity_per_s, found.peak_per_s)
        if rate is not None and rate > found.capacity_per_s * (1 + RATE_TOLERANCE):
            found = Setting(index, found.max_batch, found.requests, delay, rate, found.peak_per_s)
    if problem.delays_s is not None and 0.0 not in problem.delays_s and found.delay_s == 0.0:
        return _only_delays(found, median, sigma, slo, target, problem.delays_s)
    return found


def _only_delays(found: Setting, median, sigma, slo, target, delays) -> Setting | None:
    """The user ruled out delay 0: the best of their delays at the chosen max_batch."""
    best = None
    for delay in delays:
        rate = _capacity(found.requests, delay, median, sigma, slo, target, 0.0, found.peak_per_s)
        if rate is not None and (best is None or rate > best.capacity_per_s):
            best = Setting(found.option, found.max_batch, found.requests, delay, rate, found.peak_per_s)
    return best


def _capacity(m: int, delay: float, median, sigma, slo: float, target: float, floor: float, peak: float) -> float | None:
    """The highest rate in (floor, peak) at which P(latency > slo) <= target; None if not above floor.

    The log of the tail share against the rate is smooth and rising: regula falsi (bracket_root) finds
    the crossing in a handful of model evaluations; the answer returned always meets the SLO.
    """

    def gap(rate: float) -> float:
        return math.log(max(Batcher(rate, m, delay, median, sigma).tail(slo), 1e-300)) - math.log(target)

    hi, g_hi = peak, -math.log(target)  # at the peak the queue grows without end: every request is late
    if floor > 0:  # only a rate above the floor is worth finding: one look decides most settings
        lo = floor * (1 + 2 * RATE_TOLERANCE)
        if lo >= hi:
            return None
        g_lo = gap(lo)
        if g_lo > 0:
            return None
    else:  # most settings hold between a quarter of their peak and all of it: look there first
        lo = peak / 2
        g_lo = gap(lo)
        while g_lo > 0:
            hi, g_hi, lo = lo, g_lo, lo / 4
            if lo < peak * 1e-9:
                return None
            g_lo = gap(lo)
    return bracket_root(gap, lo, g_lo, hi, g_hi, RATE_TOLERANCE)[0]


def fastest(option: ServiceTimes, problem: OnlineProblem) -> float:
    """The latency at the percentile of a request alone on an idle GPU: no SLO below it can be met."""
    median, sigma = option.per_request(problem.request_size, 1)
    return float(median[1] * math.exp(sigma[1] * normal_quantile(problem.percentile / 100.0)))


def normal_quantile(p: float) -> float:
    lo, hi = -10.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float(normal_cdf(mid)) < p else (lo, mid)
    return (lo + hi) / 2


def _mean(median, sigma, m: int) -> float:
    return float(median[m] * math.exp(sigma[m] ** 2 / 2))


def _peak_rate(option: ServiceTimes, request_size: int) -> float:
    sizes = [b for b in option.max_batches if b >= request_size]
    if not sizes:
        return 0.0
    median, sigma = option.per_request(request_size, max(sizes) // request_size)
    return max((b // request_size) / _mean(median, sigma, b // request_size) for b in sizes)


# ---------------------------------------------------------------------------------------------
# The pool


def solve_online(problem: OnlineProblem) -> OnlinePlan:
    """The fewest GPUs (or lowest cost) and their batching settings; InfeasibleProblem when none exist."""
    started = time.perf_counter()
    return _solve(problem, started)


def _solve(problem: OnlineProblem, started: float) -> OnlinePlan:
    types = problem.gpu_types
    avail = np.array([math.inf if t.count is None else t.count for t in types], dtype=float)
    settings: list[Setting | None] = [None] * len(types)
    capacity = np.zeros(len(types))
    searched = avail <= 0  # a type with no GPU needs no search
    counts, gap = _search_types(problem, settings, capacity, avail, searched, lazy=problem.objective == "gpus")
    if counts is None:
        _search_types(problem, settings, capacity, avail, searched, lazy=False)  # the diagnosis looks at every type
        raise InfeasibleProblem(diagnose(problem, settings, capacity, avail))
    status = "optimal" if gap == 0 else "feasible"
    checked = None
    if problem.simulate:
        for _ in range(CHECK_ROUNDS):
            checked = _check(problem, settings, counts, capacity)
            failing = [k for k, (q, _, _, _) in checked.items() if q > problem.slo_s]
            if not failing:
                break
            status = "feasible"
            rates = _per_gpu_rates(problem, counts, capacity)
            for k in failing:  # the simulation says this type holds less than the model: ask less of it
                capacity[k] = rates[k] * CHECK_STEP
            _search_types(problem, settings, capacity, avail, searched, lazy=False)  # others may now be worth using
            counts, gap = _cover(problem, capacity, avail)
            if counts is None:
                raise InfeasibleProblem(diagnose(problem, settings, capacity, avail))
        else:
            checked = _check(problem, settings, counts, capacity)
    return _plan(problem, settings, counts, capacity, checked, status, gap, started)


def _search_types(problem: OnlineProblem, settings: list, capacity: np.ndarray, avail: np.ndarray, searched: np.ndarray,
                  lazy: bool):
    """Find each type's best setting not `searched` yet (filling `settings`, `capacity`, `searched`), then the counts.

    lazy (the fewest GPUs): types in order of their peak, stopping once the types found cover the rate
    with no type used whose capacity is below a remaining type's peak: those could not be used (exact).
    """
    types = problem.gpu_types
    todo = [k for k in range(len(types)) if not searched[k]]
    peaks = {k: max(_peak_rate(o, problem.request_size) for o in types[k].options) for k in todo}
    todo.sort(key=lambda k: -peaks[k])
    for i, k in enumerate(todo):
        settings[k] = best_setting(types[k], problem)
        capacity[k] = 0.0 if settings[k] is None else settings[k].capacity_per_s
        searched[k] = True
        if lazy:
            counts, gap = _cover(problem, capacity, avail)
            rest = max((peaks[r] for r in todo[i + 1:]), default=0.0)
            if counts is not None and all(capacity[u] >= rest for u in np.flatnonzero(counts)):
                return counts, gap
    return _cover(problem, capacity, avail)


def _cover(problem: OnlineProblem, capacity: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray | None, float]:
    """GPU counts with sum(count x capacity) >= rate: the fewest (largest capacities first, which is
    exact), or the cheapest (a small covering integer program, HiGHS); (None, 0) when the pool cannot."""
    rate = problem.rate_per_s
    usable = capacity > 0
    held = math.inf if np.any(usable & np.isinf(avail)) else float(np.sum(capacity[usable] * avail[usable]))
    if not usable.any() or held < rate * (1 - 1e-12):
        return None, 0.0
    if problem.objective == "gpus":
        counts = np.zeros(len(capacity), dtype=np.int64)
        left = rate
        for k in np.argsort(-capacity, kind="stable"):
            if left <= 0 or capacity[k] <= 0:
                break
            use = min(avail[k], math.ceil(left / capacity[k] - 1e-12))
            counts[k], left = int(use), left - use * capacity[k]
        return counts, 0.0
    return _cheapest(problem, capacity, avail)


def _cheapest(problem: OnlineProblem, capacity: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray | None, float]:
    from solvers import milp

    prices = np.array([t.cost_per_hour or 0.0 for t in problem.gpu_types])
    scale = 1e6 / float(capacity.max())  # integer capacities, rounded down (never more than the model allows)
    cap = np.floor(capacity * scale).astype(np.int64)[:, None]
    need = np.array([math.ceil(problem.rate_per_s * scale)], dtype=float)
    result = milp.min_gpus(cap, need, avail, prices, rel_gap=1e-4)
    if result is None:
        return None, 0.0
    return np.rint(result.x[:, 0]).astype(np.int64), float(result.gap)


def _per_gpu_rates(problem: OnlineProblem, counts: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """The balancer gives each GPU a share of the rate in proportion to its capacity."""
    held = float(np.sum(counts * capacity))
    return np.where(counts > 0, problem.rate_per_s * capacity / held, 0.0)


def _check(problem: OnlineProblem, settings, counts, capacity) -> dict[int, tuple[float, float, float, float]]:
    """Simulate each type used at its planned rate: {type: (at the percentile, p50, p99, mean batch)}."""
    rates = _per_gpu_rates(problem, counts, capacity)
    used = [k for k in range(len(counts)) if counts[k] > 0]
    out = {}
    if problem.trace is None:
        wanted = problem.simulated_requests or int(min(200_000, max(20_000, 200 / problem.target)))
        for k in used:
            s = settings[k]
            median, sigma = problem.gpu_types[k].options[s.option].per_request(problem.request_size, s.requests)
            arrivals = poisson_arrivals(rates[k], wanted, seed=problem.seed + 1)
            sim = simulate_gpu(arrivals, s.requests, s.delay_s, median, sigma, seed=problem.seed + 2)
            out[k] = (sim.quantile(problem.percentile), sim.quantile(50), sim.quantile(99), float(sim.batch_sizes.mean()))
        return out
    # A trace: every GPU of the pool gets its share of the very requests, at random.
    gpu_type = np.repeat(used, counts[used])
    parts = split_randomly(problem.trace, capacity[gpu_type], seed=problem.seed + 1)
    latencies: dict[int, list] = {k: [] for k in used}
    batches: dict[int, list] = {k: [] for k in used}
    for g, (k, arrivals) in enumerate(zip(gpu_type, parts)):
        s = settings[k]
        median, sigma = problem.gpu_types[k].options[s.option].per_request(problem.request_size, s.requests)
        sim = simulate_gpu(arrivals, s.requests, s.delay_s, median, sigma, seed=problem.seed + 2 + g, warmup_share=0.0)
        latencies[k].append(sim.latency_s)
        batches[k].append(sim.batch_sizes)
    for k in used:
        lat = np.concatenate(latencies[k]) if latencies[k] else np.zeros(0)
        sizes = np.concatenate(batches[k]) if batches[k] else np.zeros(0)
        if not len(lat):
            out[k] = (0.0, math.nan, math.nan, math.nan)
            continue
        q = np.percentile(lat, [problem.percentile, 50, 99])
        out[k] = (float(q[0]), float(q[1]), float(q[2]), float(sizes.mean()))
    return out


def _plan(problem: OnlineProblem, settings, counts, capacity, checked, status, gap, started) -> OnlinePlan:
    rates = _per_gpu_rates(problem, counts, capacity)
    assignments = []
    for k, gpu in enumerate(problem.gpu_types):
        if counts[k] <= 0:
            continue
        s = settings[k]
        median, sigma = gpu.options[s.option].per_request(problem.request_size, s.requests)
        model = Batcher(rates[k], s.requests, s.delay_s, median, sigma)
        simulated = checked is not None and k in checked
        analytic = model.quantile(problem.percentile, 1e-3)
        if simulated:
            at, p50, p99, batch = checked[k]
        else:  # the analytic model alone (slower than the simulation for these two)
            at, p50, p99, batch = analytic, model.quantile(50, 1e-3), model.quantile(99, 1e-3), math.nan
        assignments.append(OnlineAssignment(
            hardware=gpu.name, option=gpu.options[s.option].label, input_size=problem.input_size, count=int(counts[k]),
            max_batch=s.max_batch, max_queue_delay_s=s.delay_s, preferred_batch_sizes=(s.requests * problem.request_size,),
            rate_per_gpu_s=float(rates[k]), capacity_per_gpu_s=float(capacity[k]), peak_per_gpu_s=s.peak_per_s,
            utilization=float(rates[k] / s.peak_per_s), predicted_p50_s=p50, predicted_p99_s=p99, predicted_s=at,
            analytic_s=analytic, simulated=simulated,
            mean_batch=batch,
        ))
    by_type = {a.hardware: a.count for a in assignments}
    prices = {t.name: t.cost_per_hour for t in problem.gpu_types}
    priced = all(prices[name] is not None for name in by_type)
    cost = sum(n * prices[name] for name, n in by_type.items()) if priced else None
    return OnlinePlan(
        status=status, objective=problem.objective, rate_per_s=problem.rate_per_s, slo_s=problem.slo_s,
        percentile=problem.percentile, request_size=problem.request_size,
        arrivals="poisson" if problem.trace is None else "trace", assignments=tuple(assignments),
        gpus_by_type=by_type, cost=cost, capacity_per_s=float(np.sum(counts * capacity)), gap=gap,
        solve_time_s=time.perf_counter() - started,
    )


# ---------------------------------------------------------------------------------------------
# Why not


def diagnose(problem: OnlineProblem, settings, capacity: np.ndarray, avail: np.ndarray) -> OnlineDiagnosis:
    types = problem.gpu_types
    fast = {t.name: min((fastest(o, problem) for o in t.options if o.largest >= problem.request_size), default=None)
            for t in types}
    unservable = tuple(t.name for t, s in zip(types, settings) if s is None and t.count != 0
                       and (fast[t.name] is None or fast[t.name] >= problem.slo_s))
    finite = bool(np.all(np.isfinite(avail)))
    max_rate = float(np.sum(capacity * np.where(np.isfinite(avail), avail, 0.0))) if finite else None
    slo = _ms(problem.slo_s)
    if not np.any(avail > 0):
        reason = "the pool has no GPUs"
    elif not np.any(capacity > 0):
        best = min((v for k, v in fast.items() if v is not None), default=None)
        too_big = best is None
        reason = (f"no GPU takes requests of {problem.request_size} images (above every batch size timed)" if too_big else
                  f"no GPU answers within {slo} at the {_pct(problem.percentile)} percentile even with a request alone: "
                  f"the fastest is {_ms(best)} ({min(fast, key=lambda k: fast[k] if fast[k] is not None else math.inf)})")
    else:
        reason = (f"the pool holds at most {max_rate:,.4g} requests/s within {slo} at the {_pct(problem.percentile)} "
                  f"percentile, below the {problem.rate_per_s:,.4g}/s asked")
    extra: dict[str, int | None] = {}
    if max_rate is not None:
        for k, t in enumerate(types):
            if t.count is None:
                continue
            extra[t.name] = None if capacity[k] <= 0 else max(0, math.ceil((problem.rate_per_s - max_rate) / capacity[k] - 1e-12))
    return OnlineDiagnosis(
        reason=reason, rate_per_s=problem.rate_per_s, slo_s=problem.slo_s, percentile=problem.percentile,
        unservable=unservable, fastest_s=fast, max_rate_per_s=max_rate, extra_gpus=extra,
        min_slo_s=_smallest_slo(problem, avail, fast),
    )


def _smallest_slo(problem: OnlineProblem, avail: np.ndarray, fast: dict[str, float | None]) -> float | None:
    """The smallest SLO at which the pool holds the rate (2% precision); None when no SLO does."""
    floor = min((v for v in fast.values() if v is not None), default=None)
    if floor is None or not np.any(avail > 0):
        return None
    if not np.all(np.isfinite(avail)):
        return floor * (1 + 1e-6)  # with enough GPUs each gets almost nothing: a request alone

    def holds(slo: float) -> bool:
        capacity = np.array([0.0 if a <= 0 or (s := best_setting(t, problem, slo)) is None else s.capacity_per_s
                             for t, a in zip(problem.gpu_types, avail)])
        return float(np.sum(capacity * avail)) >= problem.rate_per_s

    peak = sum(a * max(_peak_rate(o, problem.request_size) for o in t.options) for t, a in zip(problem.gpu_types, avail))
    if peak <= problem.rate_per_s:
        return None
    lo = max(problem.slo_s, floor)  # the SLO asked fails: that is why we are here
    hi = lo * 2
    while not holds(hi):
        lo, hi = hi, hi * 2
        if hi > 1e6:
            return None
    while hi - lo > 0.02 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if holds(mid) else (mid, hi)
    return hi


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms"


def _pct(p: float) -> str:
    text = f"{p:g}"
    return text + ("st" if text.endswith("1") and not text.endswith("11") else
                   "nd" if text.endswith("2") and not text.endswith("12") else
                   "rd" if text.endswith("3") and not text.endswith("13") else "th")
