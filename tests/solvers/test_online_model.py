"""The online serving model (solvers/online_batcher.py, online_simulate.py, online_solve.py): the analytic model
against its own simulation on small cases, the simulation's batching rule by hand, and the plan search."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solvers import InfeasibleProblem, ProblemError
from solvers.online_batcher import Batcher, mixed_arrivals, poisson_pmf, poisson_tail, sigma_from
from solvers.online_simulate import poisson_arrivals, simulate_gpu, split_randomly
from solvers.online_solve import OnlineGpuType, OnlineProblem, ServiceTimes, best_setting, fastest, solve_online


def curve(base_s: float, per_image_s: float, largest: int, spread: float = 0.1):
    b = np.arange(1, largest + 1)
    p50 = base_s + per_image_s * b
    return ServiceTimes(p50, p50 * math.exp(2.3263478740408408 * spread), label="test")


def per_request(service: ServiceTimes, bm: int):
    return service.per_request(1, bm)


# ------------------------------------------------------------------------------------------------
# The simulation's rule, by hand


def test_a_free_gpu_sends_at_once_and_a_busy_one_batches_what_waits():
    median, sigma = np.array([0.0, 0.010, 0.010, 0.010]), np.zeros(4)
    sim = simulate_gpu([0.0, 0.001, 0.002, 0.003], 3, 0.0, median, sigma, warmup_share=0.0)
    # t=0: alone (10 ms); at 10 ms the three waiting go together, done at 20 ms.
    assert sim.batch_sizes.tolist() == [1, 3]
    assert np.allclose(sim.latency_s, [0.010, 0.019, 0.018, 0.017])


def test_the_delay_holds_a_batch_until_it_is_full_or_the_oldest_waited_long_enough():
    median, sigma = np.array([0.0, 0.01, 0.01, 0.01]), np.zeros(4)
    held = simulate_gpu([0.0, 0.001], 3, 0.005, median, sigma, warmup_share=0.0)
    assert held.batch_sizes.tolist() == [2] and np.allclose(held.latency_s, [0.015, 0.014])
    full = simulate_gpu([0.0, 0.001, 0.002], 3, 1.0, median, sigma, warmup_share=0.0)
    assert full.batch_sizes.tolist() == [3] and np.allclose(full.latency_s, [0.012, 0.011, 0.010])


def test_the_simulation_is_deterministic_and_keeps_every_request():
    service = curve(0.005, 0.001, 8)
    median, sigma = per_request(service, 8)
    arrivals = poisson_arrivals(500, 5000, seed=3)
    a = simulate_gpu(arrivals, 8, 0.001, median, sigma, seed=4)
    b = simulate_gpu(arrivals, 8, 0.001, median, sigma, seed=4)
    assert np.array_equal(a.latency_s, b.latency_s)
    assert a.batch_sizes.sum() == 5000 and a.batch_sizes.max() <= 8
    assert (a.latency_s > 0).all()


def test_the_balancer_splits_every_request_once():
    arrivals = poisson_arrivals(100, 1000, seed=1)
    parts = split_randomly(arrivals, [1.0, 2.0, 1.0], seed=2)
    assert sum(len(p) for p in parts) == 1000
    assert np.array_equal(np.sort(np.concatenate(parts)), arrivals)
    assert all(np.all(np.diff(p) >= 0) for p in parts)
    assert len(parts[1]) > len(parts[0])


# ------------------------------------------------------------------------------------------------
# The analytic model


def test_poisson_tail_is_close_to_the_exact_one():
    for mean in (0.3, 2.0, 15.0, 80.0):
        pmf = poisson_pmf(mean, 400)
        exact = 1.0 - np.concatenate([[0.0], np.cumsum(pmf)])[:200]
        approx = poisson_tail(np.arange(200), mean)
        assert np.max(np.abs(exact - approx)) < 0.01


def reference_pmf(mean, n):
    """poisson_pmf as it was written before it worked in place: the fast one must give the same bits."""
    mean = np.asarray(mean, dtype=float)[..., None]
    k = np.arange(n)
    log_factorial = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, max(n, 2))))])[:n]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        pmf = np.exp(k * np.log(np.maximum(mean, 1e-300)) - mean - log_factorial)
    return np.where(mean > 0, pmf, (k == 0).astype(float))


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 70),
    points=st.sampled_from([3, 5, 9]),
    n=st.integers(1, 300),
    scale=st.floats(0.01, 3000.0),
    seed=st.integers(0, 2**32 - 1),
    block=st.sampled_from([1, 1000, 2**20]),
)
def test_the_arrivals_are_bit_for_bit_those_of_the_whole_pmf(rows, points, n, scale, seed, block):
    # mixed_arrivals works in row blocks and poisson_pmf in place; plans (JSON) must not move by one bit
    rng = np.random.default_rng(seed)
    means = rng.exponential(scale, (rows, points))
    means[rng.random(means.shape) < 0.05] = 0.0  # an idle service: all mass at k = 0
    weights = rng.dirichlet(np.ones(points))
    whole = reference_pmf(means, n)
    assert poisson_pmf(means, n).tobytes() == whole.tobytes()
    assert mixed_arrivals(means, weights, n, block).tobytes() == np.einsum("mqk,q->mk", whole, weights).tobytes()


def test_poisson_pmf_of_one_mean_and_of_none():
    for mean in (0.0, -1.0, math.nan, 1e-320, 3.5):
        for n in (1, 2, 50):
            assert poisson_pmf(mean, n).tobytes() == reference_pmf(mean, n).tobytes()


@pytest.mark.parametrize(
    "bm, load, delay_share",
    [(1, 0.5, 0.0), (1, 0.85, 0.0), (4, 0.5, 0.0), (4, 0.85, 0.5), (16, 0.3, 0.0), (16, 0.9, 0.0)],
)
def test_the_analytic_model_agrees_with_the_simulation(bm, load, delay_share):
    service = curve(0.004, 0.0005, 16)
    median, sigma = per_request(service, bm)
    rate = load * bm / (median[bm] * math.exp(sigma[bm] ** 2 / 2))
    delay = delay_share * median[1]
    model = Batcher(rate, bm, delay, median, sigma)
    sim = simulate_gpu(poisson_arrivals(rate, 60_000, seed=1), bm, delay, median, sigma, seed=2)
    assert model.quantile(50) == pytest.approx(sim.quantile(50), rel=0.08)
    assert model.quantile(99) == pytest.approx(sim.quantile(99), rel=0.15)


def test_a_gpu_that_cannot_keep_up_has_no_percentile():
    service = curve(0.004, 0.0005, 4)
    median, sigma = per_request(service, 4)
    model = Batcher(1.01 * 4 / (median[4] * math.exp(sigma[4] ** 2 / 2)), 4, 0.0, median, sigma)
    assert not model.stable and model.tail(10.0) == 1.0 and math.isinf(model.quantile(99))


@settings(max_examples=15, deadline=None)
@given(load=st.floats(0.05, 0.95), bm=st.sampled_from([1, 3, 8]), t_share=st.floats(0.5, 6.0))
def test_the_tail_falls_with_time_and_grows_with_the_rate(load, bm, t_share):
    service = curve(0.003, 0.001, 8, spread=0.15)
    median, sigma = per_request(service, bm)
    rate = load * bm / (median[bm] * math.exp(sigma[bm] ** 2 / 2))
    t = t_share * median[bm]
    model = Batcher(rate, bm, 0.0, median, sigma)
    assert 0.0 <= model.tail(t * 1.5) <= model.tail(t) + 1e-9 <= 1.0 + 1e-9
    assert (
        model.tail(t)
        <= Batcher(
            min(rate * 1.05, 0.999 * bm / (median[bm] * math.exp(sigma[bm] ** 2 / 2))), bm, 0.0, median, sigma
        ).tail(t)
        + 1e-6
    )


def test_sigma_from_the_profile_percentiles():
    assert sigma_from(10.0, 10.0) == 0.0
    assert sigma_from(1.0, math.e) == pytest.approx(1 / 2.3263478740408408)


# ------------------------------------------------------------------------------------------------
# The plan


def test_one_type_uses_the_fewest_gpus_that_hold_the_rate():
    gpu = OnlineGpuType("g", None, [curve(0.005, 0.0002, 64, spread=0.05)])
    problem = OnlineProblem([gpu], 20_000, 0.03, 99, simulate=False)
    plan = solve_online(problem)
    setting = best_setting(gpu, problem)
    assert plan.total_gpus == math.ceil(20_000 / setting.capacity_per_s)
    a = plan.assignments[0]
    assert a.analytic_s <= 0.03 and a.rate_per_gpu_s <= a.capacity_per_gpu_s
    assert 0 < a.utilization < 1 and a.max_batch in gpu.options[0].max_batches


def test_the_simulation_checks_the_plan_and_reports_its_percentiles():
    gpu = OnlineGpuType("g", None, [curve(0.005, 0.0002, 32, spread=0.05)])
    plan = solve_online(OnlineProblem([gpu], 3000, 0.04, 99))
    a = plan.assignments[0]
    assert a.simulated and a.predicted_s <= 0.04
    assert a.predicted_p50_s < a.predicted_p99_s and a.mean_batch >= 1
    assert a.predicted_s == pytest.approx(a.analytic_s, rel=0.15)


def test_the_faster_type_goes_first_and_the_rest_is_covered():
    fast = OnlineGpuType("fast", 2, [curve(0.002, 0.0001, 32)])
    slow = OnlineGpuType("slow", None, [curve(0.004, 0.0004, 32)])
    problem = OnlineProblem([slow, fast], 30_000, 0.05, 99, simulate=False)
    plan = solve_online(problem)
    assert plan.gpus_by_type["fast"] == 2
    caps = {t.name: best_setting(t, problem).capacity_per_s for t in (fast, slow)}
    assert plan.gpus_by_type["slow"] == math.ceil((30_000 - 2 * caps["fast"]) / caps["slow"])
    assert plan.capacity_per_s >= 30_000


def test_cost_picks_the_cheaper_capacity():
    fast = OnlineGpuType("fast", None, [curve(0.002, 0.0001, 32)], cost_per_hour=10.0)
    slow = OnlineGpuType("slow", None, [curve(0.004, 0.0004, 32)], cost_per_hour=1.0)
    plan = solve_online(OnlineProblem([fast, slow], 10_000, 0.05, 99, objective="cost", simulate=False))
    assert set(plan.gpus_by_type) == {"slow"} and plan.cost == plan.gpus_by_type["slow"] * 1.0


def test_an_slo_below_one_request_alone_is_unservable():
    service = curve(0.010, 0.001, 8)
    gpu = OnlineGpuType("g", None, [service])
    problem = OnlineProblem([gpu], 100, 0.005, 99)
    with pytest.raises(InfeasibleProblem) as caught:
        solve_online(problem)
    d = caught.value.diagnosis
    assert d.unservable == ("g",) and "even with a request alone" in d.reason
    assert d.min_slo_s == pytest.approx(fastest(service, problem), rel=1e-3)


def test_a_pool_too_small_says_how_many_more_and_how_much_it_holds():
    gpu = OnlineGpuType("g", 2, [curve(0.005, 0.0002, 32, spread=0.05)])
    problem = OnlineProblem([gpu], 20_000, 0.03, 99)
    with pytest.raises(InfeasibleProblem) as caught:
        solve_online(problem)
    d = caught.value.diagnosis
    capacity = best_setting(gpu, problem).capacity_per_s
    assert d.max_rate_per_s == pytest.approx(2 * capacity)
    assert d.extra_gpus["g"] == math.ceil(20_000 / capacity) - 2
    assert d.min_slo_s is None or d.min_slo_s > 0.03


def test_a_trace_sets_the_rate_or_is_stretched_to_it():
    trace = np.cumsum(np.full(1001, 0.01))  # 100/s
    gpu = OnlineGpuType("g", None, [curve(0.002, 0.0002, 8)])
    own = OnlineProblem([gpu], None, 0.05, 99, arrivals_s=trace)
    assert own.rate_per_s == pytest.approx(100.0)
    scaled = OnlineProblem([gpu], 400.0, 0.05, 99, arrivals_s=trace)
    assert (len(scaled.trace) - 1) / scaled.trace[-1] == pytest.approx(400.0)
    plan = solve_online(scaled)
    assert plan.arrivals == "trace" and plan.assignments[0].simulated


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"slo_s": 0.0}, "SLO"),
        ({"percentile": 100}, "percentile"),
        ({"request_size": 0}, "request size"),
        ({"rate_per_s": -1.0}, "rate"),
        ({"objective": "speed"}, "objective"),
        ({"rate_per_s": None}, "rate"),
    ],
)
def test_a_malformed_problem_says_what_is_wrong(changes, message):
    base = dict(gpu_types=[OnlineGpuType("g", None, [curve(0.002, 0.0002, 8)])], rate_per_s=100.0, slo_s=0.05)
    with pytest.raises(ProblemError, match=message):
        OnlineProblem(**{**base, **changes})


def test_time_outside_the_server_adds_to_every_latency_and_takes_no_server_time():
    """A network round trip o: the plan is the one of the server alone at the SLO less o, o later."""
    server = curve(0.004, 0.0004, 32, spread=0.1)
    with_trip = ServiceTimes(server.p50_s, server.p99_s, "test", overhead_s=0.003)
    alone = solve_online(OnlineProblem([OnlineGpuType("g", 1, [server])], 1500, 0.047, 99, simulate=False))
    trip = solve_online(OnlineProblem([OnlineGpuType("g", 1, [with_trip])], 1500, 0.050, 99, simulate=False))
    a, b = alone.assignments[0], trip.assignments[0]
    assert (b.max_batch, b.max_queue_delay_s) == (a.max_batch, a.max_queue_delay_s)
    assert b.capacity_per_gpu_s == pytest.approx(a.capacity_per_gpu_s, rel=1e-6)
    assert b.predicted_p99_s == pytest.approx(a.predicted_p99_s + 0.003, rel=1e-6)
    assert b.predicted_p50_s == pytest.approx(a.predicted_p50_s + 0.003, rel=1e-6)
    problem = OnlineProblem([OnlineGpuType("g", 1, [with_trip])], 1500, 0.050, 99)
    assert fastest(with_trip, problem) == pytest.approx(fastest(server, problem) + 0.003)
    simulated = solve_online(problem).assignments[0]  # the simulation's percentiles carry it too
    assert simulated.simulated and simulated.predicted_p50_s > 0.003 + server.p50_s[0]
    with pytest.raises(ProblemError, match="overhead_s"):
        ServiceTimes(server.p50_s, server.p99_s, overhead_s=-0.001)


def test_service_times_are_checked():
    with pytest.raises(ProblemError, match="same length"):
        ServiceTimes([0.01, 0.02], [0.02])
    with pytest.raises(ProblemError, match="below its p50"):
        ServiceTimes([0.01, 0.02], [0.02, 0.01])
    with pytest.raises(ProblemError, match="max_batches"):
        ServiceTimes([0.01, 0.02], [0.02, 0.03], max_batches=[4])
    assert ServiceTimes(np.full(6, 0.01), np.full(6, 0.01)).max_batches == (1, 2, 4, 6)


def test_given_delays_are_the_only_ones_and_the_simulation_has_the_last_word():
    gpu = OnlineGpuType("g", None, [curve(0.005, 0.0002, 32, spread=0.05)])
    plan = solve_online(OnlineProblem([gpu], 2000, 0.06, 99, delays_s=[0.03]))
    a = plan.assignments[0]
    assert a.max_queue_delay_s == 0.03
    # The analytic model sends leftovers at once; Triton (and the simulation) hold them up to the delay:
    # whatever the model says, the plan's GPUs meet the SLO in the simulation.
    assert a.simulated and a.predicted_s <= 0.06
    no_check = solve_online(OnlineProblem([gpu], 2000, 0.06, 99, delays_s=[0.03], simulate=False))
    assert plan.total_gpus >= no_check.total_gpus
    assert (plan.status == "optimal") == (plan.total_gpus == no_check.total_gpus)


# ------------------------------------------------------------------------------------------------
# The safety margin


def slowed_by(service: ServiceTimes, margin: float) -> ServiceTimes:
    """Every batch's server time x (1 + margin); the round trip as it is."""
    return ServiceTimes(
        service.p50_s * (1 + margin),
        service.p99_s * (1 + margin),
        service.label,
        service.max_batches,
        service.overhead_s,
    )


def margin_pool(margin: float = 0.0) -> list[OnlineGpuType]:
    fast, slow = curve(0.002, 0.0001, 32), curve(0.004, 0.0004, 32, spread=0.05)
    fast = ServiceTimes(fast.p50_s, fast.p99_s, "test", overhead_s=0.002)  # a round trip, which the margin leaves alone
    return [OnlineGpuType("fast", 2, [slowed_by(fast, margin)]), OnlineGpuType("slow", None, [slowed_by(slow, margin)])]


@pytest.mark.parametrize("simulate", [False, True])
def test_a_margin_plans_the_service_slowed_by_it(simulate):
    """Counts, settings and capacities are those of every batch 1 + margin times slower (the round trip
    not); the latencies reported are those at the profiled speed, the slowed one beside them."""
    m = 0.2
    kw = dict(rate_per_s=12_000, slo_s=0.03, percentile=99, simulate=simulate)
    plan = solve_online(OnlineProblem(margin_pool(), **kw, margin=m))
    slow = solve_online(OnlineProblem(margin_pool(m), **kw))
    nominal = solve_online(OnlineProblem(margin_pool(), **kw))
    assert plan.margin == m and plan.to_dict()["margin"] == m and slow.margin == 0
    assert plan.gpus_by_type == slow.gpus_by_type and plan.total_gpus > nominal.total_gpus
    assert plan.capacity_per_s == pytest.approx(slow.capacity_per_s, rel=1e-12) and plan.status == slow.status
    for a, b in zip(plan.assignments, slow.assignments, strict=True):
        assert (a.hardware, a.count, a.max_batch, a.max_queue_delay_s) == (
            b.hardware,
            b.count,
            b.max_batch,
            b.max_queue_delay_s,
        )
        assert a.capacity_per_gpu_s == pytest.approx(b.capacity_per_gpu_s, rel=1e-12)
        assert a.rate_per_gpu_s == pytest.approx(b.rate_per_gpu_s, rel=1e-12)
        assert a.slowed_s == pytest.approx(b.predicted_s, rel=1e-9)  # the slowed plan's own prediction
        assert a.peak_per_gpu_s == pytest.approx(b.peak_per_gpu_s * (1 + m), rel=1e-9)  # the profiled speed
        assert a.utilization == pytest.approx(b.utilization / (1 + m), rel=1e-9)
        assert a.predicted_s < a.slowed_s <= 0.03 and a.predicted_p99_s < b.predicted_p99_s
        assert a.predicted_p50_s < b.predicted_p50_s
        assert a.to_dict()["slowed_ms_at_percentile"] == pytest.approx(a.slowed_s * 1000)


def test_a_margins_predictions_are_the_profiled_services_at_those_settings():
    m = 0.15
    problem = OnlineProblem(margin_pool(), 12_000, 0.03, 99, simulate=False, margin=m)
    plan = solve_online(problem)
    for a in plan.assignments:
        gpu = next(t for t in problem.gpu_types if t.name == a.hardware)
        option = gpu.options[0]
        requests = a.max_batch  # one image per request
        model = Batcher(a.rate_per_gpu_s, requests, a.max_queue_delay_s, *option.per_request(1, requests))
        assert a.predicted_s == pytest.approx(model.quantile(99, 1e-3) + option.overhead_s, rel=1e-9)
        assert a.analytic_s == a.predicted_s and a.predicted_p50_s == pytest.approx(
            model.quantile(50, 1e-3) + option.overhead_s
        )
        slowed = slowed_by(option, m)
        model = Batcher(a.rate_per_gpu_s, requests, a.max_queue_delay_s, *slowed.per_request(1, requests))
        assert a.slowed_s == pytest.approx(model.quantile(99, 1e-3) + option.overhead_s, rel=1e-9)
        assert a.predicted_s < a.slowed_s <= 0.03


def test_no_margin_changes_nothing():
    problem = OnlineProblem(margin_pool(), 12_000, 0.03, 99)
    assert problem.margin == 0 and problem.slowed() is problem
    plan = solve_online(problem)
    same = solve_online(OnlineProblem(margin_pool(), 12_000, 0.03, 99, margin=0.0))
    assert plan.margin == 0 and plan.gpus_by_type == same.gpus_by_type
    for a, b in zip(plan.assignments, same.assignments, strict=True):
        assert a.slowed_s == a.predicted_s == b.predicted_s and a.capacity_per_gpu_s == b.capacity_per_gpu_s


def test_a_margin_on_a_trace_replays_the_very_arrivals():
    trace = np.cumsum(np.random.default_rng(0).exponential(1 / 2000, 20_000))
    plan = solve_online(OnlineProblem(margin_pool(), None, 0.03, 99, arrivals_s=trace, margin=0.2))
    slow = solve_online(OnlineProblem(margin_pool(0.2), None, 0.03, 99, arrivals_s=trace))
    assert plan.arrivals == "trace" and plan.gpus_by_type == slow.gpus_by_type
    for a, b in zip(plan.assignments, slow.assignments, strict=True):
        assert a.slowed_s == pytest.approx(b.predicted_s, rel=1e-9) and a.predicted_s <= a.slowed_s


@pytest.mark.parametrize("margin", [-0.1, 10, 12.5, math.nan, math.inf, True, "0.1", None])
def test_a_bad_margin_is_refused(margin):
    with pytest.raises(ProblemError, match="margin"):
        OnlineProblem(margin_pool(), 100, 0.03, 99, margin=margin)


def test_an_infeasible_plan_with_a_margin_says_so_and_its_figures_hold_with_it():
    def diagnosis(margin):
        with pytest.raises(InfeasibleProblem) as caught:
            solve_online(
                OnlineProblem(
                    [OnlineGpuType("g", 2, [curve(0.005, 0.0002, 32, spread=0.05)])], 20_000, 0.03, 99, margin=margin
                )
            )
        return caught.value.diagnosis

    plain, slowed = diagnosis(0.0), diagnosis(0.1)
    assert "margin" not in plain.reason and "with the 10% margin" in slowed.reason
    assert slowed.margin == 0.1 and slowed.to_dict()["margin"] == 0.1 and plain.margin == 0
    assert slowed.max_rate_per_s < plain.max_rate_per_s and slowed.extra_gpus["g"] >= plain.extra_gpus["g"]
    service = curve(0.010, 0.001, 8)
    with pytest.raises(InfeasibleProblem) as caught:  # a request alone already misses the SLO with the margin
        solve_online(OnlineProblem([OnlineGpuType("g", None, [service])], 100, 0.0111, 99, margin=0.1))
    d = caught.value.diagnosis
    assert "even with a request alone" in d.reason and "with the 10% margin" in d.reason
    problem = OnlineProblem([OnlineGpuType("g", None, [slowed_by(service, 0.1)])], 100, 0.0111, 99)
    assert d.min_slo_s == pytest.approx(fastest(slowed_by(service, 0.1), problem), rel=1e-3)


@settings(max_examples=8, deadline=None)
@given(margin=st.floats(0.0, 0.6), rate=st.floats(500, 30_000), slo=st.floats(0.012, 0.08))
def test_any_margin_plans_as_the_slowed_service(margin, rate, slo):
    kw = dict(rate_per_s=rate, slo_s=slo, percentile=99, simulate=False)
    try:
        slow = solve_online(OnlineProblem(margin_pool(margin), **kw))
    except InfeasibleProblem as exc:
        with pytest.raises(InfeasibleProblem) as caught:
            solve_online(OnlineProblem(margin_pool(), **kw, margin=margin))
        assert caught.value.diagnosis.max_rate_per_s == pytest.approx(exc.diagnosis.max_rate_per_s, rel=1e-9)
        return
    plan = solve_online(OnlineProblem(margin_pool(), **kw, margin=margin))
    assert plan.gpus_by_type == slow.gpus_by_type
    for a, b in zip(plan.assignments, slow.assignments, strict=True):
        assert (a.max_batch, a.max_queue_delay_s) == (b.max_batch, b.max_queue_delay_s)
        assert a.predicted_s <= a.slowed_s * (1 + 1e-9) and a.slowed_s == pytest.approx(b.predicted_s, rel=1e-9)
