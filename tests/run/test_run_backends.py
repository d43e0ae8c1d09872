"""What is planned is what runs: every backend the in-process PyTorch profiler writes (so every one a plan
from its profiles can pick) is one `perfmodel run` executes, and the worker runs the plan's batch shape."""

from __future__ import annotations

import itertools
import json

import pandas as pd
import pytest
from run_data import make_images

from perfmodel import torch_runner
from perfmodel.errors import InputError
from perfmodel.planning.batch import make_plan
from perfmodel.run.planfile import read_run_plan
from perfmodel.run.worker import RunWorker, WorkerSpec, check_runnable
from perfmodel.torch_runner import BACKENDS, COMPILE_MODES, TorchOptions, parse_backend


def profile(path, options: dict[tuple[str, str], float], hardware: str = "h100"):
    """A made-up GPU profile: per (backend, precision), latency = 1 ms + ms_per_image x batch."""
    rows = [
        dict(
            hardware=hardware,
            model="tiny",
            backend=backend,
            precision=precision,
            input_size=32,
            batch_size=b,
            latency_ms=1.0 + per_image * b,
            latency_p99_ms=1.2 + per_image * b,
            warmup_ms=50.0 + per_image * b,
            memory_mb=100.0 + b,
            status="ok",
            load_ms=100.0,
        )
        for (backend, precision), per_image in options.items()
        for b in (1, 2, 4, 8, 16)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def planned(tmp_path, options, images=2000, deadline_s=2.0):
    path = profile(tmp_path / "p.csv", options)
    job = make_plan(images, deadline_s, profiles=[path], input_size=32, confidence="none")
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(job.to_dict()))
    return path


def test_every_backend_name_the_profiler_writes_is_one_run_reads_back():
    names = set()
    for channels_last, compile_, graphs in itertools.product((False, True), repeat=3):
        for mode in COMPILE_MODES if compile_ else ("default",):
            if graphs and mode != "default":
                continue  # refused: those modes capture CUDA graphs of their own
            o = TorchOptions(
                "cuda", channels_last=channels_last, compile=compile_, cuda_graphs=graphs, compile_mode=mode
            )
            names.add(o.backend_name)
            again = TorchOptions.from_backend(o.backend_name, device="cuda")
            assert again == o
    assert names == set(BACKENDS) and len(BACKENDS) == 12
    assert TorchOptions.from_backend("torch-channels-last-compile-max-autotune").compile_mode == "max-autotune"
    for wrong in (
        "triton-grpc",
        "torch-",
        "torch-fast",
        "torch-compile-channels-last",
        "torch-max-autotune",
        "torch-compile-fastest",
        "tensorrt",
        "torchx",
    ):
        assert parse_backend(wrong) is None
    with pytest.raises(InputError, match="captures CUDA graphs of its own"):
        TorchOptions.from_backend("torch-compile-max-autotune-cuda-graphs", device="cuda")


def test_a_plan_with_reduce_overhead_is_refused_on_a_cpu():
    with pytest.raises(InputError, match="needs a CUDA device \\(CUDA graphs\\)"):
        check_runnable("torch-compile-reduce-overhead", "fp16", "cpu", "cpu#0")
    check_runnable("torch-compile-max-autotune", "fp32", "cpu", "cpu#0")  # max-autotune runs on a CPU


def test_a_backend_name_no_profile_holds_is_refused_as_the_plan_is_read(tmp_path):
    """parse_backend reads torch-compile-max-autotune-cuda-graphs, but no TorchOptions writes it (the mode
    captures CUDA graphs of its own): a plan naming it is refused by the reader, before anything runs."""
    plan = json.loads(planned(tmp_path, {("torch", "fp16"): 0.05}).read_text())
    for row in plan["assignments"] + plan.get("gpus", []):
        row["backend"] = "torch-compile-max-autotune-cuda-graphs"
    (tmp_path / "edited.json").write_text(json.dumps(plan))
    with pytest.raises(InputError, match="uses backend 'torch-compile-max-autotune-cuda-graphs', but perfmodel run"):
        read_run_plan(tmp_path / "edited.json")
    with pytest.raises(InputError, match="is not a PyTorch backend perfmodel runs"):
        check_runnable("torch-compile-max-autotune-cuda-graphs", "fp16", "cuda", "GPU 1")
    assert all(o.backend_name == name for name, o in torch_runner.BACKEND_OPTIONS.items())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_plan_on_any_torch_backend_is_runnable(tmp_path, backend):
    """The planner picks any backend its profiles hold: each one the profiler can write must run."""
    plan = read_run_plan(planned(tmp_path, {(backend, "fp16"): 0.05}))
    assert {w.backend for w in plan.workers} == {backend}
    for w in plan.workers:
        check_runnable(w.backend, w.precision, "cuda", w.name)


def test_the_fastest_option_is_planned_and_runnable(tmp_path):
    """The campaign plans without --backend: the planner takes channels-last + CUDA graphs (the fastest),
    which `perfmodel run` must then execute (it refused it, and every validation plan exited 2)."""
    options = {
        ("torch", "fp16"): 0.10,
        ("torch-channels-last-cuda-graphs", "fp16"): 0.05,
        ("torch", "tf32"): 0.20,
    }
    path = planned(tmp_path, options)
    plan = read_run_plan(path)
    assert {(w.backend, w.precision) for w in plan.workers} == {("torch-channels-last-cuda-graphs", "fp16")}
    for w in plan.workers:
        check_runnable(w.backend, w.precision, "cuda", w.name)
    with pytest.raises(InputError, match=r"needs a CUDA device \(CUDA graphs\): run it with `device` cuda"):
        check_runnable(plan.workers[0].backend, "fp16", "cpu", "GPU 1")
    with pytest.raises(InputError, match=r"needs a CUDA device \(TF32 math\)"):
        check_runnable("torch", "tf32", "cpu", "GPU 1")


def test_a_partial_last_batch_runs_at_the_planned_shape(tmp_path):
    """Files: 5 images in batches of 3 -> the second batch (2 images) runs filled up to 3; 2 are counted."""
    paths = [str(p) for p in make_images(tmp_path, 5)]
    worker = RunWorker(WorkerSpec("cpu#0", "tiny", None, None, "cpu", "fp32", "torch", 1, batch_size=3))
    worker.load(32, [paths[:3], paths[3:]])
    model, shapes = worker.runner.model, []
    worker.runner.model = lambda x: shapes.append(tuple(x.shape)) or model(x)
    records = list(worker.records())
    assert shapes == [(3, 3, 32, 32)] * 2
    assert [r["images"] for r in records] == [3, 2] and [len(r["classes"]) for r in records] == [3, 2]


@pytest.mark.parametrize(("rotate_below_mb", "held"), [(256.0, 3), (0.001, 1)])
def test_synthetic_inputs_follow_the_profiles_rule(monkeypatch, rotate_below_mb, held):
    """Three random batches while small, one above ROTATE_BELOW_MB (as the profile held); a partial batch
    runs as a full one."""
    monkeypatch.setattr(torch_runner, "ROTATE_BELOW_MB", rotate_below_mb)
    worker = RunWorker(WorkerSpec("cpu#0", "tiny", None, None, "cpu", "fp32", "torch", 1, batch_size=4))
    worker.load(32, [4, 4, 1], synthetic_batch=4)
    assert len(worker.synthetic) == held
    model, shapes = worker.runner.model, []
    worker.runner.model = lambda x: shapes.append(tuple(x.shape)) or model(x)
    records = list(worker.records())
    assert shapes == [(4, 3, 32, 32)] * 3
    assert [len(r["classes"]) for r in records] == [4, 4, 1]


def test_a_runner_names_the_gpus_index(monkeypatch):
    """--device cuda reaches torch as cuda:0: torch.cuda's memory calls refuse a device without its index
    (on the H200, every `perfmodel run` worker failed so at load)."""
    import torch

    from perfmodel.models import ModelSpec

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    flags = [(torch.backends.cudnn, "benchmark"), (torch.backends.cudnn, "allow_tf32")]
    flags.append((torch.backends.cuda.matmul, "allow_tf32"))
    saved = [getattr(module, name) for module, name in flags]  # a CUDA runner sets them: restored after
    try:
        runner = torch_runner.TorchRunner(ModelSpec("tiny"), TorchOptions("cuda", precision="fp16"))
    finally:
        for (module, name), value in zip(flags, saved):
            setattr(module, name, value)
    assert runner.device == torch.device("cuda", 0)


@pytest.mark.gpu
def test_cuda_graphs_run_a_plans_batches_on_the_gpu():
    """One graph for the planned shape (the partial batch replays it too), outputs as eager's."""
    import torch

    spec = WorkerSpec(
        "h100#0", "tiny", None, None, "cuda", "fp16", "torch-channels-last-cuda-graphs", None, batch_size=8
    )
    worker = RunWorker(spec)
    worker.load(32, [8, 8, 3], synthetic_batch=8)
    records = list(worker.records())
    assert [len(r["classes"]) for r in records] == [8, 8, 3]
    assert list(worker.runner._graphs) == [(8, 3, 32, 32)]
    with torch.inference_mode():
        x = worker.synthetic[0]
        eager = worker.runner.model(x).float()
        graph = worker.runner.forward(x).float()
    assert torch.allclose(eager, graph, atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_a_graph_captures_where_its_eager_batch_fits():
    """The eager warm-up's cached activations are freed before the capture: capped at 1.6x the eager
    peak, the graph of the same batch captures (it ran out of memory at about half the batch before)."""
    import torch

    from perfmodel.models import ModelSpec

    options = TorchOptions("cuda", precision="fp16", cuda_graphs=True)
    runner = torch_runner.TorchRunner(ModelSpec("resnet50"), options)
    runner.load()
    batch, size = 256, 224
    with runner.inference():
        x = runner.inputs(batch, size, count=1)[0]
        runner.reset_peak()
        runner.model(x)
        runner.sync()
        eager_peak_mb = runner.peak_memory_mb()
        runner.release()
        total = torch.cuda.get_device_properties(runner.device).total_memory / 2**20
        torch.cuda.set_per_process_memory_fraction(min(1.0, 1.6 * eager_peak_mb / total), runner.device)
        try:
            runner.bind([x])(0)
        finally:
            torch.cuda.set_per_process_memory_fraction(1.0, runner.device)
