"""`perfmodel import`: perf_analyzer, Model Analyzer and plain tables in their real formats become profiles."""

from pathlib import Path

import numpy as np
import pytest

from perfmodel.cli import main
from perfmodel.errors import ProfileFormatError
from perfmodel.importers import ImportSettings, import_profile
from perfmodel.schema import load_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "import"
IDENTITY = ["--hardware", "a100", "--model", "resnet50", "--precision", "fp16", "--input-size", "224"]
SETTINGS = ImportSettings(hardware="a100", model="resnet50", backend="triton-grpc", precision="fp16", input_size=224)


def test_perf_analyzer_csv_becomes_a_profile_in_milliseconds(tmp_path):
    out = tmp_path / "pa.csv"
    files = [str(DATA / "perf_analyzer_b8.csv"), str(DATA / "perf_analyzer_b1_verbose.csv")]
    assert (
        main(
            [
                "import",
                "perf-analyzer",
                *files,
                "--batch-size",
                "8,1",
                *IDENTITY,
                "--backend",
                "triton-grpc",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    profile = load_profile(out)
    assert sorted(zip(profile["batch_size"], profile["concurrency"])) == [(1, 1), (8, 1), (8, 2), (8, 4)]
    first = profile[(profile["batch_size"] == 8) & (profile["concurrency"] == 1)].iloc[0]
    assert first["latency_ms"] == pytest.approx(5.389)  # p50 latency 5389 us
    assert first["latency_p99_ms"] == pytest.approx(5.920)
    assert first["server_compute_ms"] == pytest.approx((1306 + 2811 + 15) / 1000)
    assert first["latency_basis"] == "p50" and first["source"].endswith("perf_analyzer_b8.csv")
    assert np.isnan(first["warmup_ms"]) and np.isnan(first["memory_mb"])
    verbose = profile[profile["batch_size"] == 1].iloc[0]
    assert verbose["gpu_util_avg"] == pytest.approx(41.0)
    assert verbose["gpu_mem_used_mb_max"] == pytest.approx(2298478592 / 2**20)
    assert verbose["latency_mean_ms"] == pytest.approx(2.486)


def test_model_analyzer_imports_one_configuration_with_throughput_latency(tmp_path):
    settings = ImportSettings(**{**SETTINGS.__dict__, "model_config": "resnet50_libtorch_config_default"})
    profile = import_profile("model-analyzer", [DATA / "metrics-model-inference.csv"], settings)
    assert list(profile["batch_size"]) == [1, 8, 32]
    row = profile[profile["batch_size"] == 32].iloc[0]
    assert row["latency_ms"] == pytest.approx(32 / 2010.5 * 1000)  # no median in the file: Little's law
    assert row["latency_basis"] == "throughput" and row["latency_p99_ms"] == pytest.approx(16.9)
    with pytest.raises(ProfileFormatError, match="2 model configurations .* `model_config`"):
        import_profile("model-analyzer", [DATA / "metrics-model-inference.csv"], SETTINGS)


def test_a_published_table_with_units_in_its_cells(tmp_path):
    out = tmp_path / "t.csv"
    assert (
        main(
            [
                "import",
                "table",
                str(DATA / "published_table.csv"),
                *IDENTITY,
                "--backend",
                "tensorflow",
                "--precision",
                "tf32",
                "--source",
                "NVIDIA README @ abc123",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    profile = load_profile(out)
    assert list(profile["precision"].unique()) == ["tf32"]
    assert profile["latency_ms"].iloc[0] == pytest.approx(1000 / 191.23)
    assert list(profile["latency_p95_ms"]) == [5.31, 5.39, 6.93, 8.80]
    assert set(profile["source"]) == {"NVIDIA README @ abc123"}
    assert list(profile["latency_mean_ms"]) == [5.26, 5.34, 6.65, 8.31]


def test_latency_from_mean_is_honoured():
    settings = ImportSettings(**{**SETTINGS.__dict__, "latency_from": "mean"})
    profile = import_profile("table", [DATA / "published_table.csv"], settings)
    assert list(profile["latency_ms"]) == [5.26, 5.34, 6.65, 8.31]
    assert set(profile["latency_basis"]) == {"mean"}


def test_rows_can_carry_their_own_identity(tmp_path):
    table = tmp_path / "mixed.csv"
    table.write_text(
        "hardware,model,backend,precision,input_size,batch_size,latency_p50_ms,source\n"
        "t4,resnet50,torch,fp32,224,1,10.7,paper A\n"
        "v100,resnet50,torch,fp16,224,1,12.8,paper B\n"
    )
    profile = import_profile("table", [table], ImportSettings())
    assert list(profile["hardware"]) == ["t4", "v100"] and list(profile["source"]) == ["paper A", "paper B"]


@pytest.mark.parametrize(
    "content, words",
    [
        ("batch_size,latency_p50_ms\n1,5.0\n2,fast\n", ["row 2", "latency_p50_ms", "'fast'"]),
        ("batch_size,latency_p50_ms\n1,5.0\n2,17,89\n", ["not a readable CSV"]),
        ("batch_size,latency_p50_ms\n1,5.0\n2.5,6.0\n", ["row 2", "batch_size", "whole number"]),
        ("batch_size,latency_p50_ms\n1,5.0\n0,6.0\n", ["row 2", "batch_size", "> 0"]),
        ("batch_size,latency_p50_ms,latency_p99_ms\n1,5.0,4.0\n", ["row 1", "latency_p99_ms", "below the median"]),
        ("batch_size,latency_p50_ms\n1,5 s\n", ["row 1", "latency_p50_ms", "'5 s'"]),
        ("batch_size,latency_p99_ms\n1,5.0\n", ["no throughput, p50 latency or mean latency"]),
        ("latency_p50_ms\n5.0\n", ["no batch size column"]),
        ("batch_size,latency_p50_ms,precision\n1,5.0,fp64\n", ["row 1", "precision", "'fp64'"]),
    ],
)
def test_bad_tables_are_one_sentence_naming_file_row_and_column(tmp_path, content, words):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ProfileFormatError) as info:
        import_profile("table", [path], SETTINGS)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    for word in words:
        assert word in message


def test_perf_analyzer_needs_the_batch_size_and_refuses_request_rate_sweeps(tmp_path):
    with pytest.raises(ProfileFormatError, match="`batch_sizes`"):
        import_profile("perf-analyzer", [DATA / "perf_analyzer_b8.csv"], SETTINGS)
    rate = tmp_path / "rate.csv"
    rate.write_text(
        "Request Rate,Inferences/Second,Client Send,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency\n"
        "100,99.8,30,5,2000,2100,2200,2500\n"
    )
    with pytest.raises(ProfileFormatError, match="request-rate"):
        import_profile("perf-analyzer", [rate], ImportSettings(**{**SETTINGS.__dict__, "batch_sizes": (1,)}))
    bad = tmp_path / "bad.csv"
    bad.write_text((DATA / "perf_analyzer_b8.csv").read_text().replace("5389", "-5"))
    with pytest.raises(ProfileFormatError, match=r"row 1, column 'p50 latency'"):
        import_profile("perf-analyzer", [bad], ImportSettings(**{**SETTINGS.__dict__, "batch_sizes": (8,)}))


def test_the_same_point_twice_is_refused():
    settings = ImportSettings(**{**SETTINGS.__dict__, "batch_sizes": (8,)})
    with pytest.raises(ProfileFormatError, match="more than once"):
        import_profile("perf-analyzer", [DATA / "perf_analyzer_b8.csv"] * 2, settings)


def test_cli_bad_input_is_exit_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out.csv"
    code = main(
        [
            "import",
            "table",
            str(DATA / "published_table.csv"),
            "--hardware",
            "a100",
            "--model",
            "resnet50",
            "--backend",
            "tensorflow",
            "--precision",
            "tf32",
            "--out",
            str(out),
        ]
    )
    assert code == 2 and not out.exists()
    err = capsys.readouterr().err
    assert "--input-size" in err and "Traceback" not in err
    source = tmp_path / "in.csv"
    source.write_text((DATA / "published_table.csv").read_text())
    assert main(["import", "table", str(source), *IDENTITY, "--backend", "x", "--out", str(source)]) == 2
    assert source.read_text() == (DATA / "published_table.csv").read_text()
