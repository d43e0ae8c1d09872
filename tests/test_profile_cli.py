"""`perfmodel profile` as a user runs it: errors are one line with exit code 2; Ctrl-C keeps work."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from perfmodel.cli import main
from perfmodel.schema import load_profile

FAST = ["--max-time-per-point", "0.2", "--warmup", "in-process"]


def run_cli(capsys, *args):
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_profile_writes_a_valid_profile(tmp_path, capsys):
    out = tmp_path / "p.csv"
    code, stdout, stderr = run_cli(capsys, "profile", "--model", "tiny", "--batch-sizes", "1,2", "--input-sizes", "32",
                                   "--out", str(out), *FAST)
    assert code == 0, stderr
    assert len(load_profile(out)) == 2
    assert "median ms" in stdout and f"wrote 2 point(s) to {out}" in stderr


def test_profile_json(tmp_path, capsys):
    import json

    code, stdout, _ = run_cli(capsys, "profile", "--model", "tiny", "--batch-sizes", "1", "--input-sizes", "32",
                              "--out", str(tmp_path / "p.csv"), "--json", *FAST)
    assert code == 0
    data = json.loads(stdout)
    assert data["rows"][0]["status"] == "ok" and data["rows"][0]["gpu_util_avg"] is None


def _unreadable_model(tmp_path: Path) -> str:
    path = tmp_path / "broken.pt"
    path.write_bytes(b"this is not a TorchScript archive")
    return str(path)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--model", "resnet9000"], "unknown model 'resnet9000'"),
        (["--model", "tiny", "--backend", "onnx"], "invalid choice: 'onnx'"),
        (["--model", "tiny", "--device", "cuda"], "finds no CUDA device"),
        (["--model", "tiny", "--device", "tpu"], "unknown device 'tpu'"),
        (["--model", "no/such/model.pt"], "does not exist"),
        (["--model", "tiny", "--batch-sizes", "1,0,4"], "'0' is not a positive whole number"),
        (["--model", "tiny", "--batch-sizes", "1,two"], "'two' is not a positive whole number"),
        (["--model", "tiny", "--batch-sizes", "1,,2"], "--batch-sizes needs whole numbers"),
        (["--model", "tiny", "--input-sizes", "-5"], "not a positive whole number"),
        (["--model", "tiny", "--cuda-graphs"], "--cuda-graphs needs a CUDA device"),
        (["--model", "tiny", "--precision", "fp8"], "invalid choice: 'fp8'"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_code_2(tmp_path, capsys, args, words):
    out = tmp_path / "p.csv"
    code, stdout, stderr = run_cli(capsys, "profile", "--out", str(out), *args)
    assert code == 2
    assert words in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    assert not out.exists()


def test_unreadable_torchscript_file(tmp_path, capsys):
    out = tmp_path / "p.csv"
    code, _, stderr = run_cli(capsys, "profile", "--model", _unreadable_model(tmp_path), "--out", str(out), *FAST)
    assert code == 2 and "cannot load" in stderr and "TorchScript" in stderr
    assert len(stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("where", ["missing-dir", "directory", "read-only-dir", "proc"])
def test_output_that_cannot_be_written(tmp_path, capsys, where):
    if where == "missing-dir":
        out = tmp_path / "no" / "such" / "p.csv"
    elif where == "directory":
        out = tmp_path
    elif where == "proc":
        out = Path("/proc/perfmodel-test.csv")  # not writable, even for root
    else:
        if os.geteuid() == 0:
            pytest.skip("root can write into a read-only directory")
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        out = locked / "p.csv"
    code, _, stderr = run_cli(capsys, "profile", "--model", "tiny", "--out", str(out), *FAST)
    assert code == 2
    assert "cannot write" in stderr or "is a directory" in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_missing_required_option_is_one_line(capsys):
    code, _, err = run_cli(capsys, "profile", "--model", "tiny")
    assert code == 2
    assert "--out" in err and len(err.strip().splitlines()) == 1


def test_ctrl_c_keeps_finished_points_and_resume_completes(tmp_path):
    """A real Ctrl-C (SIGINT) to the real command, in the middle of a sweep."""
    out = tmp_path / "p.csv"
    args = [sys.executable, "-m", "perfmodel", "profile", "--model", "tiny", "--input-sizes", "32",
            "--batch-sizes", "1,2,4,8,16,32,64,128", "--out", str(out), "--max-time-per-point", "0.5",
            "--warmup", "in-process"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out.exists() and len(load_profile(out)) >= 2):
        assert time.monotonic() < deadline and proc.poll() is None, "the sweep should still be running"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "--resume" in stderr and "Traceback" not in stderr
    kept = load_profile(out)
    assert 2 <= len(kept) < 8
    assert not list(tmp_path.glob(".*.tmp"))

    done = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    final = load_profile(out)
    assert sorted(final["batch_size"]) == [1, 2, 4, 8, 16, 32, 64, 128]
    kept_rows = final.set_index("batch_size").loc[kept["batch_size"], "created_at"]
    assert list(kept_rows) == list(kept["created_at"])  # not measured again
