"""The two optimization models over GPU counts, built with Pyomo and solved with HiGHS.

x[k, s] = how many GPUs of type k serve input-size class s, each doing up to cap[k, s] images
(capacity.py). Because a GPU's best batch size and batch count depend only on (k, s), these K*S
integers are an exact reformulation of [serving-models]' per-GPU models (docs/design.md), however
many GPUs there are.

    min_gpus:    min sum_ks w_k x_ks   s.t.  sum_k cap_ks x_ks >= need_s,  sum_s x_ks <= avail_k
    max_images:  max sum_s y_s         s.t.  y_s <= sum_k cap_ks x_ks,  y_s <= need_s,  sum_s x_ks <= avail_k

Pyomo is imported on first use: it takes most of a second, and `import solvers` should not.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np

from solvers.errors import SolverFailure, SolverTimeLimit

# Pyomo's HiGHS interface silences the solver's log by redirecting file descriptors 1 and 2 of the whole
# process while it solves. Two solves at once (a scheduler planning in threads) undo each other's
# redirection: HiGHS's log reached stdout, a thread died on a closed descriptor, or the process hung.
# So one solve at a time; a solve takes milliseconds.
_HIGHS_LOCK = threading.Lock()


@dataclass(frozen=True, eq=False)
class MilpResult:
    """A solved model: GPU counts x[k, s], the images they do per class, the objective and its proof."""

    x: np.ndarray
    images: np.ndarray
    objective: float
    gap: float  # relative gap proved between the objective and the best bound (0: proven optimal)
    build_s: float  # Pyomo: building the model
    solve_s: float  # HiGHS: its own run time
    call_s: float  # the whole Pyomo solve call: HiGHS plus handing the model over and reading it back


def greedy_lower_bound(cap: np.ndarray, avail: np.ndarray, need: int) -> int:
    """The fewest GPUs that cover `need` images of one class, ignoring the other classes: largest first.

    Valid for every solution of the coupled model, so adding sum_k x_ks >= this bound cuts nothing off,
    and it closes most of the LP gap of the covering knapsack (HiGHS proves optimality ~3x faster).
    """
    return int(greedy_counts(cap, avail, need).sum())


def greedy_counts(cap: np.ndarray, avail: np.ndarray, need: int) -> np.ndarray:
    """GPUs per type that cover `need` images of one class, largest capacity first: the fewest that do
    (short of `need` where all of them cannot)."""
    counts, left = np.zeros(len(cap), dtype=np.int64), need
    for k in np.argsort(-cap, kind="stable"):
        if left <= 0 or cap[k] <= 0:
            break
        counts[k] = min(avail[k], math.ceil(left / cap[k]))
        left -= int(counts[k]) * int(cap[k])
    return counts


def min_gpus(
    cap, need, avail, weight, *, rel_gap: float = 0.0, time_limit: float = 10.0, strengthen: bool = True
) -> MilpResult | None:
    """Fewest (weighted) GPUs that cover every class's need; None when no choice of GPUs does.

    strengthen=False leaves out the valid count cuts (greedy_lower_bound), only to measure what they bring.
    """
    cap, need, avail = _arrays(cap, need, avail)
    if not (need > 0).any():
        return _empty(*cap.shape)
    if plainly_infeasible(cap, need, avail):
        return None
    m, pairs, build_s = _cover_model(cap, need, avail, np.asarray(weight, dtype=float), strengthen)
    results, call_s = _run(m, rel_gap, time_limit)
    if results is None:
        return None
    x = _covering(_read_counts(m, pairs, *cap.shape), cap, need, avail)
    if x is None:
        return None
    return _result(x, cap, need, weight, results, build_s, call_s, minimize=True)


def _covering(x: np.ndarray, cap: np.ndarray, need: np.ndarray, avail: np.ndarray) -> np.ndarray | None:
    """x, with GPUs added where it leaves a class short in whole numbers; None where none are left to add.

    HiGHS accepts a constraint within its feasibility tolerance, relative to the row's largest
    coefficient: with GPUs of 10^8 images each, a cover a few images short passes. Counted exactly
    here, such a plan is topped up with the largest GPUs still free (its gap then says how far from
    the proven bound it may be).
    """
    x = x.copy()
    for s in np.flatnonzero(need > 0):
        short = int(need[s]) - sum(int(c) * int(n) for c, n in zip(cap[:, s], x[:, s]))
        for k in np.argsort(-cap[:, s], kind="stable"):
            if short <= 0 or cap[k, s] <= 0:
                break
            free = avail[k] - x[k].sum()
            add = int(min(free, -(-short // int(cap[k, s]))))
            x[k, s] += add
            short -= add * int(cap[k, s])
        if short > 0:
            return None
    return x


def is_feasible(cap, need, avail, *, time_limit: float = 10.0) -> bool | None:
    """Whether some choice of GPUs covers every class's need (None: not decided within the time limit).
    The LP relaxation first, which is often enough to say no, then the integer model."""
    cap, need, avail = _arrays(cap, need, avail)
    if not (need > 0).any():
        return True
    if plainly_infeasible(cap, need, avail):
        return False
    m, _, _ = _cover_model(cap, need, avail, np.zeros(len(avail)), strengthen=True)
    try:
        if _run(m, 0.0, time_limit, relaxation=True)[0] is None:
            return False
        return _run(m, 0.0, time_limit)[0] is not None
    except SolverFailure:  # stopped by the time limit with no solution and no proof
        return None


def max_images(cap, need, avail, *, rel_gap: float = 0.0, time_limit: float = 10.0) -> MilpResult:
    """Most images by the deadline with the GPUs available; need[s] = inf means no limit for that class."""
    m, pairs, build_s = _images_model(cap, need, avail, None, None)
    if m is None:
        return _empty(*np.shape(cap))
    results, call_s = _run(m, rel_gap, time_limit)
    if results is None:  # cannot happen (x = 0 is feasible), but never read values without a solution
        raise SolverFailure("HiGHS found the max-images model infeasible, which it cannot be.")
    return _result(_read_counts(m, pairs, *np.shape(cap)), cap, need, None, results, build_s, call_s, minimize=False)


def fewest_for_images(
    cap, need, avail, weight, total: int, incumbent: MilpResult, *, rel_gap: float = 0.0, time_limit: float = 10.0
) -> MilpResult:
    """Fewest (weighted) GPUs that finish `total` images in all, no class beyond its need.

    Relaxed mode's second step, given max_images's answer (`incumbent`, which does `total`). Which
    classes give the images is left free, so (most images, then fewest GPUs) is optimal
    lexicographically. When the LP bound already proves the incumbent's GPUs optimal (typical when
    every GPU is busy), HiGHS's integer search is skipped.
    """
    m, pairs, build_s = _images_model(cap, need, avail, weight, total)
    if m is None:
        return incumbent
    weight = np.asarray(weight, dtype=float)
    have = float(np.sum(weight[:, None] * incumbent.x))
    try:
        lp, lp_s = _run(m, 0.0, time_limit, relaxation=True)
    except SolverFailure:  # only a shortcut: HiGHS's simplex can end 'unknown' on counts of 1e8 and more
        lp, lp_s = None, 0.0
    gap = math.inf if lp is None else _gap(have, lp.incumbent_objective, minimize=True, integral=_integral(weight))
    if gap <= rel_gap:
        return MilpResult(incumbent.x, incumbent.images, have, gap, build_s, lp.timing_info.highs_time, lp_s)
    results, call_s = _run(m, rel_gap, time_limit)
    if results is None:
        return incumbent
    found = _result(
        _read_counts(m, pairs, *np.shape(cap)), cap, need, weight, results, build_s, call_s + lp_s, minimize=True
    )
    # Counted exactly, HiGHS's answer may do an image or two less than `total` (its tolerance, as in _covering).
    return found if found.objective <= have and found.images.sum() >= total else incumbent


def plainly_infeasible(cap, need, avail) -> bool:
    """A class that no GPU serves, or that all the GPUs together cannot cover: no need to ask HiGHS."""
    return any(np.sum(avail[cap[:, s] > 0] * cap[cap[:, s] > 0, s]) < need[s] for s in np.flatnonzero(need > 0))


def _cover_model(cap, need, avail, weight, strengthen: bool):
    """The covering model (min_gpus): (model, its (k, s) pairs, seconds to build)."""
    active = [int(s) for s in np.flatnonzero(need > 0)]
    pairs = [(k, s) for s in active for k in range(cap.shape[0]) if cap[k, s] > 0 and avail[k] > 0]
    upper = {(k, s): _upper(avail[k], need[s], cap[k, s]) for k, s in pairs}

    pyo = load_pyomo()
    t0 = time.perf_counter()
    m = pyo.ConcreteModel()
    m.x = pyo.Var(pairs, domain=pyo.NonNegativeIntegers, bounds=lambda m, k, s: (0, upper[k, s]))
    m.cover = pyo.Constraint(
        active, rule=lambda m, s: sum(int(cap[k, s]) * m.x[k, s] for k in _types_of(pairs, s)) >= int(need[s])
    )
    if strengthen:
        bounds = {s: greedy_lower_bound(cap[:, s], avail, int(need[s])) for s in active}
        m.fewest = pyo.Constraint(active, rule=lambda m, s: sum(m.x[k, s] for k in _types_of(pairs, s)) >= bounds[s])
    _add_availability(pyo, m, pairs, avail)
    m.objective = pyo.Objective(expr=sum(float(weight[k]) * m.x[k, s] for k, s in pairs), sense=pyo.minimize)
    return m, pairs, time.perf_counter() - t0


def _images_model(cap, need, avail, weight, total):
    """max sum y (weight None), or min weighted GPUs with sum y >= total; (None, ...) when no GPU can help."""
    cap, need, avail = _arrays(cap, need, avail)
    n_types, n_sizes = cap.shape
    pairs = [(k, s) for s in range(n_sizes) for k in range(n_types) if need[s] > 0 and cap[k, s] > 0 and avail[k] > 0]
    if not pairs or total == 0:
        return None, pairs, 0.0
    upper = {(k, s): _upper(avail[k], need[s], cap[k, s]) for k, s in pairs}
    served = sorted({s for _, s in pairs})

    pyo = load_pyomo()
    t0 = time.perf_counter()
    m = pyo.ConcreteModel()
    m.x = pyo.Var(pairs, domain=pyo.NonNegativeIntegers, bounds=lambda m, k, s: (0, upper[k, s]))
    m.y = pyo.Var(
        served, domain=pyo.NonNegativeReals, bounds=lambda m, s: (0, None if math.isinf(need[s]) else int(need[s]))
    )
    m.done = pyo.Constraint(
        served, rule=lambda m, s: m.y[s] <= sum(int(cap[k, s]) * m.x[k, s] for k in _types_of(pairs, s))
    )
    _add_availability(pyo, m, pairs, avail)
    if weight is None:
        m.objective = pyo.Objective(expr=sum(m.y[s] for s in served), sense=pyo.maximize)
    else:
        m.total = pyo.Constraint(expr=sum(m.y[s] for s in served) >= int(total))
        m.objective = pyo.Objective(expr=sum(float(weight[k]) * m.x[k, s] for k, s in pairs), sense=pyo.minimize)
    return m, pairs, time.perf_counter() - t0


def _result(x, cap, need, weight, results, build_s, call_s, *, minimize: bool) -> MilpResult:
    """Everything recomputed in whole numbers from the GPU counts x (read from HiGHS's rounded answer)."""
    cap, need = np.asarray(cap, dtype=np.int64), np.asarray(need, dtype=float)
    # In float: cap x x may pass int64 (many GPUs, each able to do far more than needed); below need,
    # where the answer is read, every product and sum is under 2^53 and so exact.
    images = np.minimum(need, (cap.astype(float) * x).sum(axis=0)).astype(np.int64)
    if minimize:
        weight = np.asarray(weight, dtype=float)
        objective, integral = float(np.sum(weight[:, None] * x)), _integral(weight)
    else:
        objective, integral = float(images.sum()), True
    gap = _gap(objective, results.objective_bound, minimize=minimize, integral=integral)
    return MilpResult(x, images, objective, gap, build_s, results.timing_info.highs_time, call_s)


def _integral(weight: np.ndarray) -> bool:
    return bool(np.all(weight == np.round(weight)))


def load_pyomo():
    """Import Pyomo (most of a second, once per process) and its HiGHS interface."""
    import pyomo.environ as pyo
    from pyomo.contrib.solver.solvers.highs import Highs  # noqa: F401  (imported here, used in _run)

    return pyo


def _arrays(cap, need, avail):
    return np.asarray(cap, dtype=np.int64), np.asarray(need, dtype=float), np.asarray(avail, dtype=float)


def _upper(avail: float, need: float, cap: int) -> int | None:
    """No more GPUs than there are, nor more than the class's images need."""
    bound = avail if math.isinf(need) else min(avail, math.ceil(need / cap))
    return None if math.isinf(bound) else int(bound)


def _types_of(pairs, s):
    return [k for k, t in pairs if t == s]


def _add_availability(pyo, m, pairs, avail) -> None:
    """sum_s x_ks <= avail_k, only where the bounds on x do not already say so."""
    limited = sorted({k for k, _ in pairs if not math.isinf(avail[k]) and sum(1 for j, _ in pairs if j == k) > 1})
    sizes_of = {k: [s for j, s in pairs if j == k] for k in limited}
    m.available = pyo.Constraint(limited, rule=lambda m, k: sum(m.x[k, s] for s in sizes_of[k]) <= int(avail[k]))


def _run(m, rel_gap: float, time_limit: float, relaxation: bool = False):
    """Solve; return (results, seconds), or (None, seconds) when HiGHS proves the model infeasible.

    The status is read before any value: Pyomo raises on a non-optimal result unless told not to.
    relaxation=True solves the LP relaxation only (its objective is a bound; no values are loaded).
    """
    from pyomo.contrib.solver.common.results import SolutionStatus, TerminationCondition
    from pyomo.contrib.solver.solvers.highs import Highs

    with _HIGHS_LOCK:
        t0 = time.perf_counter()
        results = Highs().solve(
            m,
            load_solutions=False,
            raise_exception_on_nonoptimal_result=False,
            rel_gap=rel_gap,
            time_limit=time_limit,
            solver_options={"solve_relaxation": relaxation},
        )
        call_s = time.perf_counter() - t0
    condition = results.termination_condition
    if condition in (TerminationCondition.provenInfeasible, TerminationCondition.infeasibleOrUnbounded):
        return None, call_s
    if results.solution_status not in (SolutionStatus.optimal, SolutionStatus.feasible):
        failure = SolverTimeLimit if condition == TerminationCondition.maxTimeLimit else SolverFailure
        raise failure(f"HiGHS stopped ({condition.name}) without a solution in {time_limit:g} s.")
    if not relaxation:
        results.solution_loader.load_vars()
    return results, call_s


def _read_counts(m, pairs, n_types: int, n_sizes: int) -> np.ndarray:
    x = np.zeros((n_types, n_sizes), dtype=np.int64)
    for k, s in pairs:
        value = m.x[k, s].value or 0.0
        if abs(value - round(value)) > 1e-6:
            raise SolverFailure(f"HiGHS returned a fractional GPU count {value} for an integer variable.")
        x[k, s] = round(value)
    return x


def _gap(objective: float, bound, *, minimize: bool, integral: bool) -> float:
    """The relative gap proved; with integral objective values, a bound within 1 of the objective proves 0."""
    if bound is None:
        return math.inf
    bound = float(bound)
    if integral:
        bound = math.ceil(bound - 1e-6) if minimize else math.floor(bound + 1e-6)
    slack = objective - bound if minimize else bound - objective
    if slack <= 1e-9 * max(1.0, abs(objective)):
        return 0.0
    return slack / max(abs(objective), 1e-12)


def _empty(n_types: int, n_sizes: int) -> MilpResult:
    """Nothing to do (no images, or no GPU can do any): zero GPUs, trivially optimal."""
    return MilpResult(
        np.zeros((n_types, n_sizes), dtype=np.int64), np.zeros(n_sizes, dtype=np.int64), 0.0, 0.0, 0.0, 0.0, 0.0
    )
