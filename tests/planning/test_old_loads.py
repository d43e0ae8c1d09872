"""Profiles whose load counted the import (perfmodel/fixed_costs.py): the torch profiler timed the import of
the model's code (and on a GPU the CUDA context) inside load_ms before the load split, which `perfmodel
run` does before its clock. Plans still count those loads as measured, and say so: in the load line, in
`fixed_costs.load.load_includes_import` of the JSON, and, for a GPU, in a warning naming the file; plans from
a predictor fitted on such a profile (which marks those loads, fixed_costs.load_counted_import_ms) alike."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from test_plan import profile_rows

from perfmodel import fit
from perfmodel.errors import InfeasibleError, PerfmodelWarning
from perfmodel.fixed_costs import SPLIT_LOADS_MS, counted_import
from perfmodel.planning.batch import make_plan
from perfmodel.planning.batch_text import describe

OLD_LOADS_MS = (4000.0, 5000.0, 6000.0)  # as the old profiler measured them, import included


def _profile(tmp_path, hardware: str, style: str) -> str:
    """A profile of three processes' loads: `old` as written before the split (perfmodel's provenance, no
    load_process), `new` as written since (load_process named), `hand` without perfmodel's provenance."""
    rows = profile_rows(hardware=hardware, sizes=(64,))
    loads = {"old": OLD_LOADS_MS, "new": (40.0, 50.0, 60.0), "hand": (40.0, 50.0, 60.0)}[style]
    for i, row in enumerate(rows):
        row["load_ms"] = loads[i % 3]
        if style != "hand":
            row["perfmodel"] = "0.2.0"
        if style == "new":
            row["load_process"] = f"fresh-{i % 3}"
    path = tmp_path / f"{hardware}-{style}.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def _fitted(profile: str) -> str:
    """The predictor `perfmodel fit` writes of a profile, saved beside it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfmodelWarning)
        predictor = fit(profile, families=["linear"])
    path = profile.removesuffix(".csv") + ".json"
    predictor.save(path)
    return path


def _plan(path: str, hardware: str, source: str = "profiles", **settings):
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        job = make_plan(2000, 60, input_size=64, pool={hardware: 1}, **{source: [path]}, confidence="none", **settings)
    told = [str(w.message) for w in said if issubclass(w.category, PerfmodelWarning) and "import" in str(w.message)]
    (line,) = [x for x in describe(job) if x.startswith(f"load per {hardware}")]
    return job.to_dict()["data_by_type"][hardware]["fixed_costs"]["load"], line, told


def test_which_rows_counted_the_import():
    frame = pd.DataFrame(
        {
            "load_ms": [5000.0, 50.0, 50.0, 60.0, 900.0, np.nan],
            "perfmodel": ["0.2.0", "0.2.0", "0.2.0", None, "0.2.0", "0.2.0"],
            "load_process": [None, "measuring-a", None, None, None, None],
            "load_build_ms": [np.nan, np.nan, 40.0, np.nan, np.nan, np.nan],
            "backend": ["torch-channels-last", "torch", "torch", "torch", "triton", "torch"],
        }
    )
    # old torch row; a named process; a fresh process's parts; by hand; Triton's server start; no load
    assert counted_import(frame).tolist() == [True, False, False, False, False, False]


def test_an_old_gpu_profiles_loads_are_counted_as_measured_and_the_plan_says_they_include_the_import(tmp_path):
    path = _profile(tmp_path, "h200", "old")
    load, line, told = _plan(path, "h200")
    assert load["samples"] == 3 and load["median_s"] == pytest.approx(5.0)  # no number changed
    late = 5.0 - np.median(SPLIT_LOADS_MS) / 1000
    assert load["load_includes_import"] == {
        "from": f"profile {path}",
        "samples": 3,
        "range_s": [4.0, 6.0],
        "more_than_run_takes_s": pytest.approx(late),
    }
    said = "(3 processes, 4-6 s) counted the import of the model's code, which perfmodel run does before its clock"
    assert said in line and f"about {late:.2g} s more load than run takes" in line and "profile again" in line
    (warning,) = told
    assert warning.startswith("h200: the loads of profile " + path) and said in warning


def test_a_new_gpu_profiles_loads_are_not_flagged(tmp_path):
    load, line, told = _plan(_profile(tmp_path, "h200", "new"), "h200")
    assert load["samples"] == 3 and load["median_s"] == pytest.approx(0.05) and load["load_includes_import"] is None
    assert "import" not in line and not told


def test_a_hand_written_profiles_loads_are_taken_as_the_format_describes_them(tmp_path):
    load, _, told = _plan(_profile(tmp_path, "h100", "hand"), "h100")
    assert load["load_includes_import"] is None and not told


def test_an_old_cpu_profile_is_said_in_its_load_line_without_a_warning(tmp_path):
    """A CPU's old load is a second or two of a minute: said where the load is, not on every plan."""
    load, line, told = _plan(_profile(tmp_path, "cpu", "old"), "cpu")
    assert load["median_s"] == pytest.approx(5.0) and load["load_includes_import"]["more_than_run_takes_s"] is None
    assert "more load than run takes, by the import's share" in line and not told


def test_a_load_time_given_replaces_them_without_a_note(tmp_path):
    load, line, told = _plan(_profile(tmp_path, "h200", "old"), "h200", load_time="3s")
    assert load["median_s"] == 3.0 and load["load_includes_import"] is None and "import" not in line and not told


def test_a_refused_plan_names_the_loads_that_counted_the_import(tmp_path):
    """A refusal may be those loads' doing (4-6 s of a 5 s deadline): the user is told which files, and why."""
    path = _profile(tmp_path, "h200", "old")
    with warnings.catch_warnings(record=True) as said, pytest.raises(InfeasibleError):
        warnings.simplefilter("always")
        make_plan(2000, 5, input_size=64, pool={"h200": 1}, profiles=[path], confidence="none")
    told = [str(w.message) for w in said if "counted the import" in str(w.message)]
    assert len(told) == 1 and told[0].startswith("h200: the loads of profile " + path)


def test_a_refusal_names_only_the_loads_of_the_pools_gpu_types(tmp_path):
    """A type outside the pool could not have been used: its loads are no reason for the refusal."""
    paths = [_profile(tmp_path, name, "old") for name in ("h100", "h200")]
    with warnings.catch_warnings(record=True) as said, pytest.raises(InfeasibleError):
        warnings.simplefilter("always")
        make_plan(2000, 5, input_size=64, pool={"h200": 1}, profiles=paths, confidence="none")
    told = [str(w.message) for w in said if "counted the import" in str(w.message)]
    assert [line.split(":")[0] for line in told] == ["h200"]


def _import_clause(line: str) -> str:
    return line[line.index("the loads of ") : line.index("as run counts it)")]


@pytest.mark.parametrize("hardware", ["h200", "cpu"])
def test_a_plan_from_a_predictor_of_an_old_profile_says_what_the_plan_from_the_profile_says(tmp_path, hardware):
    """fit -> JSON -> plan: the load line, the JSON and (for a GPU) the warning, the profile's name for the
    predictor's; the loads still counted as measured."""
    profile = _profile(tmp_path, hardware, "old")
    predictor = _fitted(profile)
    load, line, told = _plan(profile, hardware)
    from_predictor, predictor_line, predictor_told = _plan(predictor, hardware, source="predictors")
    same = f"profile {profile}", f"predictor {predictor}"
    assert from_predictor["median_s"] == load["median_s"] == pytest.approx(5.0)
    assert from_predictor["load_includes_import"] == {**load["load_includes_import"], "from": same[1]}
    assert _import_clause(predictor_line) == _import_clause(line).replace(*same)
    assert predictor_told == [w.replace(*same) for w in told] and len(told) == (hardware != "cpu")


def test_a_plan_from_a_predictor_of_a_new_profile_says_nothing_of_the_import(tmp_path):
    load, line, told = _plan(_fitted(_profile(tmp_path, "h200", "new")), "h200", source="predictors")
    assert load["median_s"] == pytest.approx(0.05) and load["load_includes_import"] is None
    assert "import" not in line and not told


def test_a_load_transferred_from_an_old_profile_says_it_counted_the_import(tmp_path):
    """`transfer` carries the source GPU's load (its rows' median) to a GPU nobody profiled: and its mark."""
    path = _profile(tmp_path, "h100", "old")
    load, line, told = _plan(path, "a100", transfer=True)
    carried = load["load_includes_import"]
    assert carried["samples"] == 1 and carried["range_s"] == [load["median_s"]] * 2 and load["median_s"] >= 4.0
    assert f"(1 process, {load['median_s']:.3g} s) counted the import" in line
    assert len(told) == 1 and told[0].startswith("a100: the loads of predictor made by")
    load, line, told = _plan(_profile(tmp_path, "h100", "new"), "a100", transfer=True)
    assert load["load_includes_import"] is None and not told
