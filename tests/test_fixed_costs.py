"""Load and first call as measured distributions (perfmodel/fixed_costs.py), from profiles to predictors to
plans, held against the first plans executed on an H100 (../shared/gpu/h100-2026-11-27, issue 37)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from perfmodel.errors import PerfmodelWarning, PredictorFormatError
from perfmodel.fitting import Predictor, fit
from perfmodel.fixed_costs import (
    DEFAULT_FIRST_CALLS_MS,
    DEFAULT_LOADS_MS,
    SPLIT_LOADS_MS,
    FixedCost,
    Samples,
    counted_import,
    default_samples,
    first_call_samples_ms,
    load_samples_ms,
)
from perfmodel.planning.batch import NoPlanError, make_plan
from perfmodel.schema import load_profile

H100 = REPO / "profiles" / "h100-resnet50-torch-fp16.csv"
# The first plan executed on the H100 (h100-validate.jsonl): 224 px, 10 s, P=0.95, 9,240 images at batch 385,
# stated 0.99999999; its run measured a load of 7.80 s, a first call of 1.97 s and batches of 40.0 ms where
# the plan said 37.4 ms, and missed the deadline (10.72 s).
RUN_LOAD_S, RUN_FIRST_CALL_S, RUN_BATCH_RATIO = 7.80, 1.97, 40.0 / 37.4


@pytest.fixture(scope="module")
def h100_predictor():
    with pytest.warns(PerfmodelWarning, match="counted the import"):  # written before the load split
        return fit(str(H100))  # as `perfmodel fit profiles/h100-resnet50-torch-fp16.csv`


# --- samples: one per process ------------------------------------------------------------------------


def test_the_h100_profile_holds_seven_loads_not_forty_eight():
    """The six fresh warm-up processes' loads, and the measuring worker's one load that 42 rows repeat."""
    rows = load_profile(H100)
    loads = load_samples_ms(rows)
    assert len(rows) == 48 and len(loads) == 7
    assert sorted(loads)[0] == pytest.approx(6097.69) and max(loads) == pytest.approx(8891.27)
    first = first_call_samples_ms(rows)
    assert len(first) == 6 and 2000 < min(first) and max(first) < 2300  # warm-up beyond the steady batch
    assert counted_import(rows).all()  # written before the load split: every load counted the import


def test_the_h200_profiles_since_the_load_split_measured_the_load_as_run_counts_it():
    """SPLIT_LOADS_MS (how much more load than run takes a plan from an old profile counts) are the loads
    of the H200's profiles of 2026-11-28, process by process, none of them counting the import."""
    results = REPO / "experiments" / "008_gpu_campaign" / "results" / "h200"
    names = ("h200-resnet50-torch-channels-last-fp16.csv", "h200-resnet50-torch-channels-last-cuda-graphs-fp16.csv")
    rows = [load_profile(results / name) for name in names]
    assert not any(counted_import(r).any() for r in rows)
    assert tuple(x for r in rows for x in load_samples_ms(r)) == pytest.approx(SPLIT_LOADS_MS, abs=1e-3)


def test_rows_naming_one_process_share_one_sample_and_older_rows_one_per_value():
    frame = pd.DataFrame(
        {
            "load_ms": [100.0, 100.0, 120.0, 90.0, 90.0, 95.0],
            "load_process": ["measuring-a", "measuring-a", "fresh-b", None, None, None],
            "warmup_ms": [np.nan, np.nan, 30.0, np.nan, 25.0, 26.0],
            "latency_ms": [10.0] * 6,
            "status": ["ok"] * 6,
            "warmup_method": ["fresh-process"] * 6,
        }
    )
    # measuring-a once, fresh-b, and the unnamed rows by value: 90 (twice) once, 95
    assert sorted(load_samples_ms(frame)) == [90.0, 95.0, 100.0, 120.0]
    assert sorted(first_call_samples_ms(frame)) == [15.0, 16.0, 20.0]
    in_process = frame.assign(warmup_method="in-process")  # warm-ups of a process that ran other batches first
    assert first_call_samples_ms(in_process) == []


def test_the_defaults_are_the_shipped_measurements():
    """The defaults a plan states are what this project's GPU profiles hold, process by process."""
    files = {
        "h100": [H100],
        "h200": [
            REPO / "profiles" / "h200-resnet50-torch-fp16.csv",
            REPO / "experiments" / "008_gpu_campaign" / "results" / "h200" / "h200-efficientnet_b0-torch-fp16.csv",
        ],
    }
    for hardware, paths in files.items():
        rows = [load_profile(p) for p in paths]
        loads = [x / 1000 for r in rows for x in load_samples_ms(r)]
        first = [x / 1000 for r in rows for x in first_call_samples_ms(r)]
        assert default_samples(hardware, "load").values_s == pytest.approx(loads, abs=1e-5)
        assert default_samples(hardware, "first call").values_s == pytest.approx(first, abs=1e-5)
    everything = default_samples("a100", "load")
    assert everything.count == sum(len(v) for v in DEFAULT_LOADS_MS.values())
    assert default_samples("a100", "first call").count == sum(len(v) for v in DEFAULT_FIRST_CALLS_MS.values())
    assert default_samples("cpu", "load") is None  # a CPU profile measures its own


def test_a_cost_with_one_sample_takes_the_defaults_spread_and_with_none_its_value_too():
    default = Samples((6.0, 7.0, 8.0), "the default")
    two = FixedCost("load", Samples((5.0, 6.0), "mine"), default)
    assert two.median_s == 5.5 and two.sd_at(5.5) == pytest.approx(np.std([5.0, 6.0], ddof=1) * np.sqrt(1.5))
    one = FixedCost("load", Samples((3.0,), "mine"), default)
    assert one.median_s == 3.0 and one.sd_at(3.0) == pytest.approx(default.rel_sd * 3.0) and default.rel_sd > 0
    none = FixedCost("load", Samples((), "none"), default)
    assert none.guessed and none.median_s == 7.0 and none.sd_at(7.0) > 0 and "a guess" in none.describe()
    assert FixedCost("load", Samples((), "none")).median_s == 0.0  # a CPU with nothing measured: 0 s, said


# --- predictors carry the samples -------------------------------------------------------------------------


def test_a_predictor_carries_the_samples_and_an_older_file_still_loads(h100_predictor, tmp_path):
    group = h100_predictor.groups[0]
    assert len(group.load_samples_ms) == 7 and len(group.first_call_samples_ms) == 6
    assert group.load_ms == pytest.approx(np.median(group.load_samples_ms))  # 7.34 s, not the repeated 6.10 s
    path = tmp_path / "h100.json"
    h100_predictor.save(path)
    again = Predictor.load(path).groups[0]
    assert again.load_samples_ms == group.load_samples_ms and again.first_call_samples_ms == group.first_call_samples_ms
    data = json.loads(path.read_text())
    del data["groups"][0]["fixed_costs"]  # a file written before the samples
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    assert Predictor.load(old).groups[0].load_samples_ms == ()
    data["groups"][0]["fixed_costs"] = {"load_ms": [1.0, -5.0]}
    old.write_text(json.dumps(data))
    with pytest.raises(PredictorFormatError, match="fixed_costs"):
        Predictor.load(old)


# --- the plans of issue 37's acceptance ---------------------------------------------------------------------


def _sources(kind, h100_predictor):
    return {"profiles": [str(H100)]} if kind == "profile" else {"predictors": [h100_predictor]}


@pytest.mark.parametrize("kind", ["profile", "predictor"])
def test_the_h100_plan_that_missed_its_deadline_is_no_longer_promised(kind, h100_predictor):
    """9,240 images at 224 px by 10 s on one H100: refused at P=0.95, and any plan of them states < 0.9."""
    sources = _sources(kind, h100_predictor)
    with pytest.raises(NoPlanError, match="probability 0.95") as refused:
        make_plan(9240, 10, input_size=224, pool={"h100": 1}, confidence=0.95, **sources)
    with pytest.raises(NoPlanError) as even_the_median:  # 0.5 is the lowest: no lower `confidence` to suggest
        make_plan(9240, 10, input_size=224, pool={"h100": 1}, confidence=0.5, **sources)
    for said in (refused, even_the_median):  # the plans of all 9,240 images reach less than 0.5
        assert "`confidence`" not in str(said.value)
    plan = make_plan(9240, 10, input_size=224, confidence="none", **sources)
    d = plan.to_dict()
    assert d["deadline_probability"] < 0.9
    assert d["spread_by_source_s"]["load and warm-up"] > 0.5  # the load's sd alone is ~1.1 s
    fixed = d["data_by_type"]["h100"]["fixed_costs"]
    assert fixed["load"]["samples"] == 7 and fixed["load"]["median_s"] == pytest.approx(7.34334)
    (first,) = fixed["first_call_excess"].values()  # one option: torch fp16
    assert first["samples"] == 6 and fixed["share_of_deadline"] > 0.9


@pytest.mark.parametrize("kind", ["profile", "predictor"])
def test_the_relaxed_h100_plan_would_have_met_the_deadline_of_the_run_that_missed(kind, h100_predictor):
    """As many images as fit in 10 s on one H100 at P=0.95: either none, or few enough that the first run's
    measured load, first call and (7% slower) batches would have finished them in time."""
    sources = _sources(kind, h100_predictor)
    try:
        plan = make_plan(None, 10, input_size=224, mode="relaxed", pool={"h100": 1}, confidence=0.95, **sources)
    except NoPlanError:
        return
    for a in plan.assignments:
        assert RUN_LOAD_S + RUN_FIRST_CALL_S + (a.batches - 1) * a.latency_s * RUN_BATCH_RATIO <= 10


def test_a_gpu_plan_never_counts_a_load_without_spread(h100_predictor, tmp_path):
    """Published numbers (no load measured) and a predictor file of before (one load_ms): the load and the
    first call are still counted, with a spread, and the plan says which default stands in."""
    published = make_plan(
        100_000, 60, input_size=224, profiles=[str(REPO / "profiles" / "reference" / "dle-pytorch-resnet50.csv")]
    )
    d = published.to_dict()
    (name,) = d["gpus_by_type"]
    fixed = d["data_by_type"][name]["fixed_costs"]
    assert fixed["load"]["default"]["for"] == "the value and its spread" and fixed["load"]["median_s"] > 3
    (added,) = fixed["first_call_added_s"].values()
    assert added > 1 and d["spread_by_source_s"]["load and warm-up"] > 0
    assert d["load_time"][name]["source"] == "default"
    data = json.loads(h100_predictor.to_json())
    del data["groups"][0]["fixed_costs"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    d = make_plan(50_000, 60, input_size=224, predictors=[str(old)]).to_dict()
    fixed = d["data_by_type"]["h100"]["fixed_costs"]
    assert fixed["load"]["samples"] == 1 and fixed["load"]["default"]["for"] == "the spread"
    assert d["spread_by_source_s"]["load and warm-up"] > 0
    given = make_plan(50_000, 60, input_size=224, predictors=[str(old)], load_time="2s").to_dict()
    load = given["data_by_type"]["h100"]["fixed_costs"]["load"]
    assert given["load_time"]["h100"] == {"s": 2.0, "source": "--load-time"} and load["sd_s"] > 0
