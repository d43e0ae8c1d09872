"""The three serving architectures of Tulchinsky et al. 2020 (README, References [1]), redone on this machine's
CPU with perfmodel.

    python experiments/001_serving_architectures/run.py [--parts inprocess,local,remote] [--cases tiny@64:1,4 ...]

- inprocess: `perfmodel profile --backend torch` (the model called in the profiler's process);
- local:     `perfmodel profile --backend triton` (a Triton server on 127.0.0.1), HTTP and gRPC, sync and
             async, 1 and 4 requests in flight;
- remote:    the same loads from a client in another network namespace, across a veth link capped by
             tc at 5 Gbit/s and at 1 Gbit/s (netlink.py; skipped where root or iproute2 is missing).
             The server runs here, bound to the link's address; the client runs
             `perfmodel profile --url` inside the namespace.

Every run writes its profile CSVs into a new folder, results/<date>-<machine>-<commit>/ (experiments/lab.py);
`--results FOLDER` resumes an interrupted run in its folder. `summarize` then writes summary.csv
(throughput per architecture and load) and summary.md (the ratios) there. Torch runs on one thread everywhere.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

import netlink  # noqa: E402  (this folder's own module, beside this script)

from experiments.lab import finish_results, new_results  # noqa: E402
from experiments.lab import perfmodel as run_perfmodel  # noqa: E402
from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings  # noqa: E402
from perfmodel.schema import load_profile  # noqa: E402

CASES = ("tiny@64:1,4", "tiny@224:4", "resnet50@64:4")  # model@input size:batch sizes
LOADS = ["--protocol", "http,grpc", "--mode", "sync,async", "--concurrency", "1,4"]
RATES = ("5gbit", "1gbit")


def parse_case(case: str) -> tuple[str, int, str]:
    model, _, rest = case.partition("@")
    size, _, batches = rest.partition(":")
    return model, int(size), batches


RESULTS = HERE / "results"  # main() sets this run's own folder in it


def perfmodel(args: list[str], prefix: list[str] | None = None, env: dict | None = None) -> None:
    """`perfmodel profile ARGS --resume`, its output shown as it runs."""
    run_perfmodel("profile", *args, "--resume", capture=False, echo=True, prefix=prefix or (), env=env)


def run_inprocess(case: str, max_time: float) -> None:
    model, size, batches = parse_case(case)
    perfmodel(
        [
            "--model",
            model,
            "--backend",
            "torch",
            "--warmup",
            "in-process",
            "--batch-sizes",
            batches,
            "--input-sizes",
            str(size),
            "--max-time-per-point",
            str(max_time),
            "--out",
            str(RESULTS / f"inprocess-{model}-{size}.csv"),
        ]
    )


def run_local(case: str, max_time: float) -> None:
    model, size, batches = parse_case(case)
    perfmodel(
        [
            "--model",
            model,
            "--backend",
            "triton",
            *LOADS,
            "--warmup",
            "in-process",
            "--batch-sizes",
            batches,
            "--input-sizes",
            str(size),
            "--max-time-per-point",
            str(max_time),
            "--out",
            str(RESULTS / f"local-{model}-{size}.csv"),
        ]
    )


def run_remote(case: str, max_time: float, rate: str) -> None:
    model, size, batches = parse_case(case)
    out = RESULTS / f"remote-{rate}-{model}-{size}.csv"
    with netlink.veth_link(rate) as link:
        settings = ServerSettings(model, max_batch_size=max(int(b) for b in batches.split(",")))
        with LocalTritonServer(settings, host=link.host_ip) as server:
            for protocol in ("http", "grpc"):
                perfmodel(
                    [
                        "--model",
                        model,
                        "--backend",
                        "triton",
                        "--url",
                        server.info.url(protocol),
                        "--protocol",
                        protocol,
                        "--mode",
                        "sync,async",
                        "--concurrency",
                        "1,4",
                        "--hardware",
                        "cpu",
                        "--batch-sizes",
                        batches,
                        "--input-sizes",
                        str(size),
                        "--max-time-per-point",
                        str(max_time),
                        "--out",
                        str(out),
                    ],
                    prefix=link.exec([]),
                    env={"PERFMODEL_TRITON_ACCESS_TOKEN": server.info.access_token},
                )


def summarize() -> pd.DataFrame:
    frames = []
    for path in sorted(RESULTS.glob("*.csv")):
        if path.name.startswith("summary"):
            continue
        df = load_profile(path)
        kind = path.stem.split("-")[0]
        df["link"] = path.stem.split("-")[1] if kind == "remote" else ("loopback" if kind == "local" else "none")
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["architecture"] = df["architecture"].fillna("inprocess")
    for column, default in (("protocol", "-"), ("mode", "sync"), ("concurrency", 1)):
        df[column] = df[column].fillna(default) if column in df else default
    df = df[df["status"] == "ok"]
    keep = [
        "model",
        "input_size",
        "batch_size",
        "architecture",
        "link",
        "protocol",
        "mode",
        "concurrency",
        "throughput_ips",
        "latency_ms",
        "latency_p99_ms",
        "server_queue_ms",
        "server_compute_ms",
        "server_request_ms",
        "client_rss_mb_max",
        "server_rss_mb_max",
        "client_cpu_avg",
        "server_cpu_avg",
        "stable",
        "load_avg_1m",
    ]
    table = df[[c for c in keep if c in df.columns]].sort_values(
        ["model", "input_size", "batch_size", "architecture", "link", "protocol", "mode", "concurrency"]
    )
    table.to_csv(RESULTS / "summary.csv", index=False, float_format="%.4g")
    (RESULTS / "summary.md").write_text(_ratios(table))
    return table


def _ratios(t: pd.DataFrame) -> str:
    """The comparisons of Tulchinsky et al. [1] as ratios of throughput (images/s), one line per case."""
    lines = ["# Throughput ratios (images/s), from summary.csv", ""]
    for (model, size, batch), g in t.groupby(["model", "input_size", "batch_size"]):
        lines.append(f"## {model}, {size} px, batch {batch}")
        inproc = g[g["architecture"] == "inprocess"]["throughput_ips"]
        ip = float(inproc.iloc[0]) if len(inproc) else float("nan")

        def ips(link, protocol, mode, c):
            row = g[(g["link"] == link) & (g["protocol"] == protocol) & (g["mode"] == mode) & (g["concurrency"] == c)]
            return float(row["throughput_ips"].iloc[0]) if len(row) else float("nan")

        lines.append(f"in-process: {ip:.1f} img/s")
        lines.append("")
        lines.append("| link | protocol | concurrency | sync img/s | async img/s | async/sync |")
        lines.append("|---|---|---|---|---|---|")
        for link in ("loopback", *RATES):
            for protocol in ("http", "grpc"):
                for c in (1, 4):
                    s, a = ips(link, protocol, "sync", c), ips(link, protocol, "async", c)
                    if s == s or a == a:
                        lines.append(f"| {link} | {protocol} | {c} | {s:.1f} | {a:.1f} | {a / s:.2f} |")
        lines.append("")
        lines.append("| link | mode | concurrency | gRPC/HTTP | server/in-process (gRPC) | this link/loopback (gRPC) |")
        lines.append("|---|---|---|---|---|---|")
        for link in ("loopback", *RATES):
            for mode in ("sync", "async"):
                for c in (1, 4):
                    grpc, http = ips(link, "grpc", mode, c), ips(link, "http", mode, c)
                    if grpc == grpc:
                        local = ips("loopback", "grpc", mode, c)
                        lines.append(
                            f"| {link} | {mode} | {c} | {grpc / http:.2f} | {grpc / ip:.2f} | {grpc / local:.2f} |"
                        )
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default="inprocess,local,remote")
    p.add_argument("--cases", nargs="*", default=list(CASES))
    p.add_argument("--rates", default=",".join(RATES))
    p.add_argument("--max-time-per-point", type=float, default=5.0)
    p.add_argument("--results", type=Path, help="resume an earlier run's folder (default: a new one in results/)")
    args = p.parse_args()
    global RESULTS
    RESULTS = args.results or new_results(HERE)
    print(f"results in {RESULTS}", flush=True)
    parts = args.parts.split(",")
    why = netlink.missing() if "remote" in parts else None
    if why:
        print(f"skipping the remote architecture: {why}", flush=True)
    for case in args.cases:
        if "inprocess" in parts:
            run_inprocess(case, args.max_time_per_point)
        if "local" in parts:
            run_local(case, args.max_time_per_point)
        if "remote" in parts and not why:
            for rate in args.rates.split(","):
                run_remote(case, args.max_time_per_point, rate)
    print(summarize().to_string(index=False))
    finish_results(RESULTS)


if __name__ == "__main__":
    main()
