"""The in-process torch profiler on CPU with the tiny model: round trip, resume, out-of-memory."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from perfmodel.errors import InputError
from perfmodel.profile import run_profile
from perfmodel.profile.backends.torch_backend import TorchRunner
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


def test_fresh_process_warmup_is_recorded(tmp_path, tiny_config):
    df = run_profile(tiny_config(batch_sizes=(2,), warmup="fresh-process"), tmp_path / "p.csv")
    assert df.loc[0, "warmup_method"] == "fresh-process"
    assert df.loc[0, "warmup_ms"] > 0 and df.loc[0, "load_ms"] > 0


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
    with pytest.raises(InputError, match="already exists.*--resume"):
        run_profile(tiny_config(batch_sizes=(1,)), out)


def test_resume_refuses_different_settings(tmp_path, tiny_config):
    out = tmp_path / "p.csv"
    run_profile(tiny_config(batch_sizes=(1,)), out)
    with pytest.raises(InputError, match="warmup_method"):
        run_profile(tiny_config(batch_sizes=(1, 2), warmup="fresh-process"), out, resume=True)


def _inject_oom_above(monkeypatch, limit: int):
    """Make the backend run out of memory for batches above `limit`, as a GPU would."""
    import torch

    real_inputs = TorchRunner.inputs

    def inputs(self, batch_size, input_size, count=3):
        if batch_size > limit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {batch_size} images")
        return real_inputs(self, batch_size, input_size, count)

    monkeypatch.setattr(TorchRunner, "inputs", inputs)


def test_auto_finds_the_largest_batch_by_doubling_then_bisection(tmp_path, tiny_config, monkeypatch):
    _inject_oom_above(monkeypatch, 11)
    out = tmp_path / "p.csv"
    events = []
    df = run_profile(tiny_config(batch_sizes=None, max_call_ms=1e9), out, on_progress=events.append)
    tried = list(df["batch_size"])
    assert tried == [1, 2, 4, 8, 16, 12, 10, 11]  # doubling to the first OOM, then bisection
    status = dict(zip(df["batch_size"], df["status"]))
    assert status[16] == "oom" and status[12] == "oom" and status[11] == "ok"
    assert load_profile(out)["status"].tolist() == df["status"].tolist()
    search = [e for e in events if e.kind == "search"]
    assert "11 is the largest" in search[0].message


def test_oom_never_ends_a_fixed_grid(tmp_path, tiny_config, monkeypatch):
    _inject_oom_above(monkeypatch, 2)
    df = run_profile(tiny_config(batch_sizes=(1, 2, 4), input_sizes=(32, 40)), tmp_path / "p.csv")
    assert df["status"].tolist() == ["ok", "ok", "oom"] * 2
    assert df.loc[df["status"] == "oom", "error"].str.contains("out of memory").all()


def test_real_cpu_out_of_memory_under_a_memory_limit(tmp_path, tiny_config):
    # A budget of 150 MiB: large batches at 640 px fail with a real allocation error in the fresh
    # worker, caught as OOM, and the points after it still run.
    df = run_profile(
        tiny_config(batch_sizes=None, input_sizes=(640,), memory_limit_mb=150, max_call_ms=1e9,
                    warmup="fresh-process"),
        tmp_path / "p.csv",
    )
    assert (df["status"] == "oom").any()
    ok = df[df["status"] == "ok"]
    largest_ok = ok["batch_size"].max()
    smallest_oom = df.loc[df["status"] == "oom", "batch_size"].min()
    assert smallest_oom == largest_ok + 1
    assert ok["memory_mb"].max() <= 150 * 1.1


def test_without_nvml_the_sweep_goes_on(tmp_path, tiny_config, monkeypatch):
    import pynvml

    from perfmodel.profile.monitor import HardwareMonitor

    def no_library():
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    with pytest.warns(UserWarning, match="GPU counters are not available"):
        monitor = HardwareMonitor(gpu_index=0)
    with monitor:
        mark = monitor.window()
        summary = monitor.summary(mark)
    assert np.isnan(summary["gpu_util_avg"]) and summary["cpu_util_max"] >= 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # on a CPU device the monitor does not even try NVML
        df = run_profile(tiny_config(batch_sizes=(1,)), tmp_path / "p.csv")
    assert df["gpu_util_avg"].isna().all()


def test_torchscript_model_file(tmp_path, tiny_config):
    import torch

    from perfmodel.profile.models import ModelSpec, build_model

    path = tmp_path / "scripted_tiny.pt"
    torch.jit.save(torch.jit.script(build_model(ModelSpec("tiny"))), str(path))
    df = run_profile(tiny_config(model=str(path), batch_sizes=(1,)), tmp_path / "p.csv")
    assert df.loc[0, "model"] == "scripted_tiny" and df.loc[0, "status"] == "ok"
