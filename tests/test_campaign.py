"""experiments/008_gpu_campaign/campaign.sh: its CPU dry run, so that the GPU campaign script cannot rot."""

from __future__ import annotations

import importlib.util
import json
import os
import re
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


def load(name: str):
    """One of the campaign's Python files as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"campaign_{name}", HERE / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(module)
    return module


def campaign(
    *args: str, budget_s: int | None = None, seed: Path | None = None, timeout: float = 900, **more_env: str
) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable, PYTHONUNBUFFERED="1", **more_env)
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
    assert "check: the GPU tests (-m gpu" not in again.stdout and "passed in an earlier call" in again.stdout
    assert (second / "cpu-resnet50.json").exists()  # fitted again from the seeded profiles


def test_a_call_stops_cleanly_before_its_budget(tmp_path):
    done = campaign("dry-run", str(tmp_path / "out"), budget_s=1, timeout=120)
    assert done.returncode == 3
    assert "run the same step again to continue" in done.stdout


def test_gpu_steps_refuse_a_machine_without_what_they_need(tmp_path):
    # CUDA hidden: on a GPU machine this would otherwise start a real sweep (and the short budget stops
    # one, should hiding ever fail).
    done = campaign("resnet50", str(tmp_path / "out"), budget_s=30, timeout=120, CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("campaign: ") and ("no CUDA GPU" in line or "lacks" in line)
    assert not list((tmp_path / "out").glob("*.csv"))


def test_a_gpu_of_another_type_than_the_earlier_calls_is_refused(tmp_path):
    seed = tmp_path / "results"
    seed.mkdir()
    (seed / "h100-resnet50.state").write_text("torch-fp16\n")
    done = campaign("efficientnet_b0", str(tmp_path / "out"), seed=seed, timeout=120, CAMPAIGN_HARDWARE="h200")
    assert done.returncode == 2, done.stderr
    assert f"but {seed} holds the files of h100: each GPU type has its own folder" in done.stderr
    assert not list((tmp_path / "out").iterdir())
    # The same for an OUT that another GPU type's call left on the machine.
    done = campaign("efficientnet_b0", str(seed), timeout=120, CAMPAIGN_HARDWARE="h200")
    assert done.returncode == 2 and "holds the files of h100" in done.stderr


def test_each_gpu_type_resumes_from_its_own_results_folder(tmp_path):
    """No CAMPAIGN_SEED: an H100's call reads results/h100 only (the H200's files stay out of it)."""
    results = tmp_path / "results"
    for hw in ("h100", "h200"):
        (results / hw).mkdir(parents=True)
        source = HERE / "results" / hw / f"{hw}-resnet50-torch-fp16.csv"
        (results / hw / source.name).write_bytes(source.read_bytes())
    out = tmp_path / "out"
    done = campaign("fit", str(out), timeout=300, CAMPAIGN_HARDWARE="h100", CAMPAIGN_RESULTS=str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["h100-resnet50-fit.txt", "h100-resnet50.json"]
    assert {g.key["hardware"] for g in Predictor.load(out / "h100-resnet50.json").groups} == {"h100"}


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


def test_extrapolation_is_judged_per_input_size(tmp_path):
    """Batch 600 at 448 px lies past the 500 measured there, though 224 px was measured up to 2000."""
    extrapolated = load("validate").extrapolated
    key = {"hardware": "h100", "model": "resnet50", "backend": "torch", "precision": "fp16"}
    predictor = tmp_path / "p.json"
    predictor.write_text(json.dumps({"groups": [{"key": key, "ok_batches": [[224, 2000], [448, 500]]}]}))

    def plan(batch, size):
        return {
            "assignments": [
                {"hardware": "h100", "backend": "torch", "precision": "fp16", "input_size": size, "batch_size": batch}
            ]
        }

    assert not extrapolated(plan(1500, 224), predictor) and not extrapolated(plan(500, 448), predictor)
    assert extrapolated(plan(600, 448), predictor)
    assert extrapolated(plan(100, 320), predictor)  # a size never measured


def test_the_budget_fits_the_device_limits():
    """By the budget's own model: one session of 15 device-minutes, one machine start, the first call's work
    inside the budget campaign.sh stops itself at, the second call on the machine still warm."""
    budget = load("budget")
    assert budget.device_s() <= budget.DEVICE_S - budget.MARGIN_S
    assert budget.GAP_S < budget.WARM_S  # else the machine goes back between the calls and the second pays a start
    assert 0 < budget.second_call_s() < budget.CALL_BUDGET_S
    calls = {call for _, call in budget.schedule()}
    assert calls <= {"1", "1-2", "2", "2-later", "later"}
    assert [call for _, call in budget.schedule()][:3] == ["1"] * 3  # a profile and plans run on it: the first call


def test_the_budget_counts_what_campaign_sh_runs():
    """The grid, the options' warm-up, the plans and the call budget: the same in both files."""
    budget, script = load("budget"), SCRIPT.read_text()
    gpu = script[script.index("    DEVICE=cuda") : script.index("  fi\n}")]
    for model, sizes in budget.SIZES.items():
        assert f"SIZES_{model}={','.join(map(str, sizes))}" in gpu
    assert f"FRESH={','.join(map(str, budget.FRESH_AT))}" in gpu
    options = dict(re.findall(r'"(torch-[\w-]+):([^"]*)"', gpu))
    for listed in budget.OPTIONS.values():
        assert [o.name for o in listed] == list(options)
        for o in listed:
            # an option counted without fresh warm-up processes must not get --fresh-warmup-at
            assert o.fresh == ("--warmup in-process" not in options[o.name]), o.name
            assert o.cap == (int(m.group(1)) if (m := re.search(r"--max-batch-size (\d+)", options[o.name])) else None)
    plans = re.search(r"PLANS=\((.*?)\)\n", gpu, re.S).group(1)
    assert len(re.findall(r'"[^"]+"', plans)) == budget.PLANS
    assert f'BUDGET_S="${{CAMPAIGN_BUDGET_S:-{budget.CALL_BUDGET_S:.0f}}}"' in script
    assert f"--max-time-per-point {budget.MAX_TIME_PER_POINT_S:g}" in gpu
    assert f"SEARCH_TOL={budget.SEARCH_TOLERANCE:g}" in gpu
    session = re.search(r"SESSION=\((.*?)\)\n", script, re.S).group(1)
    names = [re.sub(r" \$GPU_TESTS_S$", "", n) for n in re.findall(r'"([^"]+)"', session)]
    assert names == [p.name for p in budget.parts()]
    assert f'GPU_TESTS_S="${{CAMPAIGN_GPU_TESTS_S:-{budget.GPU_TESTS_S:.0f}}}"' in script
