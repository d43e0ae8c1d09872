"""The profiler on a real CUDA GPU (marked `gpu`, skipped without one).

What a CPU cannot show: torchvision's own compiled ops loading beside ours (ResNet-50 and
EfficientNet-B0 built in a worker), real out-of-memory errors found by the search, memory that
orders as it must (fp16 below fp32; CUDA graphs counting their pool), TF32, and a real sticky
error ending the sweep. Each test takes well under a minute on an H100; all of them together,
a few minutes (`pytest -m gpu`).
"""

from __future__ import annotations

import faulty_models
import numpy as np
import pytest

from perfmodel.errors import BackendError
from perfmodel.profile import run_profile
from perfmodel.schema import load_profile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(
    "options",
    [
        dict(precision="fp32"),
        dict(precision="tf32"),
        dict(precision="fp16", channels_last=True),
        dict(precision="bf16", cuda_graphs=True),
        dict(precision="fp16", warmup="fresh-process"),
    ],
)
def test_cuda_round_trip(tmp_path, tiny_config, options):
    df = run_profile(tiny_config(device="cuda", batch_sizes=(1, 8), input_sizes=(64,), **options), tmp_path / "p.csv")
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["memory_mb"] > 0).all() and (df["warmup_ms"] > 0).all()
    assert df["hardware"].iloc[0] != "cpu" and df["device_name"].iloc[0] and df["cuda"].iloc[0]
    assert set(df["precision"]) == {options["precision"]}
    assert df["gpu_mem_used_mb_max"].notna().all()  # NVML counters are there on a GPU


@pytest.mark.parametrize("model", ["resnet50", "efficientnet_b0"])
def test_torchvision_models_run_and_fp16_takes_less_memory(tmp_path, tiny_config, model):
    """torchvision's compiled extension matches torch here: building the model must not abort (SIGABRT)."""
    memory = {}
    for precision in ("fp32", "fp16"):
        df = run_profile(
            tiny_config(model=model, device="cuda", precision=precision, batch_sizes=(1, 32), input_sizes=(224,)),
            tmp_path / f"{precision}.csv",
        )
        assert (df["status"] == "ok").all(), df["error"].tolist()
        memory[precision] = df.set_index("batch_size")["memory_mb"]
    assert (memory["fp16"] < memory["fp32"]).all()
    assert memory["fp32"][32] > memory["fp32"][1]


def test_real_cuda_oom_is_found_by_search_and_freed(tmp_path, tiny_config):
    # A 2 GiB budget per worker: the search meets a real CUDA OOM within seconds, frees it, bisects.
    config = tiny_config(device="cuda", batch_sizes=None, input_sizes=(512,), max_call_ms=1e9, memory_limit_mb=2048)
    df = run_profile(config, tmp_path / "p.csv")
    assert (df["status"] == "oom").any()
    ok = df[df["status"] == "ok"]
    assert df.loc[df["status"] == "oom", "batch_size"].min() == ok["batch_size"].max() + 1
    assert ok["memory_mb"].max() <= 2048


def test_cuda_graphs_count_their_pool(tmp_path, tiny_config):
    """A replay allocates nothing: unless the capture counts, a graph's memory would miss its activations."""
    memory = {}
    for graphs in (False, True):
        df = run_profile(
            tiny_config(
                model="resnet50",
                device="cuda",
                precision="fp16",
                cuda_graphs=graphs,
                batch_sizes=(64,),
                input_sizes=(224,),
            ),
            tmp_path / f"{graphs}.csv",
        )
        assert df.loc[0, "status"] == "ok", df.loc[0, "error"]
        memory[graphs] = df.loc[0, "memory_mb"]
    assert memory[True] >= 0.8 * memory[False], memory


def test_a_device_side_assert_ends_the_sweep(tmp_path, tiny_config):
    """Indexing out of bounds on the GPU breaks the CUDA context (sticky): the sweep stops at once."""
    model = faulty_models.save(faulty_models.IndexesOutOfBoundsAbove(2), tmp_path, "oob")
    out = tmp_path / "p.csv"
    with pytest.raises(BackendError, match="--resume"):
        run_profile(tiny_config(model=model, device="cuda", batch_sizes=(1, 2, 4, 8)), out)
    kept = load_profile(out)
    assert list(kept["batch_size"]) == [1, 2, 4] and list(kept["status"]) == ["ok", "ok", "error"]


def test_inputs_are_drawn_on_the_gpu(tiny_config):
    import torch

    from perfmodel.models import ModelSpec
    from perfmodel.torch_runner import TorchOptions, TorchRunner

    runner = TorchRunner(ModelSpec("tiny"), TorchOptions(device="cuda", precision="fp16", channels_last=True))
    x = runner.inputs(8, 64, count=1)[0]
    assert x.is_cuda and x.dtype == torch.float16 and x.is_contiguous(memory_format=torch.channels_last)
    assert np.isfinite(x.float().std().item()) and x.float().std().item() > 0.5
