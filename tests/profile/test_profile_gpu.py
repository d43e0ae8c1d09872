"""The profiler on a real CUDA GPU (marked `gpu`, skipped without one).

What a CPU cannot show: torchvision's own compiled ops loading beside ours (ResNet-50 and
EfficientNet-B0 on the GPU), real out-of-memory errors found by the search, memory that orders as it
must (fp16 below fp32; CUDA graphs counting their pool), TF32, and a real sticky error ending the sweep.

All of them together must take under a minute (the GPU campaign gives them 60 s of a lent machine's 15
minutes). A worker process costs seconds there before it measures anything (Python, torch, the CUDA
context; the H100 run of 2026-11-27 took 11 s to start a ResNet-50 worker): the first version of these
tests started 15 of them and stopped after 6 of 13 tests at its 120 s limit. So the tests run the
worker's own code (profile/worker.py's Worker) in this process, one CUDA context for all, and start
processes only where processes are what is tested: one sweep end to end with a fresh warm-up process,
the out-of-memory search, and the broken context that must end a sweep. `InProcessWorker` is also
checked on the CPU below, so that a change of the worker's requests cannot leave these tests behind.
"""

from __future__ import annotations

from dataclasses import asdict

import faulty_models
import numpy as np
import pytest
from conftest import FAST_RULE

from perfmodel.errors import BackendError
from perfmodel.models import resolve_model
from perfmodel.profile import run_profile
from perfmodel.profile.worker import Worker
from perfmodel.schema import load_profile
from perfmodel.torch_runner import TorchOptions


class InProcessWorker:
    """profile/worker.py's Worker answering its `load` and `steady` requests in this process, as the
    measuring worker process does (the requests as profile/backends/torch_sweep.py sends them)."""

    def __init__(self, model: str = "tiny", device: str = "cuda", **options):
        self.worker = Worker(reply=lambda answer: None)
        self.options = TorchOptions(device, **options)
        request = {
            "op": "load",
            "model": asdict(resolve_model(model)),
            "options": asdict(self.options),
            "seed": 0,
            "call_timeout_s": 300.0,
            "device_memory_limit_mb": None,
        }
        self.loaded = self.worker.handle(request)
        assert self.loaded["status"] == "ok", self.loaded

    def steady(self, batch_size: int, input_size: int) -> dict:
        reply = self.worker.handle(
            {
                "op": "steady",
                "batch_size": batch_size,
                "input_size": input_size,
                "memory_limit_mb": None,
                "memory_budget_mb": None,
                "timed_first_call": True,
                "rule": asdict(FAST_RULE),
            }
        )
        assert reply["status"] == "ok", reply
        return reply

    def close(self) -> None:
        """Free the model and its memory for the next test (this process keeps its CUDA context)."""
        self.worker.runner.release()
        self.worker.runner = None


def test_the_in_process_worker_answers_as_a_worker_process_does():
    """On the CPU (not marked gpu): the requests the GPU tests send are the ones the worker understands."""
    worker = InProcessWorker(device="cpu", precision="fp32", threads=1)
    reply = worker.steady(2, 32)
    assert reply["latency_ms"] > 0 and reply["warmup_ms"] > 0 and reply["memory_mb"] >= 0
    assert reply["samples"] >= FAST_RULE.floor_samples
    worker.close()


@pytest.mark.gpu
def test_a_sweep_on_cuda_end_to_end(tmp_path, tiny_config):
    """The worker processes, the fresh warm-up process, NVML's counters and the provenance, on a GPU."""
    config = tiny_config(
        device="cuda",
        precision="fp16",
        batch_sizes=(1, 8),
        input_sizes=(64,),
        warmup="fresh-process",
        fresh_warmup_at=(1,),
    )
    df = run_profile(config, tmp_path / "p.csv")
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["memory_mb"] > 0).all() and df["warmup_ms"].iloc[0] > 0 and np.isnan(df["warmup_ms"].iloc[1])
    assert df["hardware"].iloc[0] != "cpu" and df["device_name"].iloc[0] and df["cuda"].iloc[0]
    assert set(df["precision"]) == {"fp16"}
    assert df["gpu_mem_used_mb_max"].notna().all()  # NVML counters are there on a GPU


@pytest.mark.gpu
def test_nvml_finds_each_gpu_torch_sees_by_its_uuid():
    """The monitor's counters are those of torch's GPU: torch's UUID (printed without NVML's "GPU-") and
    PCI address find it in NVML, whatever CUDA_VISIBLE_DEVICES shows."""
    import torch

    from perfmodel.profile.monitor import gpu_id, open_nvml

    for i in range(torch.cuda.device_count()):
        nvml, reason = open_nvml(gpu_id(f"cuda:{i}"))
        assert nvml is not None, reason
        try:
            assert nvml.info().name == torch.cuda.get_device_name(i)
        finally:
            nvml.close()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "options",
    [
        dict(precision="fp32"),
        dict(precision="tf32"),
        dict(precision="fp16", channels_last=True),
        dict(precision="bf16", cuda_graphs=True),
    ],
)
def test_each_option_runs_on_cuda(options):
    worker = InProcessWorker(**options)
    reply = worker.steady(8, 64)
    assert reply["memory_mb"] > 0 and reply["warmup_ms"] > 0 and reply["latency_ms"] > 0
    assert worker.worker.runner.is_cuda
    if options["precision"] == "tf32":
        torch = worker.worker.runner.torch
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    worker.close()


@pytest.mark.gpu
@pytest.mark.parametrize("model", ["resnet50", "efficientnet_b0"])
def test_torchvision_models_run_and_fp16_takes_less_memory(model):
    """torchvision's compiled extension matches torch here: building the model must not abort (SIGABRT)."""
    memory = {}
    for precision in ("fp32", "fp16"):
        worker = InProcessWorker(model, precision=precision)
        memory[precision] = {b: worker.steady(b, 128)["memory_mb"] for b in (1, 16)}
        worker.close()
    assert all(memory["fp16"][b] < memory["fp32"][b] for b in (1, 16)), memory
    assert memory["fp32"][16] > memory["fp32"][1]


@pytest.mark.gpu
def test_real_cuda_oom_is_found_by_search_and_freed(tmp_path, tiny_config):
    # A 2 GiB budget per worker: the search meets a real CUDA OOM within seconds, frees it, bisects.
    config = tiny_config(device="cuda", batch_sizes=None, input_sizes=(512,), max_call_ms=1e9, memory_limit_mb=2048)
    df = run_profile(config, tmp_path / "p.csv")
    assert (df["status"] == "oom").any()
    ok = df[df["status"] == "ok"]
    assert df.loc[df["status"] == "oom", "batch_size"].min() == ok["batch_size"].max() + 1
    assert ok["memory_mb"].max() <= 2048


@pytest.mark.gpu
def test_cuda_graphs_count_their_pool():
    """A replay allocates nothing: unless the capture counts, a graph's memory would miss its activations."""
    memory = {}
    for graphs in (False, True):
        worker = InProcessWorker("resnet50", precision="fp16", cuda_graphs=graphs)
        memory[graphs] = worker.steady(32, 128)["memory_mb"]
        worker.close()
    assert memory[True] >= 0.8 * memory[False], memory


@pytest.mark.gpu
def test_a_device_side_assert_ends_the_sweep(tmp_path, tiny_config):
    """Indexing out of bounds on the GPU breaks the CUDA context (sticky): the sweep stops at once."""
    model = faulty_models.save(faulty_models.IndexesOutOfBoundsAbove(2), tmp_path, "oob")
    out = tmp_path / "p.csv"
    with pytest.raises(BackendError, match="`resume`"):
        run_profile(tiny_config(model=model, device="cuda", batch_sizes=(1, 2, 4, 8)), out)
    kept = load_profile(out)
    assert list(kept["batch_size"]) == [1, 2, 4] and list(kept["status"]) == ["ok", "ok", "error"]


@pytest.mark.gpu
def test_inputs_are_drawn_on_the_gpu():
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchRunner

    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(device="cuda", precision="fp16", channels_last=True))
    x = runner.inputs(8, 64, count=1)[0]
    assert x.is_cuda and x.dtype == torch.float16 and x.is_contiguous(memory_format=torch.channels_last)
    assert np.isfinite(x.float().std().item()) and x.float().std().item() > 0.5
