"""perfmodel plan --mode online: the command, its JSON, the Triton config it writes, and bad input."""

from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pandas as pd
import pytest

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.planning.triton_config import BatchingSettings, read_batching, write_batching
from perfmodel.units import parse_percentile, parse_rate, parse_rates

ASSIGNMENT_KEYS = {
    "hardware",
    "option",
    "input_size",
    "count",
    "max_batch",
    "max_queue_delay_ms",
    "utilization",
    "predicted_p50_ms",
    "predicted_p99_ms",
}
PLAN_KEYS = {
    "status",
    "mode",
    "rate_per_s",
    "slo_ms",
    "percentile",
    "total_gpus",
    "gpus_by_type",
    "cost",
    "assignments",
}

NEEDS_TRITONCLIENT = pytest.mark.skipif(
    importlib.util.find_spec("tritonclient") is None,
    reason="needs tritonclient (pip install '.[triton]' in perfmodel's clone)",
)


@pytest.fixture
def profile(tmp_path):
    """Two hardware types, GPU-like: 2 ms + 0.1 ms per image (fast) and 4 ms + 0.3 ms (slow), batches 1..32."""
    rows = []
    for hardware, base, per in (("fast", 2.0, 0.1), ("slow", 4.0, 0.3)):
        for b in (1, 2, 4, 8, 16, 32):
            p50 = base + per * b
            rows.append(
                {
                    "hardware": hardware,
                    "model": "resnet50",
                    "backend": "torch",
                    "precision": "fp16",
                    "input_size": 224,
                    "batch_size": b,
                    "latency_ms": p50,
                    "latency_p99_ms": 1.1 * p50,
                    "warmup_ms": 10 * p50,
                    "memory_mb": 100 + b,
                    "status": "ok",
                }
            )
    path = tmp_path / "p.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def run(capsys, *args):
    code = main(["plan", "--mode", "online", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_online_plan_json_has_the_issues_keys(profile, capsys):
    code, out, _ = run(capsys, "--rate", "4k/s", "--slo", "30ms", "--profile", str(profile), "--json")
    assert code == 0
    plan = json.loads(out)
    assert PLAN_KEYS <= set(plan) and plan["mode"] == "online"
    assert plan["rate_per_s"] == 4000 and plan["slo_ms"] == 30 and plan["percentile"] == 99
    assert plan["total_gpus"] == sum(plan["gpus_by_type"].values()) >= 1
    for a in plan["assignments"]:
        assert ASSIGNMENT_KEYS <= set(a)
        assert a["predicted_ms_at_percentile"] <= 30 and a["input_size"] == 224


def test_online_plan_readable_output(profile, capsys):
    code, out, err = run(capsys, "--rate", "1000/s", "--slo", "50ms", "--profile", str(profile), "--pool", "slow=4")
    assert code == 0
    assert "x slow: 1,000 requests/s within 50 ms for 99% of them" in out
    assert "p50 and p99 from the simulation" in err


def test_a_large_capacity_is_written_whole_not_in_exponent_notation(capsys):
    code, out, _ = run(capsys, "--rate", "3000/s", "--slo", "50ms", "--pool", "a100-80gb=1")  # the shipped data
    assert code == 0 and "3,000 requests/s" in out and "e+0" not in out, out
    assert re.search(r"\(up to \d{1,3}(,\d{3})+/s\)", out), out


def test_cost_needs_prices_and_uses_them(profile, capsys):
    code, _, err = run(capsys, "--rate", "1000/s", "--slo", "50ms", "--profile", str(profile), "--objective", "cost")
    assert code == 2 and "--price" in err and len(err.strip().splitlines()) == 1
    code, out, _ = run(
        capsys,
        "--rate",
        "1000/s",
        "--slo",
        "50ms",
        "--profile",
        str(profile),
        "--objective",
        "cost",
        "--price",
        "fast=10,slow=1",
        "--json",
        "--no-simulation",
    )
    plan = json.loads(out)
    assert code == 0 and plan["cost"] == sum(n * {"fast": 10, "slow": 1}[k] for k, n in plan["gpus_by_type"].items())


def test_infeasible_exits_3_with_what_would_do(profile, capsys):
    code, out, err = run(
        capsys, "--rate", "100k/s", "--slo", "30ms", "--profile", str(profile), "--pool", "fast=1", "--json"
    )
    assert code == 3
    d = json.loads(out)
    assert d["status"] == "infeasible" and d["extra_gpus"]["fast"] > 0 and d["max_rate_per_s"] < 100_000
    assert "add" in err and "more fast" in err
    code, out, err = run(capsys, "--rate", "100/s", "--slo", "1ms", "--profile", str(profile), "--json")
    assert code == 3 and json.loads(out)["min_slo_ms"] > 1 and "allow an SLO of at least" in err


def test_a_margin_plans_for_a_slower_service_and_says_so(profile, capsys):
    base = ["--rate", "4k/s", "--slo", "30ms", "--profile", str(profile), "--json"]
    code, out, _ = run(capsys, *base)
    plain = json.loads(out)
    code, out, _ = run(capsys, *base, "--margin", "10%")
    plan = json.loads(out)
    assert code == 0 and plain["margin"] == 0 and plan["margin"] == pytest.approx(0.1)
    assert plan["capacity_per_s"] < plain["capacity_per_s"]
    for a in plan["assignments"]:
        assert a["predicted_ms_at_percentile"] < a["slowed_ms_at_percentile"] <= 30
    for a in plain["assignments"]:
        assert a["slowed_ms_at_percentile"] == a["predicted_ms_at_percentile"]
    code, out, err = run(capsys, *base[:-1], "--margin", "0.1", "--no-simulation")
    assert code == 0 and "margin 10%: holds the SLO with every batch 10% slower" in out
    assert "with every batch 10% slower, p99: fast" in err


def test_an_infeasible_plan_names_its_margin(profile, capsys):
    code, out, err = run(
        capsys,
        "--rate",
        "100k/s",
        "--slo",
        "30ms",
        "--profile",
        str(profile),
        "--pool",
        "fast=1",
        "--margin",
        "10%",
        "--json",
    )
    d = json.loads(out)
    assert code == 3 and d["margin"] == pytest.approx(0.1) and "with the 10% margin" in d["reason"]
    assert "with the 10% margin" in err and "a smaller --margin" in err


@NEEDS_TRITONCLIENT
def test_triton_config_is_written_and_merged(profile, tmp_path, capsys):
    model_dir = tmp_path / "repo" / "resnet50"
    model_dir.mkdir(parents=True)
    (model_dir / "config.pbtxt").write_text(
        'name: "resnet50"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n'
    )
    code, out, _ = run(
        capsys,
        "--rate",
        "1000/s",
        "--slo",
        "50ms",
        "--profile",
        str(profile),
        "--pool",
        "slow=8",
        "--triton-config",
        str(model_dir),
        "--json",
    )
    assert code == 0
    plan = json.loads(out)
    a = plan["assignments"][0]
    text = (model_dir / "config.pbtxt").read_text()
    assert 'platform: "onnxruntime_onnx"' in text and 'name: "x"' in text  # the rest is kept
    settings = read_batching(model_dir)
    assert settings.max_batch_size == a["max_batch"] and settings.preferred_batch_sizes == tuple(
        a["preferred_batch_sizes"]
    )
    assert settings.max_queue_delay_us == round(a["max_queue_delay_ms"] * 1000) and settings.kind == "KIND_GPU"
    assert plan["triton_config"] == [str(model_dir / "config.pbtxt")]


@NEEDS_TRITONCLIENT
def test_two_types_get_one_custom_config_each(tmp_path):
    settings = {"h100": BatchingSettings(64, (64,), 500), "a100": BatchingSettings(32, (32,), 0)}
    written = write_batching(tmp_path / "m", settings, "a header\nsecond line")
    assert [p.relative_to(tmp_path).as_posix() for p in written] == ["m/configs/h100.pbtxt", "m/configs/a100.pbtxt"]
    assert read_batching(written[0]) == settings["h100"]
    text = written[1].read_text()
    assert text.startswith("# a header\n# second line\n") and "max_queue_delay_microseconds: 0" in text


@NEEDS_TRITONCLIENT
def test_a_broken_config_is_reported_and_left_alone(profile, tmp_path, capsys):
    model_dir = tmp_path / "m"
    model_dir.mkdir()
    (model_dir / "config.pbtxt").write_text("max_batch_size: [ not valid\n")
    code, _, err = run(
        capsys, "--rate", "100/s", "--slo", "50ms", "--profile", str(profile), "--triton-config", str(model_dir)
    )
    assert code == 2 and "not a valid Triton model configuration" in err
    assert (model_dir / "config.pbtxt").read_text() == "max_batch_size: [ not valid\n"


def test_arrivals_from_a_trace(profile, tmp_path, capsys):
    trace = tmp_path / "trace.csv"
    pd.DataFrame({"arrival_s": np.cumsum(np.random.default_rng(0).exponential(1 / 500, 3000))}).to_csv(
        trace, index=False
    )
    code, out, _ = run(capsys, "--arrivals", str(trace), "--slo", "50ms", "--profile", str(profile), "--json")
    plan = json.loads(out)
    assert code == 0 and plan["arrivals"] == "trace" and 400 < plan["rate_per_s"] < 600


@pytest.mark.parametrize(
    "args, says",
    [
        (["--rate", "400/d", "--slo", "50ms"], "is not a rate"),
        (["--rate", "0/s", "--slo", "50ms"], "more than zero"),
        (["--rate", "400/s"], "needs --slo"),
        (["--rate", "400/s", "--slo", "fast"], "is not a duration"),
        (["--rate", "400/s", "--slo", "50ms", "--percentile", "100"], "strictly between 0 and 100"),
        (["--rate", "400/s", "--slo", "50ms", "--request-size", "0"], "--request-size"),
        (["--rate", "400/s", "--slo", "50ms", "--deadline", "60s"], "--deadline is not for --mode online"),
        (["--slo", "50ms"], "give --rate"),
        (["--rate", "400/s", "--slo", "50ms", "--max-queue-delay", "soon"], "--max-queue-delay"),
        (["--rate", "400/s", "--slo", "50ms", "--pool", "tpu=4"], "no profile or predictor for tpu"),
        (["--rate", "400/s", "--slo", "50ms", "--input-size", "512"], "at 512 px"),
        (
            ["--rate", "400/s", "--slo", "50ms", "--input-size", "512"],
            "sizes timed so: 224: plan at one with --input-size 224",
        ),
        (["--rate", "400/s", "--slo", "50ms", "--request-size", "64"], "above the largest batch timed (32 images)"),
        (["--rate", "400/s", "--slo", "50ms", "--margin", "-5%"], "--margin '-5%' is negative"),
        (["--rate", "400/s", "--slo", "50ms", "--margin", "abc"], "--margin 'abc' is not a percentage"),
        (["--rate", "400/s", "--slo", "50ms", "--margin", "150%"], "must be below 100%"),
        (["--rate", "400/s", "--slo", "50ms", "--use", "p99"], "--use is not for --mode online"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(profile, capsys, args, says):
    code = main(["plan", "--mode", "online", "--profile", str(profile), *args])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_online_flags_need_online_mode(capsys):
    assert main(["plan", "--images", "10", "--deadline", "1s", "--rate", "5/s"]) == 2
    assert "--rate is not for --mode soft" in capsys.readouterr().err
    assert main(["plan", "--images", "10"]) == 2
    assert "needs --deadline" in capsys.readouterr().err


@pytest.mark.parametrize(
    "content, says",
    [
        (None, "does not exist"),
        ("", "is empty"),
        ("time\n1\n2\n", "no column 'arrival_s'"),
        ("arrival_s\n1\nlater\n", "row 2, column 'arrival_s'"),
        ("arrival_s\n1\n", "at least two arrivals"),
        ("arrival_s\n1\ninf\n", "row 2"),
    ],
)
def test_bad_arrival_files(profile, tmp_path, capsys, content, says):
    path = tmp_path / "a.csv"
    if content is not None:
        path.write_text(content)
    code = main(["plan", "--mode", "online", "--arrivals", str(path), "--slo", "50ms", "--profile", str(profile)])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_triton_config_target_must_be_a_directory(profile, tmp_path, capsys):
    target = tmp_path / "file.txt"
    target.write_text("x")
    code = main(
        [
            "plan",
            "--mode",
            "online",
            "--rate",
            "100/s",
            "--slo",
            "50ms",
            "--profile",
            str(profile),
            "--triton-config",
            str(target),
        ]
    )
    assert code == 2 and "is a file" in capsys.readouterr().err and target.read_text() == "x"


@pytest.mark.parametrize(
    "text, rate",
    [("400/s", 400), ("20k/s", 20_000), ("1.5k/s", 1500), ("24000/min", 400), ("3.6M/h", 1000), ("250", 250)],
)
def test_rates(text, rate):
    assert parse_rate(text) == pytest.approx(rate)


def test_rate_lists_and_percentiles():
    assert parse_rates("50,100,200/s") == (50, 100, 200)
    assert parse_rates("6000,1k/min") == (100, pytest.approx(1000 / 60))
    assert parse_percentile("p99.9") == 99.9 and parse_percentile("95%") == 95
    for bad in ("fast", "-3/s", "5/week", "1,,2"):
        with pytest.raises(InputError):
            parse_rates(bad)


def test_the_report_says_it_draws_batch_plans_only(profile, tmp_path, capsys):
    assert (
        main(
            [
                "plan",
                "--mode",
                "online",
                "--rate",
                "100/s",
                "--slo",
                "50ms",
                "--profile",
                str(profile),
                "--json",
                "--no-simulation",
            ]
        )
        == 0
    )
    plan = tmp_path / "online.json"
    plan.write_text(capsys.readouterr().out)
    assert main(["report", str(profile), "--plan", str(plan), "--out", str(tmp_path / "r")]) == 2
    assert "is an online plan" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_a_triton_profile_splits_the_server_time_from_the_round_trip(tmp_path):
    """server_compute_ms beside the client's latency: the rest (network, client) of the smallest batch is
    the round trip added to every latency; the server's own time is what batches queue behind."""
    from perfmodel.planning.online_sources import service_options

    rows = [
        {
            "hardware": "h100",
            "model": "resnet50",
            "backend": "triton-grpc",
            "precision": "fp16",
            "input_size": 224,
            "batch_size": b,
            "latency_ms": 3.0 + 0.5 * b,
            "latency_mean_ms": 3.1 + 0.5 * b,
            "latency_p99_ms": 4.0 + 0.5 * b,
            "server_compute_ms": 1.1 + 0.5 * b,
            "status": "ok",
            "warmup_ms": 50.0,
            "memory_mb": 100.0,
        }
        for b in (1, 2, 4, 8)
    ]
    path = tmp_path / "triton.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    option = service_options([path], [], "resnet50", 224)["h100"][0]
    assert option.overhead_s == pytest.approx(0.002)  # 3.6 ms mean at batch 1, of which the server's 1.6
    assert option.p50_s[0] == pytest.approx(0.0035 - 0.002) and option.p99_s[7] == pytest.approx(0.008 - 0.002)
    pd.DataFrame(rows).drop(columns="server_compute_ms").to_csv(path, index=False)
    assert service_options([path], [], "resnet50", 224)["h100"][0].overhead_s == 0.0


def test_triton_config_makes_missing_folders(profile, tmp_path, capsys):
    target = tmp_path / "model_repository" / "tiny"
    code = main(
        [
            "plan",
            "--mode",
            "online",
            "--rate",
            "100/s",
            "--slo",
            "50ms",
            "--profile",
            str(profile),
            "--triton-config",
            str(target),
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert "dynamic_batching" in (target / "config.pbtxt").read_text()


def test_triton_config_under_a_file_is_refused(profile, tmp_path, capsys):
    (tmp_path / "repo").write_text("x")
    code = main(
        [
            "plan",
            "--mode",
            "online",
            "--rate",
            "100/s",
            "--slo",
            "50ms",
            "--profile",
            str(profile),
            "--triton-config",
            str(tmp_path / "repo" / "tiny"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "is a file, not a directory" in err and len(err.strip().splitlines()) == 1


def test_a_file_where_configs_go_is_refused_before_planning(profile, tmp_path, capsys):
    """DIR/configs/ takes one config per type when a plan has several: a file by that name would fail the
    write after the solve, so it is refused first, and nothing is written."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "configs").write_text("x")
    code = main(
        ["plan", "--mode", "online", "--rate", "100/s", "--slo", "50ms", "--profile", str(profile)]
        + ["--triton-config", str(repo), "--json"]
    )
    said = capsys.readouterr()
    assert code == 2 and said.out == "" and len(said.err.strip().splitlines()) == 1
    assert f"--triton-config {repo}: {repo / 'configs'} is a file, where the command writes" in said.err
    assert [p.name for p in repo.iterdir()] == ["configs"]
