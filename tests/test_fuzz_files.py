"""Fuzzing the file readers: a CSV is read column for column as its header names them, or refused.

With pandas' default index inference, data rows one field longer than the header (a trailing comma)
made the first column the index and shifted every other one place left, silently; rows shorter than
the header read as empty cells (a truncated file). Every CSV reader goes through files.read_csv_text.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.errors import InputError, ProfileFormatError
from perfmodel.files import read_csv_text
from perfmodel.fitting import gpu_specs
from perfmodel.importers import ImportSettings, import_profile
from perfmodel.schema import load_profile

DATA = Path(__file__).parent / "data" / "import"
REPO = Path(__file__).resolve().parents[1]
PA = ImportSettings(
    hardware="a100", model="resnet50", backend="triton-grpc", precision="fp16", input_size=224, batch_sizes=(8,)
)


def _rows(path: Path, change) -> str:
    lines = path.read_text().splitlines()
    return "\n".join([lines[0], *(change(line) for line in lines[1:])]) + "\n"


def test_perf_analyzer_rows_ending_in_a_comma_keep_their_columns(tmp_path):
    trailing = tmp_path / "pa.csv"
    trailing.write_text(_rows(DATA / "perf_analyzer_b8.csv", lambda line: line + ","))
    shifted = import_profile("perf-analyzer", [trailing], PA)
    plain = import_profile("perf-analyzer", [DATA / "perf_analyzer_b8.csv"], PA)
    assert list(shifted["concurrency"]) == list(plain["concurrency"]) == [1, 2, 4]
    assert list(shifted["latency_ms"]) == list(plain["latency_ms"])
    assert list(shifted["throughput_ips"]) == list(plain["throughput_ips"])


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda line: line + ",7", "data row 1 (line 2) has 14 fields where the header names 13 columns"),
        (lambda line: line.rsplit(",", 1)[0], "data row 1 (line 2) has 12 fields where the header names 13 columns"),
    ],
    ids=["a field more", "a field less"],
)
def test_perf_analyzer_rows_of_another_width_are_refused(tmp_path, change, words):
    bad = tmp_path / "pa.csv"
    bad.write_text(_rows(DATA / "perf_analyzer_b8.csv", change))
    with pytest.raises(ProfileFormatError, match=words.replace("(", r"\(").replace(")", r"\)")):
        import_profile("perf-analyzer", [bad], PA)


def test_a_profile_with_trailing_commas_reads_as_without(tmp_path):
    shipped = REPO / "profiles" / "cpu-resnet50-torch.csv"
    trailing = tmp_path / "p.csv"
    trailing.write_text(_rows(shipped, lambda line: line + ","))
    assert load_profile(trailing).equals(load_profile(shipped))
    truncated = tmp_path / "t.csv"
    truncated.write_text(shipped.read_text().rstrip("\n").rsplit(",", 3)[0] + "\n")
    with pytest.raises(ProfileFormatError, match="a truncated or misaligned file"):
        load_profile(truncated)


def test_the_online_planners_profile_check_reads_the_model_column(tmp_path):
    from perfmodel.planning.context import _profile_has

    trailing = tmp_path / "p.csv"
    trailing.write_text("model,batch_size\nresnet50,1,\n")
    assert _profile_has(trailing, "resnet50")


_CELL = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters=" .-"), max_size=6).map(str.strip)


@settings(max_examples=60, deadline=None)
@given(
    width=st.integers(1, 6),
    data=st.data(),
    extra=st.integers(0, 3),
)
def test_any_table_reads_the_same_with_trailing_empty_cells(tmp_path_factory, width, data, extra):
    header = [f"c{i}" for i in range(width)]
    rows = data.draw(st.lists(st.lists(_CELL, min_size=width, max_size=width), min_size=1, max_size=5))
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(header)
    for row in rows:
        writer.writerow(row + [""] * extra)
    path.write_text(text.getvalue())
    frame = read_csv_text(path, InputError, "a table")
    assert list(frame.columns) == header
    assert frame.values.tolist() == rows


@settings(max_examples=60, deadline=None)
@given(width=st.integers(2, 6), data=st.data())
def test_any_row_short_of_a_named_column_or_with_a_cell_past_the_header_is_refused(tmp_path_factory, width, data):
    rows = data.draw(st.lists(st.lists(_CELL, min_size=width, max_size=width), min_size=1, max_size=5))
    bad = data.draw(st.integers(0, len(rows) - 1))
    rows[bad] = rows[bad][:-1] if data.draw(st.booleans()) else rows[bad] + ["x"]
    text = io.StringIO()
    csv.writer(text).writerows([[f"c{i}" for i in range(width)], *rows])
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(text.getvalue())
    with pytest.raises(InputError, match=f"data row {bad + 1} "):
        read_csv_text(path, InputError, "a table")


# --- GPU specification tables (fit --target-hardware --gpu-specs) ----------------------------------------

SPECS = REPO / "perfmodel" / "data" / "gpu_specs.csv"
_SPEC_COLUMNS = tuple(gpu_specs.BOUNDS)  # every figure a table holds, each with its bounds


def _spec_table(tmp_path, column: str, value: str, row: int = 2) -> Path:
    import pandas as pd

    frame = pd.read_csv(SPECS, dtype=str, keep_default_na=False)
    frame.loc[row, column] = value
    path = tmp_path / "specs.csv"
    frame.to_csv(path, index=False)
    return path


@settings(max_examples=40, deadline=None)
@given(
    column=st.sampled_from(_SPEC_COLUMNS),
    value=st.sampled_from(["1e-300", "1e300", "0", "-1", "nan", "inf", "1e-5", "1e7", "abc"]),
)
def test_absurd_spec_figures_are_refused_naming_row_and_column(tmp_path_factory, column, value):
    """1e-300 GB/s was accepted: fit wrote a predictor that plan then called damaged."""
    from perfmodel.fitting.gpu_specs import load_gpu_specs

    path = _spec_table(tmp_path_factory.mktemp("specs"), column, value)
    with pytest.raises(InputError, match=rf"row 3, column '{column}': '{value}' is"):
        load_gpu_specs(path)


def test_fit_with_an_absurd_spec_table_exits_2_and_writes_nothing(tmp_path, capsys):
    from perfmodel.cli import main

    specs = _spec_table(tmp_path, "memory_bandwidth_gbs", "1e-300", row=0)
    out = tmp_path / "h100.json"
    profile = REPO / "profiles" / "reference" / "dle-paddle-resnet50.csv"
    argv = ["fit", str(profile), "--families", "roofline", "--target-hardware", "h100", "--gpu-specs", str(specs)]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "column 'memory_bandwidth_gbs': '1e-300' is outside the plausible 1 to 100,000 GB/s" in err
    assert not out.exists()
    trailing = tmp_path / "trailing.csv"  # and the table is read as every CSV is: a trailing comma shifts nothing
    trailing.write_text(_rows(SPECS, lambda line: line + ","))
    from perfmodel.fitting.gpu_specs import load_gpu_specs

    assert load_gpu_specs(trailing) == load_gpu_specs(SPECS)


# --- import: a value the profile contract refuses is named by the file's row and header -----------------


@pytest.mark.parametrize(
    "fmt, data, old, new, words",
    [
        ("perf-analyzer", "perf_analyzer_b8.csv", "1,1460.5,", "1,1e13,", "row 1, column 'Inferences/Second'"),
        ("table", "published_table.csv", "1,191.23 img/s", "1,2e12 img/s", "row 1, column 'Avg throughput'"),
        (
            "model-analyzer",
            "metrics-model-inference.csv",
            "Yes,402.0,",
            "Yes,4e12,",
            "row 1, column 'Throughput (infer/sec)'",
        ),
    ],
)
def test_import_range_errors_name_the_files_row_and_header(tmp_path, fmt, data, old, new, words):
    """They named the profile's column ('throughput_ips') and the row among all files imported."""
    text = (DATA / data).read_text()
    assert old in text
    bad = tmp_path / data
    bad.write_text(text.replace(old, new, 1))
    settings = ImportSettings(
        hardware="a100",
        model="resnet50",
        backend="triton-grpc",
        precision="fp16",
        input_size=224,
        batch_sizes=(8,) if fmt == "perf-analyzer" else (),
        model_config="resnet50_libtorch_config_default" if fmt == "model-analyzer" else None,
    )
    with pytest.raises(ProfileFormatError) as caught:
        import_profile(fmt, [bad], settings)
    assert str(caught.value).startswith(f"{bad}, {words} (the profile's "), str(caught.value)
