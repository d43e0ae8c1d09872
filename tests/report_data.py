"""Inputs for the report tests: a GPU-like profile from a known curve, a fake predictor, a plan."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from perfmodel.schema import write_profile


def gpu_like_profile(
    hardware: str = "h100",
    precision: str = "fp16",
    capacity_mb: float = 81_559.0,
    speed: float = 1.0,
    sizes=(224, 320),
    batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096),
) -> pd.DataFrame:
    """latency = 1.2 + 0.25 ms per 224-px image (/ speed); memory = 300 + 45 MiB per 224-px image; rows past
    the capacity are 'oom' with no measurements, as the profiler writes them."""
    rows = []
    for s in sizes:
        work = (s / 224) ** 2
        for b in batches:
            memory = 300 + 45 * b * work
            latency = (1.2 + 0.25 * b * work) / speed
            ok = memory <= capacity_mb
            rows.append(
                {
                    "hardware": hardware,
                    "model": "resnet50",
                    "backend": "torch",
                    "precision": precision,
                    "input_size": s,
                    "batch_size": b,
                    "latency_ms": latency if ok else None,
                    "latency_p99_ms": latency * 1.15 if ok else None,
                    "warmup_ms": (400 + 3 * latency) if ok else None,
                    "memory_mb": memory if ok else None,
                    "status": "ok" if ok else "oom",
                    "throughput_ips": b / latency * 1000 if ok else None,
                    "device_name": f"NVIDIA {hardware.upper()} 80GB HBM3",
                    "device_memory_mb": capacity_mb,
                    "torch": "2.13.0",
                    "perfmodel": "0.1.0",
                    "created_at": "2026-11-20T10:00:00+00:00",
                    "load_avg_1m": 0.4,
                }
            )
            if not ok:
                break  # the profiler stops growing the batch at the first OOM
    return pd.DataFrame(rows)


def write_gpu_like(path, **kwargs) -> str:
    write_profile(gpu_like_profile(**kwargs), path)
    return str(path)


@dataclass(frozen=True, eq=False)
class FakeGroup:
    """The Predictor interface (perfmodel.fitting) over the same curves as gpu_like_profile."""

    hardware: str = "h100"
    model: str = "resnet50"
    backend: str = "torch"
    precision: str = "fp16"
    input_sizes: tuple[int, ...] = (224, 320)
    batch_range: tuple[int, int] = (1, 1024)
    report: dict = field(
        default_factory=lambda: {
            "latency_ms": {
                "family": "linear",
                "cv_mape": 1.2,
                "cv_max_error": 3.4,
                "extrapolation": {"batch_2x": {"mape": 2.0, "max_error": 5.5}},
            },
            "warmup_ms": {"family": "tree", "cv_mape": 8.0, "cv_max_error": 20.0, "extrapolation": {}},
            "memory_mb": {"family": None, "reason": "not measured"},
            "max_batch": {"largest_ok": [[224, 1024], [320, 512]], "memory_capacity_mb": 81559.0},
        }
    )

    def latency_ms(self, b, s):
        return 1.2 + 0.25 * np.asarray(b, float) * (np.asarray(s, float) / 224) ** 2

    def latency_p99_ms(self, b, s):
        return self.latency_ms(b, s) * 1.15

    def warmup_ms(self, b, s):
        return 400 + 3 * self.latency_ms(b, s)

    def memory_mb(self, b, s):
        from perfmodel.errors import InputError

        raise InputError("h100/resnet50/torch/fp16 has no memory_mb model (not measured).")

    def throughput_ips(self, b, s):
        return np.asarray(b, float) / self.latency_ms(b, s) * 1000

    def max_batch(self, s, memory_budget_mb=None):
        return np.where(np.asarray(s) <= 224, 1024, 512)


@dataclass(frozen=True)
class FakePredictor:
    groups: tuple = (FakeGroup(),)


def plan_json(margin: float = 0.1) -> dict:
    """What `perfmodel plan --json` prints for a small heterogeneous plan."""
    deadline = 60.0

    def assignment(hardware, count, size, batch, batches, load, warmup, latency):
        return {
            "hardware": hardware,
            "input_size": size,
            "option": "",
            "batch_size": batch,
            "count": count,
            "batches": batches,
            "images": batch * batches,
            "images_total": count * batch * batches,
            "last_batch": batch,
            "load_s": load,
            "warmup_s": warmup,
            "latency_s": latency,
            "finish_s": load + warmup + (batches - 1) * latency,
        }

    assignments = [
        assignment("h100", 3, 224, 256, 40, 4.0, 2.5, 1.2),
        assignment("a100", 2, 224, 128, 25, 5.0, 3.0, 1.7),
        assignment("a100", 1, 320, 64, 12, 5.0, 4.0, 3.1),
    ]
    return {
        "status": "optimal",
        "mode": "soft-real-time",
        "objective": "gpus",
        "objective_value": 6,
        "gap": 0.0,
        "images": 37888,
        "images_by_size": {"224": 37120, "320": 768},
        "images_planned": 37888,
        "deadline_s": deadline,
        "margin": margin,
        "usable_s": deadline * (1 - margin),
        "makespan_s": max(a["finish_s"] for a in assignments),
        "total_gpus": 6,
        "gpus_by_type": {"h100": 3, "a100": 3},
        "solve_time_s": 0.012,
        "assignments": assignments,
    }
