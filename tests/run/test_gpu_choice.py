"""Which GPU perfmodel reads and hands out, where torch's numbers are not NVML's: the profiler's counters
come from the GPU torch measures on (found in NVML by its UUID or PCI address), and a local `perfmodel
run` gives Ray only the GPUs CUDA_VISIBLE_DEVICES shows, each type on a node of its own.

No GPU here: NVML is tests/fake_nvml/pynvml.py, reporting the GPUs in FAKE_NVML_GPUS.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
from run_data import alive, ray_processes_of

from perfmodel.errors import InputError
from perfmodel.profile.monitor import GpuId, HardwareMonitor, gpu_id, open_nvml
from perfmodel.run import cluster
from perfmodel.run.cluster import LocalRay, NodeSpec, NvmlGpu, visible_gpus

FAKE_NVML = Path(__file__).resolve().parents[1] / "fake_nvml"
A100 = {"name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-a0a0a0a0-0000-0000-0000-000000000001", "pci": "00000000:1B:00.0"}
H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-b1b1b1b1-0000-0000-0000-000000000002", "pci": "00000000:3B:00.0"}
A100_2 = {**A100, "uuid": "GPU-c2c2c2c2-0000-0000-0000-000000000003", "pci": "00000000:5E:00.0"}


@pytest.fixture
def fake_nvml(monkeypatch):
    """Install the stand-in NVML in this process; returns a function that sets its GPUs."""
    spec = importlib.util.spec_from_file_location("pynvml", FAKE_NVML / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return lambda *gpus: monkeypatch.setenv("FAKE_NVML_GPUS", json.dumps(list(gpus)))


# -- the profiler's hardware monitor -----------------------------------------------------------------


def test_the_monitor_reads_the_gpu_torch_measures_on_not_nvmls_gpu_of_that_number(monkeypatch):
    """CUDA_VISIBLE_DEVICES=1: torch's cuda:0 is NVML's GPU 1 (the H100); NVML's GPU 0 is another."""
    monkeypatch.setenv("FAKE_NVML_GPUS", json.dumps([{**A100, "util": 11}, {**H100, "util": 77}]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_NVML), os.environ.get("PYTHONPATH", "")]))
    with HardwareMonitor(GpuId("cuda:0", H100["uuid"], None), interval_s=0.01) as monitor:
        mark = monitor.window()
        time.sleep(0.05)
        summary = monitor.summary(mark)
        assert monitor.has_gpu_counters and monitor.gpu_info().name == H100["name"]
    assert summary["gpu_util_avg"] == 77

    with pytest.warns(UserWarning, match=r"NVML has no GPU with cuda:0's UUID \(GPU-ffff\)"):
        monitor = HardwareMonitor(GpuId("cuda:0", "GPU-ffff", None), interval_s=0.01)
        monitor.start()
    try:
        assert not monitor.has_gpu_counters and math.isnan(monitor.summary(monitor.window())["gpu_util_avg"])
    finally:
        monitor.stop()


def test_nvml_finds_the_gpu_by_its_pci_address_when_the_uuid_does_not_match(fake_nvml):
    fake_nvml(A100, H100)
    nvml, reason = open_nvml(GpuId("cuda:0", "GPU-ffff", "00000000:3b:00.0"))
    assert reason is None and nvml.info().name == H100["name"]
    nvml, reason = open_nvml(GpuId("cuda:1", None, "00000000:99:00.0"))
    assert nvml is None and reason == (
        "LookupError: NVML has no GPU with cuda:1's UUID (unknown) or PCI address (00000000:99:00.0)"
    )


def test_gpu_id_is_torchs_device_in_nvmls_terms(monkeypatch):
    import torch

    uuid = type("CUuuid", (), {"__str__": lambda self: "b1b1b1b1-0000-0000-0000-000000000002"})()
    props = SimpleNamespace(uuid=uuid, pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)
    asked = []
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: asked.append(str(d)) or props)
    assert gpu_id("cuda:1") == GpuId("cuda:1", H100["uuid"], "00000000:3B:00.0") and asked == ["cuda:1"]
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(uuid=uuid))  # older torch
    assert gpu_id("cuda:0") == GpuId("cuda:0", H100["uuid"], None)


# -- the GPUs of a local run ---------------------------------------------------------------------------


def test_a_local_run_counts_only_the_gpus_cuda_visible_devices_shows(fake_nvml, monkeypatch):
    fake_nvml(H100, {**H100, "uuid": "GPU-dd", "pci": "00000000:5E:00.0"})
    assert cluster.local_gpus() == {"h100": [H100["uuid"], "GPU-dd"]}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cluster.local_gpus() == {"h100": ["1"]}  # was {"h100": 2}: Ray refused to start
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", " 1, GPU-b1b1,-1,0")  # as CUDA reads it: up to the first invalid
    assert cluster.local_gpus() == {"h100": ["1", "GPU-b1b1"]}
    for hiding in ("", "-1", "MIG-x"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hiding)
        with pytest.raises(InputError, match=f"CUDA_VISIBLE_DEVICES='{hiding}' shows none of this machine's 2 GPUs"):
            cluster.local_gpus()


def test_numbered_gpus_of_several_types_need_the_pci_order(fake_nvml, monkeypatch):
    fake_nvml(A100, H100, A100_2)
    assert cluster.local_gpus() == {"a100": [A100["uuid"], A100_2["uuid"]], "h100": [H100["uuid"]]}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-c2,GPU-b1")
    assert cluster.local_gpus() == {"a100": ["GPU-c2"], "h100": ["GPU-b1"]}
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    with pytest.raises(InputError, match="numbers the GPUs of a node with a100 and h100 GPUs fastest first"):
        cluster.local_gpus()
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    assert cluster.local_gpus() == {"h100": ["1"], "a100": ["2"]}


def test_numbers_count_in_pci_bus_order_not_nvmls():
    gpus = [NvmlGpu(H100["name"], "GPU-b", "00000000:3B:00.0"), NvmlGpu(A100["name"], "GPU-a", "00000000:1B:00.0")]
    assert [(g.uuid, name) for g, name in visible_gpus(gpus, "0", "PCI_BUS_ID")] == [("GPU-a", "0")]


def test_each_gpu_type_of_a_local_ray_is_a_node_of_its_own():
    one = LocalRay(4, {"h100": ["0", "1"]})
    assert one.nodes() == [{"Alive": True, "Resources": {"CPU": 4, "GPU": 2, "h100": 2}}]
    mixed = LocalRay(4, {"h100": ["1"], "a100": ["0", "2"]}, nodes=[NodeSpec(1)])
    assert [n["Resources"] for n in mixed.nodes()] == [
        {"CPU": 4, "GPU": 1, "h100": 1},
        {"CPU": 1, "GPU": 0},
        {"CPU": 2, "GPU": 2, "a100": 2},
    ]
    assert mixed.extra_nodes[1].gpu_ids == ("0", "2")
    placed = cluster.place(["a100", "h100", "a100"], "cuda", mixed.nodes())
    assert [p.reservation.resources for p in placed] == [{"a100": 1}, {"h100": 1}, {"a100": 1}]


@pytest.mark.integration
@pytest.mark.slow
def test_ray_hands_each_worker_a_gpu_of_its_type(fake_nvml, monkeypatch):
    """A node with an A100, an H100 and another A100 (NVML's order), of which CUDA_VISIBLE_DEVICES=1,2 shows
    the H100 and the second A100: Ray starts with those two (it refused before: 3 GPUs declared, 2 visible),
    and each worker gets the GPU of its type as its CUDA_VISIBLE_DEVICES (on one node with both, Ray gave
    the first worker the first GPU, whatever its type)."""
    fake_nvml(A100, H100, A100_2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    local = LocalRay(1, cluster.local_gpus())
    saved = dict(os.environ)
    try:
        local.start()
        cluster.connect(local.address, local.settings)
        import ray  # after connect has set the cluster's settings, which Ray reads once, at import

        placed = cluster.place(["a100", "h100"], "cuda", ray.nodes())

        @ray.remote
        class Worker:
            def gpus(self) -> str:
                return os.environ.get("CUDA_VISIBLE_DEVICES", "")

        workers = [Worker.options(**p.actor_options()).remote() for p in placed]
        assert ray.get([w.gpus.remote() for w in workers], timeout=120) == ["2", "1"]
    finally:
        if "ray" in sys.modules:
            sys.modules["ray"].shutdown()
        started = [psutil.Process(local.process.pid), *ray_processes_of(local.process.pid)] if local.process else []
        local.stop()
        os.environ.clear()
        os.environ.update(saved)
    assert alive(started) == []
