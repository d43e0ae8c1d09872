"""ResNet-50 timed by a bare PyTorch loop on the GPU, independently of perfmodel, to hold its profile rows against.

cudnn.benchmark on, TF32 off, `inference_mode`, fp16, random weights and inputs; each point: the first call
timed, 3 untimed calls, then 15 timed calls (6 from batch 2048), synchronised each; the median and the best.
Loops: eager channels-first (224 and 320 px), eager channels-last, and with --graphs channels-last replayed
from a captured CUDA graph (issue 39's options, against the profiler's rows of the same options).

    python3 experiments/008_gpu_campaign/bare_check.py --out h100-bare.json [--seconds 60] [--graphs]

(results/h100/h100-bare.json came from the first version of this script, run by hand on 2026-11-27: the
same loops without --graphs; `load_s` is the model's construction and move to the GPU.)
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torchvision


def timed(fn, x, n: int) -> tuple[float, float]:
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
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


def run(rows, label, model, batches, deadline, size=224, channels_last=False, graphs=False):
    device = torch.device("cuda", 0)
    for b in batches:
        if time.time() > deadline:
            print("out of time", flush=True)
            return
        try:
            x = torch.randn(b, 3, size, size, device=device, dtype=torch.float16)
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            with torch.inference_mode():
                t0 = time.perf_counter()
                model(x)
                torch.cuda.synchronize()
                first = (time.perf_counter() - t0) * 1e3
                fn = graphed(model, x) if graphs else model
                median, best = timed(fn, x, 15 if b < 2048 else 6)
            row = dict(
                label=label,
                size=size,
                batch=b,
                median_ms=round(median, 3),
                best_ms=round(best, 3),
                first_ms=round(first, 1),
                img_s=round(b / median * 1e3, 1),
                peak_mib=round(torch.cuda.max_memory_allocated() / 2**20),
            )
        except torch.cuda.OutOfMemoryError:
            row = dict(label=label, size=size, batch=b, oom=True)
        fn = x = None
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        rows.append(row)
        print(json.dumps(row), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--seconds", type=float, default=60.0, help="stop starting points after this long")
    parser.add_argument("--graphs", action="store_true", help="also channels-last replayed from CUDA graphs")
    args = parser.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}
    deadline = time.time() + args.seconds
    t0 = time.perf_counter()
    model = torchvision.models.resnet50(weights=None).eval().to(torch.device("cuda", 0), torch.float16)
    torch.cuda.synchronize()
    out["load_s"] = round(time.perf_counter() - t0, 2)
    rows = out["rows"] = []
    run(rows, "eager-fp16", model, [1, 8, 32, 128, 256, 512, 1024, 2048, 4096], deadline)
    run(rows, "eager-fp16-320", model, [256, 1024, 2048], deadline, size=320)
    model = model.to(memory_format=torch.channels_last)
    run(rows, "channels-last-fp16", model, [1, 32, 256, 1024, 2048], deadline, channels_last=True)
    if args.graphs:
        batches = [1, 32, 256, 1024]
        run(rows, "channels-last-cuda-graphs-fp16", model, batches, deadline, channels_last=True, graphs=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print("bare check done in", round(time.perf_counter() - t0, 1), "s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
