"""Fitting a synthetic GPU-like profile whose ground truth is known: the held-out error against it."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import fit
from perfmodel.fitting.synthetic import DEFAULT_BATCH_SIZES, GpuLikeCurve, gpu_like_profile

CURVE = GpuLikeCurve()
SIZES = (160, 224, 288)
BATCHES = DEFAULT_BATCH_SIZES + (384, 512, 768, 1024, 1536, 2048)  # up to out-of-memory at every size


@pytest.fixture(scope="module")
def profile():
    return gpu_like_profile(CURVE, batch_sizes=BATCHES, input_sizes=SIZES, noise=0.01, seed=1)


@pytest.fixture(scope="module")
def group(profile):
    return fit(profile).groups[0]


def _mape(pred, true):
    return float(np.mean(np.abs(pred - true) / true) * 100)


@pytest.mark.parametrize("quantity", ["latency_ms", "latency_p99_ms", "memory_mb"])
def test_inside_the_measured_range_within_3_percent_of_the_truth(group, quantity):
    report = group.report[quantity]
    assert report["cv_mape"] <= 3.0
    largest_ok = dict(group.ok_batches)
    # every batch size up to the largest measured at each size, and at a size between two measured ones
    for s, top in [*largest_ok.items(), (192, largest_ok[224])]:
        b = np.arange(1, top + 1)
        assert _mape(getattr(group, quantity)(b, s), getattr(CURVE, quantity)(b, s)) <= 3.0


def test_latency_extrapolates_to_twice_the_largest_batch_within_8_percent(profile):
    half = fit(profile[profile["batch_size"] <= 256], families=("linear", "piecewise")).groups[0]
    b = np.arange(257, 513)
    for s in SIZES:
        with pytest.warns(Warning, match="extrapolates"):
            predicted = half.latency_ms(b, s)
        assert _mape(predicted, CURVE.latency_ms(b, s)) <= 8.0
    assert half.report["latency_ms"]["extrapolation"]["batch_2x"]["mape"] <= 8.0


def test_the_wave_step_is_found(group):
    assert any("ceil(b/32)" in f for f in group.report["latency_ms"]["features"])


@pytest.mark.filterwarnings("ignore:.*extrapolates")
@settings(max_examples=50, deadline=None)
@given(st.floats(96, 400))
def test_max_batch_never_exceeds_what_fits(group, s):
    predicted = int(group.max_batch(s))
    assert 0 <= predicted <= CURVE.max_batch(s)


def test_max_batch_with_a_budget_inverts_the_memory_model(group):
    for budget in (2000.0, 8000.0):
        b = group.max_batch(np.array(SIZES), memory_budget_mb=budget)
        assert np.all(group.memory_mb(b, np.array(SIZES)) <= budget)
        assert np.all(group.memory_mb(b + 1, np.array(SIZES)) > budget)
