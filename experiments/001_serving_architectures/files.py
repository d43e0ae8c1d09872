"""Tulchinsky et al. [1]'s file loading and repeatability: throughput over a set of real JPEG files.

The paper (Tulchinsky et al. 2020) served a 1500-image ImageNet subset, pre-resized to 224x224. Here a set of the
same size is
generated locally (smooth random pictures saved as JPEG, quality 90: real files, real decoding), and
each configuration makes full passes over it:

  architecture  inprocess (the model called in this process) or local-server (a local Triton server,
                gRPC, async, `--concurrency` requests in flight; the client decodes and sends tensors)
  loading       files (read and decode each JPEG with PIL for every batch) or memory (decoded once,
                kept in the client's memory, as the paper did for its no-loading runs)
  batch size    --batch-sizes

Throughput = images of a pass / wall time of the pass. Every configuration is repeated --repeats times,
round-robin over the configurations so that a drift of the (shared, noisy) machine hits all alike;
the table gives the mean, and the standard error of the mean in % (the paper: < 0.5% over 20 runs on
one host).

    python experiments/001_serving_architectures/files.py                       # tiny CNN, 224 px
    python experiments/001_serving_architectures/files.py --model resnet50 --size 64 --images 300
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, new_results  # noqa: E402
from perfmodel.models import resolve_model  # noqa: E402
from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings  # noqa: E402
from perfmodel.profile.provenance import cpu_name  # noqa: E402
from perfmodel.torch_runner import TorchOptions, TorchRunner  # noqa: E402

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


def make_image_set(folder: Path, count: int, size: int) -> list[Path]:
    """`count` JPEG files of size x size, made once (deterministic) and reused."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    rng = np.random.default_rng(0)
    for i in range(count):
        path = folder / f"img{i:05d}.jpg"
        coarse = rng.integers(0, 256, size=(8, 8, 3), dtype=np.uint8)  # drawn even when the file exists
        fine = rng.normal(0, 12, size=(size, size, 3))
        if not path.exists():
            picture = np.asarray(Image.fromarray(coarse).resize((size, size), Image.BICUBIC), dtype=float)
            Image.fromarray(np.clip(picture + fine, 0, 255).astype(np.uint8)).save(path, quality=90)
        paths.append(path)
    return paths


def decode(paths: list[Path]) -> np.ndarray:
    """Read and decode JPEG files into one normalised float32 batch (N, 3, H, W)."""
    from PIL import Image

    images = []
    for path in paths:
        with Image.open(path) as im:
            rgb = np.asarray(im.convert("RGB"), dtype=np.float32) / 255.0
        images.append((rgb.transpose(2, 0, 1) - MEAN) / STD)
    return np.stack(images)


def batches(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def inprocess_pass(runner: TorchRunner, paths: list[Path], batch: int, decoded: list[np.ndarray] | None) -> float:
    torch = runner.torch
    t0 = time.perf_counter()
    with runner.inference():
        for i, group in enumerate(batches(paths, batch)):
            array = decoded[i] if decoded is not None else decode(group)
            runner.model(torch.from_numpy(array))
    return len(paths) / (time.perf_counter() - t0)


def server_pass(
    url: str, model_name: str, paths: list[Path], batch: int, decoded: list[np.ndarray] | None, concurrency: int
) -> float:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    in_flight = threading.Semaphore(concurrency)
    errors: list = []

    def done(result, error) -> None:
        if error is not None:
            errors.append(error)
        in_flight.release()

    t0 = time.perf_counter()
    for i, group in enumerate(batches(paths, batch)):
        array = decoded[i] if decoded is not None else decode(group)
        item = grpcclient.InferInput("images", list(array.shape), "FP32")
        item.set_data_from_numpy(array)
        if not in_flight.acquire(timeout=120):
            raise TimeoutError("the server did not answer within 120 s")
        client.async_infer(model_name, [item], callback=done)
    for _ in range(concurrency):  # wait for the last requests
        if not in_flight.acquire(timeout=120):
            raise TimeoutError("the server did not answer within 120 s")
    seconds = time.perf_counter() - t0
    client.close()
    if errors:
        raise RuntimeError(f"a request failed: {errors[0]}")
    return len(paths) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--images", type=int, default=1500)
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--repeats", type=at_least_one, default=5)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--architectures", default="inprocess,local-server")
    parser.add_argument("--image-dir", default=str(HERE / "images"), help="where the JPEG set is made (git-ignored)")
    args = parser.parse_args()
    batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    architectures = args.architectures.split(",")

    paths = make_image_set(Path(args.image_dir) / f"{args.size}px", args.images, args.size)
    megabytes = sum(p.stat().st_size for p in paths) / 1e6
    memory = {b: [decode(g) for g in batches(paths, b)] for b in batch_sizes}  # the images "kept in memory"

    runner = TorchRunner(resolve_model(args.model), TorchOptions(threads=1))
    runner.load()
    server = None
    if "local-server" in architectures:
        server = LocalTritonServer(ServerSettings(args.model, threads=1, max_batch_size=max(batch_sizes)))
        server.start()
    configs = [(a, loading, b) for a in architectures for loading in ("files", "memory") for b in batch_sizes]
    runs: dict[tuple, list[float]] = {c: [] for c in configs}
    loads = []
    try:
        for repeat in range(args.repeats):
            for config in configs:
                architecture, loading, batch = config
                decoded = memory[batch] if loading == "memory" else None
                loads.append(os.getloadavg()[0])
                if architecture == "inprocess":
                    ips = inprocess_pass(runner, paths, batch, decoded)
                else:
                    ips = server_pass(
                        server.info.url("grpc"), server.info.model_name, paths, batch, decoded, args.concurrency
                    )
                runs[config].append(ips)
                print(
                    f"repeat {repeat + 1}: {architecture:12s} {loading:6s} batch {batch:3d}: {ips:8.1f} img/s",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()

    rows = []
    for (architecture, loading, batch), values in runs.items():
        v = np.array(values)
        rows.append(
            {
                "architecture": architecture,
                "loading": loading,
                "batch_size": batch,
                "runs": len(v),
                "mean_ips": float(v.mean()),
                "std_ips": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                "std_error_pct": float(v.std(ddof=1) / np.sqrt(len(v)) / v.mean() * 100) if len(v) > 1 else 0.0,
                "values": [round(x, 2) for x in values],
            }
        )
    report = {
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "model": args.model,
        "input_size": args.size,
        "images": args.images,
        "image_set_mb": megabytes,
        "concurrency": args.concurrency,
        "load_avg_1m": [min(loads), max(loads)],
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "results": rows,
    }
    out = new_results(HERE) / f"files-{args.model}-{args.size}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"\n{args.images} JPEG files ({megabytes:.1f} MB), {args.model} at {args.size} px, load average "
        f"{min(loads):.2f}-{max(loads):.2f}; mean images/s over {args.repeats} passes (std error %):"
    )
    print(f"{'architecture':14s}{'batch':>6s}{'files':>18s}{'in memory':>18s}{'files/memory':>14s}")
    for architecture in architectures:
        for batch in batch_sizes:
            f = next(
                r
                for r in rows
                if r["architecture"] == architecture and r["loading"] == "files" and r["batch_size"] == batch
            )
            m = next(
                r
                for r in rows
                if r["architecture"] == architecture and r["loading"] == "memory" and r["batch_size"] == batch
            )
            print(
                f"{architecture:14s}{batch:6d}{f['mean_ips']:11.1f} ({f['std_error_pct']:.1f}%)"
                f"{m['mean_ips']:11.1f} ({m['std_error_pct']:.1f}%){f['mean_ips'] / m['mean_ips']:14.2f}"
            )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
