"""Open-loop load (`perfmodel profile --backend triton --rate`): the schedule, the flags, and (marked
`triton`) a few seconds against a real local server with dynamic batching on. Behaviour only, never a speed."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from conftest import perfmodel_command, repo_env
from test_triton import _leftovers, _server_processes

from perfmodel.cli import main
from perfmodel.errors import DeviceError
from perfmodel.planning.triton_config import BatchingSettings, write_batching
from perfmodel.profile.backends.triton_rate import run_open_loop, send_times
from perfmodel.profile.backends.triton_stats import batch_statistics
from perfmodel.schema import load_profile


def test_send_times_are_a_poisson_schedule():
    times = send_times(200.0, 50.0, seed=1)
    assert np.all(np.diff(times) > 0) and times[-1] < 50.0
    assert len(times) == pytest.approx(10_000, rel=0.05)
    gaps = np.diff(times)
    assert np.std(gaps) / np.mean(gaps) == pytest.approx(1.0, abs=0.05)  # exponential gaps
    assert np.array_equal(times, send_times(200.0, 50.0, seed=1))


def test_batch_statistics_are_differences():
    def snapshot(executions, inferences, sizes, busy_ms=0):  # the busy time split over input and infer
        ns = int(busy_ms * 1e6 / max(1, len(sizes)))
        return {
            "model_stats": [
                {
                    "execution_count": executions,
                    "inference_count": inferences,
                    "batch_stats": [
                        {
                            "batch_size": b,
                            "compute_input": {"ns": ns // 2},
                            "compute_infer": {"count": c, "ns": ns - ns // 2},
                        }
                        for b, c in sizes.items()
                    ],
                }
            ]
        }

    out = batch_statistics(
        snapshot(10, 10, {1: 10}, busy_ms=50), snapshot(30, 70, {1: 12, 4: 14, 8: 4}, busy_ms=249), wall_s=0.5
    )
    assert out == {
        "server_executions": 20.0,
        "server_batch_mean": 3.0,
        "server_batch_max": 8.0,
        "server_compute_ms": pytest.approx(9.95),
        "server_busy_share": pytest.approx(0.398),
    }
    assert np.isnan(batch_statistics(None, snapshot(1, 1, {}))["server_batch_mean"])
    unknown_window = batch_statistics(snapshot(1, 1, {1: 1}, 1), snapshot(2, 2, {1: 2}, 3))
    assert unknown_window["server_compute_ms"] == 2.0 and np.isnan(unknown_window["server_busy_share"])


@pytest.mark.parametrize(
    "args, says",
    [
        (["--rate", "10/s", "--concurrency", "2"], "--concurrency set a closed loop"),
        (["--duration", "5s"], "--duration is for --rate"),
        (["--rate", "10/s", "--max-batch-size", "4", "--triton-config", "."], "either --triton-config"),
        (["--rate", "often"], "is not a rate"),
    ],
)
def test_rate_flags_are_checked_before_any_work(tmp_path, capsys, args, says):
    code = main(["profile", "--model", "tiny", "--backend", "triton", "--out", str(tmp_path / "x.csv"), *args])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()


def test_rate_sweep_says_what_it_plans(tmp_path, capsys, monkeypatch):
    """The 'planned:' line of an open-loop sweep names its points and time (it was 'planned: ' alone)."""
    from perfmodel.profile.backends import triton_rate

    def no_server(*args, **kwargs):
        raise DeviceError("no server in this test")

    monkeypatch.setattr(triton_rate, "_target", no_server)
    out = tmp_path / "x.csv"
    args = ["--backend", "triton", "--rate", "50,100/s", "--duration", "5s", "--input-sizes", "32", "--out", str(out)]
    code = main(["profile", "--model", "tiny", *args])
    planned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("planned:")]
    assert code == 2 and not out.exists()
    assert planned == ["planned: 2 point(s); sampling takes at most 6 s per point (12 s in all)"]


@pytest.fixture(scope="module")
def batching_server():
    try:
        import pytriton  # noqa: F401

        from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings
    except ImportError as exc:
        pytest.skip(f"the Triton client or nvidia-pytriton is not installed ({exc})")
    local = LocalTritonServer(
        ServerSettings("tiny", max_batch_size=8, dynamic_batching=True, max_queue_delay_us=2000), start_timeout_s=240
    )
    try:
        local.start()
    except DeviceError as exc:
        pytest.skip(f"the bundled Triton server cannot start here: {exc}")
    yield local
    local.stop()


@pytest.mark.triton
def test_open_loop_against_a_batching_server(batching_server):
    from perfmodel.profile.backends.triton_client import ServerConnection, Workload, random_batches

    info = batching_server.info
    url = info.url("grpc")
    with ServerConnection("grpc", url, info.access_token) as conn:
        model_input = conn.check_model(info.model_name)
    work = Workload(
        "grpc",
        url,
        info.model_name,
        model_input.name,
        model_input.datatype,
        "async",
        1,
        random_batches(1, 32, np.float32),
        30.0,
    )
    stats = {}

    def snapshot(when):
        with ServerConnection("grpc", url, info.access_token) as conn:
            stats[when] = conn.model_statistics(info.model_name)

    result = run_open_loop(work, 40.0, 0.5, 2.5, seed=3, on_window=snapshot)
    assert result.sent > 50 and result.answered == result.sent and result.failed == 0
    assert result.latency.median_ms > 0 and result.latency.p99_ms >= result.latency.median_ms
    assert not result.stopped_early
    batches = batch_statistics(stats.get("start"), stats.get("end"), 2.5)
    assert batches["server_executions"] >= 1 and 1 <= batches["server_batch_mean"] <= 8
    assert batches["server_compute_ms"] > 0 and 0 < batches["server_busy_share"] < 1  # 40/s of a tiny model


@pytest.mark.triton
def test_rate_sweep_writes_rows_resumes_and_leaves_nothing(batching_server, tmp_path):
    before, running = _leftovers(), {p.pid for p in _server_processes()}
    repo = tmp_path / "tiny"
    write_batching(repo, {"cpu": BatchingSettings(4, (4,), 1000, "KIND_CPU")}, "test")
    out = tmp_path / "r.csv"
    command = perfmodel_command(
        "profile",
        "--model",
        "tiny",
        "--backend",
        "triton",
        "--rate",
        "20,40/s",
        "--duration",
        "2s",
        "--triton-config",
        str(repo),
        "--input-sizes",
        "32",
        "--out",
        str(out),
    )
    apart = len(os.sched_getaffinity(0)) >= 2
    if apart:  # the server on one core, the load generator on the others
        command += ["--server-cpus", str(min(os.sched_getaffinity(0)))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=repo_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    df = load_profile(out)
    assert (df["server_busy_share"] > 0).all() and (df["server_compute_ms"] > 0).all()
    if apart:
        assert set(df["server_cpus"]) == {str(min(os.sched_getaffinity(0)))}
    assert sorted(df["rate_per_s"]) == [20, 40] and set(df["status"]) == {"ok"}
    assert set(df["mode"]) == {"open-loop"} and set(df["server_max_batch"]) == {4}
    assert set(df["server_max_queue_delay_ms"]) == {1.0} and set(df["batch_size"]) == {1}
    assert (df["achieved_rate_per_s"] > 0).all() and (df["server_batch_mean"] >= 1).all()
    assert set(df["kept_up"]) <= {"true", "false"}
    again = subprocess.run(
        [*command, "--resume"], capture_output=True, text=True, timeout=600, env=repo_env(), cwd=tmp_path
    )
    assert again.returncode == 0 and "(0 measured now)" in again.stderr
    assert _leftovers() <= before
    assert {p.pid for p in _server_processes()} <= running


def _send_times_drawn_at_once(rate_per_s, span_s, seed):  # the schedule as it was built before streaming
    rng = np.random.default_rng(seed)
    count = int(rate_per_s * span_s * 1.2 + 10 * np.sqrt(rate_per_s * span_s) + 10)
    times = np.cumsum(rng.exponential(1.0 / rate_per_s, count))
    assert times[-1] >= span_s  # (its rare second draw is not reproduced here)
    return times[times < span_s]


@pytest.mark.parametrize("rate, span, seed", [(0.5, 30.0, 0), (50.0, 6.0, 1), (200.0, 50.0, 1), (3e4, 30.0, 7)])
def test_streamed_schedule_is_the_one_drawn_at_once(rate, span, seed):
    from perfmodel.profile.backends.triton_rate import CHUNK, arrivals

    chunks = list(arrivals(rate, span, seed))
    assert all(len(c) == CHUNK for c in chunks[:-1]) and 0 < len(chunks[-1]) <= CHUNK
    assert np.array_equal(np.concatenate(chunks), _send_times_drawn_at_once(rate, span, seed))
    assert np.array_equal(send_times(rate, span, seed), _send_times_drawn_at_once(rate, span, seed))


def test_open_loop_draws_only_the_schedule_it_sends(monkeypatch):
    """A sender that stops early (the server far behind) draws a chunk or two of the schedule, not all of it:
    memory follows what was sent, not rate x duration (1,999,999 requests here)."""
    import tracemalloc
    from types import SimpleNamespace

    from perfmodel.profile.backends import triton_rate

    def sender(workload, inputs, schedule, start, lag, answer, done, abort):
        for i, _t in enumerate(schedule):
            lag[i] = 0.001
            answer(i, None if i % 2 else RuntimeError("refused"))
            if i == 999:
                return 1000, True
        return 0, False

    monkeypatch.setattr(triton_rate, "_inputs", lambda workload: [None])
    monkeypatch.setattr(triton_rate, "_grpc_sender", sender)
    tracemalloc.start()
    try:
        requests = triton_rate.send_open_loop(SimpleNamespace(protocol="grpc"), 79_999.9, 5.0, 20.0, seed=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000  # all at once: ~2.4M x 8 bytes per figure, over 60 MB
    assert np.array_equal(requests.schedule, send_times(79_999.9, 25.0, 3)[:1000])
    assert np.allclose(requests.sent - requests.schedule, 0.001)
    assert requests.failed.tolist() == [i % 2 == 0 for i in range(1000)] and requests.stopped_early
    assert np.all(np.isfinite(requests.answered)) and requests.first_error == "refused"
