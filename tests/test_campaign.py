"""experiments/008_gpu_campaign/campaign.sh: its CPU dry run, so that the GPU campaign script cannot rot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from perfmodel.fitting import Predictor
from perfmodel.schema import load_profile

pytestmark = pytest.mark.integration  # each test runs the campaign script or validate.py
ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "experiments" / "008_gpu_campaign"
SCRIPT = HERE / "campaign.sh"


def campaign(
    *args: str, budget_s: int | None = None, seed: Path | None = None, timeout: float = 900
) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, PYTHONUNBUFFERED="1")
    if budget_s is not None:
        env["CAMPAIGN_BUDGET_S"] = str(budget_s)
    if seed is not None:
        env["CAMPAIGN_SEED"] = str(seed)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
    )


@pytest.mark.slow
def test_dry_run_runs_every_step_and_the_next_call_resumes_from_its_files(tmp_path):
    out = tmp_path / "out"
    done = campaign("dry-run", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for step in ("resnet50", "efficientnet_b0"):
        profiles = sorted(out.glob(f"cpu-{step}-*.csv"))
        assert [p.name for p in profiles] == [f"cpu-{step}-torch-{o}.csv" for o in ("channels-last-bf16", "fp32")]
        for path in profiles:
            df = load_profile(path)
            assert set(df["status"]) == {"ok"} and df["batch_size"].max() == 8
        predictor = Predictor.load(out / f"cpu-{step}.json")
        assert len(predictor.select(hardware="cpu")) == 2
        assert "CV MAPE" in (out / f"cpu-{step}-fit.txt").read_text()
    assert "torch" in (out / "cpu-check.txt").read_text()
    if (out / "cpu-validate.jsonl").exists():
        (line,) = [json.loads(x) for x in (out / "cpu-validate.jsonl").read_text().splitlines()]
        assert line["images_done"] > 0 and line["measured_makespan_s"] > 0
    else:
        assert "validate skipped: perfmodel has no `run` command" in done.stdout

    # The next device call starts with an empty folder and the files of this one (committed) as its seed.
    second = tmp_path / "second"
    again = campaign("dry-run", str(second), seed=out)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming from" in again.stdout and again.stdout.count("done in an earlier call") >= 4
    assert "perfmodel profile --model" not in again.stdout  # nothing measured twice
    assert "check: the GPU tests" not in again.stdout
    assert (second / "cpu-resnet50.json").exists()  # fitted again from the seeded profiles


def test_a_call_stops_cleanly_before_its_budget(tmp_path):
    done = campaign("dry-run", str(tmp_path / "out"), budget_s=1, timeout=120)
    assert done.returncode == 3
    assert "run the same step again to continue" in done.stdout


def test_gpu_steps_refuse_a_machine_without_what_they_need(tmp_path):
    done = campaign("resnet50", str(tmp_path / "out"), timeout=120)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("campaign: ") and ("no CUDA GPU" in line or "lacks" in line)
    assert not list((tmp_path / "out").glob("*.csv"))


def test_usage_is_shown_for_a_wrong_step():
    done = campaign("resnet", "x", timeout=60)
    assert done.returncode == 2 and "campaign.sh check" in done.stderr


def test_validate_summary_table(tmp_path):
    results = tmp_path / "h100-validate.jsonl"
    line = {
        "name": "resnet50-224-60000-20s",
        "images": 60000,
        "batch_size": [512],
        "predicted_makespan_s": 18.5,
        "measured_makespan_s": 19.0,
        "error_rel": 0.027,
        "met_deadline": True,
    }
    results.write_text(json.dumps(line) + "\n")
    done = subprocess.run(
        [sys.executable, str(HERE / "validate.py"), "--summary", str(results)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "resnet50-224-60000-20s" in done.stdout and "+2.7%" in done.stdout and "met" in done.stdout
