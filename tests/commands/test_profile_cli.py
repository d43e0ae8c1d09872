"""`perfmodel profile` as a user runs it: errors are one line with exit code 2; Ctrl-C keeps work."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from conftest import descendants, perfmodel_command, repo_env, run_cli

from perfmodel.cli import main
from perfmodel.schema import load_profile

FAST = ["--max-time-per-point", "0.2", "--warmup", "in-process", "--drift-probe", "0"]
HALF_SECOND = ["--max-time-per-point", "0.5", "--warmup", "in-process"]  # the integration tests' sweeps
SWEEP = "1,2,4,8,16,32,64,128"
ROOT = Path(__file__).resolve().parents[2]


def _profile(out, *rest: str, model: str = "tiny", batch_sizes: str | None = None, input_sizes: str | None = None):
    """The arguments of `perfmodel profile --model MODEL [--batch-sizes B] [--input-sizes S] --out OUT REST`,
    so that a test names only what differs."""
    sizes = [] if batch_sizes is None else ["--batch-sizes", batch_sizes]
    sizes += [] if input_sizes is None else ["--input-sizes", input_sizes]
    return ["profile", "--model", model, *sizes, "--out", str(out), *rest]


def _tiny(*args: str) -> list[str]:
    """A bad-input case's arguments on the tiny model."""
    return ["--model", "tiny", *args]


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


no_gpu_here = pytest.mark.skipif(_has_cuda(), reason="a CUDA GPU is here: --device cuda is valid")


def test_profile_writes_a_valid_profile(tmp_path, capsys):
    out = tmp_path / "p.csv"
    code, stdout, stderr = run_cli(capsys, *_profile(out, *FAST, batch_sizes="1,2", input_sizes="32"))
    assert code == 0, stderr
    assert len(load_profile(out)) == 2
    assert "median ms" in stdout and f"wrote 2 point(s) to {out}" in stderr


def test_profile_json(tmp_path, capsys):
    import json

    code, stdout, _ = run_cli(capsys, *_profile(tmp_path / "p.csv", "--json", *FAST, batch_sizes="1", input_sizes="32"))
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
        (_tiny("--backend", "onnx"), "invalid choice: 'onnx'"),
        pytest.param(_tiny("--device", "cuda"), "finds no CUDA device", marks=no_gpu_here),
        (_tiny("--device", "tpu"), "unknown device 'tpu'"),
        (["--model", "no/such/model.pt"], "does not exist"),
        (_tiny("--batch-sizes", "1,0,4"), "'0' is not a positive whole number"),
        (_tiny("--batch-sizes", "1,two"), "'two' is not a positive whole number"),
        (_tiny("--batch-sizes", "1,,2"), "--batch-sizes needs whole numbers"),
        (_tiny("--input-sizes", "-5"), "not a positive whole number"),
        (_tiny("--cuda-graphs"), "--cuda-graphs needs a CUDA device"),
        (
            _tiny("--compile", "--compile-mode", "reduce-overhead"),
            "--compile-mode reduce-overhead is torch.compile with CUDA graphs",
        ),
        (_tiny("--compile", "--compile-mode", "max-autotune", "--cuda-graphs"), "captures CUDA graphs of its own"),
        (_tiny("--compile", "--compile-mode", "fastest"), "invalid choice: 'fastest'"),
        (_tiny("--compile-mode", "max-autotune"), "--compile-mode max-autotune is a mode of torch.compile: add"),
        (
            _tiny("--backend", "triton", "--compile", "--compile-mode", "max-autotune", "--batch-sizes", "1"),
            "--compile-mode max-autotune is for the in-process backend",
        ),
        (_tiny("--precision", "fp8"), "invalid choice: 'fp8'"),
        (_tiny("--precision", "tf32"), "--precision tf32"),
        (_tiny("--max-time-per-point", "nan"), "--max-time-per-point: must be a positive number"),
        (_tiny("--max-time-per-point", "inf"), "--max-time-per-point: must be a positive number"),
        (_tiny("--max-time-short-calls", "0"), "--max-time-short-calls: must be a positive number of seconds"),
        (
            _tiny("--max-time-per-point", "1", "--max-time-short-calls", "0.5"),
            "is less than --max-time-per-point (1 s): it gives short calls more time, not less",
        ),
        (_tiny("--max-call-ms", "-1"), "--max-call-ms: must be a positive number of milliseconds"),
        (_tiny("--memory-limit-mb", "0"), "--memory-limit-mb: must be a positive number of MiB"),
        (_tiny("--threads", "0"), "--threads: must be a positive whole number"),
        (_tiny("--max-batch-size", "-3"), "--max-batch-size: must be a positive whole number"),
        (_tiny("--call-timeout", "nan"), "--call-timeout: must be a positive number of seconds"),
        (_tiny("--worker-timeout", "0"), "--worker-timeout: must be a positive number of seconds"),
        (_tiny("--search-tolerance", "150%"), "below 100%"),
        (_tiny("--processes", "0"), "--processes: must be a positive whole number, not '0'"),
        (_tiny("--processes", "1.5"), "--processes: must be a positive whole number, not '1.5'"),
        (_tiny("--processes", "two"), "--processes: must be a positive whole number"),
        (
            _tiny("--backend", "triton", "--processes", "2", "--batch-sizes", "1"),
            "--processes is for the in-process backend",
        ),
        (_tiny("--fresh-warmup-at", "0,16"), "'0' is not a positive whole number"),
        (_tiny("--fresh-warmup-at", "16", "--warmup", "in-process"), "needs --warmup fresh-process"),
        (_tiny("--fresh-warmup-at", "3", "--batch-sizes", "1,2"), "--fresh-warmup-at 3 is not among"),
        (_tiny("--backend", "triton", "--request-timeout", "nan"), "--request-timeout: must be"),
        (_tiny("--backend", "triton", "--batch-sizes", "auto"), "is for the in-process backend"),
        (
            _tiny("--backend", "triton", "--fresh-warmup-at", "1", "--batch-sizes", "1"),
            "is for the in-process backend",
        ),
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
    code, _, stderr = run_cli(capsys, *_profile(out, *FAST, model=_unreadable_model(tmp_path)))
    assert code == 2 and "cannot load" in stderr and "TorchScript" in stderr
    assert len(stderr.strip().splitlines()) == 1 and not out.exists()


def test_a_model_file_torch_jit_load_refuses_is_named_in_one_plain_sentence(tmp_path, capsys):
    """A checkpoint from torch.save (the usual mistake) is said to be one; torch's own message, which goes on for
    several sentences and calls the file corrupted, is not passed on."""
    import torch

    from perfmodel.models import TinyCNN

    checkpoint = tmp_path / "weights.pth"
    torch.save(TinyCNN().state_dict(), checkpoint)
    out = tmp_path / "p.csv"
    code, _, stderr = run_cli(capsys, "profile", "--model", str(checkpoint), "--out", str(out), *FAST)
    assert code == 2 and "holds no TorchScript code" in stderr and "torch.jit.save(torch.jit.script(model)" in stderr
    assert "corrupted" not in stderr and "miniz" not in stderr
    assert len(stderr.strip().splitlines()) == 1 and not out.exists()
    code, _, stderr = run_cli(capsys, "profile", "--model", _unreadable_model(tmp_path), "--out", str(out), *FAST)
    assert code == 2 and "is not the zip archive torch.jit.save writes" in stderr and "miniz" not in stderr


def test_a_directory_given_as_the_model_is_called_a_directory(tmp_path, capsys):
    folder = tmp_path / "model"
    folder.mkdir()
    out = tmp_path / "p.csv"
    code, _, stderr = run_cli(capsys, "profile", "--model", str(folder), "--out", str(out), *FAST)
    assert code == 2 and f"model file {folder} is a directory" in stderr and "does not exist" not in stderr
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
    code, _, stderr = run_cli(capsys, *_profile(out, *FAST))
    assert code == 2
    assert "cannot write" in stderr or "is a directory" in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_missing_required_option_is_one_line(capsys):
    code, _, err = run_cli(capsys, "profile", "--model", "tiny")
    assert code == 2
    assert "--out" in err and len(err.strip().splitlines()) == 1


@pytest.mark.integration
def test_ctrl_c_keeps_finished_points_and_resume_completes(tmp_path):
    """A real Ctrl-C (SIGINT) to the real command, in the middle of a sweep."""
    out = tmp_path / "p.csv"
    args = perfmodel_command(*_profile(out, *HALF_SECOND, "--drift-probe", "0", batch_sizes=SWEEP, input_sizes="32"))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=repo_env())
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


def test_help_says_what_auto_does(capsys):
    assert main(["profile", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "double from 1 until a batch does not fit" in text and "bisect" in text
    assert "powers of two up to" not in text


def test_estimate_measures_nothing(tmp_path, capsys):
    out = tmp_path / "p.csv"
    rest = ["--fresh-warmup-at", "1,16", "--search-tolerance", "10%", "--estimate"]
    code, _, stderr = run_cli(capsys, *_profile(out, *rest, batch_sizes="auto", input_sizes="32,64"))
    assert code == 0 and not out.exists()
    # 1024 on a CPU: 11 doublings and at most 4 bisections within 10%, plus 2 chosen sizes, per input size
    assert "at most 34 point(s), 4 of them with a fresh warm-up process" in stderr


def test_estimate_says_what_processes_cost(tmp_path, capsys):
    out = tmp_path / "p.csv"
    code, _, stderr = run_cli(capsys, *_profile(out, "--processes", "3", "--estimate", batch_sizes="1,4"))
    assert code == 0 and not out.exists()
    assert "each measured in 3 processes (2 fresh ones per point besides the measuring one" in stderr
    assert "about 3x as long" in stderr and "for each second a call at batch 4, 224 px takes" in " ".join(
        stderr.split()
    )


def _wait_for(predicate, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline and proc.poll() is None, "the sweep should still be running"
        time.sleep(0.05)


def _gone(procs: list[psutil.Process], timeout_s: float = 10) -> bool:
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    return not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.integration
def test_sigterm_is_handled_like_ctrl_c(tmp_path):
    out = tmp_path / "p.csv"
    args = perfmodel_command(*_profile(out, *HALF_SECOND, batch_sizes=SWEEP, input_sizes="32"))
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=repo_env())
    try:
        _wait_for(lambda: out.exists() and len(load_profile(out)) >= 2, proc)
        children = descendants(proc)
        assert children, "the sweep runs its model in worker processes"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, stderr
    assert "terminated" in stderr and "--resume" in stderr and "Traceback" not in stderr
    assert 2 <= len(load_profile(out)) < 8
    assert _gone(children)


@pytest.mark.integration
def test_an_interrupt_before_the_first_point_claims_no_file(tmp_path):
    out = tmp_path / "p.csv"
    args = perfmodel_command(*_profile(out, batch_sizes="1", input_sizes="32"))  # fresh-process warm-up: seconds
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=repo_env(PYTHONUNBUFFERED="1")
    )
    try:
        assert "planned:" in proc.stderr.readline()
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert not out.exists()
    assert "nothing was written" in stderr and "saved in" not in stderr and "Traceback" not in stderr


def test_a_sticky_cuda_error_exits_1_with_a_resume_hint(tmp_path, capsys):
    import faulty_models

    model = faulty_models.fails_above(tmp_path, 1, faulty_models.ILLEGAL_ACCESS)
    out = tmp_path / "p.csv"
    code, _, stderr = run_cli(capsys, *_profile(out, *FAST, model=model, batch_sizes="1,2,4", input_sizes="32"))
    assert code == 1
    error = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "illegal memory access" in error[0] and "--resume" in error[0]
    assert "Traceback" not in stderr
    assert list(load_profile(out)["status"]) == ["ok", "error"]


@pytest.mark.slow
def test_the_drift_probe_measures_the_machine_and_every_row_carries_it(tmp_path, capsys):
    out = tmp_path / "p.csv"
    code, _, err = run_cli(
        capsys, *_profile(out, *FAST[:-2], "--drift-probe", "5s", batch_sizes="1,2", input_sizes="32")
    )
    assert code == 0, err
    rows = load_profile(out)
    assert (rows["drift_probe_s"] == 5).all()
    assert rows["drift_rel_sd"].notna().all() and (rows["drift_rel_sd"] >= 0).all()
    assert (rows["drift_corr_s"] > 0).all()
    from perfmodel.planning.batch import make_plan

    d = make_plan(1000, "60s", profiles=[str(out)], input_size=32).to_dict()
    drift = d["makespan_model"]["drift"]["drift cpu"]
    assert drift["source"].startswith("measured") and drift["rel_sd"] == pytest.approx(rows["drift_rel_sd"].median())


@pytest.mark.parametrize("value, message", [("-1s", "negative"), ("1h", "10 min"), ("soon", "--drift-probe")])
def test_a_bad_drift_probe_is_refused(tmp_path, capsys, value, message):
    out = tmp_path / "p.csv"
    code, _, err = run_cli(capsys, *_profile(out, "--drift-probe", value))
    assert code == 2 and message in err and not out.exists()


@pytest.mark.parametrize("value, refused", [("5s", True), ("0", False)])
def test_the_drift_probe_with_triton_is_refused_unless_it_is_zero(value, refused):
    import argparse

    from perfmodel.commands.profile_config import _drift_probe
    from perfmodel.errors import InputError

    args = argparse.Namespace(drift_probe=value, backend="triton")
    if refused:
        with pytest.raises(InputError, match="--backend triton"):
            _drift_probe(args)
    else:
        assert _drift_probe(args) == 0.0


def test_estimate_with_resume_says_it_counts_the_whole_sweep(tmp_path, capsys):
    out = tmp_path / "p.csv"
    code, _, stderr = run_cli(capsys, *_profile(out, "--resume", "--estimate", batch_sizes="1,4"))
    assert code == 0 and not out.exists()
    assert "whole sweep: --resume measures only the points not yet in" in " ".join(stderr.split())
