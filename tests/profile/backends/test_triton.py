"""The Triton backend: options, the throughput rule, and (marked `triton`) profiling through a real server.

The server tests start pytriton's bundled Triton with the tiny model on the CPU; they skip, saying
why, where that server cannot start. They check behaviour (rows, errors, exit codes, clean-up),
never a measured speed.
"""

from __future__ import annotations

import importlib.util
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import descendants, perfmodel_command, repo_env

from perfmodel.cli import main
from perfmodel.errors import DeviceError, InputError
from perfmodel.profile.backends.triton_backend import TritonOptions, split_url
from perfmodel.profile.backends.triton_client import ThroughputRule, Workload, _Windows
from perfmodel.profile.backends.triton_stats import server_times_ms
from perfmodel.schema import load_profile

ROOT = Path(__file__).resolve().parents[3]

NEEDS_TRITONCLIENT = pytest.mark.skipif(
    importlib.util.find_spec("tritonclient") is None,
    reason="needs tritonclient (pip install '.[triton]' in perfmodel's clone)",
)


# ------------------------------------------------------------------------------------------------
# Without a server


def test_url_names_one_protocol_port():
    with pytest.raises(InputError, match="one protocol in `protocols`"):
        TritonOptions(protocols=("http", "grpc"), url="127.0.0.1:8001")
    with pytest.raises(InputError, match="without the scheme"):
        TritonOptions(url="http://127.0.0.1:8000", protocols=("http",))
    assert split_url("[::1]:8001") == ("::1", 8001)


@pytest.mark.parametrize(
    "url, override, expected",
    [
        (None, None, "local-server"),
        ("127.0.0.1:8001", None, "local-server"),
        ("localhost:8001", None, "local-server"),
        ("10.77.0.1:8001", None, "remote-server"),
        ("10.77.0.1:8001", "local-server", "local-server"),
    ],
)
def test_architecture_rule(url, override, expected):
    assert TritonOptions(url=url, architecture=override).resolved_architecture == expected


@pytest.mark.parametrize("field, value", [("protocols", ("ftp",)), ("modes", ("batch",)), ("concurrencies", (0,))])
def test_bad_options_are_input_errors(field, value):
    with pytest.raises(InputError):
        TritonOptions(**{field: value})


def _windows(rule: ThroughputRule, concurrency: int = 1, batch: int = 2) -> _Windows:
    batches = (np.ones((batch, 3, 8, 8), np.float32),)
    return _Windows(rule, Workload("grpc", "h:1", "m", "images", "FP32", "sync", concurrency, batches))


def test_steady_completions_stop_after_ramp_and_windows():
    rule = ThroughputRule(window_s=0.1, windows=3, rel_tol=0.05, rel_ci=0.05, min_samples=10, max_time_s=100)
    windows = _windows(rule)
    t = windows._start
    step = 10_000_000  # one request every 10 ms, each taking 10 ms: 100 requests/s, 200 images/s
    n = 0
    while not windows.done.is_set() and n < 1000:
        windows.record(t, t + step)
        t += step
        n += 1
    result = windows.result()
    assert windows.done.is_set() and result.stable
    assert len(windows.closed) == 1 + rule.windows  # the ramp-up window, then the counted ones
    assert result.throughput_ips == pytest.approx(200, rel=0.01)
    assert result.latency.median_ms == pytest.approx(10)


def test_unsteady_completions_run_to_the_time_cap():
    rule = ThroughputRule(window_s=0.1, windows=3, rel_tol=0.01, rel_ci=0.01, min_samples=10, max_time_s=2)
    windows = _windows(rule)
    rng = np.random.default_rng(0)
    t = windows._start
    while not windows.done.is_set():
        step = int(rng.uniform(1, 30) * 1e6)
        windows.record(t, t + step)
        t += step
    result = windows.result()
    assert not result.stable
    assert (t - windows._start) / 1e9 >= rule.max_time_s


def test_server_times_are_per_request_differences():
    def snapshot(**stages):  # Triton's JSON: cumulative count and ns per stage
        inference = {stage: {"count": count, "ns": int(ns)} for stage, (count, ns) in stages.items()}
        return {"model_stats": [{"name": "m", "inference_stats": inference}]}

    before = snapshot(
        success=(10, 100e6),
        queue=(10, 10e6),
        compute_input=(10, 1e6),
        compute_infer=(10, 50e6),
        compute_output=(10, 2e6),
    )
    after = snapshot(
        success=(30, 300e6),
        queue=(30, 50e6),
        compute_input=(30, 3e6),
        compute_infer=(30, 150e6),
        compute_output=(30, 6e6),
    )
    times = server_times_ms(before, after)
    assert times["server_queue_ms"] == pytest.approx(2.0)
    assert times["server_compute_ms"] == pytest.approx(0.1 + 5.0 + 0.2)
    assert times["server_request_ms"] == pytest.approx(10.0)
    assert np.isnan(server_times_ms(None, after)["server_queue_ms"])


def test_triton_flags_need_the_triton_backend(tmp_path, capsys):
    code = main(["profile", "--model", "tiny", "--concurrency", "4", "--out", str(tmp_path / "p.csv")])
    assert code == 2
    assert "--backend triton" in capsys.readouterr().err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_unreachable_server_is_a_clear_error(tmp_path, capsys, protocol):
    pytest.importorskip(f"tritonclient.{protocol}")
    out = tmp_path / "p.csv"
    started = time.monotonic()
    code = main(
        [
            "profile",
            "--model",
            "tiny",
            "--backend",
            "triton",
            "--url",
            f"127.0.0.1:{_closed_port()}",
            "--protocol",
            protocol,
            "--batch-sizes",
            "1",
            "--input-sizes",
            "32",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2  # nothing was measured: the address given is wrong, as with --device cuda on a CPU
    assert "cannot reach a Triton server" in err and "Traceback" not in err
    assert time.monotonic() - started < 30  # a bound against hanging, not a timing
    assert not out.exists()


@pytest.mark.parametrize("url", [None, "127.0.0.1:8001"])
def test_missing_triton_packages_are_one_sentence(tmp_path, capsys, monkeypatch, url):
    # As on a machine with numpy 2, where the `triton` extra (nvidia-pytriton needs numpy<2) is not installed.
    for name in ("tritonclient", "tritonclient.grpc", "tritonclient.http", "pytriton"):
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "p.csv"
    args = [
        "profile",
        "--model",
        "tiny",
        "--backend",
        "triton",
        "--batch-sizes",
        "1",
        "--input-sizes",
        "32",
        "--device",
        "cpu",
        "--out",
        str(out),
    ]
    code = main(args + (["--url", url] if url else []))
    err = capsys.readouterr().err
    assert code == 2
    assert "in perfmodel's clone, pip install '.[triton]'" in err and "Traceback" not in err and " line " not in err
    assert not out.exists()


# ------------------------------------------------------------------------------------------------
# Through a real server


def _leftovers() -> set[str]:
    """What a server leaves when it is not cleaned up: our workspaces, Triton's model copies, shm regions."""
    tmp = Path(tempfile.gettempdir())
    found = {str(p) for p in tmp.glob("perfmodel-triton-*")}
    found |= {str(p) for p in Path("/tmp").glob("folder*") if (p / "1" / "model.py").exists()}
    found |= {str(p) for p in Path("/dev/shm").glob("pytrtion*")}
    return found


def _server_processes() -> list[psutil.Process]:
    procs = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "perfmodel.profile.backends.triton_server" in cmdline or "tritonserver" in cmdline:
            procs.append(proc)
    return procs


@pytest.fixture(scope="module")
def server():
    """One local server for the tests that need a running one; skips the module's server tests if it cannot start."""
    try:
        from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings
    except ImportError as exc:  # tritonclient or psutil missing
        pytest.skip(f"the Triton client is not installed ({exc})")
    try:
        import pytriton  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"nvidia-pytriton (the bundled Triton server) is not installed ({exc})")
    local = LocalTritonServer(ServerSettings("tiny", max_batch_size=4), start_timeout_s=240)
    try:
        local.start()
    except DeviceError as exc:
        pytest.skip(f"the bundled Triton server cannot start here: {exc}")
    yield local
    local.stop()


def _profile(*args: str) -> list[str]:
    return perfmodel_command(
        "profile",
        "--model",
        "tiny",
        "--backend",
        "triton",
        "--input-sizes",
        "32",
        "--max-time-per-point",
        "0.5",
        *args,
    )


@pytest.mark.triton
def test_round_trip_writes_a_valid_profile_and_leaves_nothing(server, tmp_path):
    before, running = _leftovers(), {p.pid for p in _server_processes()}
    out = tmp_path / "t.csv"
    done = subprocess.run(
        _profile(
            "--protocol",
            "grpc,http",
            "--mode",
            "sync,async",
            "--concurrency",
            "2",
            "--batch-sizes",
            "1,2",
            "--out",
            str(out),
        ),
        capture_output=True,
        text=True,
        timeout=600,
        env=repo_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    df = load_profile(out)
    assert len(df) == 2 * 2 * 2  # batch sizes x protocols x modes
    assert set(df["status"]) == {"ok"}
    assert set(df["backend"]) == {"triton-grpc", "triton-http"}
    assert set(df["architecture"]) == {"local-server"}
    assert set(df["mode"]) == {"sync", "async"} and set(df["concurrency"]) == {2}
    assert set(df["warmup_method"]) == {"fresh-server"}
    assert (df["throughput_ips"] > 0).all() and (df["warmup_ms"] > 0).all()
    assert (df["server_compute_ms"] > 0).all() and (df["server_queue_ms"] >= 0).all()  # Triton's statistics
    assert (df["server_rss_mb_max"] > 0).all() and (df["client_rss_mb_max"] > 0).all()
    # One fresh server per batch size: two server starts, so two load times.
    assert df.groupby("batch_size")["load_ms"].nunique().eq(1).all() and df["load_ms"].nunique() == 2
    assert _leftovers() <= before
    assert {p.pid for p in _server_processes()} <= running


@pytest.mark.triton
def test_model_not_ready_on_a_running_server(server, tmp_path, capsys):
    code = main(
        [
            "profile",
            "--model",
            "tiny",
            "--backend",
            "triton",
            "--url",
            server.info.url("grpc"),
            "--protocol",
            "grpc",
            "--server-model",
            "no_such_model",
            "--batch-sizes",
            "1",
            "--input-sizes",
            "32",
            "--out",
            str(tmp_path / "p.csv"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "'no_such_model'" in err and "not ready" in err


@pytest.mark.triton
def test_running_server_by_url(server, tmp_path):
    out = tmp_path / "u.csv"
    code = main(
        [
            "profile",
            "--model",
            "tiny",
            "--backend",
            "triton",
            "--url",
            server.info.url("http"),
            "--protocol",
            "http",
            "--mode",
            "async",
            "--concurrency",
            "1,3",
            "--batch-sizes",
            "2",
            "--input-sizes",
            "32",
            "--max-time-per-point",
            "0.5",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    df = load_profile(out)
    assert list(df["concurrency"]) == [1, 3] and set(df["warmup_method"]) == {"running-server"}
    assert df["server_rss_mb_max"].isna().all()  # not our process: not watched


@pytest.mark.triton
def test_request_timeout_fails_the_points_not_the_machine(server, tmp_path, capsys):
    out = tmp_path / "p.csv"
    code = main(
        [
            "profile",
            "--model",
            "tiny",
            "--backend",
            "triton",
            "--url",
            server.info.url("grpc"),
            "--protocol",
            "grpc",
            "--batch-sizes",
            "1",
            "--input-sizes",
            "32",
            "--request-timeout",
            "0.0001",
            "--out",
            str(out),
        ]
    )
    assert code == 1
    assert "request timeout" in capsys.readouterr().err
    df = load_profile(out)
    assert list(df["status"]) == ["error"] and "request timeout" in df["error"].iloc[0]


def _wait_for_rows(out: Path, proc: subprocess.Popen, rows: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and len(out.read_text().strip().splitlines()) > rows:
            return
        time.sleep(0.1)
    raise AssertionError(f"the profiler wrote no {rows} row(s) in time (exit code {proc.poll()})")


@pytest.mark.triton
def test_server_killed_mid_sweep_keeps_points_and_resume_completes(server, tmp_path):
    before = _leftovers()
    out = tmp_path / "k.csv"
    args = _profile(
        "--warmup",
        "in-process",
        "--protocol",
        "grpc",
        "--concurrency",
        "1,2",
        "--batch-sizes",
        "1,2,4",
        "--max-time-per-point",
        "1",
        "--out",
        str(out),
    )
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=repo_env(), cwd=tmp_path
    )
    try:
        _wait_for_rows(out, proc, 1)
        started = descendants(proc)
        program = [p for p in started if "triton_server" in " ".join(p.cmdline())]
        assert program, "the profiler started no server program"
        program[0].kill()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    assert "stopped serving" in err and "--resume" in err and "Traceback" not in err
    kept = load_profile(out)
    assert 1 <= len(kept) < 6 and set(kept["status"]) == {"ok"}
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert _leftovers() <= before

    done = subprocess.run(
        args + ["--resume"], capture_output=True, text=True, timeout=600, env=repo_env(), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    df = load_profile(out)
    assert len(df) == 6 and set(df["status"]) == {"ok"}
    first = kept.set_index(["batch_size", "concurrency"])["created_at"]
    assert (df.set_index(["batch_size", "concurrency"]).loc[first.index, "created_at"] == first).all()
    assert _leftovers() <= before


@pytest.mark.triton
def test_ctrl_c_stops_the_server_and_keeps_points(server, tmp_path):
    before = _leftovers()
    out = tmp_path / "c.csv"
    proc = subprocess.Popen(
        _profile(
            "--warmup",
            "in-process",
            "--concurrency",
            "1,2,3",
            "--max-time-per-point",
            "1",
            "--batch-sizes",
            "1",
            "--out",
            str(out),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=repo_env(),
        cwd=tmp_path,
    )
    try:
        _wait_for_rows(out, proc, 1)
        started = descendants(proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "--resume" in err
    assert len(load_profile(out)) >= 1
    assert not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert _leftovers() <= before


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a CUDA GPU is here")
def test_triton_on_cuda_without_a_gpu_says_so(tmp_path, capsys):
    code = main(
        [
            "profile",
            "--model",
            "tiny",
            "--backend",
            "triton",
            "--device",
            "cuda",
            "--batch-sizes",
            "1",
            "--input-sizes",
            "32",
            "--out",
            str(tmp_path / "p.csv"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "finds no CUDA device" in err and "NVML" not in err
    assert len(err.strip().splitlines()) == 1


@NEEDS_TRITONCLIENT
def test_url_at_a_plain_http_server_is_not_called_not_live(tmp_path, capsys):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        code = main(
            [
                "profile",
                "--model",
                "tiny",
                "--backend",
                "triton",
                "--url",
                f"127.0.0.1:{server.server_port}",
                "--protocol",
                "http",
                "--batch-sizes",
                "1",
                "--input-sizes",
                "32",
                "--out",
                str(tmp_path / "p.csv"),
            ]
        )
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert code == 2 and "not as a Triton server" in err and "not live yet" not in err


@pytest.mark.triton
def test_a_model_the_server_cannot_load_is_one_line_without_traceback_frames(tmp_path):
    try:
        import pytriton  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"nvidia-pytriton is not installed ({exc})")
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"this is not a TorchScript archive")
    done = subprocess.run(
        _profile("--model", str(broken), "--batch-sizes", "1", "--out", str(tmp_path / "p.csv")),
        capture_output=True,
        text=True,
        timeout=300,
        env=repo_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "cannot load" in lines[-1] and "TorchScript" in lines[-1]
    assert not any(marker in done.stderr for marker in ("Traceback", " | ", 'File "', "raise "))
