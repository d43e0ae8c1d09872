"""The quick experiments reproduce their committed results and refuse bad flags in one sentence."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
RESULTS_004 = "2026-11-28-intel-r-xeon-r-processor-2-80ghz-3a66e26181"  # the run 004's README cites


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), EXPERIMENTS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_004_reproduces_its_committed_plans_on_the_fixed_rule():
    """004 compares fixed rules (margin 0/5/10% on p50, p99): since plan's default --confidence 0.95, the
    margin-0 row silently became a 95% plan (10 s, then: 4 167 devices instead of 1 755) unless the script
    says which rule it means. The committed run is the one its README cites (the plans count the median
    of the profile's loads, one per process: issue 37)."""
    run = _load("004_planning_curves/run.py")
    profiles = sorted(str(p) for p in (EXPERIMENTS.parent / "profiles").glob("cpu-*.csv"))
    got = run.solve_grid(profiles, "resnet50", 224, 100_000, np.array([10.0]), 64)
    committed = pd.read_csv(EXPERIMENTS / "004_planning_curves/results" / RESULTS_004 / "results.csv")
    committed = committed[(committed["input_size"] == 224) & (committed["deadline_s"] == 10.0)]
    assert RESULTS_004 in (EXPERIMENTS / "004_planning_curves/README.md").read_text()
    assert got.set_index("plan")["gpus"].to_dict() == committed.set_index("plan")["gpus"].to_dict()
    assert got.set_index("plan")["images_planned"].to_dict() == committed.set_index("plan")["images_planned"].to_dict()


def _script(path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXPERIMENTS / path), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        "003_fit_accuracy/between_published.py",  # took --help for a 3-minute run
        "003_fit_accuracy/transfer_heldout.py",  # ... one that rewrites perfmodel/data/gpu_effects.json
        "003_fit_accuracy/transfer_tried.py",
        "003_fit_accuracy/same_publication.py",
        "003_fit_accuracy/two_batch_sizes.py",
        "011_deadline_calibration/queue_call.py",  # ... one that starts Ray
        "011_deadline_calibration/coload.py",
        "011_deadline_calibration/gpu_calibration.py",  # ... one that starts Ray and runs plans
    ],
)
def test_help_says_what_a_script_does_and_runs_nothing(path):
    done = _script(path, "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-500:]


@pytest.mark.slow
@pytest.mark.parametrize(
    "path, args",
    [
        ("004_planning_curves/run.py", ["--deadlines", "10,abc"]),
        ("004_planning_curves/run.py", ["--deadlines", "10", "--input-size", "100"]),  # perfmodel's InputError
        ("005_solver_speed/run.py", ["--repeats", "0"]),  # an IndexError once all seeds were solved
        ("005_solver_speed/run.py", ["--profile", "nope.csv"]),  # an error line in results.md, minutes later
        ("010_profiler_overhead/run.py", ["--rounds", "0"]),  # a KeyError after the auto sweeps
        ("006_plan_execution/back_to_back.py", ["--rounds", "0"]),  # a KeyError, and a results folder left
        ("001_serving_architectures/modes.py", ["--repeats", "0"]),  # 0 of these loops runs nothing to report
        ("002_efficientnet_input_batch/run.py", ["--repeats", "0"]),
        ("006_plan_execution/pairing.py", ["--rounds", "0"]),
        ("007_online_serving/run.py", ["--repeats", "0"]),
        ("011_deadline_calibration/level.py", ["--repeats", "0"]),
        ("011_deadline_calibration/against_run.py", ["--runs", "0"]),
        ("011_deadline_calibration/coload.py", ["nosuch"]),  # waited forever for a load that never came
        ("012_load_time/run.py", ["--repeats", "0"]),
        ("012_load_time/run.py", ["--arms", "old,nosuch"]),  # would fail after minutes of the other arms
        ("011_deadline_calibration/gpu_calibration.py", ["--hardware", "h999", "--out", "x.jsonl"]),  # no profile
        ("011_deadline_calibration/gpu_calibration.py", ["--deadlines", "10,abc"]),
        ("008_gpu_campaign/budget.py", ["h999"]),
        ("008_gpu_campaign/figures.py", ["no/such/folder"]),
    ],
)
def test_a_bad_flag_is_refused_in_one_sentence(path, args):
    done = _script(path, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert done.stderr.strip().splitlines()[-1].startswith(f"{Path(path).name}: error: ")
