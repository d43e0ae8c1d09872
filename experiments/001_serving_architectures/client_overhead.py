"""How much does perfmodel's client cost? Its async gRPC throughput against a bare tritonclient loop.

    python experiments/001_serving_architectures/client_overhead.py [--repeats 5] [--out FILE.json]

One local Triton server (the tiny model, and ResNet-50, at 64 px, batch 1) serves both clients in
turn, alternating (and alternating which goes first): the bare loop (tritonclient.grpc `async_infer` with a
callback, `concurrency`
requests in flight, no measurement beyond a counter) and `perfmodel profile --backend triton --url
... --mode async` (its whole path: stability rule, per-request timing, monitor, statistics). The
figure is the median over repeats of perfmodel's images/s divided by the bare loop's; the target is
at least 0.95. The machine has 2 cores shared by server and client, so any client CPU the
profiler spends is taken from the server: this is the worst case for overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, new_results, perfmodel  # noqa: E402
from perfmodel.profile.backends.triton_client import random_batches  # noqa: E402
from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings  # noqa: E402
from perfmodel.profile.provenance import cpu_name  # noqa: E402
from perfmodel.schema import load_profile  # noqa: E402


def bare_loop(url: str, model: str, batch: np.ndarray, concurrency: int, seconds: float, ramp_s: float = 1.0) -> float:
    """images/s of the plainest async gRPC client: keep `concurrency` in flight, count completions."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url)
    item = grpcclient.InferInput("images", list(batch.shape), "FP32")
    item.set_data_from_numpy(batch)
    done: queue.SimpleQueue = queue.SimpleQueue()

    def submit() -> None:
        client.async_infer(model, [item], callback=lambda result, error: done.put(error))

    for _ in range(concurrency):
        submit()
    start = time.perf_counter()
    counted, t0 = 0, None
    while True:
        error = done.get(timeout=60)
        if error is not None:
            raise error
        now = time.perf_counter()
        if t0 is None and now - start >= ramp_s:
            t0 = now
        elif t0 is not None:
            counted += 1
        if t0 is not None and now - t0 >= seconds:
            break
        submit()
    for _ in range(concurrency - 1):  # drain what is still in flight
        done.get(timeout=60)
    client.close()
    return counted * batch.shape[0] / (now - t0)


def perfmodel_run(url: str, model: str, batch_size: int, size: int, concurrency: int, max_time_s: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "p.csv"
        perfmodel(
            "profile",
            *("--model", model, "--backend", "triton", "--url", url, "--protocol", "grpc", "--mode", "async"),
            *("--concurrency", concurrency, "--batch-sizes", batch_size, "--input-sizes", size),
            *("--max-time-per-point", max_time_s, "--out", out),
        )
        row = load_profile(out).iloc[0]
        return {
            "throughput_ips": float(row["throughput_ips"]),
            "stable": bool(str(row["stable"]).lower() == "true"),
            "client_cpu_avg": float(row["client_cpu_avg"]),
            "samples": int(row["samples"]),
        }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="tiny,resnet50")
    p.add_argument("--concurrency", default="1,4")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeats", type=at_least_one, default=5)
    p.add_argument("--seconds", type=float, default=5.0, help="the bare loop's measuring time (after 1 s ramp-up)")
    p.add_argument("--out", help="the JSON to write (default: client_overhead.json in a new folder in results/)")
    args = p.parse_args()

    results = []
    for model in args.models.split(","):
        with LocalTritonServer(ServerSettings(model, max_batch_size=args.batch)) as server:
            url = server.info.url("grpc")
            batch = random_batches(args.batch, args.size, np.float32)[0]
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                pairs = []
                for repeat in range(args.repeats):
                    load = os.getloadavg()[0]
                    # Alternate which client goes first, so that an order effect cancels out over the repeats.
                    if repeat % 2:
                        ours = perfmodel_run(url, model, args.batch, args.size, concurrency, max_time_s=10)
                        bare = bare_loop(url, server.info.model_name, batch, concurrency, args.seconds)
                    else:
                        bare = bare_loop(url, server.info.model_name, batch, concurrency, args.seconds)
                        ours = perfmodel_run(url, model, args.batch, args.size, concurrency, max_time_s=10)
                    pairs.append({"bare_ips": bare, **ours, "load_avg_1m": load})
                    print(
                        f"{model} c={concurrency}: bare {bare:.1f} img/s, perfmodel {ours['throughput_ips']:.1f} "
                        f"img/s (load {load:.2f})",
                        flush=True,
                    )
                bare = float(np.median([x["bare_ips"] for x in pairs]))
                ours = float(np.median([x["throughput_ips"] for x in pairs]))
                results.append(
                    {
                        "model": model,
                        "input_size": args.size,
                        "batch_size": args.batch,
                        "concurrency": concurrency,
                        "bare_ips_median": bare,
                        "perfmodel_ips_median": ours,
                        "ratio_of_medians": ours / bare,
                        "median_pair_ratio": float(np.median([x["throughput_ips"] / x["bare_ips"] for x in pairs])),
                        "load_avg_1m_median": float(np.median([x["load_avg_1m"] for x in pairs])),
                        "repeats": pairs,
                    }
                )
                print(f"== {model} c={concurrency}: perfmodel / bare = {ours / bare:.3f}", flush=True)
    report = {
        "machine": cpu_name(),
        "cores": os.cpu_count(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "results": results,
    }
    out = Path(args.out) if args.out else new_results(HERE) / "client_overhead.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
