"""Each serving option's profile rows against a bare PyTorch loop of the same option, and issue 39's targets.

    # bare loops of torch.compile (bare_check.py has eager, channels-last and CUDA graphs), into one JSON
    python3 experiments/008_gpu_campaign/options_vs_bare.py bare-compile --out h100-bare-compile.json \\
            --mode max-autotune --batches 1,256 [--seconds 240]   # --device cpu --size 32: a dry run
    # the comparison: every profile row that has a bare row of the same option, size and batch
    python3 experiments/008_gpu_campaign/options_vs_bare.py compare --bare h100-bare.json h100-bare-compile.json \\
            --profile h100-resnet50-torch-fp16.csv --profile h100-resnet50-torch-channels-last-compile-fp16.csv \\
            --out h100-options.json

The bare compile loop is bare_check.py's loop (cudnn.benchmark on, TF32 off, `inference_mode`, fp16, ResNet-50
with random weights, channels-last) with the model compiled as the profiler compiles it
(perfmodel.torch_runner: dynamic=False, fullgraph=True, Inductor's freezing); its first call (the compilation)
is timed as `first_ms`, in a fresh Inductor cache of its own. Rows have bare_check.py's fields; their label is
the profile's backend without `torch-` (`eager` for `torch`) and the precision: `channels-last-compile-fp16`.

`compare` prints, per option, the profile's median against the bare loop's at each shared point, the
option's best images/s and its batch-1 time, and checks issue 39's targets on an H100: the best option at
least 2x eager channels-first at its best batch and at least 21,000 images/s; batch 1 in at most 2 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TARGET_SPEEDUP, TARGET_IMAGES_S, TARGET_BATCH1_MS = 2.0, 21_000.0, 2.0
ROOT = Path(__file__).resolve().parents[2]


def label_of(backend: str, precision: str) -> str:
    """The bare loop's label of a profile's backend: torch -> eager-fp16, torch-channels-last -> channels-last-fp16."""
    return f"{'eager' if backend == 'torch' else backend.removeprefix('torch-')}-{precision}"


def bare_compile(args) -> int:
    cache = tempfile.mkdtemp(prefix="options-vs-bare-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")  # a fresh cache, as a fresh worker has
    os.environ["TRITON_CACHE_DIR"] = os.path.join(cache, "triton")
    try:
        return _bare_compile(args)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def _bare_compile(args) -> int:
    import torch

    sys.path.insert(0, str(ROOT))
    from perfmodel._torchvision import import_torchvision
    from perfmodel.torch_runner import compile_model  # the profiler's own call, so both compile alike

    torchvision = import_torchvision()

    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cuda = args.device == "cuda"  # a CPU only for a dry run of this script (fp32, a small --size)
    device, dtype = (torch.device("cuda", 0), torch.float16) if cuda else (torch.device("cpu"), torch.float32)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    deadline = time.time() + args.seconds
    model = torchvision.models.resnet50(weights=None).eval().to(device, dtype)
    model = model.to(memory_format=torch.channels_last)
    compiled = compile_model(model, args.mode)
    precision = "fp16" if cuda else "fp32"
    label = label_of("torch-channels-last-compile" + ("" if args.mode == "default" else f"-{args.mode}"), precision)
    rows = []
    for b in args.batches:
        if time.time() > deadline:
            print("out of time", flush=True)
            break
        x = torch.randn(b, 3, args.size, args.size, device=device, dtype=dtype)
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            t0 = time.perf_counter()
            compiled(x)
            sync()
            first = (time.perf_counter() - t0) * 1e3
            for _ in range(3):
                compiled(x)
            sync()
            times = []
            for _ in range(15 if b < 2048 else 6):
                t0 = time.perf_counter()
                compiled(x)
                sync()
                times.append((time.perf_counter() - t0) * 1e3)
        times.sort()
        median = times[len(times) // 2]
        row = dict(
            label=label,
            size=args.size,
            batch=b,
            median_ms=round(median, 3),
            best_ms=round(times[0], 3),
            first_ms=round(first, 1),
            img_s=round(b / median * 1e3, 1),
        )
        rows.append(row)
        print(json.dumps(row), flush=True)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"
    out = {"gpu": name, "torch": torch.__version__, "mode": args.mode, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


def compare(args) -> int:
    import pandas as pd

    bare = {}
    for path in args.bare:
        for row in json.loads(Path(path).read_text())["rows"]:
            if "median_ms" in row:
                size = int(row["size"])
                label = row["label"].removesuffix(f"-{size}")
                bare[(label, size, int(row["batch"]))] = row
    frame = pd.concat([pd.read_csv(p) for p in args.profile], ignore_index=True)
    frame = frame[frame["status"] == "ok"]
    options, lines = {}, []
    for (backend, precision), rows in frame.groupby(["backend", "precision"], sort=False):
        label = label_of(backend, precision)
        at224 = rows[rows["input_size"] == 224]
        pairs = []
        for r in rows.itertuples(index=False):
            other = bare.get((label, int(r.input_size), int(r.batch_size)))
            if other is not None:
                pairs.append(
                    {
                        "input_size": int(r.input_size),
                        "batch_size": int(r.batch_size),
                        "profile_ms": float(r.latency_ms),
                        "bare_ms": other["median_ms"],
                        "ratio": float(r.latency_ms) / other["median_ms"],
                    }
                )
        best = at224.loc[at224["throughput_ips"].idxmax()] if len(at224) else None
        one = at224[at224["batch_size"] == 1]
        name = f"{backend} {precision}"
        options[name] = {
            "against_bare": pairs,
            "best_images_s": None if best is None else float(best["throughput_ips"]),
            "best_batch": None if best is None else int(best["batch_size"]),
            "batch1_ms": float(one["latency_ms"].iloc[0]) if len(one) else None,
            "first_call_ms": {int(r.batch_size): r.warmup_ms for r in at224.itertuples() if pd.notna(r.warmup_ms)},
        }
        lines.append(f"{name}: best {options[name]['best_images_s'] or 0:,.0f} images/s at 224 px")
        for p in pairs:
            lines.append(
                f"  {p['input_size']} px batch {p['batch_size']}: profile {p['profile_ms']:.3f} ms, bare "
                f"{p['bare_ms']:.3f} ms ({p['ratio'] - 1:+.1%})"
            )
    verdict = _targets(options)
    print("\n".join(lines + verdict["lines"]))
    Path(args.out).write_text(json.dumps({"options": options, "targets": verdict["targets"]}, indent=1) + "\n")
    return 0


def _targets(options: dict) -> dict:
    eager = options.get("torch fp16", {}).get("best_images_s")
    best = max((o["best_images_s"] or 0, name) for name, o in options.items())
    fastest_one = min(((o["batch1_ms"], name) for name, o in options.items() if o["batch1_ms"]), default=(None, None))
    targets = {
        "eager_best_images_s": eager,
        "best_option": best[1],
        "best_images_s": best[0],
        "speedup": best[0] / eager if eager else None,
        "speedup_met": bool(eager) and best[0] >= TARGET_SPEEDUP * eager,
        "images_s_met": best[0] >= TARGET_IMAGES_S,
        "batch1_option": fastest_one[1],
        "batch1_ms": fastest_one[0],
        "batch1_met": fastest_one[0] is not None and fastest_one[0] <= TARGET_BATCH1_MS,
    }
    speedup = f"{targets['speedup']:.2f}x eager" if targets["speedup"] else "no eager fp16 rows to compare"
    lines = [
        f"best: {best[1]} {best[0]:,.0f} images/s ({speedup}; target >= {TARGET_SPEEDUP:g}x and >= "
        f"{TARGET_IMAGES_S:,.0f}: {'met' if targets['speedup_met'] and targets['images_s_met'] else 'not met'})",
        f"batch 1: {fastest_one[1]} {fastest_one[0] or float('nan'):.2f} ms (target <= {TARGET_BATCH1_MS:g} ms: "
        f"{'met' if targets['batch1_met'] else 'not met'})",
    ]
    return {"targets": targets, "lines": lines}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("bare-compile", help="bare torch.compile loops of ResNet-50, channels-last fp16")
    b.add_argument("--out", required=True)
    b.add_argument("--mode", default="default", choices=["default", "reduce-overhead", "max-autotune"])
    b.add_argument("--batches", type=lambda t: [int(x) for x in t.split(",")], default=[1, 256])
    b.add_argument("--seconds", type=float, default=240.0, help="start no batch size after this long")
    b.add_argument("--size", type=int, default=224, help="input size in pixels (default: 224)")
    b.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run of this script (fp32)")
    c = sub.add_parser("compare", help="profile rows against bare rows, and the targets")
    c.add_argument("--bare", nargs="+", required=True, help="bare_check.py / bare-compile JSON files")
    c.add_argument("--profile", action="append", required=True, help="a profile CSV (repeatable)")
    c.add_argument("--out", required=True, help="the JSON to write")
    args = parser.parse_args()
    return bare_compile(args) if args.command == "bare-compile" else compare(args)


if __name__ == "__main__":
    raise SystemExit(main())
