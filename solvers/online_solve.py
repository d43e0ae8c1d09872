"""Online serving plans: a request rate and a latency objective in; GPUs and dynamic-batching settings out.

    from solvers.online_solve import OnlineGpuType, OnlineProblem, ServiceTimes, solve_online
    h100 = OnlineGpuType("h100", None, [ServiceTimes(p50_s, p99_s, label="torch fp16")], cost_per_hour=4.5)
    plan = solve_online(OnlineProblem([h100], rate_per_s=400, slo_s=0.1, percentile=99))

Requests of `request_size` images arrive as a Poisson process (or as a trace of arrival times); a load
balancer sends each to a GPU at random, in proportion to what the GPU can take, so each GPU of a type
sees a Poisson stream. Each GPU runs Triton's dynamic batcher (max_batch, max_queue_delay). Per GPU
type the search finds the (max_batch, delay) with the highest per-GPU rate that still meets the SLO at
the percentile (batcher.py, the analytic model); the counts then cover the rate with the fewest GPUs
(or the lowest cost). A discrete-event simulation (simulate.py) checks every type used at its
planned rate and gives the predicted p50/p99; where it finds the SLO missed, that type's per-GPU rate
is lowered (3% to 30%, by how far the percentile is over) and the counts are chosen again.

With a margin (OnlineProblem.margin) the search and the check run on the service slowed by it (every
batch's server time x (1 + margin), OnlineProblem.slowed): the counts and settings hold the SLO with
every batch that much slower. The latencies reported are those at the profiled times (what one should
measure); slowed_s is the one at the percentile with the margin.

Plain numbers (seconds, requests/s); no torch, no perfmodel.
"""

from __future__ import annotations

import math
import time

import numpy as np

from solvers.batch_problem import MAX_COUNT
from solvers.errors import InfeasibleProblem
from solvers.online_batcher import Batcher
from solvers.online_diagnose import diagnose
from solvers.online_problem import OBJECTIVES, OnlineGpuType, OnlineProblem, ServiceTimes
from solvers.online_search import Setting, best_setting, fastest, peak_rate
from solvers.online_simulate import WARMUP_SHARE, poisson_arrivals, simulate_gpu, split_randomly
from solvers.online_solution import OnlineAssignment, OnlineDiagnosis, OnlinePlan

__all__ = [
    "OBJECTIVES",
    "OnlineAssignment",
    "OnlineDiagnosis",
    "OnlineGpuType",
    "OnlinePlan",
    "OnlineProblem",
    "ServiceTimes",
    "Setting",
    "best_setting",
    "fastest",
    "solve_online",
]

CHECK_ROUNDS = 30  # at most this many simulation rounds that lower a type's rate
CHECK_STEP = 0.97  # each round lowers a failing type's per-GPU rate by at least 3% ...
CHECK_FLOOR = 0.7  # ... and at most 30% (half the share by which the simulated percentile is over the SLO)


def solve_online(problem: OnlineProblem) -> OnlinePlan:
    """The fewest GPUs (or lowest cost) and their batching settings; InfeasibleProblem when none exist."""
    started = time.perf_counter()
    nominal, problem = problem, problem.slowed()  # the search and the check hold the SLO with the margin
    types = problem.gpu_types
    avail = np.array([math.inf if t.count is None else t.count for t in types], dtype=float)
    settings: list[Setting | None] = [None] * len(types)
    capacity = np.zeros(len(types))
    searched = avail <= 0  # a type with no GPU needs no search
    counts, gap = _search_types(problem, settings, capacity, avail, searched, lazy=problem.objective == "gpus")
    if counts is None:
        _search_types(problem, settings, capacity, avail, searched, lazy=False)  # the diagnosis looks at every type
        raise InfeasibleProblem(diagnose(problem, settings, capacity, avail, nominal.margin))
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
                over = checked[k][0] / problem.slo_s - 1  # far over the SLO: a bigger step
                capacity[k] = rates[k] * max(CHECK_FLOOR, min(CHECK_STEP, 1 - over / 2))
            counts, gap = _search_types(problem, settings, capacity, avail, searched, lazy=False)  # others may now do
            if counts is None:
                raise InfeasibleProblem(diagnose(problem, settings, capacity, avail, nominal.margin))
        else:
            checked = _check(problem, settings, counts, capacity)
    return _plan(nominal, problem, settings, counts, capacity, checked, status, gap, started)


def _search_types(
    problem: OnlineProblem, settings: list, capacity: np.ndarray, avail: np.ndarray, searched: np.ndarray, lazy: bool
):
    """Find each type's best setting not `searched` yet (filling `settings`, `capacity`, `searched`), then the counts.

    lazy (the fewest GPUs): types in order of their peak, stopping once the types found cover the rate
    with no type used whose capacity is below a remaining type's peak: those could not be used (exact).
    """
    types = problem.gpu_types
    todo = [k for k in range(len(types)) if not searched[k]]
    peaks = {k: max(peak_rate(o, problem.request_size) for o in types[k].options) for k in todo}
    todo.sort(key=lambda k: -peaks[k])
    for i, k in enumerate(todo):
        settings[k] = best_setting(types[k], problem)
        capacity[k] = 0.0 if settings[k] is None else settings[k].capacity_per_s
        searched[k] = True
        if lazy:
            counts, gap = _cover(problem, capacity, avail)
            rest = max((peaks[r] for r in todo[i + 1 :]), default=0.0)
            if counts is not None and all(capacity[u] >= rest for u in np.flatnonzero(counts)):
                return counts, gap
    return _cover(problem, capacity, avail)


def _cover(problem: OnlineProblem, capacity: np.ndarray, avail: np.ndarray) -> tuple[np.ndarray | None, float]:
    """GPU counts with sum(count x capacity) >= rate: the fewest (largest capacities first, which is
    exact), or the cheapest (a small covering integer program, HiGHS); (None, 0) when the pool cannot."""
    rate = problem.rate_per_s
    avail = np.minimum(avail, MAX_COUNT)  # "as many as needed" is at most MAX_COUNT GPUs, as in batch plans
    usable = capacity > 0
    held = float(np.sum(capacity[usable] * avail[usable]))
    if not usable.any() or held < rate * (1 - 1e-12):
        return None, 0.0
    if problem.objective == "gpus":
        counts = np.zeros(len(capacity), dtype=np.int64)
        left = rate
        for k in np.argsort(-capacity, kind="stable"):
            if left <= 0 or capacity[k] <= 0:
                break
            # relative slack for rounding; at least one GPU while any rate is left (a tiny rate is still served)
            use = min(avail[k], max(1, math.ceil(left / capacity[k] * (1 - 1e-12))))
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
    used = [k for k in range(len(counts)) if counts[k] > 0]
    if problem.trace is None:  # the GPUs of a type alike: one of them, Poisson at its share of the rate
        rates = _per_gpu_rates(problem, counts, capacity)
        wanted = problem.simulated_requests or int(min(200_000, max(20_000, 200 / problem.target)))
        runs = {
            k: [(poisson_arrivals(rates[k], wanted, seed=problem.seed + 1), problem.seed + 2, WARMUP_SHARE)]
            for k in used
        }
    else:  # a trace: every GPU of the pool gets its share of the very requests, at random
        gpu_type = np.repeat(used, counts[used])
        parts = split_randomly(problem.trace, capacity[gpu_type], seed=problem.seed + 1)
        runs = {k: [] for k in used}
        for g, (k, arrivals) in enumerate(zip(gpu_type, parts)):
            runs[k].append((arrivals, problem.seed + 2 + g, 0.0))
    out = {}
    for k, gpus in runs.items():
        s = settings[k]
        option = problem.gpu_types[k].options[s.option]
        median, sigma = option.per_request(problem.request_size, s.requests)
        sims = [
            simulate_gpu(arrivals, s.requests, s.delay_s, median, sigma, seed=seed, warmup_share=warmup)
            for arrivals, seed, warmup in gpus
        ]
        latency = (
            np.concatenate([sim.latency_s for sim in sims]) + option.overhead_s
        )  # the round trip takes no server time
        if not len(latency):
            out[k] = (0.0, math.nan, math.nan, math.nan)
            continue
        q = np.percentile(latency, [problem.percentile, 50, 99])
        out[k] = (
            float(q[0]),
            float(q[1]),
            float(q[2]),
            float(np.concatenate([sim.batch_sizes for sim in sims]).mean()),
        )
    return out


def _analytic(problem: OnlineProblem, setting: Setting, k: int, rate: float):
    """One GPU of type k with its setting at `rate`, by the analytic model: its latency (seconds, the round
    trip included) at a percentile, and its peak rate (requests/s with every batch full)."""
    option = problem.gpu_types[k].options[setting.option]
    model = Batcher(
        rate, setting.requests, setting.delay_s, *option.per_request(problem.request_size, setting.requests)
    )
    return (lambda percentile: model.quantile(percentile, 1e-3) + option.overhead_s), model.peak_rate


def _plan(
    problem: OnlineProblem, slowed: OnlineProblem, settings, counts, capacity, checked, status, gap, started
) -> OnlinePlan:
    """The plan: counts, settings and capacities found on the `slowed` problem (the problem itself without a
    margin), latencies predicted at `problem`'s service times and, with a margin, at the slowed ones."""
    rates = _per_gpu_rates(problem, counts, capacity)
    predicted = checked if checked is None or slowed is problem else _check(problem, settings, counts, capacity)
    assignments = []
    for k, gpu in enumerate(problem.gpu_types):
        if counts[k] <= 0:
            continue
        s = settings[k]
        latency, peak = _analytic(problem, s, k, rates[k])
        analytic = latency(problem.percentile)
        simulated = predicted is not None and k in predicted
        if simulated:
            at, p50, p99, batch = predicted[k]
            held = checked[k][0]
        else:  # the analytic model alone (slower than the simulation for these two)
            at, p50, p99, batch = analytic, latency(50), latency(99), math.nan
            held = analytic if slowed is problem else _analytic(slowed, s, k, rates[k])[0](problem.percentile)
        assignments.append(
            OnlineAssignment(
                hardware=gpu.name,
                option=gpu.options[s.option].label,
                input_size=problem.input_size,
                count=int(counts[k]),
                max_batch=s.max_batch,
                max_queue_delay_s=s.delay_s,
                preferred_batch_sizes=(s.requests * problem.request_size,),
                rate_per_gpu_s=float(rates[k]),
                capacity_per_gpu_s=float(capacity[k]),
                peak_per_gpu_s=float(peak),
                utilization=float(rates[k] / peak),
                predicted_p50_s=p50,
                predicted_p99_s=p99,
                predicted_s=at,
                analytic_s=analytic,
                slowed_s=held,
                simulated=simulated,
                mean_batch=batch,
            )
        )
    by_type = {a.hardware: a.count for a in assignments}
    prices = {t.name: t.cost_per_hour for t in problem.gpu_types}
    priced = all(prices[name] is not None for name in by_type)
    cost = sum(n * prices[name] for name, n in by_type.items()) if priced else None
    return OnlinePlan(
        status=status,
        objective=problem.objective,
        rate_per_s=problem.rate_per_s,
        slo_s=problem.slo_s,
        percentile=problem.percentile,
        margin=problem.margin,
        request_size=problem.request_size,
        arrivals="poisson" if problem.trace is None else "trace",
        assignments=tuple(assignments),
        gpus_by_type=by_type,
        cost=cost,
        capacity_per_s=float(np.sum(counts * capacity)),
        gap=gap,
        solve_time_s=time.perf_counter() - started,
    )
