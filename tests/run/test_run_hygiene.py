"""Nothing of `perfmodel run` outlives it: after Ctrl-C, SIGTERM or SIGKILL of the command, every process it
started (the keeper, Ray's servers and agents, the workers) is gone, and so is Ray's temporary folder."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import repo_env
from run_data import alive, ray_processes_of, stray_folders, write_plan

pytestmark = pytest.mark.integration  # each test runs `perfmodel run` (Ray) in a subprocess
GONE_WITHIN_S = 30.0  # generous for a loaded machine; Ray's own agents would linger a minute or more


@pytest.fixture
def long_plan(tmp_path):
    """Two workers with 3,750 batches of random 64 px inputs each: still running when the signal comes."""
    return write_plan(tmp_path, 60_000, 90, pool={"cpu": 2}, size=64)


def start_run(plan, tmp_path) -> tuple[subprocess.Popen, list]:
    out = tmp_path / "labels.csv"
    process = subprocess.Popen(
        [sys.executable, "-m", "perfmodel", "run", str(plan), "--synthetic", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=repo_env(),
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # until both workers run their batches
        running = [p for p in ray_processes_of(process.pid) if _title(p).startswith("ray::RunWorker.run")]
        if len(running) == 2:
            return process, ray_processes_of(process.pid)
        if process.poll() is not None:
            pytest.fail(f"perfmodel run ended early: {process.stderr.read()}")
        time.sleep(0.2)
    process.kill()
    pytest.fail("the workers did not start within 240 s")


def _title(p) -> str:
    try:
        return " ".join(p.cmdline())
    except Exception:
        return ""


def wait_gone(processes) -> list:
    deadline = time.monotonic() + GONE_WITHIN_S
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive(processes)


def rows_once_written(process, labels, timeout_s: float = 120.0) -> int:
    """Wait for the run's first flush of the labels (every 5 s): a fixed sleep raced the first batches
    on a loaded machine, and a signal before any batch leaves nothing to keep."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            return len(pd.read_csv(labels))
        except (FileNotFoundError, pd.errors.EmptyDataError):
            time.sleep(0.2)
    process.kill()
    pytest.fail(f"perfmodel run wrote no labels within {timeout_s:.0f} s")


def keeper_pids(processes) -> set[int]:
    return {p.pid for p in processes if "perfmodel.run.keeper" in _title(p)}


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_stops_everything_and_keeps_the_labels(long_plan, tmp_path, sig, code):
    process, started = start_run(long_plan, tmp_path)
    keepers = keeper_pids(started)
    written = rows_once_written(process, tmp_path / "labels.csv")  # some batches done and flushed
    process.send_signal(sig)
    _, err = process.communicate(timeout=120)
    assert process.returncode == code, err
    assert ("interrupted" if sig == signal.SIGINT else "terminated") in err and "Traceback" not in err
    assert len(pd.read_csv(tmp_path / "labels.csv")) >= written > 0  # the finished results are kept
    assert wait_gone(started) == []
    assert stray_folders(keepers) == []


def test_a_sigkill_leaves_no_process_and_no_folder(long_plan, tmp_path):
    process, started = start_run(long_plan, tmp_path)
    keepers = keeper_pids(started)
    assert keepers, "the keeper was not found under perfmodel run"
    process.kill()
    process.wait(30)
    assert wait_gone(started) == []
    assert stray_folders(keepers) == []


def test_a_process_can_run_plans_on_a_local_ray_twice(tmp_path):
    """A scheduler that imports perfmodel runs one plan after another in one process: each run starts its
    own local Ray, and the second must connect as the first did (Ray reads its auth token only once)."""
    plan = write_plan(tmp_path, 40, 0.2)
    code = (
        "import sys; from perfmodel.run import RunOptions, read_run_plan, run_plan\n"
        "for _ in range(2):\n"
        "    result = run_plan(read_run_plan(sys.argv[1]), RunOptions(synthetic=True))\n"
        "    print(result.status, result.to_dict()['images_done'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(plan)], capture_output=True, text=True, timeout=300, env=repo_env()
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["complete 40", "complete 40"]


def test_a_process_that_ran_its_own_ray_first_can_run_a_plan(tmp_path):
    """A scheduler that already used Ray (its own ray.init, which read ~/.ray/auth_token and looks for a
    cluster at the machine's network address) then runs a plan: it connects to the local Ray perfmodel
    starts, instead of retrying it for minutes."""
    plan = write_plan(tmp_path, 40, 0.2)
    code = (
        "import sys, ray; from perfmodel.run import RunOptions, read_run_plan, run_plan\n"
        "ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False); ray.shutdown()\n"
        "result = run_plan(read_run_plan(sys.argv[1]), RunOptions(synthetic=True))\n"
        "print(result.status, result.to_dict()['images_done'])\n"
    )
    env = repo_env(HOME=str(tmp_path))  # Ray writes its own token file there, not in ~
    done = subprocess.run([sys.executable, "-c", code, str(plan)], capture_output=True, text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == "complete 40"
