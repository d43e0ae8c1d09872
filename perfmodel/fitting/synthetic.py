"""Synthetic GPU-like profiles with a known ground truth, to test and measure the fitting.

GpuLikeCurve follows a GPU's waves: a batch runs in waves of `wave` images, so latency is near-flat
while one wave is not full, then grows in steps of one wave, plus a small per-image cost (copies).
LaunchBoundCurve has the shape of published serving curves (profiles/reference/): flat while the
launches and the framework bound a call, then linear once the GPU is busy, the two joined smoothly.
For both, memory is weights plus activations per image; warm-up is a fixed set-up plus a few calls'
worth. Every measured value is the truth times (1 + noise * N(0, 1)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from perfmodel.fitting.features import pixels


@dataclass(frozen=True)
class GpuLikeCurve:
    overhead_ms: float = 1.5  # launch and framework overhead per call
    wave: int = 32  # images per wave of the GPU's streaming multiprocessors
    wave_ms: float = 8.0  # time of one wave of 224-px images
    image_ms: float = 0.05  # per 224-px image on top (copies)
    p99_factor: float = 1.05
    weights_mb: float = 400.0
    image_mb: float = 12.0  # activations per 224-px image
    capacity_mb: float = 16384.0  # device memory: above it, the point is 'oom'
    warmup_base_ms: float = 350.0
    warmup_calls: float = 3.0

    def latency_ms(self, b, s) -> np.ndarray:
        b, p = np.asarray(b, dtype=float), pixels(s)
        return self.overhead_ms + self.wave_ms * p * np.ceil(b / self.wave) + self.image_ms * b * p

    def latency_p99_ms(self, b, s) -> np.ndarray:
        return self.p99_factor * self.latency_ms(b, s)

    def warmup_ms(self, b, s) -> np.ndarray:
        return self.warmup_base_ms + self.warmup_calls * self.latency_ms(b, s)

    def memory_mb(self, b, s) -> np.ndarray:
        return self.weights_mb + self.image_mb * np.asarray(b, dtype=float) * pixels(s)

    def max_batch(self, s) -> np.ndarray:
        """The true largest batch that fits in capacity_mb."""
        return np.floor((self.capacity_mb - self.weights_mb) / (self.image_mb * pixels(s))).astype(np.int64)


@dataclass(frozen=True)
class LaunchBoundCurve(GpuLikeCurve):
    """latency = (floor^k + (busy + image * b * p)^k)^(1/k): flat up to batch ~16-32, then linear."""

    floor_ms: float = 6.0  # launches, framework and host: what small batches cannot go below
    busy_ms: float = 0.5  # the fixed part of a busy GPU's time
    image_ms: float = 0.28  # per 224-px image once busy (about 3500 images/s saturated)
    sharpness: float = 4.0

    def latency_ms(self, b, s) -> np.ndarray:
        busy = self.busy_ms + self.image_ms * np.asarray(b, dtype=float) * pixels(s)
        return (self.floor_ms**self.sharpness + busy**self.sharpness) ** (1.0 / self.sharpness)


DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256)


def gpu_like_profile(
    curve: GpuLikeCurve = GpuLikeCurve(),
    batch_sizes=DEFAULT_BATCH_SIZES,
    input_sizes=(160, 224, 288),
    noise: float = 0.01,
    seed: int = 0,
    hardware: str = "synthetic-gpu",
    model: str = "synthetic",
) -> pd.DataFrame:
    """A profile as the profiler writes it: one row per (input size, batch size), 'oom' above capacity."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in input_sizes:
        for b in batch_sizes:
            row = {
                "hardware": hardware,
                "model": model,
                "backend": "torch",
                "precision": "fp16",
                "input_size": int(s),
                "batch_size": int(b),
            }
            if curve.memory_mb(b, s) > curve.capacity_mb:
                rows.append(
                    {
                        **row,
                        "latency_ms": np.nan,
                        "latency_p99_ms": np.nan,
                        "warmup_ms": np.nan,
                        "memory_mb": np.nan,
                        "status": "oom",
                    }
                )
                break  # the profiler stops growing the batch at the first out-of-memory
            noisy = {
                q: float(getattr(curve, q)(b, s) * (1 + noise * rng.standard_normal()))
                for q in ("latency_ms", "warmup_ms", "memory_mb")
            }
            p99 = max(float(curve.latency_p99_ms(b, s) * (1 + noise * rng.standard_normal())), noisy["latency_ms"])
            rows.append({**row, **noisy, "latency_p99_ms": p99, "status": "ok", "latency_ci_rel": noise})
    df = pd.DataFrame(rows)
    df["throughput_ips"] = df["batch_size"] / df["latency_ms"] * 1000.0
    return df
