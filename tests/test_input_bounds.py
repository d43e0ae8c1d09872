"""Bounds on everything read: JSON files, profile cells and columns, predictors, plans, and the
solver's numbers at the largest counts it accepts (issue 11, items 4-8)."""

from __future__ import annotations

import json
import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import solvers
from perfmodel.errors import InputError, PerfmodelWarning, PredictorFormatError, ProfileFormatError
from perfmodel.files import MAX_JSON_DEPTH, read_json
from perfmodel.schema import BOUNDS, DEFAULT_BOUND, INTEGER_COLUMNS, NUMERIC_COLUMNS, load_profile, validate_profile
from solvers import milp
from solvers.batch_problem import MAX_COUNT

ROW = {
    "hardware": "cpu",
    "model": "m",
    "backend": "torch",
    "precision": "fp32",
    "input_size": 64,
    "batch_size": 1,
    "latency_ms": 2.0,
    "latency_p99_ms": 3.0,
    "warmup_ms": 4.0,
    "memory_mb": 5.0,
    "status": "ok",
}


# --- JSON ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 100_000 + "]" * 100_000, f"nest more than {MAX_JSON_DEPTH} deep"),
        ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), "nest more than"),
        ("1" * 5000, "whole number of 5,000 digits"),
        ("-" + "1" * 19, "19 digits"),
        ('{"a": NaN}', "NaN"),
        ("[Infinity]", "Infinity"),
        ("[-Infinity]", "-Infinity"),
        ("[1e400]", "too large for a float"),
        ('{"a": 1, "a": 2}', "names the key 'a' twice"),
        ("", "is empty"),
        ("  \n", "is empty"),
        ("{", "it is not JSON"),
    ],
)
def test_hostile_json_is_one_input_error(tmp_path, text, words):
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(InputError, match=words) as info:
        read_json(path, InputError, "a plan", "give a plan")
    assert "\n" not in str(info.value) and str(info.value).startswith(str(path))


def test_json_within_bounds_reads(tmp_path):
    path = tmp_path / "x.json"
    depth = MAX_JSON_DEPTH
    path.write_text("\ufeff" + json.dumps({"a": [1, -2.5e-300, 10**17, None, True]}) + "[" * 0)
    assert read_json(path, InputError, "x", "y") == {"a": [1, -2.5e-300, 10**17, None, True]}
    path.write_text("[" * depth + "]" * depth)
    read_json(path, InputError, "x", "y")


def test_json_reader_refuses_non_utf8_and_large_files(tmp_path, monkeypatch):
    import perfmodel.files

    (tmp_path / "bin.json").write_bytes(b"\xff\xfe{}")
    with pytest.raises(InputError, match="not UTF-8"):
        read_json(tmp_path / "bin.json", InputError, "x", "y")
    monkeypatch.setattr(perfmodel.files, "MAX_INPUT_BYTES", 10)
    (tmp_path / "big.json").write_text("[" + "1," * 20 + "1]")
    with pytest.raises(InputError, match="larger than"):
        perfmodel.files.read_json(tmp_path / "big.json", InputError, "x", "y")


@pytest.mark.parametrize("text", ["[" * 100_000, "1" * 5000, '{"format": NaN}'])
def test_predictor_load_raises_predictor_format_error(tmp_path, text):
    from perfmodel.fitting import Predictor

    (tmp_path / "p.json").write_text(text)
    with pytest.raises(PredictorFormatError):
        Predictor.load(tmp_path / "p.json")


def test_outputs_are_regular_files_never_devices(tmp_path):
    from perfmodel.readers import output_file

    if os.path.exists("/dev/null"):
        with pytest.raises(InputError, match="not a regular file"):
            output_file("/dev/null")  # the atomic rename would replace the device node (as root)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match="not a regular file"):
        output_file(tmp_path / "pipe")


# --- profiles ------------------------------------------------------------------------------------------


def _csv(tmp_path, change: dict, name="p.csv"):
    rows = [ROW, {**ROW, "batch_size": 2}, {**ROW, "batch_size": 4, **change}]
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("cell", ["4\x002", "42x", "4 2", "0x10", "1_000", "inf", "nan", "٤", "4.2.1", "1e", "--1"])
def test_a_cell_parses_whole_or_is_refused(tmp_path, cell):
    path = tmp_path / "p.csv"
    text = pd.DataFrame([ROW, {**ROW, "batch_size": 2}]).to_csv(index=False)
    path.write_text(text.replace(",64,2,", f",64,{cell},"))
    with pytest.raises(ProfileFormatError, match=r"p\.csv") as info:
        load_profile(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "column, value",
    [
        ("latency_ms", 1e-300),
        ("latency_ms", 2e9),
        ("memory_mb", 1e300),
        ("memory_mb", 1e-9),
        ("batch_size", 1e20),
        ("batch_size", 2**63),
        ("batch_size", 2**20 + 1),
        ("input_size", 65537),
        ("warmup_ms", 1e10),
        ("gpu_util_avg", 101),
        ("temp_c_max", 1000),
        ("power_w_max", 1e6),
        ("samples", 1e12),
        ("concurrency", 10**6),
    ],
)
def test_numbers_outside_their_physical_range_are_refused_by_file_row_and_column(tmp_path, column, value):
    path = _csv(tmp_path, {column: value})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no numpy cast warning on the way
        with pytest.raises(ProfileFormatError, match=rf"p\.csv, row 3, column '{column}': .* outside the range"):
            load_profile(path)


def test_every_numeric_column_has_a_range_and_the_shipped_profiles_are_inside():
    from pathlib import Path

    assert set(BOUNDS) <= NUMERIC_COLUMNS | INTEGER_COLUMNS
    for low, high in [*BOUNDS.values(), DEFAULT_BOUND]:
        assert 0 <= low <= high < math.inf
    for path in sorted((Path(__file__).resolve().parents[1] / "profiles").glob("*.csv")):
        load_profile(path)


def test_bounds_hold_at_their_edges(tmp_path):
    edge = {
        "latency_ms": 1e-6,
        "latency_p99_ms": 1e9,
        "warmup_ms": 0,
        "memory_mb": 1e9,
        "batch_size": 2**20,
        "input_size": 65536,
    }
    assert len(load_profile(_csv(tmp_path, edge))) == 3


def test_missing_columns_are_listed_once(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame([{"hardware": "cpu", "model": "m"}]).to_csv(path, index=False)
    with pytest.raises(ProfileFormatError) as info:
        load_profile(path)
    message = str(info.value)
    assert message.count("'latency_ms'") == 1 and message.count("batch_size") == 1 and "'model'" not in message


def test_a_column_named_twice_is_refused(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text(pd.DataFrame([ROW]).to_csv(index=False).replace("warmup_ms", "latency_ms"))
    with pytest.raises(ProfileFormatError, match="names the column 'latency_ms' twice"):
        load_profile(path)


_time = st.one_of(st.sampled_from([1e-6, 1e9, 1e-6 * 1.0000001]), st.floats(1e-6, 1e9))


@settings(max_examples=8, deadline=None)
@given(
    latency=st.lists(_time, min_size=4, max_size=4),
    memory=st.lists(st.one_of(st.just(0.0), _time), min_size=4, max_size=4),
    batches=st.sampled_from([(1, 2, 3, 4), (1, 8, 2**19, 2**20)]),
    size=st.sampled_from([1, 224, 65536]),
)
def test_fit_runs_on_any_profile_within_the_bounds_without_warnings(latency, memory, batches, size):
    """The fit's relative-error weights (1/y^2) and features (b x s^2) stay finite inside the bounds."""
    from perfmodel.fitting import fit

    rows = [
        {
            **ROW,
            "input_size": size,
            "batch_size": b,
            "latency_ms": lat,
            "latency_p99_ms": lat,
            "warmup_ms": lat,
            "memory_mb": mem,
        }
        for b, lat, mem in zip(batches, latency, memory)
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor = fit(pd.DataFrame(rows), families=["linear", "piecewise"])
        group = predictor.groups[0]
        values = group.latency_ms(np.array(batches, dtype=float), size)
    assert np.all(np.isfinite(values)) and np.all(values >= 0)
    assert [str(w.message) for w in caught if not issubclass(w.category, PerfmodelWarning)] == []


def test_a_dataframe_is_held_to_the_same_bounds():
    with pytest.raises(ProfileFormatError, match="outside the range"):
        validate_profile(pd.DataFrame([{**ROW, "latency_ms": 1e-300}]))


# --- predictors --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def predictor_dict():
    from perfmodel.fitting import fit

    rows = [
        {**ROW, "batch_size": b, "latency_ms": 1.0 + b, "latency_p99_ms": 2.0 + b, "memory_mb": 10.0 + b}
        for b in (1, 2, 4, 8)
    ]
    return fit(pd.DataFrame(rows), families=["piecewise"]).to_dict()


def _changed(data, change):
    data = json.loads(json.dumps(data))
    change(data["groups"][0], data)
    return data


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda g, d: g.update(batch_sizes=[-4, 2]), "batch_sizes holds -4"),
        (lambda g, d: g.update(batch_sizes=[True, 2]), "batch_sizes holds True"),
        (lambda g, d: g.update(input_sizes=[10**6]), "input_sizes holds 1000000"),
        (lambda g, d: g.update(memory_capacity_mb=float("nan")), "memory_capacity_mb is nan"),
        (lambda g, d: g.update(memory_capacity_mb=-5), "memory_capacity_mb is -5"),
        (lambda g, d: g.update(memory_capacity_mb="lots"), "memory_capacity_mb is 'lots'"),
        (lambda g, d: g.update(ok_batches=[[64]]), "ok_batches is not a list of"),
        (lambda g, d: g.update(oom_batches=[[64, -1]]), "oom_batches holds -1"),
        (lambda g, d: g.update(provenance=[1]), "provenance is not an object"),
        (lambda g, d: g["key"].update(hardware=["cpu"]), "lacks its hardware"),
        (lambda g, d: g["key"].update(mode={"a": 1}), "neither text nor a whole number"),
        (lambda g, d: g["quantities"]["latency_ms"].update(report=[]), "report of latency_ms is not an object"),
        (
            lambda g, d: g["quantities"]["latency_ms"]["report"].update(training_range={"batch_size": "ab"}),
            "training range",
        ),
        (lambda g, d: g["quantities"]["latency_ms"]["model"]["fitted"].update(knots_y=[1e300, 1e301]), "beyond 1e30"),
        (
            lambda g, d: g["quantities"]["latency_ms"]["model"]["fitted"].update(knots_y=["a", "b"]),
            "other than numbers",
        ),
        (lambda g, d: d.update(schema_version="1"), 'schema_version "1", which is text'),
        (lambda g, d: d.update(schema_version=3), "predictor schema_version 3, but this perfmodel reads versions 1, 2"),
    ],
)
def test_damaged_predictors_are_refused_in_one_sentence(predictor_dict, change, words):
    from perfmodel.fitting import Predictor

    with pytest.raises(PredictorFormatError, match=words.replace("(", r"\(").replace("[", r"\[")) as info:
        Predictor.from_dict(_changed(predictor_dict, change), "p.json")
    assert "\n" not in str(info.value)


def test_tree_models_check_their_integers_and_learning_rate():
    from perfmodel.fitting.regressors import TreeEnsembleRegression, _Estimator

    X, y = np.array([[1, 64], [2, 64], [4, 64], [8, 64]]), np.array([1.0, 2.0, 4.0, 8.0])
    good = TreeEnsembleRegression(n_estimators=3).fit(X, y).to_dict()
    for change in (
        lambda d: d["params"].update(learning_rate="fast"),
        lambda d: d["fitted"]["trees"][0].update(feature=[0.5] * len(d["fitted"]["trees"][0]["feature"])),
    ):
        data = json.loads(json.dumps(good))
        change(data)
        with pytest.raises(PredictorFormatError):
            _Estimator.from_dict(data)


# --- plans (report --plan) -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, words",
    [
        ({"deadline_s": "sixty"}, '"deadline_s" is "sixty"'),
        ({"deadline_s": 0}, '"deadline_s" is 0'),
        ({"status": "maybe"}, "status 'maybe'"),
        ({"margin": 1.5}, '"margin" is 1.5'),
        ({"total_gpus": 2.5}, '"total_gpus" is 2.5'),
        ({"gpus_by_type": {"cpu": -1}}, "gives 'cpu' the value -1"),
        ({"unservable_sizes": [0]}, '"unservable_sizes" is [0]'),
        ({"assignments": [{"hardware": "cpu", "batch_size": 4, "finish_s": 1e300}]}, '"finish_s" is 1e+300'),
        ({"assignments": [{"hardware": "cpu", "batch_size": 4, "finish_s": 1, "count": 0}]}, '"count" is 0'),
    ],
)
def test_plan_files_are_checked_field_by_field(tmp_path, change, words):
    from perfmodel.report.inputs import read_plan

    plan = {
        "status": "optimal",
        "deadline_s": 60,
        "assignments": [{"hardware": "cpu", "batch_size": 4, "finish_s": 50}],
    }
    (tmp_path / "plan.json").write_text(json.dumps({**plan, **change}))
    with pytest.raises(InputError) as info:
        read_plan(tmp_path / "plan.json")
    assert words in str(info.value) and "\n" not in str(info.value)


# --- the solver at its largest numbers -------------------------------------------------------------------------


def _solve(images, batch, latency, warmup, count=None, deadline=60.0, mode="soft"):
    problem = solvers.Problem(
        [solvers.GpuType("g", count, [solvers.Candidates(224, batch, latency, warmup)])],
        {224: images},
        deadline,
        mode=mode,
        time_limit_s=10,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow or cast warning
        return solvers.solve(problem)


@pytest.mark.parametrize(
    "images, batch, latency, warmup, count, deadline, mode",
    [
        (MAX_COUNT, [1, 2**20], [1e-12, 1e-3], [1e-12, 1e-3], None, 3e8, "soft"),
        (MAX_COUNT, [MAX_COUNT], [1e-15], [1e-15], None, 1.0, "soft"),
        (MAX_COUNT, [7, 1024], [1e-9, 5e-9], [0.0, 0.0], 10**6, 3e8, "soft"),
        (None, [1, 2**20], [1e-12, 1e-12], [0.0, 0.0], MAX_COUNT, 3e8, "relaxed"),
        (MAX_COUNT, [1], [100.0], [100.0], None, 60.0, "soft"),  # infeasible: a plain answer
    ],
)
def test_the_largest_counts_solve_exactly(images, batch, latency, warmup, count, deadline, mode):
    try:
        plan = _solve(images, batch, latency, warmup, count, deadline, mode)
    except solvers.InfeasibleProblem as exc:
        assert exc.diagnosis.reason
        return
    asked = MAX_COUNT if images is None else images
    assert plan.total_images == asked if mode == "soft" else plan.total_images <= asked


@pytest.mark.parametrize(
    "problem",
    [
        lambda: solvers.Problem(
            [solvers.GpuType("g", None, [solvers.Candidates(224, [1], [1.0], [1.0])])], {224: MAX_COUNT + 1}, 60
        ),
        lambda: solvers.Problem(
            [solvers.GpuType("g", None, [solvers.Candidates(224, [1], [1.0], [1.0])])], {224: MAX_COUNT, 64: 1}, 60
        ),
        lambda: solvers.GpuType("g", MAX_COUNT + 1, []),
        lambda: solvers.Candidates(224, [MAX_COUNT + 1], [1.0], [1.0]),
        lambda: solvers.Problem([solvers.GpuType("g", None, [])], {224: 1}, 60, max_batches=10**30),
    ],
)
def test_counts_beyond_the_largest_are_problem_errors(problem):
    with pytest.raises(solvers.ProblemError, match="at most|more than|from 1 to"):
        problem()


def test_a_cover_highs_leaves_short_by_its_tolerance_is_topped_up():
    """HiGHS accepts 7 GPUs of 142,857,142,857 images for 10^12 (one image short, 1e-12 relative)."""
    cap = np.array([[148], [142_857_142_857], [5_242_880]])
    need, avail = np.array([1e12]), np.array([0.0, 1e6, 1e6])
    result = milp.min_gpus(cap, need, avail, np.array([1.0, 1.0, 1.0]))
    assert int((cap[:, 0].astype(object) * result.x[:, 0]).sum()) >= 10**12
    most = milp.max_images(cap, need, avail, rel_gap=1e-4)
    fewest = milp.fewest_for_images(
        cap, need, avail, np.array([0.006, 30659.2, 1798.0]), int(most.objective), most, rel_gap=1e-4
    )
    assert int((cap[:, 0].astype(object) * fewest.x[:, 0]).sum()) >= int(most.objective)


def test_relaxed_mode_survives_an_lp_highs_cannot_finish():
    """HiGHS's simplex ends 'unknown' on this LP relaxation (counts near 10^9); the integer model decides."""
    need = np.array([457_798_727.0, 457_798_728.0])
    cap = np.minimum(
        np.array([[1024, 1024], [915_597_455, 915_597_455], [2_724_944, 456_883_844]]), need.astype(np.int64)
    )
    avail, weight = np.array([1.0, 1.0, 0.0]), np.array([4.51452512, 0.06906977, 0.38669682])
    most = milp.max_images(cap, need, avail, rel_gap=1e-4)
    fewest = milp.fewest_for_images(cap, need, avail, weight, int(most.objective), most, rel_gap=1e-4)
    assert int((cap.astype(object) * fewest.x).sum()) >= int(most.objective)
