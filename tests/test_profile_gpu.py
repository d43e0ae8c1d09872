"""The profiler on a real CUDA GPU (skipped without one): the options and a real out-of-memory."""

from __future__ import annotations

import pytest

from perfmodel.profile import run_profile

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize(
    "options",
    [
        dict(precision="fp32"),
        dict(precision="fp16", channels_last=True),
        dict(precision="bf16", cuda_graphs=True),
        dict(precision="fp16", warmup="fresh-process"),
    ],
)
def test_cuda_round_trip(tmp_path, tiny_config, options):
    df = run_profile(tiny_config(device="cuda", batch_sizes=(1, 8), input_sizes=(64,), **options), tmp_path / "p.csv")
    assert (df["status"] == "ok").all()
    assert (df["memory_mb"] > 0).all() and (df["warmup_ms"] > 0).all()
    assert df["hardware"].iloc[0] != "cpu" and df["device_name"].iloc[0]
    assert df["gpu_mem_used_mb_max"].notna().all()  # NVML counters are there on a GPU


def test_real_cuda_oom_is_caught_and_freed(tmp_path, tiny_config):
    import torch

    free, total = torch.cuda.mem_get_info()
    # Cap this process at ~2 GiB of the card: the search then meets a real CUDA OOM quickly.
    torch.cuda.set_per_process_memory_fraction(min(1.0, 2 * 2**30 / total))
    try:
        df = run_profile(tiny_config(device="cuda", batch_sizes=None, input_sizes=(512,), max_call_ms=1e9),
                         tmp_path / "p.csv")
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert (df["status"] == "oom").any()
    ok = df[df["status"] == "ok"]
    assert df.loc[df["status"] == "oom", "batch_size"].min() == ok["batch_size"].max() + 1
