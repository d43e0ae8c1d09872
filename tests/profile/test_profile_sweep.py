"""The in-process torch profiler on CPU with the tiny model: round trip, resume, out-of-memory."""

from __future__ import annotations

import warnings

import faulty_models
import numpy as np
import pytest

from perfmodel.errors import BackendError, InputError
from perfmodel.fixed_costs import load_samples_ms
from perfmodel.profile import run_profile
from perfmodel.schema import REQUIRED_COLUMNS, load_profile


def test_round_trip_through_the_csv(tmp_path, tiny_config):
    out = tmp_path / "p.csv"
    df = run_profile(tiny_config(batch_sizes=(1, 2, 4), input_sizes=(32, 48)), out)
    again = load_profile(out)
    assert len(again) == 6
    assert set(REQUIRED_COLUMNS) <= set(again.columns)
    assert (again["status"] == "ok").all()
    assert sorted(zip(again["input_size"], again["batch_size"])) == [(s, b) for s in (32, 48) for b in (1, 2, 4)]
    for column in ("latency_ms", "latency_p99_ms", "warmup_ms", "memory_mb", "load_ms", "throughput_ips"):
        assert (again[column] > 0).all(), column
    assert (again["latency_p99_ms"] >= again["latency_ms"]).all()
    np.testing.assert_allclose(again["throughput_ips"], again["batch_size"] / again["latency_ms"] * 1e3, rtol=1e-4)
    assert set(again["hardware"]) == {"cpu"} and set(again["backend"]) == {"torch"}
    assert set(again["warmup_method"]) == {"in-process"}
    assert (again["threads"] == 1).all()
    assert again["cpu_util_avg"].notna().all() and again["gpu_util_avg"].isna().all()
    assert len(df) == len(again)


def test_one_process_writes_the_columns_of_before(tmp_path, tiny_config):
    df = run_profile(tiny_config(batch_sizes=(1,)), tmp_path / "p.csv")
    assert not {"processes", "process_rel_sd"} & set(df.columns)
    with pytest.raises(InputError, match="processes=1, this run has 2"):  # a file without the column: one process
        run_profile(tiny_config(batch_sizes=(1, 2), processes=2), tmp_path / "p.csv", resume=True)


def test_processes_measure_each_point_in_fresh_workers_and_resume(tmp_path, tiny_config):
    import os

    import psutil

    out = tmp_path / "p.csv"
    df = run_profile(tiny_config(batch_sizes=(1,), processes=2), out)
    assert df.loc[0, "processes"] == 2 and np.isfinite(df.loc[0, "process_rel_sd"]) and df.loc[0, "process_rel_sd"] >= 0
    assert df.loc[0, "latency_p99_ms"] >= df.loc[0, "latency_ms"] > 0
    assert df.loc[0, "throughput_ips"] == pytest.approx(1 / df.loc[0, "latency_ms"] * 1e3, rel=1e-4)
    workers = [
        p for p in psutil.Process(os.getpid()).children(recursive=True) if "perfmodel.profile" in " ".join(p.cmdline())
    ]
    assert not workers, "every worker, the extra ones included, is gone when the sweep ends"
    # resumed with the same K: the point from before is kept, the new one measured in 2 processes too
    again = run_profile(tiny_config(batch_sizes=(1, 2), processes=2), out, resume=True)
    assert list(again["processes"]) == [2, 2] and list(again["created_at"])[:1] == list(df["created_at"])
    for k in (1, 3):  # another K would put two kinds of point on one curve
        with pytest.raises(InputError, match="processes=2, this run has " + str(k)):
            run_profile(tiny_config(batch_sizes=(1, 2, 4), processes=k), out, resume=True)


def test_fresh_process_warmup_is_recorded_with_the_parts_of_its_load(tmp_path, tiny_config):
    config = tiny_config(batch_sizes=(1, 2), warmup="fresh-process", fresh_warmup_at=(1,))
    df = run_profile(config, tmp_path / "p.csv")
    fresh, other = df.iloc[0], df.iloc[1]
    assert fresh["warmup_method"] == "fresh-process"
    assert fresh["warmup_ms"] > 0 and fresh["load_ms"] > 0
    start = ("start_python_ms", "start_import_ms", "start_device_ms")
    parts = (*start, "load_build_ms", "load_weights_ms", "cold_start_ms")
    assert all(fresh[c] > 0 for c in parts if c != "start_device_ms") and fresh["start_device_ms"] >= 0  # a CPU
    assert fresh["load_build_ms"] + fresh["load_weights_ms"] == pytest.approx(fresh["load_ms"], rel=1e-6)
    # The fresh process's time until its first call returned is its parts' sum, but for the messages
    # between profiler and worker and the first call's input batch.
    total = sum(fresh[c] for c in start) + fresh["load_ms"] + fresh["warmup_ms"]
    assert 0.8 * fresh["cold_start_ms"] <= total <= fresh["cold_start_ms"], fresh[[*parts, "load_ms", "warmup_ms"]]
    # A row without a fresh process has none: its load_ms is the measuring worker's.
    assert all(np.isnan(other[c]) for c in parts) and other["load_ms"] > 0


def test_interrupted_sweep_keeps_finished_points_and_resume_completes(tmp_path, tiny_config):
    out = tmp_path / "p.csv"
    config = tiny_config(batch_sizes=(1, 2, 4, 8))

    def interrupt_after_two(event):
        if event.kind == "point" and event.done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_profile(config, out, on_progress=interrupt_after_two)
    first = load_profile(out)
    assert list(first["batch_size"]) == [1, 2]
    assert not list(tmp_path.glob(".*.tmp")), "no temporary file is left behind"

    events = []
    df = run_profile(config, out, resume=True, on_progress=events.append)
    points = [e for e in events if e.kind == "point"]
    assert [(e.batch_size, e.resumed) for e in points] == [(1, True), (2, True), (4, False), (8, False)]
    assert list(df["batch_size"]) == [1, 2, 4, 8]
    # The resumed points are the very rows measured before, not measured again.
    assert list(df["created_at"][:2]) == list(first["created_at"])
    assert list(df["latency_ms"][:2]) == list(first["latency_ms"])


def test_existing_output_needs_resume(tmp_path, tiny_config):
    out = tmp_path / "p.csv"
    run_profile(tiny_config(batch_sizes=(1,)), out)
    with pytest.raises(InputError, match="already exists: continue that sweep with `resume`"):
        run_profile(tiny_config(batch_sizes=(1,)), out)


def test_resume_refuses_different_settings(tmp_path, tiny_config):
    out = tmp_path / "p.csv"
    run_profile(tiny_config(batch_sizes=(1,)), out)
    with pytest.raises(InputError, match="warmup_method"):
        run_profile(tiny_config(batch_sizes=(1, 2), warmup="fresh-process"), out, resume=True)


def test_auto_finds_the_largest_batch_by_doubling_then_bisection(tmp_path, tiny_config):
    model = faulty_models.fails_above(tmp_path, 11, faulty_models.OOM)
    out = tmp_path / "p.csv"
    events = []
    df = run_profile(tiny_config(model=model, batch_sizes=None, max_call_ms=1e9), out, on_progress=events.append)
    tried = list(df["batch_size"])
    assert tried == [1, 2, 4, 8, 16, 12, 10, 11]  # doubling to the first OOM, then bisection
    status = dict(zip(df["batch_size"], df["status"]))
    assert status[16] == "oom" and status[12] == "oom" and status[11] == "ok"
    assert load_profile(out)["status"].tolist() == df["status"].tolist()
    search = [e for e in events if e.kind == "search"]
    assert "11 is the largest" in search[0].message
    points = [e for e in events if e.kind == "point"]
    assert all(e.total is not None and e.total >= e.done for e in points)  # a bound, never "?"
    assert points[-1].eta_s is not None


def test_oom_never_ends_a_fixed_grid(tmp_path, tiny_config):
    model = faulty_models.fails_above(tmp_path, 2, faulty_models.OOM)
    df = run_profile(tiny_config(model=model, batch_sizes=(1, 2, 4), input_sizes=(32, 40)), tmp_path / "p.csv")
    assert df["status"].tolist() == ["ok", "ok", "oom"] * 2
    assert df.loc[df["status"] == "oom", "error"].str.contains("out of memory").all()


@pytest.mark.parametrize(
    "message",
    [
        faulty_models.CUDNN_INTERNAL,
        faulty_models.NO_ENGINE,
        "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`",
        faulty_models.INDEX_32BIT,
    ],
)
def test_out_of_memory_in_disguise_and_size_limits_bisect(tmp_path, tiny_config, message):
    """cuDNN/cuBLAS failures at a large batch, and kernels' 2^31-element limits, bound the batch like an
    OOM: the search bisects to the largest batch that runs, and each row keeps the original message."""
    model = faulty_models.fails_above(tmp_path, 5, message)
    df = run_profile(tiny_config(model=model, batch_sizes=None, max_call_ms=1e9), tmp_path / "p.csv")
    assert list(df["batch_size"]) == [1, 2, 4, 8, 6, 5]
    failed = df[df["status"] != "ok"]
    assert set(failed["status"]) == {"oom"} and list(failed["batch_size"]) == [8, 6]
    first_line = message.splitlines()[0][:60]
    assert failed["error"].str.contains(first_line, regex=False).all()
    assert not failed["error"].str.contains("TorchScript").any()  # the real cause, not the interpreter's preamble


def test_a_disguised_oom_without_a_smaller_success_is_an_error(tmp_path, tiny_config):
    model = faulty_models.fails_above(tmp_path, 0, faulty_models.CUDNN_INTERNAL)
    df = run_profile(tiny_config(model=model, batch_sizes=(1, 2)), tmp_path / "p.csv")
    assert df["status"].tolist() == ["error", "error"]
    assert df["error"].str.contains("CUDNN_STATUS_INTERNAL_ERROR").all()


def test_sticky_cuda_error_ends_the_sweep_with_a_resume_hint(tmp_path, tiny_config):
    model = faulty_models.fails_above(tmp_path, 2, faulty_models.ILLEGAL_ACCESS)
    out = tmp_path / "p.csv"
    with pytest.raises(BackendError, match="`resume`") as caught:
        run_profile(tiny_config(model=model, batch_sizes=(1, 2, 4, 8, 16)), out)
    assert "illegal memory access" in str(caught.value) and "\n" not in str(caught.value)
    kept = load_profile(out)
    assert list(kept["batch_size"]) == [1, 2, 4]  # stopped at once: 8 and 16 were not tried
    assert list(kept["status"]) == ["ok", "ok", "error"] and "illegal memory access" in kept["error"].iloc[-1]


@pytest.mark.parametrize("warmup", ["in-process", "fresh-process"])
def test_a_call_that_never_returns_fails_its_point_and_the_sweep_goes_on(tmp_path, tiny_config, warmup):
    model = faulty_models.save(faulty_models.LoopsAt(2), tmp_path, "loops")
    df = run_profile(
        tiny_config(model=model, batch_sizes=(1, 2, 4), warmup=warmup, call_timeout_s=2), tmp_path / "p.csv"
    )
    assert df["status"].tolist() == ["ok", "error", "ok"]
    assert "did not return within 2 s (`call_timeout_s`)" in df["error"].iloc[1]


def test_fresh_warmup_only_at_chosen_batch_sizes(tmp_path, tiny_config):
    df = run_profile(
        tiny_config(batch_sizes=(1, 2, 4), warmup="fresh-process", fresh_warmup_at=(2,)), tmp_path / "p.csv"
    )
    assert (df["status"] == "ok").all() and set(df["warmup_method"]) == {"fresh-process"}
    warm = dict(zip(df["batch_size"], df["warmup_ms"]))
    assert warm[2] > 0 and np.isnan(warm[1]) and np.isnan(warm[4])
    assert (df["load_ms"] > 0).all() and (df["memory_mb"] > 0).all()
    # which process measured each row's load: batch 2's own fresh one; 1 and 4 the measuring worker's, one load
    process = dict(zip(df["batch_size"], df["load_process"]))
    assert process[2].startswith("fresh-") and process[1] == process[4] and process[1].startswith("measuring-")
    assert len(load_samples_ms(load_profile(tmp_path / "p.csv"))) == 2


def test_fresh_warmup_sizes_off_the_doubling_path_are_measured_too(tmp_path, tiny_config):
    model = faulty_models.fails_above(tmp_path, 11, faulty_models.OOM)
    config = tiny_config(
        model=model,
        batch_sizes=None,
        max_call_ms=1e9,
        warmup="fresh-process",
        fresh_warmup_at=(3, 4, 64),
        search_tolerance=0.5,
    )
    df = run_profile(config, tmp_path / "p.csv")
    # doubling 1..16, bisection within 50% of 8 (12 is OOM, gap 4 <= 4), then 3 (4 was visited; 64 does not fit)
    assert list(df["batch_size"]) == [1, 2, 4, 8, 16, 12, 3]
    assert set(df.loc[df["warmup_ms"].notna(), "batch_size"]) == {3, 4}


def test_memory_is_one_input_batch_not_three(tmp_path, tiny_config):
    """A model with no activations to speak of: its memory is its one input batch (96 MiB here),
    not the three batches the steady state rotates between. The batch is large so that what a first
    call loads once on a CPU (kernel code, thread stacks: about 20 MiB, more on some CPUs than on
    others) cannot be mistaken for, or hide, a second batch."""
    model = faulty_models.save(faulty_models.MeanOnly(), tmp_path, "mean_only")
    batch_mb = 8 * 3 * 1024 * 1024 * 4 / 2**20
    for warmup in ("fresh-process", "in-process"):
        df = run_profile(
            tiny_config(model=model, batch_sizes=(8,), input_sizes=(1024,), warmup=warmup), tmp_path / f"{warmup}.csv"
        )
        assert df.loc[0, "status"] == "ok"
        assert 0.8 * batch_mb < df.loc[0, "memory_mb"] < 1.6 * batch_mb, (warmup, df.loc[0, "memory_mb"])


def test_torchscript_errors_keep_their_real_cause(tmp_path, tiny_config):
    model = faulty_models.fails_above(tmp_path, 1, "the model refuses batches above 1")
    df = run_profile(tiny_config(model=model, batch_sizes=(1, 2)), tmp_path / "p.csv")
    assert df.loc[1, "status"] == "error"
    assert df.loc[1, "error"] == "RuntimeError: the model refuses batches above 1"


def test_real_cpu_out_of_memory_under_a_memory_limit(tmp_path, tiny_config):
    # A budget of 150 MiB: large batches at 640 px fail with a real allocation error, caught as OOM,
    # and the points after it still run.
    df = run_profile(
        tiny_config(batch_sizes=None, input_sizes=(640,), memory_limit_mb=150, max_call_ms=1e9), tmp_path / "p.csv"
    )
    assert (df["status"] == "oom").any()
    ok = df[df["status"] == "ok"]
    largest_ok = ok["batch_size"].max()
    smallest_oom = df.loc[df["status"] == "oom", "batch_size"].min()
    assert smallest_oom == largest_ok + 1, df[["batch_size", "status", "memory_mb", "error"]].to_string()
    assert ok["memory_mb"].max() <= 150 * 1.1
    # the allocator's own words, or oneDNN's when its scratchpad could not be allocated (after a smaller batch ran)
    said = df.loc[df["status"] == "oom", "error"]
    assert said.str.contains("alloc|could not create a primitive", case=False).all(), said.to_string()


def test_real_cpu_out_of_memory_in_a_fresh_worker(tmp_path, tiny_config):
    df = run_profile(
        tiny_config(batch_sizes=(1, 64), input_sizes=(640,), memory_limit_mb=150, warmup="fresh-process"),
        tmp_path / "p.csv",
    )
    assert df["status"].tolist() == ["ok", "oom"]  # 64 images of 640 px are 300 MiB
    assert df.loc[0, "memory_mb"] <= 150 and df.loc[0, "warmup_ms"] > 0


def test_without_nvml_the_sweep_goes_on(tmp_path, tiny_config):
    from perfmodel.profile.monitor import GpuId, HardwareMonitor

    monitor = HardwareMonitor(GpuId("cuda:0", "GPU-0", None))  # no NVML library here, or no such GPU there
    with pytest.warns(UserWarning, match="GPU counters are not available"):
        monitor.start()
    try:
        mark = monitor.window()
        summary = monitor.summary(mark)
    finally:
        monitor.stop()
    assert np.isnan(summary["gpu_util_avg"]) and summary["cpu_util_max"] >= 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on a CPU device the monitor does not even try NVML
        df = run_profile(tiny_config(batch_sizes=(1,)), tmp_path / "p.csv")
    assert df["gpu_util_avg"].isna().all()


def test_torchscript_model_file(tmp_path, tiny_config):
    import torch

    from perfmodel.models import ModelSpec, build_model

    path = tmp_path / "scripted_tiny.pt"
    torch.jit.save(torch.jit.script(build_model(ModelSpec("tiny"))), str(path))
    df = run_profile(tiny_config(model=str(path), batch_sizes=(1,)), tmp_path / "p.csv")
    assert df.loc[0, "model"] == "scripted_tiny" and df.loc[0, "status"] == "ok"


def test_the_monitor_samples_in_its_own_process():
    """A reading holds an interpreter for ~2 ms: on the timing process's interpreter it moved the p99."""
    import threading
    import time

    from perfmodel.profile.monitor import HardwareMonitor

    threads_before = threading.active_count()
    with HardwareMonitor(interval_s=0.01) as monitor:
        mark = monitor.window()
        time.sleep(0.5)
        assert threading.active_count() == threads_before  # no sampling thread here
        later = monitor.window()
        summary = monitor.summary(mark)
    assert later - mark >= 5  # it sampled meanwhile, elsewhere
    assert summary["cpu_util_max"] >= 0 and summary["host_rss_mb_max"] > 0


def test_each_compile_worker_has_its_own_cache_folder_removed_after():
    from dataclasses import asdict

    from perfmodel.models import ModelSpec
    from perfmodel.profile.worker_process import WorkerProcess
    from perfmodel.torch_runner import TorchOptions

    request = {
        "op": "load",
        "model": asdict(ModelSpec("tiny")),
        "options": asdict(TorchOptions(compile=True)),
        "seed": 0,
        "call_timeout_s": 60,
    }
    caches, folders = [], []
    for _ in range(2):
        with WorkerProcess(own_compile_cache=True) as worker:
            reply = worker.request(request, 600, "--worker-timeout")
            assert reply["status"] == "ok", reply
            caches.append(reply["compile_cache"])
            folders.append(worker.scratch)
            assert str(worker.scratch) in reply["compile_cache"] and str(worker.scratch) in reply["temp_dir"]
        assert not folders[-1].exists()
    assert caches[0] != caches[1]


def test_a_worker_whose_call_timed_out_is_not_asked_again(tiny_config, tmp_path):
    """The worker answers a timed-out call and then ends itself: the sweep must not send the next point to
    it while it is still exiting (that point then failed as 'exited with code 3', half the time)."""
    from perfmodel.profile.backends.torch_sweep import _TorchSweep
    from perfmodel.profile.output import ProfileOutput

    class Exiting:  # answered "timeout" and has not exited yet
        stopped = False

        def request(self, message, timeout_s, flag):
            return {"status": "failed", "kind": "timeout", "error": "a model call at batch 2 did not return"}

        def is_alive(self):
            return not self.stopped

        def stop(self):
            self.stopped = True

    sweep = _TorchSweep(tiny_config(), ProfileOutput(tmp_path / "p.csv", resume=False), lambda event: None)
    sweep.measuring = worker = Exiting()
    assert sweep._steady(2, 32, False, None)["kind"] == "timeout"
    assert worker.stopped
