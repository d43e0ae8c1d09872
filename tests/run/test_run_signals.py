"""SIGTERM and Ctrl-C around Ray's own signal handling: ray.init sets Ray's SIGTERM handlers (a Python one that
exits, a native one that dumps its stack and aborts) and ray.shutdown leaves SIGTERM to its default action
(death, no output). perfmodel keeps its own in charge, so a signal in those windows ends the run as any other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import repo_env
from run_data import write_plan

from perfmodel.run import cluster

GONE_WITHIN_S = 30.0


def test_a_sigterm_that_rays_handler_turned_into_an_exit_goes_to_the_callers_handler():
    came = []

    def ours(signum, frame):
        came.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, ours)
    try:
        with pytest.raises(KeyboardInterrupt), cluster.sigterm_kept():
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # as ray.init does
            signal.raise_signal(signal.SIGTERM)
        assert came == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is ours
        with cluster.sigterm_kept():  # a block that ends normally: ours is set again all the same
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(
    ("point", "sig", "code", "said"),
    [
        ("init", "SIGTERM", 143, "error: terminated: 0 images done"),  # was 134 and Ray's stack dump
        ("shutdown", "SIGTERM", 0, "note: SIGTERM came once every batch was done: the run is complete."),  # 143, mute
        ("shutdown", "SIGINT", 0, "note: Ctrl-C came once every batch was done: the run is complete."),  # 130
    ],
)
def test_a_signal_as_ray_starts_or_stops_ends_the_run_in_its_sentence(tmp_path, point, sig, code, said):
    """B-E2 with a real local Ray: a signal right after ray.init or ray.shutdown."""
    plan = write_plan(tmp_path, 40, 0.2)
    probe = Path(__file__).with_name("signal_at.py")
    done = subprocess.run(
        [sys.executable, str(probe), point, sig, str(plan)],
        capture_output=True,
        text=True,
        timeout=240,
        env=repo_env(),
    )
    assert done.returncode == code, done.stderr[-2000:]
    assert said in done.stderr and "Traceback" not in done.stderr and "SIGTERM received" not in done.stderr
    assert ("40 of 40 images; makespan" in done.stdout) == (code == 0)
    started = json.loads(done.stderr.strip().splitlines()[-1])
    assert started["pids"], "the run started no keeper"
    deadline = time.monotonic() + GONE_WITHIN_S
    while time.monotonic() < deadline and any(_alive(pid) for pid in started["pids"]):
        time.sleep(0.2)
    assert [pid for pid in started["pids"] if _alive(pid)] == []
    assert not os.path.exists(started["folder"])


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
