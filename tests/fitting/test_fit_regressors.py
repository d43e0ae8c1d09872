"""The three model families: scikit-learn conventions, JSON round trips, and what each guarantees."""

import functools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from perfmodel.errors import InputError
from perfmodel.fitting.features import pixels
from perfmodel.fitting.regressors import (
    FAMILIES,
    FeatureLinearRegression,
    MonotonePiecewiseLinear,
    NotFittedError,
    TreeEnsembleRegression,
    _Estimator,
)

BATCHES = np.array([1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128])
SIZES = np.array([160, 224, 288])


def _grid(fn, noise=0.0, seed=0):
    b, s = (a.ravel().astype(float) for a in np.meshgrid(BATCHES, SIZES))
    y = fn(b, s) * (1 + noise * np.random.default_rng(seed).standard_normal(b.size))
    return np.column_stack([b, s]), y


def _gpu_curve(b, s):
    return 1.0 + 5.0 * pixels(s) * np.ceil(b / 32) + 0.1 * b * pixels(s)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_estimators_follow_scikit_learn_conventions(family):
    estimator = FAMILIES[family]()
    params = estimator.get_params()
    assert clone(estimator).get_params() == params
    with pytest.raises(NotFittedError):
        estimator.predict(np.array([[1.0, 224.0]]))
    before = set(vars(estimator))
    X, y = _grid(_gpu_curve, noise=0.01)
    assert estimator.fit(X, y) is estimator
    learned = {a for a in set(vars(estimator)) - before if not a.startswith("_")}
    assert learned and all(a.endswith("_") for a in learned)
    assert estimator.get_params() == params  # fit does not touch the hyper-parameters
    assert estimator.predict(X).shape == y.shape


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_json_round_trip_predicts_the_same(family):
    X, y = _grid(_gpu_curve, noise=0.01)
    estimator = FAMILIES[family]().fit(X, y)
    loaded = _Estimator.from_dict(json.loads(json.dumps(estimator.to_dict())))
    queries = np.column_stack([np.linspace(0.5, 400, 257), np.linspace(64, 512, 257)])
    np.testing.assert_allclose(loaded.predict(queries), estimator.predict(queries), rtol=1e-12)


@functools.cache
def _tree_pair():
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = _grid(_gpu_curve, noise=0.05)
    ours = TreeEnsembleRegression().fit(X, y)
    return ours, GradientBoostingRegressor(**ours.get_params()).fit(X, np.log(y))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0.5, 300), st.floats(32, 400)), min_size=1, max_size=20))
def test_tree_table_matches_scikit_learn(points):
    ours, theirs = _tree_pair()
    Q = np.array(points)
    np.testing.assert_allclose(ours.predict(Q), np.exp(theirs.predict(Q)), rtol=1e-9)


def test_linear_regression_recovers_a_wave_curve():
    X, y = _grid(_gpu_curve)
    model = FeatureLinearRegression().fit(X, y)
    assert any("ceil(b/32)" in f for f in model.features_)
    b, s = np.meshgrid(np.arange(1, 257), [160, 192, 224, 288])
    error = np.abs(model.evaluate(b, s) / _gpu_curve(b, s) - 1)
    assert error.max() < 0.01


def test_linear_regression_without_enough_batch_sizes_uses_work():
    X = np.array([[1, 224], [8, 224], [1, 160], [8, 160]], dtype=float)
    model = FeatureLinearRegression().fit(X, 2 + 3 * X[:, 0] * pixels(X[:, 1]))
    assert model.features_ == ("b*p",)
    assert model.cv_mape_ is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.1, 1000), min_size=len(BATCHES) * len(SIZES), max_size=len(BATCHES) * len(SIZES)))
def test_piecewise_is_non_decreasing_in_batch_and_size(values):
    X, _ = _grid(_gpu_curve)
    model = MonotonePiecewiseLinear().fit(X, np.array(values))
    b = np.linspace(0.5, 500, 400)
    for s in (100, 224, 300):
        assert np.all(np.diff(model.evaluate(b, s)) >= -1e-9)
    assert np.all(np.diff(model.evaluate(16, np.linspace(32, 600, 100))) >= -1e-9)


@pytest.mark.parametrize(
    "y, X",
    [
        ([1.0, np.nan], [[1, 224], [2, 224]]),
        ([1.0, -2.0], [[1, 224], [2, 224]]),
        ([1.0, 2.0], [[1, 224, 3], [2, 224, 3]]),
        ([1.0, 2.0, 3.0], [[1, 224], [2, 224]]),
    ],
)
def test_bad_training_data_is_refused(y, X):
    with pytest.raises(InputError):
        FeatureLinearRegression().fit(np.array(X, dtype=float), np.array(y))
