"""The public API as a scheduler uses it (perfmodel.* only): arguments of the wrong type or shape are
refused with a PerfmodelError in one sentence, never a TypeError, ValueError or AttributeError from
deep inside; results survive pickling; nothing is printed."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import repo_env

import perfmodel

ROOT = Path(__file__).resolve().parents[1]
CPU_PROFILE = ROOT / "profiles" / "cpu-resnet50-torch.csv"


@pytest.fixture(scope="module")
def predictor():
    return perfmodel.fit(CPU_PROFILE, families=["linear"])


def one_sentence(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("path", [None, 3, pd.DataFrame({"a": [1]})])
@pytest.mark.parametrize(
    "read", [perfmodel.load_profile, perfmodel.Predictor.load, perfmodel.read_run_plan], ids=lambda f: f.__name__
)
def test_readers_refuse_what_is_not_a_path(read, path, capsys):
    with pytest.raises(perfmodel.InputError) as caught:
        read(path)
    assert "expected the path of a file" in one_sentence(caught.value)
    assert capsys.readouterr() == ("", "")


def test_writers_refuse_a_path_they_cannot_write(predictor, tmp_path):
    profile = perfmodel.load_profile(CPU_PROFILE)
    for target in (None, tmp_path, tmp_path / "missing" / "x.out"):
        with pytest.raises(perfmodel.InputError) as caught:
            predictor.save(target)
        one_sentence(caught.value)
        with pytest.raises(perfmodel.InputError) as caught:
            perfmodel.write_profile(profile, target)
        one_sentence(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == []


PLAN = dict(profiles=[str(CPU_PROFILE)], pool={"cpu": 2}, input_size=64, confidence="none")


@pytest.mark.parametrize(
    "settings",
    [
        {"input_size": 0},  # was planned at the default 224 px
        {"input_size": 64.5},  # was planned at 64 px
        {"input_size": "abc"},
        {"input_size": [64]},
        {"images": None, "input_size": None, "mix": {64: 3.5}},  # was planned for 3 images
        {"images": None, "input_size": None, "mix": {64.7: 3}},  # was planned at 64 px
        {"input_size": None, "mix": [64]},
        {"pool": ["cpu"]},
        {"pool": "cpu=2"},
        {"pool": {3: 1}},
        {"prices": ["cpu"], "objective": "cost"},
        {"model": 3},
        {"model": ["resnet50"]},
        {"use": ["p50"]},
        {"profiles": [None]},
        {"profiles": [pd.DataFrame()]},
        {"predictors": [3]},
    ],
    ids=repr,
)
def test_make_plan_refuses_settings_of_the_wrong_type_or_shape(settings, capsys):
    with pytest.raises(perfmodel.InputError) as caught:
        settings = {**PLAN, **settings}
        perfmodel.make_plan(settings.pop("images", 100), 60, **settings)
    one_sentence(caught.value)
    assert capsys.readouterr() == ("", "")


def test_make_plan_takes_one_source_where_a_list_belongs():
    one, listed = (
        perfmodel.make_plan(100, 60, **{**PLAN, "profiles": p}).to_dict() for p in (CPU_PROFILE, PLAN["profiles"])
    )
    assert (one["sources"], one["assignments"]) == (listed["sources"], listed["assignments"])


def test_make_plan_refuses_a_request_that_is_not_a_plan_request():
    with pytest.raises(perfmodel.InputError, match="PlanRequest"):
        perfmodel.make_plan(100, 60, {"pool": {"cpu": 2}})


@pytest.mark.parametrize("settings", [{"input_size": 0}, {"input_size": 64.5}, {"pool": ["cpu"]}], ids=repr)
def test_make_online_plan_refuses_settings_of_the_wrong_type_or_shape(settings):
    with pytest.raises(perfmodel.InputError) as caught:
        perfmodel.make_online_plan("40/s", "200ms", **{"profiles": [CPU_PROFILE], "input_size": 64, **settings})
    one_sentence(caught.value)


@pytest.mark.parametrize("margin", [-0.5, float("nan")])
def test_make_plan_refuses_a_margin_outside_0_to_1_under_the_probability_rule(margin):
    # With the default deadline probability a margin > 0 is refused as a second rule; one below 0 (or NaN)
    # was ignored without a word, and the plan kept no margin.
    with pytest.raises(perfmodel.InputError, match="margin"):
        perfmodel.make_plan(100, 60, **{**PLAN, "confidence": None, "margin": margin})


@pytest.mark.parametrize(
    "query",
    [
        lambda p: p.latency_ms("abc", 224),
        lambda p: p.latency_ms({}, 224),
        lambda p: p.latency_ms(1j, 224),
        lambda p: p.warmup_ms([1, 2], [64, 128, 224]),  # shapes that do not broadcast
        lambda p: p.extrapolates("abc", 224),
        lambda p: p.groups[0].measured_batch_range("abc"),
        lambda p: p.max_batch(224, memory_budget_mb="abc"),
        lambda p: p.max_batch(224, memory_budget_mb=[100]),
        lambda p: p.groups[0].error_quantile("0.9"),
        lambda p: p.groups[0].error_quantile(0.9, quantity="latency"),  # was None: as if no error was measured
        lambda p: p.groups[0].error_samples(quantity="latency"),
    ],
)
def test_predictor_queries_refuse_what_is_not_numbers(predictor, query, capsys):
    with pytest.raises(perfmodel.InputError) as caught:
        query(predictor)
    one_sentence(caught.value)
    assert capsys.readouterr() == ("", "")


def test_predictor_answers_an_empty_query_with_an_empty_array(predictor):
    assert predictor.latency_ms([], 224).shape == (0,)
    assert predictor.throughput_ips(np.array([], dtype=int), 224).shape == (0,)


def test_a_predictor_survives_pickling_and_deepcopy(predictor):
    # multiprocessing, Ray and copy.deepcopy pickle it: "cannot pickle 'mappingproxy' object" before
    import copy
    import pickle

    for other in (pickle.loads(pickle.dumps(predictor)), copy.deepcopy(predictor)):
        assert other.to_json() == predictor.to_json()
        assert other.latency_ms(8, 224) == predictor.latency_ms(8, 224)
        assert other.extrapolates([1, 64], 224).tolist() == predictor.extrapolates([1, 64], 224).tolist()
        with pytest.raises(TypeError):
            other.groups[0].key["hardware"] = "h100"  # still read-only


@pytest.mark.parametrize(
    "call",
    [
        lambda profile: perfmodel.fit(3),
        lambda profile: perfmodel.fit(None),
        lambda profile: perfmodel.fit(profile, on_progress=3),
        lambda profile: perfmodel.fit(profile, target_hardware=3),
        lambda profile: perfmodel.validate_profile(str(CPU_PROFILE)),
        lambda profile: perfmodel.load_profiles(3),
    ],
)
def test_fit_and_profiles_refuse_arguments_of_the_wrong_type(call):
    with pytest.raises(perfmodel.InputError) as caught:
        call(perfmodel.load_profile(CPU_PROFILE))
    one_sentence(caught.value)


def test_one_name_or_path_where_a_list_belongs_is_a_list_of_one():
    # they were read letter by letter: "unknown model families l, i, n, e, a, r", "p does not exist"
    profile = perfmodel.load_profile(CPU_PROFILE)
    fitted = perfmodel.fit(profile, families="linear")
    assert {q["family"] for q in fitted.report.values() if "family" in q} <= {"linear", None}
    assert perfmodel.load_profiles(str(CPU_PROFILE)).equals(profile)
    with pytest.raises(perfmodel.InputError, match="cannot predict h100"):  # not "no specification for 'h'"
        perfmodel.fit(profile, families="linear", target_hardware="h100")


@pytest.mark.parametrize(
    "query, unit",
    [
        ("latency_ms", "milliseconds"),
        ("latency_p99_ms", "milliseconds"),
        ("warmup_ms", "milliseconds"),
        ("memory_mb", "MiB"),
        ("throughput_ips", "per second"),
        ("max_batch", "MiB"),
        ("extrapolates", "measured"),
    ],
)
def test_every_query_says_its_unit_in_its_docstring(query, unit):
    for cls in (perfmodel.Predictor, perfmodel.GroupPredictor):
        assert unit in (getattr(cls, query).__doc__ or ""), f"{cls.__name__}.{query}"


def test_select_refuses_a_key_it_does_not_know(predictor):
    assert predictor.select(hardware="cpu", architecture="inprocess") == predictor.groups
    with pytest.raises(TypeError, match="hardwar"):  # it returned (), as if there were no such group
        predictor.select(hardwar="cpu")


PLANS_IN_THREADS = textwrap.dedent(
    """
    import json, sys, warnings
    from concurrent.futures import ThreadPoolExecutor
    import perfmodel
    warnings.simplefilter("ignore")

    def job(n):
        settings = dict(pool={"cpu": 2}, profiles=[sys.argv[1]], input_size=64, confidence="none")
        return json.dumps(perfmodel.make_plan(100 + 100 * (n % 3), 30, **settings).to_dict()["assignments"])

    serial = [job(n) for n in range(12)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(job, range(12))) == serial
    """
)


def test_plans_made_in_threads_at_once_print_nothing_and_agree():
    # Pyomo silences HiGHS by redirecting the process's stdout and stderr during a solve: solves in threads
    # at once printed HiGHS's log, killed a thread on a closed descriptor ("lost sys.stderr") or hung.
    done = subprocess.run(
        [sys.executable, "-c", PLANS_IN_THREADS, str(CPU_PROFILE)],
        env=repo_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize("data", [{}, [], {"key": {"hardware": "cpu"}}, "x"], ids=repr)
def test_a_damaged_group_is_a_predictor_format_error(data):
    with pytest.raises(perfmodel.PredictorFormatError) as caught:  # was KeyError or TypeError
        perfmodel.GroupPredictor.from_dict(data)
    one_sentence(caught.value)


@pytest.mark.parametrize(
    "settings",
    [{"max_queue_delays": ["x"]}, {"rate": None, "arrivals": [0.1, 0.2, "x"]}, {"seed": "x"}, {"request_size": "x"}],
    ids=repr,
)
def test_make_online_plan_refuses_what_is_not_numbers(settings):
    settings = {"rate": "40/s", "profiles": [CPU_PROFILE], "input_size": 64, **settings}
    with pytest.raises(perfmodel.InputError) as caught:  # was ValueError or TypeError from numpy or the simulation
        perfmodel.make_online_plan(settings.pop("rate"), "200ms", **settings)
    one_sentence(caught.value)
