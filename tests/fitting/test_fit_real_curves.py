"""Latency models on real GPU curves (profiles/reference/) and on synthetic curves of the same shape.

The held-out splits of issue 15 (perfmodel.fitting.accuracy): between measured points (fit on batch
1, 4, 16, 64, 256) and beyond them (fit on batch <= 64, predict 128 and 256), against the straight
line a + c * batch.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from perfmodel.fitting.accuracy import linear_baseline, split_errors, split_masks, summary
from perfmodel.fitting.regressors import RooflineRegression, TreeEnsembleRegression
from perfmodel.fitting.selection import fit_quantity, unstable_past_data
from perfmodel.fitting.synthetic import LaunchBoundCurve, gpu_like_profile
from perfmodel.schema import load_profiles

REFERENCE = sorted((Path(__file__).resolve().parents[2] / "profiles" / "reference").glob("*.csv"))
POWERS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def roofline(b, s, y):
    model = RooflineRegression().fit(np.column_stack([b, s]), y)
    return model.evaluate


def selected(b, s, y):
    return fit_quantity(b, s, y).estimator.evaluate


def medians(errors):
    table = summary(errors).set_index(["split", "method"])
    return table


def test_splits_are_the_issues():
    b = np.array(POWERS, dtype=float)
    between, beyond = split_masks(b)["between"], split_masks(b)["beyond"]
    assert list(b[between[0]]) == [1, 4, 16, 64, 256] and list(b[between[1]]) == [2, 8, 32, 128]
    assert list(b[beyond[0]]) == [1, 2, 4, 8, 16, 32, 64] and list(b[beyond[1]]) == [128, 256]


@pytest.fixture(scope="module")
def reference():
    return load_profiles(REFERENCE)


def test_reference_profiles_are_published_gpu_curves_with_sources(reference):
    assert {"a100", "a100-80gb", "v100", "t4", "a30", "a10"} <= set(reference["hardware"])
    assert {"fp32", "tf32", "fp16", "int8"} <= set(reference["precision"])
    assert reference["source"].str.contains("github.com/NVIDIA/DeepLearningExamples/blob/[0-9a-f]{40}/").all()
    assert reference["warmup_ms"].isna().all() and reference["memory_mb"].isna().all()


def test_roofline_meets_the_median_targets_on_the_reference_curves_and_beats_the_line(reference):
    table = medians(split_errors(reference, {"roofline": roofline, "line": linear_baseline}))
    assert table.loc[("between", "roofline"), "median"] <= 3.0
    assert table.loc[("beyond", "roofline"), "median"] <= 10.0
    for split in ("between", "beyond"):
        for statistic in ("median", "mean"):
            assert table.loc[(split, "roofline"), statistic] < table.loc[(split, "line"), statistic]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_launch_bound_synthetic_curves_meet_every_target(seed):
    curve = LaunchBoundCurve(floor_ms=4.0 + seed, image_ms=0.2 + 0.1 * seed)
    profile = gpu_like_profile(curve, batch_sizes=POWERS, input_sizes=(224,), noise=0.01, seed=seed)
    table = medians(split_errors(profile, {"selected": selected, "line": linear_baseline}))
    assert table.loc[("between", "selected"), "median"] <= 3.0 and table.loc[("between", "selected"), "worst"] <= 8.0
    assert table.loc[("beyond", "selected"), "median"] <= 10.0 and table.loc[("beyond", "selected"), "worst"] <= 20.0
    for split in ("between", "beyond"):
        assert table.loc[(split, "selected"), "mean"] < table.loc[(split, "line"), "mean"]


def test_selection_refuses_families_unstable_past_the_data():
    profile = gpu_like_profile(LaunchBoundCurve(), batch_sizes=POWERS, input_sizes=(224,), noise=0.01, seed=3)
    ok = profile[profile["status"] == "ok"]
    b, s, y = (ok[c].to_numpy(dtype=float) for c in ("batch_size", "input_size", "latency_ms"))
    result = fit_quantity(b, s, y, families=("tree", "roofline"))
    assert result.report["family"] == "roofline" and unstable_past_data(result.estimator, b, s) is None
    tree = TreeEnsembleRegression().fit(np.column_stack([b, s]), y)
    assert unstable_past_data(tree, b, s) is not None  # a step function: flat past the data, bumpy within

    class FlatPastTheData:  # the truth up to batch 256, constant beyond: what a tree does outside its data
        def evaluate(self, qb, qs):
            return LaunchBoundCurve().latency_ms(np.minimum(qb, 256.0), qs)

    assert "flattens" in unstable_past_data(FlatPastTheData(), b, s)

    class Quadratic:
        def evaluate(self, qb, qs):
            return 1.0 + 0.01 * np.asarray(qb, dtype=float) ** 2

    assert "faster than twice" in unstable_past_data(Quadratic(), b, s)


def test_roofline_is_linear_past_the_data_and_round_trips():
    from perfmodel.fitting.regressors import _Estimator

    b = np.array(POWERS, dtype=float)
    y = LaunchBoundCurve().latency_ms(b, 224)
    model = RooflineRegression().fit(np.column_stack([b, np.full_like(b, 224.0)]), y)
    far = model.evaluate(np.array([1024.0, 2048.0, 4096.0]), np.full(3, 224.0))
    assert far[2] - far[1] == pytest.approx(2 * (far[1] - far[0]), rel=1e-3)
    again = _Estimator.from_dict(model.to_dict())
    assert np.allclose(again.evaluate(b, np.full_like(b, 224.0)), model.evaluate(b, np.full_like(b, 224.0)))
    assert np.mean(np.abs(model.evaluate(b, np.full_like(b, 224.0)) / y - 1)) < 1e-3


def test_split_errors_rows_are_per_held_out_point():
    profile = gpu_like_profile(LaunchBoundCurve(), batch_sizes=POWERS, input_sizes=(224,), noise=0.0)
    errors = split_errors(profile, {"line": linear_baseline})
    assert isinstance(errors, pd.DataFrame)
    assert sorted(errors.loc[errors["split"] == "between", "batch_size"]) == [2, 8, 32, 128]
