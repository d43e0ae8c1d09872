"""One GPU behind Triton's dynamic batcher, in numbers: how long requests take, analytically.

The model (docs/design.md section 5, online serving): requests arrive as a Poisson process at `rate`
(requests/s); the batcher sends a batch when the GPU is free and either `max_batch` requests wait or
the oldest has waited `delay` seconds; a batch of m requests keeps the GPU busy for a lognormal time
with median `median[m]` and log-spread `sigma[m]` (from the profile's p50 and p99). A request's
latency is its wait for a batch (queueing + batching delay) plus its batch's service time.

How the percentile is computed: the number of requests waiting when a batch ends is a Markov chain
(the next batch takes min(queue, max_batch); arrivals during its service are Poisson with the
service's mean, mixed over the lognormal). It is solved exactly on its first max_batch + 16 states,
with a geometric tail beyond (the decay of the full-batch random walk, the root z > 1 of
z**max_batch = E[exp(rate * S * (z - 1))]). A request arriving during a batch's service, with X
requests left behind and N(u) arrivals before it, joins the batch J = (X + N(u)) // max_batch places
after the next one: its latency is the rest of the current service, J full batches, and its own
batch's service. Averaging over the chain, the moment of arrival (time-weighted) and the service's
spread gives P(latency > t); the percentile is where that crosses 1 - percentile/100 (bracket_root).

Approximations (measured against the simulation in simulate.py, docs/online.md): after a
batch ends, waiting requests are sent at once (Triton would hold them until the oldest has waited
`delay`; that rarely matters when the delay is at most one request's service time, the planner's
automatic candidates); full batches ahead take their mean time; the own batch's size ignores its
correlation with J; for large max_batch, neighbouring states are grouped.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np


def _hermite(points: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes and weights for E[f(Z)], Z standard normal: the lognormal service's spread."""
    x, w = np.polynomial.hermite_e.hermegauss(points)
    return x, w / w.sum()


_SPREAD_X, _SPREAD_W = _hermite(5)  # the decay of the queue's tail
_QUADRATURE = {3: _hermite(3), 5: _hermite(5), 9: _hermite(9)}
_HERMITE_X, _HERMITE_W = _hermite(9)  # the own batch's size, for large means
_U = (np.arange(8) + 0.5) / 8  # where in the current service a request arrives (time fraction)
Z99 = 2.3263478740408408  # the standard normal's 99th percentile
_NEGLIGIBLE = 1e-9  # the least likely chain states, together this likely, are left out of the latency sums
_ROWS = 48  # at most this many states per max_batch in the latency sums (neighbours grouped beyond)
_MAX_ROWS = 1024  # and at most this many in all, however long the queue's tail (an SLO of hours)


_BLAS = []  # threadpoolctl's controller, made on first use


def one_blas_thread():
    """The chain's small linear systems run ten times slower when a 2-thread BLAS shares busy cores: use
    one thread for them. (threadpoolctl comes with scikit-learn; without it, nothing changes.)"""
    if not _BLAS:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _BLAS.append(None)
        else:
            _BLAS.append(ThreadpoolController())
    return contextlib.nullcontext() if _BLAS[0] is None else _BLAS[0].limit(limits=1, user_api="blas")


def _nodes(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """Points enough for a service spread sigma: 3 up to 0.25 (GPU-like), 5 up to 0.5, then 9."""
    return _QUADRATURE[3 if sigma <= 0.25 else 5 if sigma <= 0.5 else 9]


def normal_cdf(x):
    """Phi(x), vectorised (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7): numpy has no erf."""
    x = np.asarray(x, dtype=float)
    z = np.abs(x) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t
    return 0.5 * (1.0 + np.sign(x) * (1.0 - poly * np.exp(-z * z)))


def sigma_from(p50, p99):
    """Log-spread of a lognormal with this median and 99th percentile (0 when they are equal)."""
    p50, p99 = np.asarray(p50, dtype=float), np.asarray(p99, dtype=float)
    return np.log(np.maximum(p99, p50) / p50) / Z99


def service_tail(median, sigma, x):
    """P(service > x) for a lognormal service time (sigma 0: a fixed time)."""
    x = np.asarray(x, dtype=float)
    median, sigma = np.asarray(median, dtype=float), np.asarray(sigma, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.log(np.maximum(x, 1e-300)) - np.log(median)) / np.maximum(sigma, 1e-9)
    return np.where(x <= 0, 1.0, 1.0 - normal_cdf(z))


def poisson_tail(k, mean):
    """P(N >= k) for N ~ Poisson(mean): P(Gamma(k, 1) <= mean), by Wilson and Hilferty's cube root."""
    k, mean = np.asarray(k, dtype=float), np.asarray(mean, dtype=float)
    kk = np.maximum(k, 1.0)
    z = (np.cbrt(np.maximum(mean, 0.0) / kk) - 1.0 + 1.0 / (9.0 * kk)) * 3.0 * np.sqrt(kk)
    return np.where(k <= 0, 1.0, np.where(mean <= 0, 0.0, normal_cdf(z)))


def poisson_pmf(mean, n: int) -> np.ndarray:
    """[..., k] = P(N = k) for k < n, N ~ Poisson(mean) (mean an array)."""
    mean = np.asarray(mean, dtype=float)[..., None]
    k = np.arange(n, dtype=float)
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, max(n, 2))))])[:n]
    with np.errstate(divide="ignore", over="ignore"):  # in place: one array, not five (millions of entries)
        pmf = np.multiply(k, np.log(np.maximum(mean, 1e-300)))
        pmf -= mean
        pmf -= log_factorial
        np.exp(pmf, out=pmf)
    idle = np.broadcast_to(~(mean > 0), pmf.shape[:-1] + (1,))[..., 0]  # NaN too, as np.where had it
    if idle.any():
        pmf[idle] = k == 0
    return pmf


def mixed_arrivals(means: np.ndarray, weights: np.ndarray, n: int, block: int = 2**20) -> np.ndarray:
    """[m, k] = sum over q of weights[q] x P(N = k), k < n, N ~ Poisson(means[m, q]): the arrivals during a
    service spread over quadrature points, each row as poisson_pmf's. In row blocks of about `block` pmf
    entries: max_batch 1024 (the shipped H100 profile) has 1024 x 3 x 1040 of them, and one array of them
    all, made and read again op by op, took most of a plan's time."""
    out = np.empty((len(means), n))
    step = max(1, block // (n * means.shape[1]))
    for start in range(0, len(means), step):
        rows = slice(start, start + step)
        out[rows] = np.einsum("mqk,q->mk", poisson_pmf(means[rows], n), weights)
    return out


class Batcher:
    """The analytic model of one GPU at one request rate. `median` and `sigma` are indexed by the
    batch size in requests (index 0 unused): median[m] is the median service of m requests, seconds.

        b = Batcher(rate=400.0, max_batch=8, delay=0.0, median=..., sigma=...)
        b.tail(0.1)        # P(latency > 100 ms)
        b.quantile(99)     # the 99th percentile latency, seconds (inf when the GPU cannot keep up)
    """

    def __init__(self, rate: float, max_batch: int, delay: float, median, sigma):
        self.rate, self.max_batch, self.delay = float(rate), int(max_batch), float(delay)
        self.median = np.asarray(median, dtype=float)[: self.max_batch + 1]
        self.sigma = np.asarray(sigma, dtype=float)[: self.max_batch + 1]
        self.mean = self.median * np.exp(self.sigma**2 / 2)
        self.peak_rate = self.max_batch / self.mean[self.max_batch]  # requests/s with every batch full
        self._x, self._w = _nodes(float(self.sigma[1:].max()))
        self.stable = 0 < self.rate < self.peak_rate
        if self.stable:
            self._solve_chain()

    # -- the queue when a batch ends ------------------------------------------------------------

    def _solve_chain(self) -> None:
        lam, bm = self.rate, self.max_batch
        self.ratio = _tail_ratio(lam, bm, self.median[bm], self.sigma[bm])
        n = bm + 16  # states solved exactly; a geometric tail beyond (2 * bm + 16 gives the same to 0.2%)
        m = np.arange(1, bm + 1)
        services = self.median[m][:, None] * np.exp(self.sigma[m][:, None] * self._x)
        arrivals = mixed_arrivals(lam * services, self._w, n)  # [m - 1, k]: k arrive during m's service
        # After an idle spell the first request opens a window of `delay` (cut short at a full batch).
        self.window = min(self.delay, (bm - 1) / lam) if self.delay > 0 else 0.0
        opened = poisson_pmf(lam * self.window, bm)
        opened[-1] += max(0.0, 1.0 - opened.sum())
        self.opened = opened  # P(the batch after an idle spell has m = 1..bm requests)
        full = arrivals[bm - 1]
        P = np.zeros((n, n))
        P[0] = opened @ arrivals
        P[1:bm] = arrivals[: bm - 1][: n - 1]
        rows = np.arange(bm, n)[:, None]
        shift = np.arange(n)[None, :] - (rows - bm)  # leftovers rows - bm stay, arrivals come on top
        P[bm:] = np.where(shift >= 0, full[np.clip(shift, 0, n - 1)], 0.0)
        A = P.T - np.eye(n)
        r = self.ratio
        if r > 0:  # inflow from the tail states n-1+k (k >= 1), each pi[n-1] * r**k
            weights = np.zeros(n)
            offsets = np.arange(n - bm, n)
            weights[offsets] = r ** (offsets - (n - 1 - bm))
            A[:, n - 1] += np.convolve(weights, full)[:n]
        A[-1] = 1.0
        A[-1, -1] += r / (1 - r)
        b = np.zeros(n)
        b[-1] = 1.0
        with one_blas_thread():
            self.pi = np.maximum(np.linalg.solve(A, b), 0.0)
        self.n = n

    def _states(self, count: int) -> tuple[np.ndarray, float]:
        """pi[0 .. count-1], with the geometric tail where past the exact part, and the mass beyond."""
        r, n = self.ratio, self.n
        if count <= n:
            return self.pi[:count], float(self.pi[count:].sum() + self.pi[-1] * r / (1 - r))
        more = self.pi[-1] * r ** np.arange(1, count - n + 1)
        return np.concatenate([self.pi, more]), float(self.pi[-1] * r ** (count - n + 1) / (1 - r))

    def _negligible_beyond(self) -> int:
        """The states past which the queue's geometric tail holds less than 1e-18 of the time: summing
        further changes no percentile, and an SLO of thousands of batch times (hours) would otherwise
        ask for an array of bm x SLO / batch time states (159 GiB for 8,760 h)."""
        r = self.ratio
        return self.n if r <= 0 else self.n + int(math.ceil(math.log(1e-18) / math.log(r)))

    # -- latency --------------------------------------------------------------------------------

    def tail(self, t: float) -> float:
        """P(a request takes longer than t seconds)."""
        if not self.stable:
            return 1.0
        lam, bm, med, sig = self.rate, self.max_batch, self.median, self.sigma
        full_mean = self.mean[bm]
        jmax = int(t // full_mean) + 1  # this many full batches ahead already take longer than t
        pi, beyond = self._states(min(bm * (jmax + 1) + 1, self._negligible_beyond()))
        # Services in progress: a partial batch of m < bm (nothing left behind), or a full one with X left.
        partial = np.zeros(bm + 1)
        partial[1:bm] = pi[1:bm]
        partial[1:] += pi[0] * self.opened
        leftover = pi[bm:].copy()
        leftover[0] += partial[bm]
        partial[bm] = 0.0
        late = time = 0.0
        width = -(-bm // _ROWS)  # large batches: neighbouring states in groups, each at its mean
        m, mass = _grouped(_kept(partial), partial, width)
        if len(m):
            e, w = self._in_service(t, m, np.zeros(len(m), dtype=np.int64), jmax)
            late += np.sum(mass * e)
            time += np.sum(mass * w)
        x = _kept(leftover)  # a long SLO near saturation keeps many multiples of bm: coarser groups there
        span = int(x[-1] - x[0]) + 1 if len(x) else 0
        x, mass = _grouped(x, leftover, max(width, -(-span // _MAX_ROWS)))
        if len(x):
            e, w = self._in_service(t, np.full(len(x), bm), x, jmax)
            late += np.sum(mass * e)
            time += np.sum(mass * w)
        late += beyond * full_mean  # so many requests ahead that every arrival is late
        time += beyond * full_mean
        # Idle spells: the request that ends one waits the window; those arriving in it, the rest of it.
        idle, window = pi[0] / lam, pi[0] * self.window
        sizes = np.arange(1, bm + 1)
        late += idle * np.sum(self.opened * service_tail(med[sizes], sig[sizes], t - self.window))
        if self.window > 0:
            rest = t - self.window * (1 - _U)
            late += window * np.mean(
                self.opened[:, None] * service_tail(med[sizes][:, None], sig[sizes][:, None], rest)
            )
        time += idle + window
        return float(min(1.0, max(0.0, late / time)))

    def _in_service(self, t: float, m: np.ndarray, left: np.ndarray, jmax: int):
        """Arrivals during services of m[r] requests with left[r] requests left behind (one row r each).
        Returns per row the time-weighted share of late arrivals and the mean service time (the weights' total)."""
        lam, bm, med, sig = self.rate, self.max_batch, self.median, self.sigma
        service = med[m][:, None] * np.exp(sig[m][:, None] * self._x)  # [r, q]
        rest = service[..., None] * (1 - _U)  # [r, q, u]: what is left of the current service
        before = lam * service[..., None] * _U  # [r, q, u]: mean arrivals before the request
        # J, the full batches between the current one and the request's own, is at least left // bm,
        # and at most that plus what arrives during a service can fill (P(more) < 1e-12): count it from
        # there, row by row, rather than from 0 to an SLO of many batch times (near saturation that
        # was hundreds of rows x dozens of j). Past jmax full batches the request is late anyway.
        most = lam * float(service.max())
        count = min(jmax + 2, int(math.ceil((most + 12 * math.sqrt(most) + 12) / bm)) + 3)
        jj = (left // bm)[:, None] + np.arange(count)  # [r, k]
        # P(J >= jj): [r, q, u, k]
        ahead = poisson_tail(jj[:, None, None, :] * bm - left[:, None, None, None], before[..., None])
        exactly = ahead[..., :-1] - ahead[..., 1:]
        # J >= 1: that many full batches (their mean time each), then a full own batch.
        jk = jj[:, None, None, :-1]
        later = service_tail(med[bm], sig[bm], t - rest[..., None] - jk * self.mean[bm])
        # J = 0: the own batch is everyone waiting when the current service ends: left + 1 + k,
        # k ~ Poisson(rate x service) more (its correlation with J = 0 is ignored).
        k, weights = _poisson_points(lam * service, bm)  # [r, q, K]
        own = np.minimum(bm, left[:, None, None] + 1 + k)
        first = np.empty(rest.shape)
        full = np.all(own >= bm, axis=(1, 2))  # the own batch is full whatever arrives
        first[full] = service_tail(med[bm], sig[bm], t - rest[full])
        some = ~full
        o = own[some][:, :, None, :]  # [r', q, 1, K]
        first[some] = np.sum(weights[some][:, :, None, :] * service_tail(med[o], sig[o], t - rest[some][..., None]), -1)
        late = np.sum(exactly * np.where(jk == 0, first[..., None], later), -1) + ahead[..., -1]  # [r, q, u]
        weight = self._w * service  # time-weighted: a request lands in a long service more often
        return np.sum(weight * late.mean(-1), -1), np.sum(weight, -1)

    def quantile(self, percentile: float, tolerance: float = 1e-4) -> float:
        """The latency (seconds) that `percentile` percent of requests meet; inf when the GPU cannot keep up."""
        if not self.stable:
            return math.inf
        target = 1.0 - percentile / 100.0

        def excess(t: float) -> float:  # > 0 while more than the target share takes longer than t
            return math.log(max(self.tail(t), 1e-300)) - math.log(target)

        lo, hi = 0.0, 3.0 * self.mean[self.max_batch] + self.delay
        g_lo, g_hi = -math.log(target), excess(hi)
        while g_hi > 0:
            lo, g_lo, hi = hi, g_hi, hi * 2
            if hi > 1e7:
                return math.inf
            g_hi = excess(hi)
        return bracket_root(excess, lo, g_lo, hi, g_hi, tolerance)[1]


def bracket_root(f, a: float, fa: float, b: float, fb: float, tolerance: float) -> tuple[float, float]:
    """Narrow [a, b], where f (monotone, smooth) changes sign, to a relative width `tolerance` by regula
    falsi with the Illinois modification (a handful of f's, not bisection's dozen); the ends keep
    their signs, so a is always on f(a)'s side and b on f(b)'s."""
    side = 0
    while abs(b - a) > tolerance * max(abs(a), abs(b)):
        x = b - fb * (b - a) / (fb - fa) if fb != fa else (a + b) / 2
        x = min(max(x, a + 0.02 * (b - a)), b - 0.02 * (b - a))  # never a step too small to matter
        fx = f(x)
        if (fx > 0) == (fa > 0):
            a, fa = x, fx
            if side < 0:
                fb /= 2
            side = -1
        else:
            b, fb = x, fx
            if side > 0:
                fa /= 2
            side = 1
    return a, b


def _kept(mass: np.ndarray) -> np.ndarray:
    """The states worth summing over: all but the least likely ones that together hold < _NEGLIGIBLE."""
    order = np.argsort(mass)
    dropped = np.searchsorted(np.cumsum(mass[order]), _NEGLIGIBLE)
    return np.sort(order[dropped:][mass[order[dropped:]] > 0])


def _grouped(states: np.ndarray, mass: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """`states` (with their `mass`) in groups of `width` neighbours: each group's mean state and total mass."""
    if width <= 1 or not len(states):
        return states, mass[states]
    _, index = np.unique(states // width, return_inverse=True)
    total = np.bincount(index, weights=mass[states])
    mean = np.bincount(index, weights=mass[states] * states) / total
    return np.rint(mean).astype(np.int64), total


def _poisson_points(mean: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Support points and weights [..., K] that stand for Poisson(mean) (mean an array) in a sum over it:
    the exact pmf up to a bound where every mean is small (the rest at the bound), else a 9-point
    Gauss-Hermite rule on the normal approximation (a Poisson of mean >= 20 is nearly normal)."""
    top = float(mean.max())
    if top <= 20:
        count = int(min(cap, math.ceil(top + 8 * math.sqrt(top) + 8)))
        weights = poisson_pmf(mean, count)
        weights[..., -1] += np.maximum(0.0, 1.0 - weights.sum(-1))  # `count - 1` or more: the largest batch anyway
        return np.broadcast_to(np.arange(count), weights.shape), weights
    k = np.maximum(0.0, np.rint(mean[..., None] + np.sqrt(mean[..., None]) * _HERMITE_X))
    return k.astype(np.int64), np.broadcast_to(_HERMITE_W, k.shape)


def _tail_ratio(rate: float, max_batch: int, median: float, sigma: float) -> float:
    """1/z for the root z > 1 of z**max_batch = E[exp(rate * S * (z - 1))], S the full batch's service:
    how fast the queue's tail decays per request once batches are full (0: it never overflows).

    f(z) = max_batch * ln z - ln E[...] is concave with f(1) = 0 and f'(1) > 0 when the GPU keeps up,
    so Newton's method started right of the root converges to it from the right."""
    terms = [(float(w), rate * median * math.exp(sigma * x)) for w, x in zip(_SPREAD_W, _SPREAD_X)]

    def f_and_slope(z: float) -> tuple[float, float]:
        e = [w * math.exp(min(a * (z - 1), 700.0)) for w, a in terms]
        total = sum(e)
        return max_batch * math.log(z) - math.log(total), max_batch / z - sum(
            a * x for (_, a), x in zip(terms, e)
        ) / total

    z = 2.0
    while f_and_slope(z)[0] > 0:
        z *= 2
        if z > 1e15:
            return 0.0
    for _ in range(100):
        value, slope = f_and_slope(z)
        step = value / slope
        if not (slope < 0 and math.isfinite(step)):
            break
        z = max(1.0 + (z - 1.0) / 2, z - step)  # stay right of 1
        if abs(step) <= 1e-12 * z:
            break
    return 1.0 / z
