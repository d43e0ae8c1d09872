"""The profiler's parts without a model: the stability rule, the batch search, the parsers."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import warnings
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.errors import InputError
from perfmodel.files import atomic_write_text
from perfmodel.profile.grid import parse_batch_sizes, parse_input_sizes
from perfmodel.profile.provenance import hardware_key
from perfmodel.profile.search import search_batch_sizes, search_points_bound
from perfmodel.profile.timing import (
    LatencySummary,
    StabilityRule,
    measure_latency,
    median_ci_ranks,
    median_ci_rel,
    pool_processes,
)


class FakeClock:
    """A clock in nanoseconds that each call advances by the next of `durations_ms` (cycled)."""

    def __init__(self, durations_ms):
        self.durations = durations_ms
        self.now = 0
        self.calls = 0

    def tick(self) -> int:
        return self.now

    def call(self, i: int) -> None:
        self.now += int(self.durations[self.calls % len(self.durations)] * 1e6)
        self.calls += 1


def test_constant_calls_stop_at_min_samples():
    clock = FakeClock([2.0])
    rule = StabilityRule(min_samples=20, warmup_calls=3)
    summary = measure_latency(clock.call, rule, clock.tick)
    assert summary.samples == 20 and summary.stable
    assert summary.median_ms == pytest.approx(2.0) and summary.p99_ms == pytest.approx(2.0)
    assert clock.calls == 23  # the warm-up calls are not sampled


def test_noisy_calls_hit_the_caps_and_say_unstable():
    rng = np.random.default_rng(0)
    clock = FakeClock(list(rng.uniform(1, 3, size=997)))
    summary = measure_latency(clock.call, StabilityRule(rel_ci=0.001, max_samples=300, max_time_s=1e9), clock.tick)
    assert summary.samples == 300 and not summary.stable
    slow = FakeClock([400.0])  # 0.4 s per call: the time cap stops it, after the floor of 5 samples
    summary = measure_latency(slow.call, StabilityRule(max_time_s=1.0, floor_samples=5), slow.tick)
    assert summary.samples == 5


def test_a_long_steady_call_is_known_from_six_samples():
    slow = FakeClock([400.0, 400.2, 399.9])  # 0.4 s per call, steady: the floor, and an interval from it
    summary = measure_latency(slow.call, StabilityRule(max_time_s=1.0), slow.tick)
    assert summary.samples == 6 and summary.stable and summary.ci_rel < 0.001


def test_short_noisy_calls_get_the_short_calls_time_and_long_ones_do_not():
    rng = np.random.default_rng(2)
    short = list(rng.uniform(1, 3, size=997))  # 1-3 ms: 20 fit in 0.1 s many times over
    rule = StabilityRule(rel_ci=0.001, max_time_s=0.1, short_calls_time_s=0.4)
    clock = FakeClock(short)
    plain = measure_latency(clock.call, replace(rule, short_calls_time_s=None), clock.tick)
    clock = FakeClock(short)
    longer = measure_latency(clock.call, rule, clock.tick)
    assert 40 <= plain.samples <= 60 and 180 <= longer.samples <= 220  # 0.1 s, then 0.4 s of 2 ms calls
    assert longer.ci_rel < plain.ci_rel
    steady = FakeClock([2.0])  # short but steady: known to rel_ci at min_samples, no more time
    assert measure_latency(steady.call, rule, steady.tick).samples == rule.min_samples
    slow = FakeClock(list(rng.uniform(300, 500, size=50)))  # long and noisy: fewer than 20 fit, no more time
    assert measure_latency(slow.call, rule, slow.tick).samples == rule.floor_samples


def binomial_coverage(n: int, k: int) -> float:
    """P(x_(k) <= median <= x_(n+1-k)) for n samples of a continuous distribution (1-based ranks)."""
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n


@given(st.integers(min_value=1, max_value=400))
def test_median_interval_ranks_are_the_narrowest_that_hold_95_percent(n):
    ranks = median_ci_ranks(n)
    if n < 6:
        assert ranks is None and binomial_coverage(n, 1) < 0.95
        return
    lo, hi = ranks
    k = lo + 1
    assert hi == n - k and binomial_coverage(n, k) >= 0.95 > binomial_coverage(n, k + 1)


def test_summary_statistics_match_numpy():
    x = np.random.default_rng(1).lognormal(0, 0.3, 500)
    s = LatencySummary.from_samples(x, 0.01)
    assert s.median_ms == pytest.approx(np.median(x))
    assert s.p99_ms == pytest.approx(np.percentile(x, 99))
    assert s.min_ms <= s.median_ms <= s.p90_ms <= s.p99_ms
    assert median_ci_rel(np.sort(x[:2])) == math.inf


def test_stability_rule_rejects_nonsense():
    with pytest.raises(ValueError):
        StabilityRule(rel_ci=0)
    with pytest.raises(ValueError):
        StabilityRule(min_samples=5, max_samples=4)
    with pytest.raises(ValueError):
        StabilityRule(max_time_s=1.0, short_calls_time_s=0.5)


def fake_measure(fits_up_to: int, ms_per_image: float = 1.0, fail_at: int | None = None):
    seen = []

    def measure(b):
        seen.append(b)
        if fail_at is not None and b == fail_at:
            return {"status": "error", "error": "boom"}
        if b > fits_up_to:
            return {"status": "oom"}
        return {"status": "ok", "latency_ms": b * ms_per_image}

    return measure, seen


@given(st.integers(min_value=0, max_value=5000))
def test_search_finds_exactly_the_largest_fitting_batch(fits_up_to):
    measure, seen = fake_measure(fits_up_to)
    result = search_batch_sizes(measure, max_batch_size=8192, max_call_ms=None)
    assert result.largest_ok == (fits_up_to or None)
    assert len(seen) == len(set(seen)), "no batch size is measured twice"
    assert len(seen) <= 2 * math.log2(max(fits_up_to, 1)) + 3


def test_search_stops_at_caps_and_errors():
    measure, seen = fake_measure(10**6, ms_per_image=10)
    assert search_batch_sizes(measure, 1000, None).largest_ok == 1000 and seen[-1] == 1000
    measure, seen = fake_measure(10**6, ms_per_image=10)
    result = search_batch_sizes(measure, 1000, max_call_ms=100)
    assert seen == [1, 2, 4, 8, 16] and "over `max_call_ms`" in result.reason
    measure, seen = fake_measure(10**6, fail_at=8)
    result = search_batch_sizes(measure, 1000, None)
    assert seen == [1, 2, 4, 8] and result.largest_ok == 4 and "boom" in result.reason


@given(st.lists(st.integers(min_value=1, max_value=10**6), min_size=1, max_size=20))
def test_batch_size_lists_parse(values):
    text = ",".join(str(v) for v in values)
    assert parse_batch_sizes(text) == tuple(sorted(set(values)))
    assert parse_batch_sizes(" " + text.replace(",", " , ") + " ") == tuple(sorted(set(values)))


@given(st.text(max_size=12))
def test_batch_size_parser_never_crashes(text):
    try:
        result = parse_batch_sizes(text)
    except InputError as exc:
        assert "\n" not in str(exc)
    else:
        assert result is None or all(isinstance(b, int) and b > 0 for b in result)


def test_auto_and_bad_values():
    assert parse_batch_sizes("auto") is None and parse_batch_sizes("AUTO") is None
    for bad in ("", "0", "-1", "1.5", "1,,2", "x", "2e3"):
        with pytest.raises(InputError):
            parse_batch_sizes(bad)
    assert parse_input_sizes("320,224") == (224, 320)


@pytest.mark.parametrize(
    "name, key",
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA L4", "l4"),
    ],
)
def test_hardware_keys(name, key):
    assert hardware_key(name, is_gpu=True) == key
    assert hardware_key(name, is_gpu=False) == "cpu"


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "f.txt"
    atomic_write_text(path, "one")
    atomic_write_text(path, "two")
    assert path.read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["f.txt"]
    assert oct(path.stat().st_mode & 0o777) != oct(0o600)


# ------------------------------------------------------------------------------------------------
# The bisection tolerance and the estimate


@given(st.integers(min_value=1, max_value=20000), st.sampled_from([0.0, 0.05, 0.1, 0.25]))
def test_search_with_a_tolerance_stops_within_it(fits_up_to, tolerance):
    measure, seen = fake_measure(fits_up_to)
    result = search_batch_sizes(measure, max_batch_size=16384, max_call_ms=None, tolerance=tolerance)
    assert len(seen) == len(set(seen))
    assert len(seen) <= search_points_bound(16384, tolerance)
    largest = min(fits_up_to, 16384)
    assert result.largest_ok <= largest
    assert largest - result.largest_ok <= max(1, tolerance * result.largest_ok)
    if tolerance == 0:
        assert result.largest_ok == largest


def test_a_ten_percent_tolerance_saves_points_at_gpu_batch_sizes():
    exact, _ = fake_measure(13000)
    fast, _ = fake_measure(13000)
    n_exact = len(search_batch_sizes(exact, 16384, None).rows)
    n_fast = len(search_batch_sizes(fast, 16384, None, tolerance=0.1).rows)
    assert n_fast <= n_exact - 5
    assert search_points_bound(16384, 0.1) < search_points_bound(16384, 0.0)


def test_estimate_counts_points_and_fresh_workers():
    from perfmodel.profile import ProfileConfig, estimate_profile

    grid = estimate_profile(
        ProfileConfig(model="tiny", batch_sizes=(1, 2, 4), input_sizes=(32, 64), fresh_warmup_at=(2,))
    )
    assert (grid.points, grid.bound, grid.fresh_workers) == (6, False, 2)
    auto = estimate_profile(
        ProfileConfig(
            model="tiny",
            batch_sizes=None,
            input_sizes=(32,),
            device="cuda",
            search_tolerance=0.1,
            fresh_warmup_at=(1, 16, 256),
        )
    )
    assert auto.bound and auto.points == search_points_bound(16384, 0.1) + 3 and auto.fresh_workers == 3
    assert auto.seconds is None and "at most" in auto.describe()


def test_estimate_with_processes_counts_their_sampling_and_starts():
    from perfmodel.profile import ProfileConfig, estimate_profile

    one = estimate_profile(ProfileConfig(model="tiny", batch_sizes=(1, 2, 4), input_sizes=(32,)))
    three = estimate_profile(ProfileConfig(model="tiny", batch_sizes=(1, 2, 4), input_sizes=(32,), processes=3))
    assert (three.points, three.fresh_workers, three.extra_workers) == (3, 3, 6)
    assert three.sampling_s == 3 * one.sampling_s
    assert "each measured in 3 processes" in three.describe() and "about 3x as long" in three.describe()
    assert "processes" not in one.describe()  # K = 1: the words of before
    started = replace(three, worker_s=2.0)
    fresh_calls = 3 * three.fresh_extra_s  # the fresh warm-up processes' own calls and exits
    assert started.seconds == pytest.approx(three.sampling_s + fresh_calls + (3 + 6 + 1) * 2.0 + three.probe_s)


def test_a_lists_estimate_says_what_each_second_of_its_slowest_call_adds():
    from perfmodel.profile import ProfileConfig, estimate_profile

    rule = StabilityRule(max_time_s=0.5)
    plan = estimate_profile(ProfileConfig(model="tiny", batch_sizes=(16, 64), input_sizes=(32, 64), rule=rule))
    # 2 untimed calls and 6 timed at least, per point; the calls in proportion to batch x pixels
    assert plan.calls_s == pytest.approx((2 + 6) * (64 * 64**2 + 16 * 64**2 + 64 * 32**2 + 16 * 32**2) / (64 * 64**2))
    assert plan.slowest_s is None and plan.seconds is None
    assert "and 12 s more for each second a call at batch 64, 64 px takes" in plan.describe()
    timed_first = estimate_profile(
        ProfileConfig(model="tiny", batch_sizes=(16, 64), input_sizes=(32, 64), rule=rule, warmup="in-process")
    )
    assert timed_first.calls_s == pytest.approx(plan.calls_s * 9 / 8)  # the timed first call, one more


def test_an_auto_search_estimate_counts_its_calls_at_the_call_it_assumes():
    from perfmodel.profile import ProfileConfig, estimate_profile

    def auto(**kw):
        config = ProfileConfig(model="tiny", batch_sizes=None, input_sizes=(224,), device="cuda", **kw)
        return replace(estimate_profile(config), worker_s=10.0)

    assumed = auto()
    assert assumed.slowest_s == 2.0 and "about" in assumed.describe() and "at most" not in assumed.describe()[20:]
    assert "if a call at the largest batch that fits takes 2 s" in assumed.describe()
    bounded = auto(max_call_ms=500)
    assert "if a call at the largest batch takes 0.5 s" in bounded.describe() and "`max_call_ms`" in bounded.describe()
    assert bounded.calls_s < assumed.calls_s < auto(max_call_ms=4000).calls_s
    # each point: its sampling cap, and besides it the calls of a call time > cap / 6
    assert assumed.seconds > assumed.points * assumed.per_point_s + assumed.calls_s


def test_the_estimate_of_the_gpu_campaigns_sweep_is_near_its_measured_time():
    """experiments/008's ResNet-50 sweep took 391 s on the H100 and 393 s on the H200 (from the campaign's
    logs: the command's start to the next step's); its estimate said "at most 3 min" when it left the calls out."""
    import re
    from pathlib import Path

    from perfmodel.profile import ProfileConfig, estimate_profile

    results = Path(__file__).resolve().parents[2] / "experiments" / "008_gpu_campaign" / "results"
    for hw in ("h100", "h200"):
        log = (results / hw / "session-call1.log").read_text()
        began, command = re.search(r"==> \[ *(\d+) s\] resnet50 torch-fp16: (perfmodel profile .*)", log).groups()
        ended = re.search(r"==> \[ *(\d+) s\] session: step_(?!profile resnet50)", log[log.index(command) :]).group(1)
        worker_s = float(re.search(r"a worker process takes (\d+) s to start here", log).group(1))
        for flags in ("--batch-sizes auto", "--input-sizes 224,320,448", "--max-time-per-point 0.5"):
            assert flags in command
        for flags in ("--search-tolerance 0.2", "--fresh-warmup-at 1,256", "--precision fp16", "--device cuda"):
            assert flags in command
        config = ProfileConfig(
            model="resnet50",
            device="cuda",
            precision="fp16",
            batch_sizes=None,
            input_sizes=(224, 320, 448),
            search_tolerance=0.2,
            fresh_warmup_at=(1, 256),
            rule=StabilityRule(max_time_s=0.5),
        )
        measured, estimated = int(ended) - int(began), replace(estimate_profile(config), worker_s=worker_s).seconds
        assert measured in (391, 393) and 0.8 < estimated / measured < 1.2, (hw, measured, estimated)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_processes_must_be_a_whole_number_from_one(value):
    from perfmodel.profile import ProfileConfig

    with pytest.raises(InputError, match="`processes` must be a whole number"):
        ProfileConfig(model="tiny", processes=value)


def _steady(median, p99, samples=50, ci=0.01, stable=True):
    return {
        "status": "ok",
        "latency_ms": median,
        "latency_p50_ms": median,
        "latency_p90_ms": median * 1.1,
        "latency_p99_ms": p99,
        "latency_mean_ms": median * 1.05,
        "latency_std_ms": median * 0.1,
        "latency_min_ms": median * 0.9,
        "latency_ci_rel": ci,
        "samples": samples,
        "stable": stable,
        "memory_mb": 7.0,
        "throughput_ips": 4 / median * 1e3,
    }


def test_pooling_processes_takes_the_mean_of_their_figures():
    first = {**_steady(10.0, 30.0, samples=40, ci=float("nan")), "warmup_ms": 99.0}
    replies = [first, _steady(12.0, 13.0), _steady(9.0, 20.0, stable=False)]
    pooled = pool_processes(replies, batch_size=4)
    assert pooled["latency_ms"] == pooled["latency_p50_ms"] == pytest.approx(31.0 / 3)
    assert pooled["latency_p99_ms"] == pytest.approx(21.0) and pooled["latency_p99_ms"] >= pooled["latency_ms"]
    assert pooled["latency_min_ms"] == pytest.approx(0.9 * 31.0 / 3)
    assert pooled["latency_mean_ms"] == pytest.approx(1.05 * 31.0 / 3)
    assert pooled["latency_ci_rel"] == 0.01  # the process without an interval does not count
    assert (pooled["samples"], pooled["stable"], pooled["processes"]) == (140, False, 3)
    assert pooled["throughput_ips"] == pytest.approx(4 / (31.0 / 3) * 1e3)
    assert pooled["process_rel_sd"] == pytest.approx(np.std(np.log([10.0, 12.0, 9.0]), ddof=1))
    assert (pooled["warmup_ms"], pooled["memory_mb"]) == (99.0, 7.0)  # the measuring worker's own
    two = pool_processes([_steady(10.0, 15.0), _steady(12.0, 14.0)], batch_size=4)
    assert two["latency_ms"] == 11.0 and two["latency_p99_ms"] == 14.5
    assert pool_processes([first], batch_size=4) == first  # one process: as before, no new columns


# ------------------------------------------------------------------------------------------------
# What a failure means


@pytest.mark.parametrize(
    "text, kind",
    [
        ("CUDA out of memory. Tried to allocate 20.00 MiB", "oom"),
        ("DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes", "oom"),
        ("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", "oom-like"),
        ("FIND was unable to find an engine to execute this computation", "oom-like"),
        ("CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`", "oom-like"),
        ("could not create a primitive", "oom-like"),  # oneDNN under a CPU memory limit (seen in CI)
        ("Expected canUse32BitIndexMath(input) && canUse32BitIndexMath(output) to be true, but got false.", "limit"),
        ("value cannot be converted to type int without overflow", "limit"),  # max_pool2d past 2^31
        ("value cannot be converted to type int32_t without overflow", "limit"),
        ("integer out of range", "limit"),
        ("value cannot be converted to type at::Half without overflow", "error"),  # a constant, not a size
        ("CUDA error: an illegal memory access was encountered", "sticky"),
        ("CUDA error: device-side assert triggered", "sticky"),
        ("CUDA error: misaligned address", "sticky"),
        ("mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)", "error"),
    ],
)
def test_failure_kinds(text, kind):
    from perfmodel.profile.failures import classify

    assert classify(RuntimeError(text)).kind == kind


def test_torchscript_failures_name_their_real_cause():
    from perfmodel.profile.failures import describe

    class Error(Exception):  # torch.jit.Error is not a RuntimeError
        pass

    text = (
        "The following operation failed in the TorchScript interpreter.\nTraceback of TorchScript (most recent "
        "call last):\n  File \"x.py\", line 5, in forward\n    raise RuntimeError('boom')\n    ~~~~ <--- HERE\n"
        "builtins.RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    assert describe(Error(text)) == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert describe(RuntimeError("one line\nand a hint")) == "RuntimeError: one line"


# ------------------------------------------------------------------------------------------------
# The torch backend without a GPU: inputs, TF32, CUDA graphs (CUDA calls replaced by fakes)


def test_inputs_are_drawn_in_the_measured_dtype_and_layout_without_a_copy(monkeypatch):
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(precision="bf16", channels_last=True))

    def no_copies(*args, **kwargs):
        raise AssertionError("inputs must be drawn on the device in their dtype, not converted")

    monkeypatch.setattr(torch.Tensor, "to", no_copies)
    monkeypatch.setattr(torch.Tensor, "contiguous", no_copies)
    batches = runner.inputs(4, 16, count=2)
    monkeypatch.undo()
    assert len(batches) == 2 and all(x.dtype == torch.bfloat16 for x in batches)
    assert all(x.is_contiguous(memory_format=torch.channels_last) for x in batches)
    assert not torch.equal(batches[0], batches[1]) and batches[0].abs().sum() > 0  # distinct, never zeros
    again = runner.inputs(4, 16, count=2)
    assert torch.equal(again[0], batches[0])  # seeded: the same point gets the same inputs


def test_large_batches_rotate_one_input_not_three():
    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import ROTATE_BELOW_MB, TorchOptions, TorchRunner

    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(precision="fp16"))
    assert runner.input_count(1, 224) == 3
    big = int(ROTATE_BELOW_MB * 2**20 / (3 * 224 * 224 * 2)) + 1
    assert runner.input_count(big, 224) == 1
    assert runner.input_count(64, 224, budget_mb=80_000) == 3  # 18 MiB, a GPU of 80 GB
    assert runner.input_count(64, 224, budget_mb=1_000) == 1  # two more would be 3.6% of a 1 GB budget


@pytest.mark.parametrize("precision, tf32", [("fp32", False), ("tf32", True), ("fp16", False)])
def test_fp32_is_true_fp32_and_tf32_is_recorded(precision, tf32):
    import torch

    from perfmodel.errors import InputError
    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = not tf32
    try:
        TorchRunner(ModelSpec("tiny"), TorchOptions(device="cuda", precision=precision))  # sets flags, touches no GPU
        assert torch.backends.cuda.matmul.allow_tf32 is tf32 and torch.backends.cudnn.allow_tf32 is tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    with pytest.raises(InputError, match="tf32"):
        TorchOptions(device="cpu", precision="tf32")


class _FakeCuda:
    """Stands in for the torch.cuda calls a CUDA-graph binding makes, and records their order."""

    def __init__(self, monkeypatch, runner):
        import contextlib

        import torch

        self.log: list[str] = []
        log = self.log

        class Graph:
            def replay(self):
                log.append("replay")

        @contextlib.contextmanager
        def graph(g):
            log.append("capture")
            yield

        @contextlib.contextmanager
        def stream(s):
            yield

        class Stream:
            def __init__(self, *a, **k):
                pass

            def wait_stream(self, other):
                pass

        for name, value in (
            ("CUDAGraph", Graph),
            ("graph", graph),
            ("stream", stream),
            ("Stream", Stream),
            ("current_stream", lambda *a: Stream()),
            ("synchronize", lambda *a: None),
            ("reset_peak_memory_stats", lambda *a: log.append("reset_peak")),
            ("empty_cache", lambda *a: log.append("empty_cache")),
        ):
            monkeypatch.setattr(torch.cuda, name, value)
        model = runner.model

        def traced(x):
            log.append("model")
            return model(x)

        runner.model = traced


def test_cuda_graph_memory_counts_the_capture():
    """The peak is reset after the eager warm-up and before the capture, never after it: a replay
    allocates nothing, so a later reset would miss the graph's activations. The cache is emptied before
    the capture: the eager warm-up's cached activations would crowd out the graph's private pool (the
    largest batch that captured came out at about half the one that fits)."""
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(device="cuda", cuda_graphs=True))
    runner.device = torch.device("cpu")  # the fakes below run the graph's model on the CPU
    runner.model = runner.torch.nn.Identity()
    patch = pytest.MonkeyPatch()
    try:
        fake = _FakeCuda(patch, runner)
        x = torch.ones(2, 3, 8, 8)
        call = runner.bind([x])
        call(0)
        call(1)
    finally:
        patch.undo()
    assert fake.log == [
        *["model", "model", "model", "empty_cache", "reset_peak", "capture", "model"],
        *["replay", "replay"],
    ]


def test_a_run_captures_one_graph_per_shape_and_replays_it():
    """perfmodel run's forward: the first batch of a shape captures (its warm-up), later ones replay."""
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(device="cuda", cuda_graphs=True))
    runner.device = torch.device("cpu")
    runner.model = runner.torch.nn.Identity()
    patch = pytest.MonkeyPatch()
    try:
        fake = _FakeCuda(patch, runner)
        a, b = torch.ones(4, 3, 8, 8), torch.full((4, 3, 8, 8), 2.0)
        first = runner.forward(a)
        assert torch.equal(runner.forward(b), b) and first is runner.forward(a)  # the graph's static output
        runner.forward(torch.ones(2, 3, 8, 8))
    finally:
        patch.undo()
    assert fake.log.count("capture") == 2 and fake.log.count("replay") == 4
    assert list(runner._graphs) == [(4, 3, 8, 8), (2, 3, 8, 8)]


def _flushing_subnormals() -> bool:
    return sys.float_info.min / 2.0 == 0.0  # a subnormal result comes out as zero


def test_a_cpu_runner_flushes_subnormals_only_while_it_runs():
    """Subnormals are flushed to zero while the runner builds and runs its model on a CPU (random weights
    make them, and they slow CPUs down), and not after: left on, the setting leaked into the rest of the
    process, where numpy warns that the smallest subnormal is zero (a fit after a runner warned)."""
    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    assert not _flushing_subnormals()
    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(device="cpu"))
    runner.load()
    assert not _flushing_subnormals()
    with runner.inference():
        assert _flushing_subnormals()
        runner.bind(runner.inputs(2, 32, count=1))(0)
    assert not _flushing_subnormals()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.finfo(np.float64).smallest_subnormal > 0


class _LoggingRunner:
    """What Worker._steady asks of a runner, each call logged (no torch, no device)."""

    is_cuda = True

    def __init__(self, options):
        self.options, self.log = options, []

    def release(self):
        self.log.append("release")

    def reset_peak(self):
        self.log.append("reset_peak")

    def bind(self, inputs):
        return lambda i: self.log.append("call")

    @contextlib.contextmanager
    def inference(self):
        yield

    def inputs(self, b, s, count):
        return [None] * count

    used_memory_mb = compile_counts = lambda self: None  # noqa: E731
    input_count = lambda self, b, s, budget: 1  # noqa: E731
    device_memory_mb = peak_memory_mb = lambda self: 100.0  # noqa: E731
    batch_mb = lambda self, b, s: 1.0  # noqa: E731


@pytest.mark.parametrize(
    ("options", "reset_before_the_calls"),
    [
        (dict(), False),
        (dict(compile=True), False),
        (dict(compile=True, compile_mode="reduce-overhead"), True),
        (dict(compile=True, compile_mode="max-autotune"), True),
    ],
)
def test_memory_of_compiled_cuda_graphs_counts_their_recording(options, reset_before_the_calls):
    """torch.compile's reduce-overhead and max-autotune record CUDA graphs in the untimed calls, and a replay
    allocates nothing: a peak reset after them missed the graphs' pool (the H200's reduce-overhead said
    220 MiB at batch 256, NVML 3,362). Such a point counts its memory from its start; the others from
    after the untimed calls, as before."""
    from perfmodel.profile.timing import StabilityRule
    from perfmodel.profile.worker import Worker, _Watchdog
    from perfmodel.torch_runner import TorchOptions

    worker = Worker(reply=None)
    worker.runner = runner = _LoggingRunner(TorchOptions(device="cuda", **options))
    worker.watchdog = _Watchdog(60, lambda: None)
    rule = dataclasses.asdict(StabilityRule(min_samples=6, max_samples=6, max_time_s=1))
    out = worker._steady({"batch_size": 2, "input_size": 8, "rule": rule})
    assert out["status"] == "ok", out
    calls = runner.log.index("call")
    resets = [i for i, entry in enumerate(runner.log) if entry == "reset_peak"]
    assert len(resets) == 1 and (resets[0] < calls) == reset_before_the_calls
