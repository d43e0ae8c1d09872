"""`perfmodel profile --alongside N`: every point timed while N more workers run the same batch."""

from __future__ import annotations

import os
import time

import psutil
import pytest
from test_process_hygiene import profile_workers

from perfmodel.errors import InputError
from perfmodel.profile import ProfileConfig, run_profile
from perfmodel.profile.neighbours import Neighbours, check_alongside
from perfmodel.schema import load_profile, write_profile


def _load_request() -> dict:
    return {
        "op": "load",
        "model": {"name": "tiny", "path": None},
        "options": {"device": "cpu", "threads": 1},
        "seed": 0,
        "call_timeout_s": 60,
        "device_memory_limit_mb": None,
    }


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_rows_say_alongside_and_no_neighbour_outlives_the_sweep(tmp_path, tiny_config):
    seen = []

    def during(event):
        if event.kind == "point":
            seen.append(len(profile_workers(os.getpid())))

    df = run_profile(tiny_config(batch_sizes=(1, 4), alongside=1), tmp_path / "p.csv", on_progress=during)
    assert (df["status"] == "ok").all()
    assert (load_profile(tmp_path / "p.csv")["alongside"] == 1).all()
    assert seen and min(seen) >= 2  # the measuring worker and its neighbour, at every point
    assert not profile_workers(os.getpid())


def test_a_profile_measured_alone_says_zero(tmp_path, tiny_config):
    df = run_profile(tiny_config(batch_sizes=(1,)), tmp_path / "p.csv")
    assert df["alongside"].tolist() == [0]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_resume_refuses_another_alongside_also_for_files_from_before_the_column(tmp_path, tiny_config):
    out = tmp_path / "p.csv"
    df = run_profile(tiny_config(batch_sizes=(1,)), out)
    with pytest.raises(InputError, match="alongside"):
        run_profile(tiny_config(batch_sizes=(1, 2), alongside=1), out, resume=True)
    write_profile(df.drop(columns=["alongside"]), out)  # a profile written before --alongside existed
    with pytest.raises(InputError, match="alongside=0"):
        run_profile(tiny_config(batch_sizes=(1, 2), alongside=1), out, resume=True)
    assert len(run_profile(tiny_config(batch_sizes=(1, 2)), out, resume=True)) == 2


def test_a_neighbour_runs_until_told_otherwise_and_reports_a_batch_that_does_not_fit():
    with Neighbours(1, _load_request(), load_timeout_s=120, call_timeout_s=60) as neighbours:
        assert neighbours.busy(2, 32, memory_limit_mb=None) == {"status": "ok"}
        worker = psutil.Process(neighbours.workers[0].pid)
        before = worker.cpu_times()
        time.sleep(1.0)  # a wait, not a timing: it must have run some calls meanwhile
        after = worker.cpu_times()
        assert after.user + after.system - before.user - before.system > 0.2  # it computes while we wait
        assert neighbours.still_busy() == {"status": "ok"}
        failed = neighbours.busy(4096, 256, memory_limit_mb=1.0)  # over a 1 MiB budget: a limit, like OOM
        assert failed["status"] == "failed" and failed["kind"] in ("oom", "limit")
        assert "alongside" in failed["error"]
        assert neighbours.busy(1, 32, memory_limit_mb=None)["status"] == "ok"  # a new neighbour takes over
    assert not profile_workers(os.getpid())


@pytest.mark.parametrize("value", [-1, True, 1.5, 2000])
def test_config_refuses_a_bad_alongside(value):
    with pytest.raises(InputError, match="`alongside` must be a whole number"):
        ProfileConfig(model="tiny", alongside=value)


def test_alongside_is_for_cpu_workers_and_needs_their_cores():
    check_alongside(0, 1, is_cuda=True)  # nothing asked, nothing to refuse
    with pytest.raises(InputError, match="GPU worker a GPU of its own"):
        check_alongside(1, 1, is_cuda=True)
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(InputError, match=f"needs {cores + 1} cores.*may use {cores}"):
        check_alongside(cores, 1, is_cuda=False)
