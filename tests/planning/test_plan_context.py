"""The plan says what was planned: model, sizes, options, the files it came from, and its assumptions."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from test_plan import profile_rows

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.planning.batch import make_plan


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame(profile_rows()).to_csv(path, index=False)
    return path


def plan_json(capsys, *args) -> dict:
    assert main(["plan", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_plan_json_names_model_options_sources_and_assumptions(profile, capsys):
    plan = plan_json(
        capsys,
        "--images",
        "1000",
        "--deadline",
        "60s",
        "--profile",
        profile,
        "--input-size",
        "64",
        "--margin",
        "5%",
        "--use",
        "p99",
    )
    assert plan["format"] == "perfmodel-plan" and plan["schema_version"] == 1
    assert plan["model"] == {"name": "tiny", "path": None}
    assert plan["input_sizes"] == [64] and plan["use"] == "p99" and plan["margin"] == pytest.approx(0.05)
    digest = hashlib.sha256(profile.read_bytes()).hexdigest()
    assert plan["sources"] == [{"kind": "profile", "path": str(profile), "sha256": digest}]
    assert plan["load_time"] == {"cpu": {"s": pytest.approx(0.05), "source": "profile load_ms"}}
    for row in plan["assignments"] + plan["gpus"]:
        assert (row["backend"], row["precision"], row["option"]) == ("torch", "fp32", "torch fp32")


def test_load_time_given_on_the_command_line_says_so(profile, capsys):
    plan = plan_json(
        capsys, "--images", "1000", "--deadline", "60s", "--profile", profile, "--input-size", "64", "--load-time", "2s"
    )
    assert plan["load_time"]["cpu"] == {"s": 2.0, "source": "--load-time"}
    assert plan["assignments"][0]["load_s"] == 2.0


def test_no_load_time_anywhere_is_said(tmp_path, capsys):
    path = tmp_path / "noload.csv"
    pd.DataFrame(profile_rows()).drop(columns=["load_ms"]).to_csv(path, index=False)
    plan = plan_json(capsys, "--images", "100", "--deadline", "60s", "--profile", path, "--input-size", "64")
    assert plan["load_time"]["cpu"] == {"s": 0.0, "source": "none"}


def test_the_readable_plan_names_the_model_and_the_file(profile, capsys):
    assert main(["plan", "--images", "1000", "--deadline", "60s", "--profile", str(profile), "--input-size", "64"]) == 0
    out = capsys.readouterr().out
    digest = hashlib.sha256(profile.read_bytes()).hexdigest()[:12]
    assert "model tiny at 64 px" in out and f"{profile} (sha256 {digest})" in out
    assert "load per cpu (profile load_ms): 0.05 s (1 process; no spread known)" in out


def test_a_torchscript_path_plans_for_its_stem_and_is_recorded(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame(profile_rows(model="mynet")).to_csv(path, index=False)
    job = make_plan(100, 60, profiles=[path], input_size=64, model=str(tmp_path / "mynet.pt"))
    data = job.to_dict()
    assert data["model"] == {"name": "mynet", "path": str(tmp_path / "mynet.pt")}
    assert job.makespan_s == job.plan.makespan_s  # the plan's attributes read through


def test_only_the_profiles_of_the_planned_model_are_named(tmp_path, profile):
    other = tmp_path / "other.csv"
    pd.DataFrame(profile_rows(model="resnet50")).to_csv(other, index=False)
    job = make_plan(100, 60, profiles=[profile, other], input_size=64, model="tiny")
    assert [s.path for s in job.context.sources] == [str(profile)]


def test_the_infeasible_answer_carries_the_format_too(profile, capsys):
    assert (
        main(
            [
                "plan",
                "--images",
                "10M",
                "--deadline",
                "1s",
                "--profile",
                str(profile),
                "--input-size",
                "64",
                "--pool",
                "cpu=1",
                "--json",
            ]
        )
        == 3
    )
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "perfmodel-plan" and data["status"] == "infeasible"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "perfmodel-predictor"}, "is a 'perfmodel-predictor' file, not a plan"),
        ({"schema_version": 99}, "has plan schema_version 99, but this perfmodel reads version 1"),
    ],
)
def test_report_refuses_a_plan_of_another_format_or_a_newer_schema(profile, tmp_path, capsys, change, message):
    plan = plan_json(capsys, "--images", "100", "--deadline", "60s", "--profile", profile, "--input-size", "64")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**plan, **change}))
    assert main(["report", "--plan", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err


def test_decode_time_is_added_to_every_batch_and_recorded(profile):
    plain = make_plan(1000, 60, profiles=[profile], input_size=64, pool={"cpu": 1}, max_batches=1000)
    slow = make_plan(1000, 60, profiles=[profile], input_size=64, pool={"cpu": 1}, decode="2ms")
    (a,), (b,) = plain.assignments, slow.assignments
    if a.batch_size == b.batch_size:
        assert b.latency_s == pytest.approx(a.latency_s + b.batch_size * 0.002)
        assert b.warmup_s == pytest.approx(a.warmup_s + b.batch_size * 0.002)
    assert slow.makespan_s > plain.makespan_s
    assert slow.to_dict()["decode_s_per_image"] == 0.002 and plain.to_dict()["decode_s_per_image"] == 0.0
    with pytest.raises(InputError, match="`decode`"):
        make_plan(1000, 60, profiles=[profile], input_size=64, decode="fast")
