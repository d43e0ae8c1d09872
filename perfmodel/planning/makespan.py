"""A plan's makespan as a distribution: the probability that every worker is done by a time.

Each group of identical workers loads the model, runs its first batch (warm-up), then `batches` more.
Per worker, independent between workers: the load's and warm-up's spread, the batches' own spread (the
sum of many batch times, taken as lognormal with the sum's mean and variance, which keeps its right
skew), and the worker's own drift over the run (a GPU's speed). Shared by every worker that names it
(`Shared`): the profile median's uncertainty, a predictor's error, co-location, and on a CPU the
machine's drift (its workers share the cores). A shared factor multiplies the worker's compute time
(not its load). The makespan is the latest worker.

Two ways to the same distribution:
- `probability` / `quantiles` (the planner's): exact given the lognormal sum, by quadrature over the
  shared factors (Gauss-Hermite for normal ones, the samples themselves for empirical ones); the max of
  `count` independent workers is the per-worker probability to the power `count`.
- `simulate`: draws every batch time (lognormal), the drift as an AR(1) process from batch to batch, and
  every worker, with no sum approximation: the check on the first (tests, experiments/011).
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from perfmodel.planning.drift import Drift

SOURCES = ("batch", "load and warm-up", "drift", "profile", "predictor", "transfer", "co-location")
QUANTILES = (0.05, 0.5, 0.9, 0.95, 0.99)
QUADRATURE_POINTS = 20_000  # the most points of the shared factors' grid (the nodes per factor shrink to fit)
# per factor: Gauss-Hermite exact to ~1e-4 in P here (odd: a node at the median); samples' quantiles
NODES = {"normal": 25, "samples": 64}
_MAX_SIMULATED = 30_000_000  # batch draws in all; beyond it `simulate` declines


@dataclass(frozen=True)
class Shared:
    """A slowdown shared by every worker that names it: a worker's compute time is multiplied by a factor
    that is positive by construction: exp(sigma(scale) * e), e standard normal ('normal'; a lognormal of
    median 1 and relative spread `scale`, given per worker group), or 1 + e with e drawn from `values`
    ('samples': measured relative errors, each above -1, scale 1)."""

    source: str  # one of SOURCES
    kind: str = "normal"
    values: tuple[float, ...] = ()

    def nodes(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Quadrature nodes of e and their weights (summing to 1)."""
        if self.kind == "normal":
            x, w = np.polynomial.hermite_e.hermegauss(n - 1 if n > 2 and n % 2 == 0 else n)  # 0 a node
            return x, w / w.sum()
        values = np.asarray(self.values, float)
        if len(values) > n:  # evenly spaced quantiles keep the shape with fewer points
            values = np.quantile(values, (np.arange(n) + 0.5) / n)
        return values, np.full(len(values), 1.0 / len(values))

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        if self.kind == "normal":
            return rng.standard_normal(size)
        return rng.choice(np.asarray(self.values, float), size)

    def factor(self, e: np.ndarray, scale: float) -> np.ndarray:
        """The slowdown at e (nodes or draws), for a worker group's scale."""
        return np.exp(log_sd(scale) * e) if self.kind == "normal" else 1 + scale * e


def log_sd(rel_sd: float) -> float:
    """The sd of the log of a lognormal whose relative spread is rel_sd (about rel_sd when it is small)."""
    return math.sqrt(math.log1p(rel_sd * rel_sd))


@dataclass(frozen=True)
class Workers:
    """`count` identical workers. Times in seconds; sd_s the standard deviation of one draw."""

    count: int
    load_s: float
    warmup_s: float
    batches: int  # after the first
    batch_mean_s: float
    batch_sd_s: float = 0.0
    load_sd_s: float = 0.0
    warmup_sd_s: float = 0.0
    drift: Drift | None = None  # the worker's own drift (None: none, or shared through `shared`)
    shared: tuple[tuple[str, float], ...] = ()  # (key of a Shared factor, scale)
    name: str = ""

    @property
    def compute_s(self) -> float:
        return self.warmup_s + self.batches * self.batch_mean_s

    @property
    def mean_s(self) -> float:
        return self.load_s + self.compute_s

    def variance(self, only: str | None = None) -> float:
        """The variance of one worker's finish from its own sources (all, or `only` one of SOURCES)."""
        parts = {
            "load and warm-up": self.load_sd_s**2 + self.warmup_sd_s**2,
            "batch": self.batches * self.batch_sd_s**2,
            "drift": (self.compute_s * self.drift.run_rel_sd(self.compute_s)) ** 2 if self.drift else 0.0,
        }
        return sum(v for k, v in parts.items() if only in (None, k))


@dataclass(frozen=True, eq=False)
class Makespan:
    """The makespan's model: the worker groups and the shared factors they name."""

    groups: tuple[Workers, ...]
    shared: dict[str, Shared] = field(default_factory=dict)
    # the Drift behind each shared 'drift' factor, and a CPU type's own per-worker level (reported, not shared)
    drifts: dict[str, Drift] = field(default_factory=dict)

    def probability(self, t: float, only: str | None = None) -> float:
        """P(makespan <= t), by quadrature over the shared factors."""
        return float(self._cdf(np.array([t], float), only)[0])

    def quantiles(self, levels=QUANTILES, only: str | None = None) -> dict[float, float]:
        """The makespan's quantiles (seconds), each found by bisection on `probability` from 0."""
        low = 0.0
        high = max((g.mean_s for g in self.groups), default=0.0) * 2 + 1e-9
        while self._cdf(np.array([high]), only)[0] < max(levels):
            high *= 2
        lo, hi = np.full(len(levels), low), np.full(len(levels), high)
        target = np.asarray(levels, float)
        for _ in range(40):  # (high - low) / 2^40: far below a millisecond
            mid = (lo + hi) / 2
            below = self._cdf(mid, only) < target
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        # met already at the lower end (no workers: a plan of 0 images ends at 0 s, not at high / 2^40)
        hi = np.where(self._cdf(np.full(len(levels), low), only) >= target, low, hi)
        return {float(q): float(x) for q, x in zip(levels, hi)}

    def spread_by_source(self) -> dict[str, float]:
        """Per source: p95 - p50 with that source alone (seconds): what each one adds to the makespan."""
        out = {}
        for source in SOURCES:
            q = self.quantiles((0.5, 0.95), only=source)
            out[source] = q[0.95] - q[0.5]
        return out

    def _cdf(self, t: np.ndarray, only: str | None) -> np.ndarray:
        values, weights, slowdowns = self._grid(only)
        log_p = np.zeros((len(weights), len(t)))
        for g, slowdown in zip(self.groups, slowdowns):
            mu, s = _lognormal(g.mean_s, g.variance(only))
            x = t[None, :] / slowdown[:, None]
            if s > 0:
                log_p += g.count * log_normal_cdf((np.log(np.maximum(x, 1e-300)) - mu) / s)
            else:
                with np.errstate(divide="ignore"):
                    log_p += g.count * np.log((x >= math.exp(mu) * (1 - 1e-12)).astype(float))
        # The quadrature weights sum to 1 only up to rounding: a probability must not exceed 1 (a plan
        # stating 1.0000000000000002 is one `perfmodel run` refuses).
        return np.clip(weights @ np.exp(log_p), 0.0, 1.0)

    @functools.cache  # noqa: B019 - a frozen model, a handful of `only` values
    def _grid(self, only: str | None):
        """The shared factors' quadrature grid: (values [point, factor], weights [point], per group its
        compute slowdown at each point)."""
        keys = [k for k in dict.fromkeys(k for g in self.groups for k, _ in g.shared) if self._on(k, only)]
        per = max(2, int(QUADRATURE_POINTS ** (1 / len(keys)))) if keys else 1
        grids = [self.shared[k].nodes(min(per, NODES[self.shared[k].kind])) for k in keys]
        values, weights = np.zeros((1, 0)), np.ones(1)
        if keys:
            values = np.array(list(itertools.product(*(x for x, _ in grids))))
            weights = np.prod(np.array(list(itertools.product(*(w for _, w in grids)))), axis=1)
        column = {k: i for i, k in enumerate(keys)}
        slowdowns = []
        for g in self.groups:
            factor = np.ones(len(weights))
            for key, scale in g.shared:
                if key in column:
                    factor = factor * self.shared[key].factor(values[:, column[key]], scale)
            share = g.compute_s / g.mean_s if g.mean_s > 0 else 0.0
            slowdowns.append((1 - share) + share * factor)  # > 0: factor > 0 and share <= 1
        return values, weights, slowdowns

    def _on(self, key: str, only: str | None) -> bool:
        return only is None or self.shared[key].source == only

    def simulate(self, deadline_s: float, draws: int = 2000, seed: int = 0) -> dict | None:
        """Every batch drawn: {'probability', 'quantiles', 'draws'}; None when the plan is too large to draw."""
        size = draws * sum(g.count * (g.batches + 1) for g in self.groups)
        if size > _MAX_SIMULATED:
            return None
        rng = np.random.default_rng(seed)
        shared = {k: f.draw(rng, draws) for k, f in self.shared.items()}
        machine_drift = {}  # a shared normal 'drift' factor: one AR(1) path per draw, shared by its workers
        finish = np.zeros(draws)
        for g in self.groups:
            factor = np.ones(draws)
            own = g.drift
            drift_keys = [k for k, _ in g.shared if k in self.drifts]
            for key, scale in g.shared:
                if key not in self.drifts:  # shared drift is drawn below, as a path
                    factor = factor * self.shared[key].factor(shared[key], scale)
            n = g.batches + 1
            times = _lognormal_draws(rng, g.batch_mean_s, g.batch_sd_s, (draws, g.count, n))
            times[:, :, 0] = _lognormal_draws(rng, g.warmup_s, g.warmup_sd_s, (draws, g.count))
            if drift_keys:
                key = (drift_keys[0], g.batch_mean_s, n)
                if key not in machine_drift:
                    machine_drift[key] = _drift_path(rng, self.drifts[drift_keys[0]], g.batch_mean_s, (draws, 1, n))
                times = times * machine_drift[key]
            if own is not None:
                times = times * _drift_path(rng, own, g.batch_mean_s, (draws, g.count, n))
            compute = times.sum(axis=2) * factor[:, None]
            load = _lognormal_draws(rng, g.load_s, g.load_sd_s, (draws, g.count))
            finish = np.maximum(finish, (load + compute).max(axis=1))
        return {
            "probability": float(np.mean(finish <= deadline_s)),
            "quantiles": {float(q): float(np.quantile(finish, q)) for q in QUANTILES},
            "draws": draws,
        }


@dataclass(frozen=True)
class DeadlineProbability:
    """How surely a plan finishes by its deadline: its Makespan at the deadline, and the probability it was
    planned for (`asked`; None: the fixed rule, margin, p50 or p99). to_dict: the plan JSON's keys."""

    probability: float
    quantiles_s: dict[str, float]  # the makespan's p50, p95 ... in seconds
    spread_by_source_s: dict[str, float]  # what each source of spread adds to the p95 (SOURCES)
    asked: float | None
    simulated_probability: float | None  # the batch-level simulation's check, where it ran
    simulated_draws: int | None
    drifts: dict[str, Drift]  # each type's machine drift, as planned with

    @classmethod
    def of(cls, distribution: Makespan, deadline_s: float, asked: float | None) -> DeadlineProbability:
        check = distribution.simulate(deadline_s) or {}
        return cls(
            distribution.probability(deadline_s),
            {f"p{round(q * 100)}": v for q, v in distribution.quantiles().items()},
            distribution.spread_by_source(),
            asked,
            check.get("probability"),
            check.get("draws"),
            dict(distribution.drifts),
        )

    def to_dict(self) -> dict:
        """The plan JSON's keys about its deadline probability."""
        return {
            "deadline_probability": self.probability,
            "makespan_quantiles_s": dict(self.quantiles_s),
            "spread_by_source_s": dict(self.spread_by_source_s),
            "confidence": {
                "asked": self.asked,
                "rule": "probability" if self.asked is not None else "fixed (margin, p50 or p99)",
            },
            "makespan_model": {
                "method": "lognormal sum per worker, quadrature over the shared factors (planning/makespan.py)",
                "simulated_probability": self.simulated_probability,
                "simulated_draws": self.simulated_draws,
                "drift": {name: drift.to_dict() for name, drift in self.drifts.items()},
            },
        }


LOG_CDF_RANGE = (-37.0, 9.0)  # below, Phi(z) leaves float64; above, it is 1 to within 1e-19
LOG_CDF_STEP = 1e-3  # log Phi has |second derivative| <= 1: linear interpolation is within STEP^2 / 8


@functools.cache
def _log_cdf_table() -> np.ndarray:
    """log Phi on the grid low, low + LOG_CDF_STEP, ..., high, from math.erfc (46,001 values, 20 ms once)."""
    low, high = LOG_CDF_RANGE
    z = np.linspace(low, high, round((high - low) / LOG_CDF_STEP) + 1)
    return np.log([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in z.tolist()])


def log_normal_cdf(z) -> np.ndarray:
    """log Phi(z), the standard normal CDF's logarithm, elementwise: within 2e-7 of math.erfc's over
    LOG_CDF_RANGE (its table, interpolated); below it the tail's asymptotic series (relative error under
    1e-8 there). Not scipy's ndtr: with Pyomo loaded, importing scipy imports scipy.stats too, a second of
    every plan's wall time."""
    shape, z = np.shape(z), np.asarray(z, dtype=float).reshape(-1)
    table = _log_cdf_table()
    low, high = LOG_CDF_RANGE
    at = np.nan_to_num((np.clip(z, low, high) - low) / LOG_CDF_STEP)  # a uniform grid: the index by arithmetic
    i = np.minimum(at.astype(np.int64), len(table) - 2)
    out = table[i] + (at - i) * (table[i + 1] - table[i])  # above the range: table[-1], -1e-19
    out[np.isnan(z)] = np.nan
    tail = z < low
    if tail.any():
        t = z[tail]
        out[tail] = -(t**2) / 2 - np.log(-t * math.sqrt(2 * math.pi)) + np.log1p(-1 / t**2 + 3 / t**4)
    return out.reshape(shape)


def _lognormal(mean: float, variance: float) -> tuple[float, float]:
    if mean <= 0:
        return -math.inf, 0.0
    s2 = math.log1p(variance / mean**2)
    return math.log(mean) - s2 / 2, math.sqrt(s2)


def _lognormal_draws(rng, mean: float, sd: float, shape) -> np.ndarray:
    mu, s = _lognormal(mean, sd * sd)
    if mean <= 0:
        return np.zeros(shape)
    return np.exp(mu + s * rng.standard_normal(shape))


def _drift_path(rng, drift: Drift, step_s: float, shape) -> np.ndarray:
    """The slowdown batch by batch: exp of an AR(1) path with the drift's relative spread (as a lognormal's)
    and its correlation time (0: none from one batch to the next)."""
    if step_s <= 0 or drift.corr_s <= 0:
        phi = 0.0
    else:
        phi = math.exp(-step_s / drift.corr_s) if math.isfinite(drift.corr_s) else 1.0
    noise = rng.standard_normal(shape) * log_sd(drift.rel_sd)
    path = np.empty(shape)
    path[..., 0] = noise[..., 0]
    innovation = math.sqrt(max(1 - phi * phi, 0.0))
    for i in range(1, shape[-1]):
        path[..., i] = phi * path[..., i - 1] + innovation * noise[..., i]
    sigma = log_sd(drift.rel_sd)
    return np.exp(path - sigma * sigma / 2)  # mean 1, as the closed form's drift variance around the mean
