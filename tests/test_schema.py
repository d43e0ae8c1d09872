"""The profile contract: load_profile accepts good files and rejects bad ones with one clear sentence."""

from __future__ import annotations

import pandas as pd
import pytest

from perfmodel.errors import ProfileFormatError
from perfmodel.schema import REQUIRED_COLUMNS, load_profile, load_profiles, validate_profile, write_profile

GOOD = {
    "hardware": "cpu",
    "model": "tiny",
    "backend": "torch",
    "precision": "fp32",
    "input_size": 32,
    "batch_size": 1,
    "latency_ms": 1.5,
    "latency_p99_ms": 2.0,
    "warmup_ms": 10.0,
    "memory_mb": 5.0,
    "status": "ok",
}


def write_rows(tmp_path, rows, name="p.csv"):
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_good_profile_round_trips_with_types(tmp_path):
    oom = {
        **GOOD,
        "batch_size": 64,
        "status": "oom",
        "latency_ms": None,
        "latency_p99_ms": None,
        "warmup_ms": None,
        "memory_mb": None,
    }
    path = write_rows(tmp_path, [GOOD, {**GOOD, "batch_size": 2}, oom])
    df = load_profile(path)
    assert list(df["batch_size"]) == [1, 2, 64]
    assert df["batch_size"].dtype.kind == "i"
    assert df["latency_ms"].dtype.kind == "f"
    assert df.loc[2, "status"] == "oom"
    write_profile(df, tmp_path / "again.csv")
    again = load_profile(tmp_path / "again.csv")
    pd.testing.assert_frame_equal(df, again)


def test_extra_columns_are_kept(tmp_path):
    df = load_profile(write_rows(tmp_path, [{**GOOD, "my_note": "hello"}]))
    assert df.loc[0, "my_note"] == "hello"


@pytest.mark.parametrize(
    "change, words",
    [
        ({"latency_ms": -3.0}, ["row 2", "latency_ms"]),
        ({"batch_size": 0}, ["row 2", "batch_size", "positive whole number"]),
        ({"batch_size": 2.5}, ["row 2", "batch_size"]),
        ({"status": "crashed"}, ["row 2", "status", "'crashed'"]),
        ({"precision": "fp64"}, ["row 2", "precision"]),
        ({"latency_ms": "fast"}, ["row 2", "latency_ms", "not a number"]),
        ({"latency_ms": None}, ["row 2", "latency_ms", "status 'ok'"]),
        ({"latency_p99_ms": 1.0}, ["row 2", "latency_p99_ms", "below the median"]),
        ({"memory_mb": float("inf")}, ["row 2", "memory_mb"]),
        ({"hardware": ""}, ["row 2", "hardware", "empty"]),
        ({"input_size": None}, ["row 2", "input_size", "empty"]),
        ({"processes": 0}, ["row 2", "processes", "positive whole number"]),
        ({"processes": 2.5}, ["row 2", "processes"]),
        ({"process_rel_sd": -0.1}, ["row 2", "process_rel_sd"]),
    ],
)
def test_nonsense_is_rejected_naming_row_and_column(tmp_path, change, words):
    path = write_rows(tmp_path, [GOOD, {**GOOD, **change}])
    with pytest.raises(ProfileFormatError) as info:
        load_profile(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message
    assert "\n" not in message


def test_missing_required_column_is_named(tmp_path):
    row = {k: v for k, v in GOOD.items() if k != "warmup_ms"}
    with pytest.raises(ProfileFormatError, match="lacks the required column 'warmup_ms'"):
        load_profile(write_rows(tmp_path, [row]))


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "is empty"),
        (",".join(REQUIRED_COLUMNS) + "\n", "no measured points"),
        ("\x00\x01\x02garbage\n\xff\xfe", "not a readable CSV"),
        # a predictor or plan given where a profile goes (fit p.json, plan --profile p.json): it was "has no
        # measured points" (a one-line JSON) or "data row 118 has 2 fields where the header names 1 column"
        ('{\n  "format": "perfmodel-predictor",\n  "groups": [1, 2]\n}\n', "holds JSON, not a profile CSV"),
        ("[1, 2]\n", "holds JSON, not a profile CSV"),
    ],
)
def test_files_that_are_not_profiles(tmp_path, content, words):
    path = tmp_path / "bad.csv"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(ProfileFormatError, match=words):
        load_profile(path)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(ProfileFormatError, match="does not exist"):
        load_profile(tmp_path / "nope.csv")
    with pytest.raises(ProfileFormatError, match="is a directory"):
        load_profile(tmp_path)


def test_load_profiles_concatenates(tmp_path):
    a = write_rows(tmp_path, [GOOD], "a.csv")
    b = write_rows(tmp_path, [{**GOOD, "hardware": "h100"}], "b.csv")
    df = load_profiles([a, b])
    assert sorted(df["hardware"]) == ["cpu", "h100"]
    with pytest.raises(ProfileFormatError, match="no profile given"):
        load_profiles([])


def test_a_loaded_profile_validates_again_with_empty_integer_cells(tmp_path):
    # A column with some empty whole-number cells loads as pandas' nullable Int64, whose empty cells are
    # pd.NA; validating that frame again (perfmodel.fit(DataFrame) does) must read them as empty, not "<NA>".
    df = load_profile(
        write_rows(tmp_path, [{**GOOD, "concurrency": 4}, {**GOOD, "batch_size": 2, "concurrency": None}])
    )
    assert str(df["concurrency"].dtype) == "Int64"
    again = validate_profile(df, "frame")
    assert again["concurrency"].isna().tolist() == [False, True]


def test_processes_columns_are_typed_and_older_profiles_load_without_them(tmp_path):
    from pathlib import Path

    pooled = {**GOOD, "processes": 3, "process_rel_sd": 0.05}
    df = load_profile(write_rows(tmp_path, [pooled, {**GOOD, "batch_size": 2, "processes": 3}]))
    assert df["processes"].dtype.kind == "i" and df["process_rel_sd"].dtype.kind == "f"
    assert df["process_rel_sd"].isna().tolist() == [False, True]
    write_profile(df, tmp_path / "again.csv")
    pd.testing.assert_frame_equal(df, load_profile(tmp_path / "again.csv"))
    shipped = Path(__file__).resolve().parents[1] / "profiles" / "cpu-resnet50-torch.csv"
    old = load_profile(shipped)  # written before the columns existed
    assert len(old) and "processes" not in old.columns
