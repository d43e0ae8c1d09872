"""The serving options of the in-process profiler: channels-last, torch.compile and its modes, CUDA graphs.

Every option's rows say what was measured (backend, warmup_includes, compile_cache, compile_graphs,
compile_ms); a point during whose timing torch.compile compiled again fails loudly; CUDA graphs and
reduce-overhead are refused on a CPU. Compiling takes tens of seconds on a CPU: those tests are `slow`.
"""

from __future__ import annotations

import math
from dataclasses import asdict

import pytest

from perfmodel.errors import InputError
from perfmodel.profile.worker import _compile_problem
from perfmodel.torch_runner import CompileCounts, TorchOptions, compile_model


@pytest.mark.parametrize(
    "options, includes",
    [
        (TorchOptions(), "run"),
        (TorchOptions(channels_last=True), "run"),
        (TorchOptions(compile=True), "compile+run"),
        (TorchOptions(compile=True, compile_mode="max-autotune"), "compile+run"),  # no CUDA graphs on a CPU
        (TorchOptions("cuda"), "cudnn-autotune+run"),
        (TorchOptions("cuda", cuda_graphs=True), "cudnn-autotune+graph-capture+run"),
        (TorchOptions("cuda", compile=True), "compile+cudnn-autotune+run"),
        (
            TorchOptions("cuda", compile=True, compile_mode="reduce-overhead"),
            "compile+cudnn-autotune+graph-capture+run",
        ),
        (TorchOptions("cuda", compile=True, cuda_graphs=True), "compile+cudnn-autotune+graph-capture+run"),
    ],
)
def test_each_option_says_what_its_first_call_includes(options, includes):
    assert options.warmup_includes == includes


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(compile=True, compile_mode="reduce-overhead"), "for CUDA devices"),
        (dict(compile_mode="max-autotune"), "add `compile`"),
        (dict(compile=True, compile_mode="fast"), "unknown compile mode 'fast'"),
        (dict(device="cuda", compile=True, compile_mode="max-autotune", cuda_graphs=True), "of its own"),
        (dict(cuda_graphs=True), "`cuda_graphs` needs a CUDA device"),
    ],
)
def test_options_that_cannot_be_measured_as_named_are_refused(kwargs, words):
    with pytest.raises(InputError, match=words):
        TorchOptions(**kwargs)


def test_a_recompile_or_lost_cuda_graphs_fail_the_point():
    class Runner:
        is_cuda = True
        options = TorchOptions("cuda", compile=True, compile_mode="max-autotune")

    once, none = CompileCounts(1, 12.0, 0), CompileCounts(0, 0.0, 0)
    assert _compile_problem(Runner, once, none, "while the point was timed") is None
    again = _compile_problem(Runner, once, CompileCounts(1, 3.0, 0), "while the point was timed")
    assert again["status"] == "failed" and "compiled 1 more graph(s) while the point was timed" in again["error"]
    skipped = _compile_problem(Runner, CompileCounts(1, 12.0, 1), none, "while the point was timed")
    assert "gave up its CUDA graphs" in skipped["error"]
    Runner.options = TorchOptions("cuda", compile=True)  # default mode: no CUDA graphs to lose
    assert _compile_problem(Runner, CompileCounts(1, 12.0, 1), none, "while the point was timed") is None
    assert CompileCounts(3, 20.0, 1).since(CompileCounts(1, 5.0, 1)) == CompileCounts(2, 15.0, 0)


@pytest.mark.slow
def test_a_graph_compiled_while_timing_fails_the_point(tmp_path, monkeypatch):
    """A model whose guards fail at every call (it counts its calls in a Python attribute) compiles again at
    each call: the steady state must say so instead of timing compilations."""
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.profile.timing import StabilityRule
    from perfmodel.profile.worker import Worker

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    worker = Worker(lambda message: None)
    load = {"op": "load", "model": asdict(ModelSpec("tiny")), "options": asdict(TorchOptions(compile=True))}
    assert worker.handle({**load, "seed": 0, "call_timeout_s": 600})["status"] == "ok"
    worker.runner.model = compile_model(Counting())
    rule = asdict(StabilityRule(min_samples=1, max_samples=1, floor_samples=1, warmup_calls=1))
    reply = worker.handle({"op": "steady", "batch_size": 2, "input_size": 4, "rule": rule})
    assert reply["status"] == "failed"
    assert "compiled 1 more graph(s) while the point was timed" in reply["error"]


@pytest.mark.slow
def test_a_compiled_profile_compiles_in_the_first_call_of_a_fresh_process(tmp_path):
    """One point of the tiny model with --compile: the fresh worker's first call compiled one graph from an
    empty cache of its own, that compilation is most of warmup_ms, and no cache folder is left behind."""
    from perfmodel.profile import ProfileConfig, StabilityRule, run_profile
    from perfmodel.profile.worker_process import SCRATCH_PREFIX

    before = set(_scratch_folders(SCRATCH_PREFIX))
    out = tmp_path / "p.csv"
    config = ProfileConfig(
        "tiny",
        batch_sizes=(2,),
        input_sizes=(16,),
        compile=True,
        drift_probe_s=0,
        rule=StabilityRule(max_time_s=0.5),
        worker_timeout_s=1200,
        call_timeout_s=1200,
    )
    row = run_profile(config, out).iloc[0]
    assert row["status"] == "ok" and row["backend"] == "torch-compile"
    assert row["warmup_includes"] == "compile+run" and row["compile_cache"] == "fresh"
    assert row["compile_graphs"] == 1
    assert 0 < row["compile_ms"] <= row["warmup_ms"] and row["compile_ms"] > 0.5 * row["warmup_ms"]
    assert row["latency_ms"] < row["warmup_ms"] / 100
    assert not math.isnan(row["load_ms"])
    assert set(_scratch_folders(SCRATCH_PREFIX)) <= before


def _scratch_folders(prefix: str) -> list[str]:
    import tempfile
    from pathlib import Path

    return [str(p) for p in Path(tempfile.gettempdir()).glob(f"{prefix}*")]


@pytest.mark.slow
def test_an_in_process_warm_up_compiles_even_at_the_drift_probes_batch(tmp_path):
    """The drift probe runs the sweep's smallest batch first: with --warmup in-process it must not run in
    the measuring worker, whose first call at that batch is the point's warm-up (it compiled nothing there)."""
    from perfmodel.profile import ProfileConfig, StabilityRule, run_profile

    config = ProfileConfig(
        "tiny",
        batch_sizes=(2,),
        input_sizes=(16,),
        compile=True,
        warmup="in-process",
        drift_probe_s=1.0,
        rule=StabilityRule(max_time_s=0.5),
        worker_timeout_s=1200,
        call_timeout_s=1200,
    )
    row = run_profile(config, tmp_path / "p.csv").iloc[0]
    assert row["status"] == "ok" and row["drift_probe_s"] == 1.0
    assert row["compile_cache"] == "process" and row["compile_graphs"] == 1
    assert row["compile_ms"] > 0.5 * row["warmup_ms"]
