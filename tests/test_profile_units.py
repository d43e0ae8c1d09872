"""The profiler's parts without a model: the stability rule, the batch search, the parsers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfmodel.errors import InputError
from perfmodel.files import atomic_write_text
from perfmodel.profile.grid import parse_batch_sizes, parse_input_sizes
from perfmodel.profile.provenance import hardware_key
from perfmodel.profile.search import search_batch_sizes
from perfmodel.profile.timing import LatencySummary, StabilityRule, measure_latency, median_ci_rel


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
    assert seen == [1, 2, 4, 8, 16] and "over --max-call-ms" in result.reason
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
