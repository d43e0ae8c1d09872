"""Fuzzing `perfmodel plan --mode online` at the edges of what the model computes: rates so low that no
request arrives within the SLO, so high that no pool holds them, SLOs of hours, delays longer than the SLO.
Each is a plan, a refusal in one sentence (exit 2), or no plan with its reason (exit 3): never 0 GPUs, a
traceback, or an array the size of the SLO."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfmodel.cli import main
from solvers import InfeasibleProblem, ProblemError
from solvers import online_batcher as batcher_module
from solvers.online_solve import OnlineGpuType, OnlineProblem, ServiceTimes, solve_online

SHIPPED = Path(__file__).resolve().parents[2] / "profiles" / "cpu-resnet50-torch.csv"
ONLINE = ["plan", "--mode", "online", "--profile", str(SHIPPED), "--input-size", "64", "--json"]


def gpu(count=None, largest=16, base_s=0.004, per_image_s=0.002):
    b = np.arange(1, largest + 1)
    p50 = base_s + per_image_s * b
    return OnlineGpuType("g", count, [ServiceTimes(p50, p50 * 1.3)])


def plan(capsys, *args):
    import json

    code = main([*ONLINE, *args])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def test_a_rate_with_no_request_within_the_slo_is_one_gpu_not_none():
    """The counts were ceil(rate / capacity - 1e-12): 0 GPUs for any rate below 1e-12 of one GPU's."""
    fast = gpu(base_s=1e-5, per_image_s=1e-6)  # ~600,000 requests/s a GPU
    for rate in (1e-9, 1e-6, 1e-3):
        answer = solve_online(OnlineProblem([fast], rate, 0.1, simulate=False))
        assert answer.gpus_by_type == {"g": 1}, rate


@pytest.mark.parametrize("rate", [1e-20, 1e-10, 1e16, 1e300])
def test_rates_beyond_what_the_model_computes_are_refused(rate):
    with pytest.raises(ProblemError, match="the model plans for"):
        OnlineProblem([gpu()], rate, 0.1)


@pytest.mark.parametrize("span", [1e20, 1e-20])
def test_traces_of_such_rates_are_refused_too(span):
    with pytest.raises(ProblemError, match="the trace's rate"):
        OnlineProblem([gpu()], None, 0.1, arrivals_s=np.array([0.0, span, 2 * span]))


@pytest.mark.parametrize("span, words", [("1e20", "below the 1e-09/s"), ("1e-20", "above the 1e+15/s")])
def test_a_trace_of_such_a_rate_without_rate_is_one_sentence(capsys, tmp_path, span, words):
    """A trace of the same shape as --rate 1e-20/s was a traceback."""
    trace = tmp_path / "trace.csv"
    trace.write_text(f"arrival_s\n0\n{span}\n2{span[1:]}\n")
    code, _, err = plan(capsys, "--arrivals", str(trace), "--slo", "100ms")
    assert code == 2 and words in err and err.startswith("error: ") and err.count("\n") == 1


def test_no_pool_is_larger_than_a_batch_plans(capsys):
    """--rate 1e19/s planned 1.9e17 GPUs, exit 0; the most is 10^12 GPUs of a type, as in batch plans."""
    with pytest.raises(InfeasibleProblem, match="1,000,000,000,000 GPUs of a type"):
        solve_online(OnlineProblem([gpu()], 1e15, 0.1, simulate=False))
    code, _, err = plan(capsys, "--rate", "1e14/s", "--slo", "100ms")
    assert code == 3 and "1,000,000,000,000 GPUs of a type" in err and "Traceback" not in err


def test_an_slo_of_a_day_costs_what_an_slo_of_a_second_does(monkeypatch):
    """The batcher's state array grew with the SLO (159 GiB for 8,760 h, 109 s for 240 h): the rows of its
    latency sums are now bounded, and an SLO past a day is refused as a batch job's deadline."""
    rows = []
    real = batcher_module.Batcher._in_service

    def counted(self, t, m, left, jmax):
        rows.append(len(m))
        return real(self, t, m, left, jmax)

    monkeypatch.setattr(batcher_module.Batcher, "_in_service", counted)
    answers = {slo: solve_online(OnlineProblem([gpu()], 400.0, slo, simulate=False)) for slo in (1.0, 3600.0, 86400.0)}
    assert max(rows) <= batcher_module._MAX_ROWS
    assert answers[3600.0].gpus_by_type == answers[86400.0].gpus_by_type
    with pytest.raises(ProblemError, match="more than a day"):
        OnlineProblem([gpu()], 400.0, 86401.0)


def test_a_delay_longer_than_the_slo_is_named_as_the_cause(capsys):
    code, _, err = plan(capsys, "--rate", "400/s", "--slo", "1s", "--max-queue-delay", "10h")
    assert code == 2 and "every max_queue_delay candidate (the smallest 36,000 s) is at least the SLO" in err
    code, _, err = plan(capsys, "--rate", "400/s", "--slo", "52ms", "--max-queue-delay", "10ms")
    assert code == 3 and "the smallest max_queue_delay, 10 ms, leaves too little of the SLO" in err
    assert "no GPU answers" not in err


def test_rate_and_percentile_messages_say_what_is_wrong(capsys):
    code, _, err = plan(capsys, "--rate", "1e400/s", "--slo", "100ms")
    assert code == 2 and "is too large a rate" in err
    code, _, err = plan(capsys, "--rate", "400/s", "--slo", "100ms", "--percentile", "0.99")
    assert code == 2 and "write 99 for the 99th" in err
    code, answer, _ = plan(capsys, "--rate", "400/s", "--slo", "100ms", "--percentile", "0.5%")
    assert code == 0 and answer["percentile"] == 0.5


@pytest.mark.parametrize("name, make", [("configs", "file"), ("config.pbtxt", "folder")])
def test_a_triton_config_directory_of_the_wrong_shape_is_refused_before_solving(capsys, tmp_path, name, make):
    """DIR/configs as a file: FileExistsError after solving (the plan lost)."""
    repo = tmp_path / "model"
    repo.mkdir()
    (repo / name).mkdir() if make == "folder" else (repo / name).write_text("x")
    code, _, err = plan(capsys, "--rate", "400/s", "--slo", "100ms", "--triton-config", str(repo))
    assert code == 2 and f"{repo / name} is a" in err and "Traceback" not in err
