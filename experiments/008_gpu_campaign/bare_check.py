"""ResNet-50 timed by a bare PyTorch loop on the GPU, independently of perfmodel, to hold its profile rows against.

cudnn.benchmark on, TF32 off, `inference_mode`, fp16, random weights and inputs; each point: the first call
timed, 3 untimed calls, then 15 timed calls (6 from batch 2048), synchronised each; the median and the best.
Loops: eager channels-first (224 and 320 px), eager channels-last, with --graphs channels-last replayed
from a captured CUDA graph, and with --compile channels-last compiled by torch.compile (Inductor) as the
profiler compiles it (static shapes, one graph, Inductor's freezing): mode default at batch 256, then
reduce-overhead at batch 1 and 256, torch._dynamo.reset() and a fresh, empty Inductor and Triton cache
before each mode, so that each mode's first shape is its compilation from nothing, timed as `first_ms`
apart from the steady median (a mode's second shape, like the profiler's, is compiled in a process that
has compiled one already). Issue 39's options, against the profiler's rows of the same options
(options_vs_bare.py compare).

    python3 experiments/008_gpu_campaign/bare_check.py --out h100-bare.json [--seconds 60] [--graphs] [--compile]
    python3 experiments/008_gpu_campaign/bare_check.py --out h200-bare-compile.json --compile-only
    python3 experiments/008_gpu_campaign/bare_check.py --out cpu-bare.json --device cpu --compile   # the code path

--device cpu runs every loop but CUDA graphs with ResNet-18 at 32 px, batch 1 and 2, fp32, compiled by
Dynamo's `eager` backend (Inductor's C++ compile takes minutes on a small CPU): a check of this script's
code path, whose times mean nothing. The rows are written after every point (a loop stopped by a time
limit keeps what it measured). (results/h100/h100-bare.json came from the first version of this script,
run by hand on 2026-11-27: the eager loops only; `load_s` is the model's construction and move to the GPU.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Grid:
    """What each loop runs on one kind of device."""

    device: str
    dtype: torch.dtype
    precision: str
    model: str
    size: int
    eager: list[int]
    eager_320: list[int]
    channels_last: list[int]
    graphs: list[int]
    compiled: list[tuple[str, int]]  # (mode, batch), in this order
    backend: str  # torch.compile's


CUDA = Grid(
    "cuda", torch.float16, "fp16", "resnet50", 224,
    eager=[1, 8, 32, 128, 256, 512, 1024, 2048, 4096],
    eager_320=[256, 1024, 2048],
    channels_last=[1, 32, 256, 1024, 2048],
    graphs=[1, 32, 256, 1024],
    compiled=[("default", 256), ("reduce-overhead", 1), ("reduce-overhead", 256)],
    backend="inductor",
)  # fmt: skip
CPU = Grid(
    "cpu", torch.float32, "fp32", "resnet18", 32, eager=[1, 2], eager_320=[], channels_last=[1, 2], graphs=[],
    compiled=[("default", 2), ("reduce-overhead", 1)], backend="eager",
)  # fmt: skip


def synchronize(grid: Grid) -> None:
    if grid.device == "cuda":
        torch.cuda.synchronize()


def timed(fn, x, n: int, grid: Grid) -> tuple[float, float]:
    for _ in range(3):
        fn(x)
    synchronize(grid)
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(x)
        synchronize(grid)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2], times[0]


def graphed(model, x):
    """A callable that replays `model(x)` from a captured CUDA graph (the input copied into its buffer)."""
    static = x.clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            model(static)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        model(static)

    def replay(inputs):
        static.copy_(inputs)
        graph.replay()

    return replay


class Results:
    """The output file, rewritten atomically after every row."""

    def __init__(self, path: Path, header: dict):
        self.path, self.out = path, {**header, "rows": []}

    def add(self, row: dict) -> None:
        self.out["rows"].append(row)
        print(json.dumps(row), flush=True)
        self.write()

    def write(self) -> None:
        part = self.path.with_name(self.path.name + ".part")
        part.write_text(json.dumps(self.out, indent=1) + "\n")
        os.replace(part, self.path)


def run(results, grid, label, model, batches, deadline, size=None, channels_last=False, graphs=False, mode=None):
    """Each batch's point; `mode`: `model` is compiled in that torch.compile mode (its first call compiles)."""
    size = size or grid.size
    for b in batches:
        if time.time() > deadline:
            print("out of time", flush=True)
            return
        fn = x = None
        try:
            x = torch.randn(b, 3, size, size, device=grid.device, dtype=grid.dtype)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                t0 = time.perf_counter()
                model(x)
                synchronize(grid)
                first = (time.perf_counter() - t0) * 1e3
                fn = graphed(model, x) if graphs else model
                median, best = timed(fn, x, 15 if b < 2048 else 6, grid)
            row = dict(
                label=label,
                size=size,
                batch=b,
                median_ms=round(median, 3),
                best_ms=round(best, 3),
                first_ms=round(first, 1),
                img_s=round(b / median * 1e3, 1),
            )
            if mode is not None:
                row["mode"] = mode
            if grid.device == "cuda":
                row["peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
        except torch.cuda.OutOfMemoryError:
            row = dict(label=label, size=size, batch=b, oom=True)
        fn = x = None
        if grid.device == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        results.add(row)


def compiled_loops(results, grid, model, deadline) -> None:
    """torch.compile in each mode of `grid.compiled`, a fresh compile and a fresh cache per mode."""
    import torch._dynamo

    if grid.backend == "inductor":
        import torch._inductor.config

        torch._inductor.config.freezing = True  # as the profiler compiles (perfmodel/torch_runner.py)
    scratch = tempfile.mkdtemp(prefix="bare-check-")
    try:
        modes = dict.fromkeys(mode for mode, _ in grid.compiled)
        for mode in modes:
            torch._dynamo.reset()  # the previous mode's graphs gone: this mode compiles anew
            for name, var in (("inductor", "TORCHINDUCTOR_CACHE_DIR"), ("triton", "TRITON_CACHE_DIR")):
                os.environ[var] = os.path.join(scratch, mode, name)  # read when a compile looks for its cache
            # static shapes and one graph, as the profiler's; Dynamo's eager backend takes no mode
            options = {"mode": None if mode == "default" else mode} if grid.backend == "inductor" else {}
            compiled = torch.compile(model, backend=grid.backend, dynamic=False, fullgraph=True, **options)
            suffix = "" if mode == "default" else f"-{mode}"
            batches = [b for m, b in grid.compiled if m == mode]
            label = f"channels-last-compile{suffix}-{grid.precision}"
            run(results, grid, label, compiled, batches, deadline, channels_last=True, mode=mode)
    finally:
        torch._dynamo.reset()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the JSON file to write")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop starting points after this long")
    parser.add_argument("--graphs", action="store_true", help="also channels-last replayed from CUDA graphs")
    parser.add_argument("--compile", action="store_true", help="also channels-last compiled by torch.compile")
    parser.add_argument("--compile-only", action="store_true", help="only the torch.compile loops")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: this script's code path")
    args = parser.parse_args()
    grid = CUDA if args.device == "cuda" else CPU
    if grid.device == "cuda" and not torch.cuda.is_available():
        parser.error("torch finds no CUDA GPU here; --device cpu checks this script's code path")
    sys.path.insert(0, str(ROOT))
    from perfmodel._torchvision import import_torchvision  # torchvision, whether or not its ops match torch

    torchvision = import_torchvision()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    name = torch.cuda.get_device_name(0) if grid.device == "cuda" else "cpu"
    results = Results(args.out, {"gpu": name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()})
    deadline = time.time() + args.seconds
    t0 = time.perf_counter()
    model = getattr(torchvision.models, grid.model)(weights=None).eval().to(grid.device, grid.dtype)
    synchronize(grid)
    results.out["load_s"] = round(time.perf_counter() - t0, 2)
    if not args.compile_only:
        label = f"eager-{grid.precision}"
        run(results, grid, label, model, grid.eager, deadline)
        run(results, grid, f"{label}-320", model, grid.eager_320, deadline, size=320)
    model = model.to(memory_format=torch.channels_last)
    if not args.compile_only:
        run(results, grid, f"channels-last-{grid.precision}", model, grid.channels_last, deadline, channels_last=True)
    if args.graphs and grid.graphs and not args.compile_only:
        label = f"channels-last-cuda-graphs-{grid.precision}"
        run(results, grid, label, model, grid.graphs, deadline, channels_last=True, graphs=True)
    if args.compile or args.compile_only:
        compiled_loops(results, grid, model, deadline)
    results.write()
    print("bare check done in", round(time.perf_counter() - t0, 1), "s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
