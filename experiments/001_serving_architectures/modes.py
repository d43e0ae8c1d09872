"""Sync vs async and HTTP vs gRPC against one local server, interleaved, so that a busy machine's
drift falls on every load alike.

    python experiments/001_serving_architectures/modes.py [--repeats 5]

For each case (model, input size, batch size) one local Triton server serves all four loads
(http/grpc x sync/async) at each concurrency, in rotating order, `repeats` times; each load runs
perfmodel's own load loop (triton_client.run_load) with its steady-state rule. The report gives
the median images/s per load and the ratios async/sync and gRPC/HTTP of those medians.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, new_results  # noqa: E402
from perfmodel.profile.backends.triton_client import (
    ServerConnection,
    ThroughputRule,
    Workload,
    random_batches,
    run_load,
)  # noqa: E402
from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings  # noqa: E402
from perfmodel.profile.provenance import cpu_name  # noqa: E402

LOADS = [(p, m) for p in ("http", "grpc") for m in ("sync", "async")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", nargs="*", default=["tiny@64:1", "tiny@64:4", "resnet50@64:1"])
    p.add_argument("--concurrency", default="1,4")
    p.add_argument("--repeats", type=at_least_one, default=5)
    p.add_argument("--max-time", type=float, default=5.0)
    p.add_argument("--out", help="the JSON to write (default: modes.json in a new folder in results/)")
    args = p.parse_args()
    rule = ThroughputRule(max_time_s=args.max_time)
    report = {
        "machine": cpu_name(),
        "cores": os.cpu_count(),
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "cases": [],
    }
    for case in args.cases:
        model, _, rest = case.partition("@")
        size, _, batch = (int(x) if x.isdigit() else x for x in rest.partition(":"))
        with LocalTritonServer(ServerSettings(model, max_batch_size=batch)) as server:
            with ServerConnection("grpc", server.info.url("grpc")) as conn:
                model_input = conn.check_model(server.info.model_name)
            batches = random_batches(batch, size, np.float32)
            for c in (int(x) for x in args.concurrency.split(",")):
                runs: dict[str, list] = {f"{p} {m}": [] for p, m in LOADS}
                loads_avg = []
                for r in range(args.repeats):
                    order = LOADS[r % len(LOADS) :] + LOADS[: r % len(LOADS)]  # rotate who goes first
                    for protocol, mode in order:
                        loads_avg.append(os.getloadavg()[0])
                        w = Workload(
                            protocol,
                            server.info.url(protocol),
                            server.info.model_name,
                            model_input.name,
                            "FP32",
                            mode,
                            c,
                            batches,
                        )
                        runs[f"{protocol} {mode}"].append(run_load(w, rule).throughput_ips)
                med = {k: float(np.median(v)) for k, v in runs.items()}
                entry = {
                    "model": model,
                    "input_size": size,
                    "batch_size": batch,
                    "concurrency": c,
                    "median_ips": med,
                    "runs_ips": runs,
                    "load_avg_1m_median": float(np.median(loads_avg)),
                    "async_over_sync": {p: med[f"{p} async"] / med[f"{p} sync"] for p in ("http", "grpc")},
                    "grpc_over_http": {m: med[f"grpc {m}"] / med[f"http {m}"] for m in ("sync", "async")},
                }
                report["cases"].append(entry)
                print(
                    json.dumps(
                        {
                            k: entry[k]
                            for k in (
                                "model",
                                "input_size",
                                "batch_size",
                                "concurrency",
                                "median_ips",
                                "async_over_sync",
                                "grpc_over_http",
                                "load_avg_1m_median",
                            )
                        }
                    ),
                    flush=True,
                )
    out = Path(args.out) if args.out else new_results(HERE) / "modes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
