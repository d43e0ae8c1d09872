"""A first call planned past the largest batch whose warm-up a fresh process measured: carried on along
the measured rise (never down), and as unsure as what was carried."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from test_plan import profile_rows

from perfmodel.planning.batch import make_plan
from perfmodel.planning.batch_sources import _fill_warmup


def fill(batch, latency, warmup):
    labels = np.array(["a"] * len(batch))
    return _fill_warmup(np.array(batch, float), labels, np.array(latency, float), np.array(warmup, float))


def test_the_excess_rises_past_the_largest_measured_batch_along_the_last_two():
    # excess 1.5 s at batch 1, 1.6 s at 256: 0.1 s per 255 images, carried to 2048
    out, beyond, filled, unmeasured = fill([1, 256, 2048], [4, 24, 166], [1504, 1624, np.nan])
    carried = 100 / 255 * (2048 - 256)
    assert out[2] == pytest.approx(166 + 1600 + carried)
    assert beyond == {2: pytest.approx(carried)}
    assert filled == {"a": 1} and not unmeasured


def test_a_falling_excess_is_held_flat_and_nothing_is_carried():
    out, beyond, _, _ = fill([1, 256, 2048], [4, 24, 166], [1804, 1624, np.nan])
    assert out[2] == pytest.approx(166 + 1600)
    assert beyond == {}


def test_between_and_below_the_measured_batches_nothing_is_carried():
    out, beyond, _, _ = fill([1, 64, 128, 256], [4, 8, 14, 24], [np.nan, 1508, np.nan, 1624])
    assert beyond == {}
    assert out[0] == pytest.approx(4 + 1500)  # flat below the smallest
    assert out[2] == pytest.approx(14 + 1500 + 100 * (128 - 64) / (256 - 64))  # interpolated between


def test_one_measured_batch_is_held_flat():
    out, beyond, _, _ = fill([256, 2048], [24, 166], [1624, np.nan])
    assert out[1] == pytest.approx(166 + 1600)
    assert beyond == {}


def plan_from(rows, tmp_path, name):
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        plan = make_plan(10_000, 60, profiles=[str(path)], input_size=64, confidence=0.95)
    return plan, [str(w.message) for w in said]


def test_a_carried_first_call_is_planned_wider_than_the_same_one_measured(tmp_path):
    """The same first call at batch 8, once carried from batches 1 and 2 and once measured: the same
    centre, a wider spread of load and warm-up, and a warning that says what was carried."""
    carried = profile_rows(hardware="h200", sizes=(64,))
    for r in carried:
        if r["batch_size"] > 2:
            r["warmup_ms"] = np.nan
    plan, said = plan_from(carried, tmp_path, "carried.csv")
    a = plan.assignments[0]
    assert a.batch_size == 8
    # latency 2 + b ms, warm-up 3 x latency + 20 ms: excess 2 x (2 + b) + 20, rising 2 ms an image
    assert a.warmup_s * 1000 == pytest.approx(10 + 2 * (2 + 2) + 20 + 2 * (8 - 2))
    assert any("carried on along their rise" in s and "batch 8" in s for s in said)

    measured = profile_rows(hardware="h200", sizes=(64,))
    for r in measured:
        if r["batch_size"] == 4:
            r["warmup_ms"] = np.nan
        if r["batch_size"] == 8:
            r["warmup_ms"] = a.warmup_s * 1000
    same, said = plan_from(measured, tmp_path, "measured.csv")
    assert same.assignments[0].warmup_s == pytest.approx(a.warmup_s)
    assert not any("carried" in s for s in said)
    wide = plan.to_dict()["spread_by_source_s"]["load and warm-up"]
    narrow = same.to_dict()["spread_by_source_s"]["load and warm-up"]
    assert wide > narrow
