"""The quick experiments reproduce their committed results and refuse bad flags in one sentence."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name.replace("/", "_"), EXPERIMENTS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_004_reproduces_its_committed_plans_on_the_fixed_rule():
    """004 compares fixed rules (margin 0/5/10% on p50, p99): since plan's default --confidence 0.95, the
    margin-0 row silently became a 95% plan (10 s: 4 167 devices instead of 1 755) unless the script says
    which rule it means."""
    run = _load("004_planning_curves/run.py")
    profiles = sorted(str(p) for p in (EXPERIMENTS.parent / "profiles").glob("cpu-*.csv"))
    got = run.solve_grid(profiles, "resnet50", 224, 100_000, np.array([10.0]), 64)
    committed = pd.read_csv(EXPERIMENTS / "004_planning_curves/results/2026-11-21-6ae9fcc/results.csv")
    committed = committed[(committed["input_size"] == 224) & (committed["deadline_s"] == 10.0)]
    assert got.set_index("plan")["gpus"].to_dict() == committed.set_index("plan")["gpus"].to_dict()
    assert got.set_index("plan")["images_planned"].to_dict() == committed.set_index("plan")["images_planned"].to_dict()


def _script(path: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXPERIMENTS / path), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize(
    "path, args",
    [
        ("004_planning_curves/run.py", ["--deadlines", "10,abc"]),
        ("004_planning_curves/run.py", ["--deadlines", "10", "--input-size", "100"]),  # perfmodel's InputError
    ],
)
def test_a_bad_flag_is_refused_in_one_sentence(path, args):
    done = _script(path, *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert done.stderr.strip().splitlines()[-1].startswith(f"{Path(path).name}: error: ")
