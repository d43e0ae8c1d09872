"""The predictor file marks the loads that counted the import (fixed_costs.load_counted_import_ms: those of its
load samples that perfmodel's torch profiler timed before the load split, perfmodel/fixed_costs.py): fit
writes them, a file written before reads as none, and anything but some of the group's load samples is one
PredictorFormatError sentence."""

from __future__ import annotations

import copy
import json
import warnings

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel import fit
from perfmodel.errors import PerfmodelWarning, PredictorFormatError
from perfmodel.fitting.predictor import Predictor

LOADS_MS = (4000.0, 5000.0, 6000.0)


def _rows(old: bool, hardware: str = "h200") -> pd.DataFrame:
    """Three processes' loads, by perfmodel's torch profiler before the load split (`old`) or since."""
    rows = []
    for i, b in enumerate((1, 2, 4, 8, 16, 32)):
        latency = 2.0 + 0.5 * b
        rows.append(
            dict(
                hardware=hardware,
                model="tiny",
                backend="torch",
                precision="fp32",
                input_size=64,
                batch_size=b,
                latency_ms=latency,
                latency_p99_ms=1.5 * latency,
                warmup_ms=3 * latency + 20,
                memory_mb=100.0 * b,
                status="ok",
                load_ms=LOADS_MS[i % 3],
                perfmodel="0.2.0",
                load_process=None if old else f"fresh-{i % 3}",
            )
        )
    return pd.DataFrame(rows)


def _fitted(frame: pd.DataFrame) -> tuple[Predictor, list[str]]:
    """The predictor, and the warnings fit gave that speak of the import."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        predictor = fit(frame, families=["linear"])
    return predictor, [
        str(w.message) for w in said if issubclass(w.category, PerfmodelWarning) and "import" in str(w.message)
    ]


@pytest.fixture(scope="module")
def written() -> dict:
    """The JSON fit writes of an old GPU profile."""
    return _fitted(_rows(old=True))[0].to_dict()


def _with(data: dict, value) -> dict:
    data = copy.deepcopy(data)
    data["groups"][0]["fixed_costs"]["load_counted_import_ms"] = value
    return data


def test_fit_marks_the_loads_that_counted_the_import_and_they_read_back(written, tmp_path):
    assert len(_fitted(_rows(old=True))[1]) == 1  # and warns once, for a GPU
    fixed = written["groups"][0]["fixed_costs"]
    assert sorted(fixed["load_counted_import_ms"]) == sorted(fixed["load_ms"]) == list(LOADS_MS)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(written))
    assert sorted(Predictor.load(path).groups[0].load_counted_import_ms) == list(LOADS_MS)


@pytest.mark.parametrize("hardware", ["h200", "cpu"])
def test_a_profile_measured_as_run_counts_the_load_marks_none(hardware):
    predictor, told = _fitted(_rows(old=False, hardware=hardware))
    (group,) = predictor.groups
    assert sorted(group.load_samples_ms) == list(LOADS_MS) and group.load_counted_import_ms == () and not told


def test_a_cpu_group_is_marked_without_a_warning():
    """As a plan from a CPU profile: said in the load line, not warned (a second or two of a minute)."""
    predictor, told = _fitted(_rows(old=True, hardware="cpu"))
    assert sorted(predictor.groups[0].load_counted_import_ms) == list(LOADS_MS) and not told


def test_a_file_written_before_the_mark_reads_as_none_counted(written):
    data = copy.deepcopy(written)
    del data["groups"][0]["fixed_costs"]["load_counted_import_ms"]
    assert Predictor.from_dict(data).groups[0].load_counted_import_ms == ()
    del data["groups"][0]["fixed_costs"]  # before the samples: load_ms alone
    assert Predictor.from_dict(data).groups[0].load_counted_import_ms == ()


def test_a_group_with_load_ms_alone_may_mark_it(written):
    """A transferred group carries one load_ms and no samples (fitting/transfer.py)."""
    data = _with(written, [5000.0])
    data["groups"][0]["fixed_costs"]["load_ms"] = []
    data["groups"][0]["load_ms"] = 5000.0
    assert Predictor.from_dict(data).groups[0].load_counted_import_ms == (5000.0,)


@pytest.mark.parametrize(
    "value",
    [None, "4000", 4000.0, {"ms": 4000.0}, [True], ["4000"], [float("nan")], [4001.0], [4000.0, 4000.0]],
    ids=["null", "text", "a number", "an object", "a bool", "text in it", "nan", "no such load", "one load twice"],
)
def test_a_bad_mark_is_one_sentence(written, value):
    with pytest.raises(PredictorFormatError) as caught:
        Predictor.from_dict(_with(written, value), "p.json")
    message = str(caught.value)
    assert message.startswith("p.json is a damaged predictor: a group's fixed_costs.load_counted_import_ms is ")
    assert "some of its load samples" in message and message.endswith("fit it again with `perfmodel fit`.")
    assert message.count(". ") == 0  # one sentence


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10, 10_000) | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(value=_JSON | st.lists(st.sampled_from([*LOADS_MS, 4000, 1.0]), max_size=4))
def test_any_mark_reads_as_some_of_the_loads_or_is_refused_in_one_sentence(written, value):
    data = _with(written, value)
    try:
        group = Predictor.from_dict(data).groups[0]
    except PredictorFormatError as exc:
        assert "load_counted_import_ms" in str(exc)
        return
    left = list(group.load_samples_ms)
    for load in group.load_counted_import_ms:  # each one of the group's samples, no more often than there
        left.remove(load)
    assert len(group.load_counted_import_ms) == len(value)
