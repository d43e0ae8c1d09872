"""Online serving plans against a real Triton server, and the GPUs they need against the rate.

    python experiments/007_online_serving/run.py                       # everything, about 30 minutes
    python experiments/007_online_serving/run.py --parts accuracy,curve,speed   # no server: about 10 minutes

Parts (each writes its files into this run's folder, a new results/<date>-<machine>-<commit>/ or
--results FOLDER to continue one, and its table into summary.md there; the paths below are in it):

- calibrate: the local Triton server (pytriton's, the tiny model at 64 px, one torch thread, dynamic
  batching on, max_batch_size --max-batch, no delay) driven open-loop at rates from single requests to
  beyond its peak, so that it forms batches of every size; Triton's statistics per batch size give the
  time the model instance is busy with a batch of m one-image requests. -> results/service-profile.csv
  (the profile contract; see calibrate()), and the ordinary profile (one request of m images) beside it.
- validate: for each of --loads x the capacity of one server at --slo, `perfmodel plan --mode online
  --pool cpu=1 --triton-config ...` plans max_batch and delay and writes config.pbtxt; `perfmodel
  profile --backend triton --rate R --triton-config ...` deploys it and drives it open-loop for
  --duration; predicted and measured p50/p99 side by side. Then --over x the capacity, with the plan
  for the highest load: the prediction and the measurement there. -> validation.csv. --margin 10% is
  passed to every plan (the capacity's too): the plans then hold the SLO with every batch 10% slower,
  and the loads are shares of that capacity.
- accuracy: the analytic model against the simulation over a grid of loads, batch limits, delays
  and service curves (100k requests per run, 300k at load 0.9, 500k at 0.95; 3 seeds). -> accuracy.csv.
- curve: GPUs needed against the rate for a synthetic GPU-like ResNet-50 curve: perfmodel's plans,
  and Model Analyzer's approach (measure every configuration x concurrency on the GPU you have, keep
  the highest throughput whose p99 meets the SLO, divide the rate by it), each checked by the
  simulation under Poisson arrivals. -> gpu_curve.csv, gpu_curve.png.
- speed: solve times for pools of thousands of GPUs. -> speed.json.

The load average (1 minute) is recorded before and after every part: this machine is shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"  # main() sets this run's own folder in it
sys.path.insert(0, str(ROOT))

from experiments.lab import at_least_one, load_average, new_results  # noqa: E402
from experiments.lab import perfmodel as run_perfmodel  # noqa: E402
from perfmodel.fitting.synthetic import GpuLikeCurve  # noqa: E402
from perfmodel.profile.backends.triton_stats import executions_by_size, server_times_ms  # noqa: E402
from perfmodel.profile.provenance import cpu_name  # noqa: E402
from perfmodel.schema import load_profile, write_profile  # noqa: E402
from solvers.online_batcher import Batcher  # noqa: E402
from solvers.online_simulate import poisson_arrivals, simulate_gpu  # noqa: E402
from solvers.online_solve import OnlineGpuType, OnlineProblem, ServiceTimes, solve_online  # noqa: E402

MODEL, SIZE = "tiny", 64
SERVER_CPUS: tuple[int, ...] = ()  # --server-cpus: the server's cores; the load generator runs on the others
PARTS = ("calibrate", "validate", "accuracy", "curve", "speed")


def perfmodel(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_perfmodel(*args, check=check, echo=True)


# ---------------------------------------------------------------------------------------------
# calibrate


CALIBRATION_RATES = (30, 100, 250, 500, 800, 1200)  # requests/s: from single requests to full batches


@contextlib.contextmanager
def batching_server(max_batch: int, cpus: tuple[int, ...]):
    """A local Triton server of the tiny model with the dynamic batcher (max_batch, no delay) on `cpus`, this
    process on the other cores; yields the open-loop workload of one-image requests and a function that
    reads the server's statistics."""
    from perfmodel.profile.affinity import pinned_apart_from
    from perfmodel.profile.backends.triton_client import ServerConnection, Workload, random_batches
    from perfmodel.profile.backends.triton_process import LocalTritonServer, ServerSettings

    settings = ServerSettings(
        MODEL,
        max_batch_size=max_batch,
        dynamic_batching=True,
        max_queue_delay_us=0,
        preferred_batch_sizes=(max_batch,),
        threads=1,
        cpus=cpus,
    )
    with pinned_apart_from(cpus), LocalTritonServer(settings) as server:
        info = server.info
        url = info.url("grpc")
        with ServerConnection("grpc", url, info.access_token) as conn:
            model_input = conn.check_model(info.model_name)
        work = Workload(
            "grpc",
            url,
            info.model_name,
            model_input.name,
            model_input.datatype,
            "async",
            1,
            random_batches(1, SIZE, np.float32),
            60.0,
        )

        def statistics() -> dict | None:
            with ServerConnection("grpc", url, info.access_token) as conn:
                return conn.model_statistics(info.model_name)

        yield work, statistics


def calibrate(max_batch: int, seconds: float) -> Path:
    """The service time of a dynamic batch of m one-image requests, as the server deploys it: a server with
    max_batch_size --max-batch and no delay driven open-loop at rates from light to beyond its peak, so it
    forms batches of every size; Triton's statistics per batch size (compute input + infer + output, the
    time the model instance is busy) give each size's mean. The spread is the one of single requests at
    the lightest rate (client p99 over p50, as a lognormal); the round trip outside the server (client
    latency less the server's request time at that rate) is added to every size, so the service times
    are what a client sees of a batch. -> service-profile.csv, and the ordinary profile (one request of m
    images) beside it."""
    from perfmodel.profile.backends.triton_rate import run_open_loop

    stats, light = {}, None
    before = load_average()
    with batching_server(max_batch, SERVER_CPUS) as (work, statistics):

        def snapshot(when: str) -> None:
            stats[(rate, when)] = statistics()

        for rate in CALIBRATION_RATES:
            result = run_open_loop(work, rate, 2.0, seconds, seed=rate, on_window=snapshot)
            print(
                f"{rate}/s: answered {result.achieved_per_s:.0f}/s, p50 {result.latency.median_ms:.2f} ms, "
                f"p99 {result.latency.p99_ms:.2f} ms",
                flush=True,
            )
            if light is None:
                light = (
                    result,
                    server_times_ms(stats.get((rate, "start")), stats.get((rate, "end")))["server_request_ms"],
                )
    per_size = executions_by_size([(stats.get((r, "start")), stats.get((r, "end"))) for r in CALIBRATION_RATES])
    result, request_ms = light
    spread = math.log(result.latency.p99_ms / result.latency.median_ms) / 2.3263478740408408
    round_trip = max(0.0, result.latency.mean_ms - request_ms)
    rows = []
    for m, (count, mean_ms) in sorted(per_size.items()):
        if count < 20 and m != 1:
            continue  # too few executions to say
        median = mean_ms * math.exp(-(spread**2) / 2) + round_trip
        rows.append(
            {
                "hardware": "cpu",
                "model": MODEL,
                "backend": "triton-grpc",
                "precision": "fp32",
                "input_size": SIZE,
                "batch_size": m,
                "latency_ms": median,
                "latency_p99_ms": median * math.exp(2.3263478740408408 * spread),
                "latency_mean_ms": mean_ms + round_trip,
                "warmup_ms": math.nan,
                "memory_mb": math.nan,
                "status": "ok",
                "samples": count,
                "architecture": "local-server",
                "protocol": "grpc",
                "mode": "dynamic-batch",
                "server_compute_ms": mean_ms,
                "load_avg_1m": (before + load_average()) / 2,
                "threads": 1,
                "device_name": cpu_name(),
                "host": platform.node(),
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "schema_version": 1,
            }
        )
    path = RESULTS / "service-profile.csv"
    write_profile(pd.DataFrame(rows), path)
    print(f"service profile: {len(rows)} batch sizes, spread {spread:.3f}, round trip {round_trip:.2f} ms", flush=True)
    ordinary = RESULTS / "ordinary-profile.csv"  # one request of m images at a time, no dynamic batching
    ordinary.unlink(missing_ok=True)
    sizes = [2**i for i in range(int(math.log2(max_batch)) + 1)]
    perfmodel(
        "profile",
        "--model",
        MODEL,
        "--backend",
        "triton",
        "--batch-sizes",
        ",".join(map(str, sizes)),
        "--input-sizes",
        str(SIZE),
        "--warmup",
        "in-process",
        "--threads",
        "1",
        "--max-time-per-point",
        f"{seconds:g}",
        "--out",
        str(ordinary),
        *placement(),
    )
    return path


# ---------------------------------------------------------------------------------------------
# validate


def plan(
    rate: float, slo: str, directory: Path | None, profile: str = "service-profile.csv", margin: str = "0"
) -> dict:
    args = [
        "plan",
        "--mode",
        "online",
        "--rate",
        f"{rate:.6g}/s",
        "--slo",
        slo,
        "--percentile",
        "99",
        "--profile",
        str(RESULTS / profile),
        "--input-size",
        str(SIZE),
        "--pool",
        "cpu=1",
        "--margin",
        margin,
        "--json",
    ]
    if directory is not None:
        args += ["--triton-config", str(directory)]
    done = perfmodel(*args, check=False)
    if done.returncode not in (0, 3):
        raise SystemExit(f"perfmodel plan failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def measure(rate: float, directory: Path, duration: float, out: Path) -> dict:
    perfmodel(
        "profile",
        "--model",
        MODEL,
        "--backend",
        "triton",
        "--rate",
        f"{rate:.6g}/s",
        "--triton-config",
        str(directory),
        "--input-sizes",
        str(SIZE),
        "--duration",
        f"{duration:g}s",
        "--threads",
        "1",
        "--out",
        str(out),
        "--resume",
        *placement(),
    )
    df = load_profile(out)
    row = df[np.isclose(df["rate_per_s"].astype(float), float(f"{rate:.6g}"))].iloc[-1]
    return row.to_dict()


def placement() -> list[str]:
    return ["--server-cpus", ",".join(map(str, SERVER_CPUS))] if SERVER_CPUS else []


def predict(
    service: ServiceTimes, rate: float, max_batch: int, delay_s: float, seed: int = 0, slower: float = 1.0
) -> tuple[float, float]:
    """p50 and p99 (seconds, the round trip included) of one GPU with these settings at this rate, by the
    simulation, with every batch's server time `slower` times the calibrated one."""
    median, sigma = service.per_request(1, max_batch)
    median = median * slower
    if not Batcher(rate, max_batch, delay_s, median, sigma).stable:
        return math.inf, math.inf
    sim = simulate_gpu(poisson_arrivals(rate, 100_000, seed + 1), max_batch, delay_s, median, sigma, seed + 2)
    return sim.quantile(50) + service.overhead_s, sim.quantile(99) + service.overhead_s


def at_served_speed(service: ServiceTimes, rate: float, max_batch: int, delay_ms: float, m: dict) -> float:
    """The p99 (ms) predicted with the service curve scaled to the speed the server ran at during the
    measurement (its busy time per execution over the calibration's at the same mean batch): what is
    left of the error then is the model's, not the machine's drift."""
    ratio = m.get("server_compute_ms", math.nan) / calibrated_compute_ms(m["server_batch_mean"])
    if not math.isfinite(ratio) or ratio <= 0:
        return math.nan
    return predict(service, rate, max_batch, delay_ms / 1000, slower=ratio)[1] * 1000


def validate(slo: str, loads: list[float], over: float, duration: float, margin: str = "0") -> pd.DataFrame:
    profile = load_profile(RESULTS / "service-profile.csv")
    probe = plan(1.0, slo, None, margin=margin)
    if probe["status"] == "infeasible":
        raise SystemExit(f"no plan at 1/s: {probe['reason']}")
    capacity, share_slower = probe["capacity_per_s"], probe["margin"]
    print(
        f"one server holds {capacity:.1f} requests/s within {slo} at p99 (margin {share_slower * 100:g}%)", flush=True
    )
    capacities = {"service-profile.csv": capacity}
    if (RESULTS / "ordinary-profile.csv").exists():  # what a plan from the ordinary profile would promise
        ordinary = plan(1.0, slo, None, "ordinary-profile.csv", margin=margin)
        capacities["ordinary-profile.csv"] = ordinary.get("capacity_per_s")
    (RESULTS / "capacity.json").write_text(
        json.dumps({"slo": slo, "margin": share_slower, "capacity_per_s": capacities}, indent=2) + "\n"
    )
    measured = RESULTS / "measured.csv"
    service = _service(profile)
    rows = []
    last = None
    for share in loads:
        rate = round(capacity * share, 1)
        directory = RESULTS / "deploy" / f"load-{share:g}" / MODEL
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        before = load_average()
        answer = plan(rate, slo, directory, margin=margin)
        (directory.parent / "plan.json").write_text(json.dumps(answer, indent=2) + "\n")
        a = answer["assignments"][0]
        m = measure(rate, directory, duration, measured)
        rows.append(
            _compare(
                "planned",
                share,
                rate,
                a["max_batch"],
                a["max_queue_delay_ms"],
                a["predicted_p50_ms"],
                a["predicted_p99_ms"],
                m,
                slo,
                before,
                share_slower,
                a["slowed_ms_at_percentile"],
                at_served_speed(service, rate, a["max_batch"], a["max_queue_delay_ms"], m),
            )
        )
        last = (directory, a)
    directory, a = last
    rate = round(capacity * over, 1)
    before = load_average()
    p50, p99 = predict(service, rate, a["max_batch"], a["max_queue_delay_ms"] / 1000)
    m = measure(rate, directory, duration, measured)
    rows.append(
        _compare(
            "above capacity",
            over,
            rate,
            a["max_batch"],
            a["max_queue_delay_ms"],
            p50 * 1000,
            p99 * 1000,
            m,
            slo,
            before,
            share_slower,
        )
    )
    table = pd.DataFrame(rows)
    table.to_csv(RESULTS / "validation.csv", index=False, float_format="%.4g")
    return table


def _service(profile: pd.DataFrame) -> ServiceTimes:
    from perfmodel.planning.online_sources import service_options

    return service_options([RESULTS / "service-profile.csv"], [], MODEL, SIZE)["cpu"][0]


def _compare(
    case,
    share,
    rate,
    max_batch,
    delay_ms,
    p50,
    p99,
    m: dict,
    slo: str,
    before: float,
    margin: float = 0.0,
    slowed_p99: float = math.nan,
    served_p99: float = math.nan,
) -> dict:
    from perfmodel.units import parse_duration

    slo_ms = parse_duration(slo) * 1000
    return {
        "case": case,
        "load_share": share,
        "rate_per_s": rate,
        "margin": margin,
        "max_batch": max_batch,
        "max_queue_delay_ms": delay_ms,
        "predicted_p50_ms": p50,
        "measured_p50_ms": m["latency_ms"],
        "predicted_p99_ms": p99,
        "slowed_p99_ms": slowed_p99,
        "p99_at_served_speed_ms": served_p99,
        "measured_p99_ms": m["latency_p99_ms"],
        "p99_error": m["latency_p99_ms"] / p99 - 1 if math.isfinite(p99) else math.nan,
        "predicted_meets_slo": bool(p99 <= slo_ms),
        "measured_meets_slo": bool(m["latency_p99_ms"] <= slo_ms),
        "achieved_rate_per_s": m["achieved_rate_per_s"],
        "kept_up": m["kept_up"],
        "server_batch_mean": m["server_batch_mean"],
        "server_compute_ms": m.get("server_compute_ms", math.nan),
        "calibrated_compute_ms": calibrated_compute_ms(m["server_batch_mean"]),
        "server_busy_share": m.get("server_busy_share", math.nan),
        "sender_lag_p99_ms": m["sender_lag_p99_ms"],
        "requests": m["samples"],
        "load_avg_before": before,
        "load_avg_after": load_average(),
    }


def calibrated_compute_ms(batch_mean: float) -> float:
    """The calibration's busy time per execution at this mean batch size (interpolated): beside the one
    measured under the validation's load, it shows whether the server ran slower than calibrated."""
    if not math.isfinite(batch_mean):
        return math.nan
    curve = load_profile(RESULTS / "service-profile.csv").sort_values("batch_size")
    return float(np.interp(batch_mean, curve["batch_size"], curve["server_compute_ms"]))


# ---------------------------------------------------------------------------------------------
# accuracy


def accuracy(requests: int) -> pd.DataFrame:
    curves = {
        "gpu-like (5 ms + 0.2 ms/image)": lambda b: 0.005 + 0.0002 * b,
        "cpu-like (1 ms + 1 ms/image)": lambda b: 0.001 + 0.001 * b,
        "measured here (service-profile.csv)": None,
    }
    rows = []
    for name, curve in curves.items():
        for spread in (0.05, 0.2) if curve is not None else (None,):
            for bm in (1, 4, 16, 64):
                if curve is None:
                    path = RESULTS / "service-profile.csv"
                    if not path.exists():
                        continue
                    service = _service(load_profile(path))
                    if bm > service.largest:
                        continue
                    median, sigma = service.per_request(1, bm)
                else:
                    median = np.array([curve(1)] + [curve(b) for b in range(1, bm + 1)])
                    sigma = np.full(bm + 1, spread)
                mean = median[bm] * math.exp(sigma[bm] ** 2 / 2)
                for delay in (0.0, median[1] / 2):
                    for rho in (0.2, 0.5, 0.8, 0.9, 0.95):
                        rate = rho * bm / mean
                        t0 = time.perf_counter()
                        model = Batcher(rate, bm, delay, median, sigma)
                        a50, a99 = model.quantile(50), model.quantile(99)
                        analytic_s = time.perf_counter() - t0
                        count = int(
                            requests * (1 if rho <= 0.8 else 3 if rho <= 0.9 else 5)
                        )  # long queues need longer runs
                        sims = [
                            simulate_gpu(poisson_arrivals(rate, count, seed), bm, delay, median, sigma, seed + 100)
                            for seed in range(3)
                        ]
                        s50 = float(np.median([s.quantile(50) for s in sims]))
                        s99s = [s.quantile(99) for s in sims]
                        s99 = float(np.median(s99s))
                        rows.append(
                            {
                                "curve": name,
                                "spread": spread,
                                "max_batch": bm,
                                "delay_ms": delay * 1000,
                                "load": rho,
                                "analytic_p50_ms": a50 * 1000,
                                "simulated_p50_ms": s50 * 1000,
                                "analytic_p99_ms": a99 * 1000,
                                "simulated_p99_ms": s99 * 1000,
                                "simulated_p99_seed_spread": (max(s99s) - min(s99s)) / s99,
                                "p50_error": a50 / s50 - 1,
                                "p99_error": a99 / s99 - 1,
                                "analytic_s": analytic_s,
                            }
                        )
                print(f"{name} spread {spread} max_batch {bm}: done", flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(RESULTS / "accuracy.csv", index=False, float_format="%.4g")
    return table


# ---------------------------------------------------------------------------------------------
# curve


GPU = GpuLikeCurve()  # ResNet-50-like at 224 px: waves of 32 images of 8 ms, 1.5 ms overhead, p99 = 1.05 x p50
GPU_MAX_BATCH = 256


def gpu_service() -> ServiceTimes:
    b = np.arange(1, GPU_MAX_BATCH + 1)
    return ServiceTimes(GPU.latency_ms(b, 224) / 1000, GPU.latency_p99_ms(b, 224) / 1000, label="synthetic")


def model_analyzer_best(service: ServiceTimes, slo_s: float, delays_s=(0.0, 0.0005, 0.001, 0.002, 0.005)):
    """Model Analyzer's way on one GPU: every (max_batch, delay) x concurrency measured closed-loop; the
    highest throughput whose p99 meets the SLO. With zero think time and c requests in flight, each
    batch takes min(c, max_batch) of them: p99 = ceil(c / max_batch) x the full batch's p99 (the delay
    never waits: the queue holds c >= the batch). Returns (throughput, max_batch, concurrency, measurements)."""
    best, count = (0.0, None, None), 0
    for b in service.max_batches:
        for _ in delays_s:
            for c in (2**i for i in range(int(math.log2(4 * GPU_MAX_BATCH)) + 1)):
                count += 1
                m = min(c, b)
                p99 = math.ceil(c / b) * service.p99_s[m - 1]
                throughput = c / (math.ceil(c / b) * service.p50_s[m - 1])
                if p99 <= slo_s and throughput > best[0]:
                    best = (throughput, b, c)
    return (*best, count)


def curve(slo_s: float, rates: list[float]) -> pd.DataFrame:
    service = gpu_service()
    gpu = OnlineGpuType("gpu", None, [service])
    ma_throughput, ma_batch, ma_c, measurements = model_analyzer_best(service, slo_s)
    median, sigma = service.per_request(1, ma_batch)
    rows = []
    for rate in rates:
        t0 = time.perf_counter()
        p = solve_online(OnlineProblem([gpu], rate, slo_s, 99))
        took = time.perf_counter() - t0
        a = p.assignments[0]
        ma_gpus = math.ceil(rate / ma_throughput)
        per_gpu = rate / ma_gpus
        ma_p99 = (
            simulate_gpu(poisson_arrivals(per_gpu, 50_000, 1), ma_batch, 0.0, median, sigma, 2).quantile(99)
            if Batcher(per_gpu, ma_batch, 0.0, median, sigma).stable
            else math.inf
        )
        rows.append(
            {
                "rate_per_s": rate,
                "perfmodel_gpus": p.total_gpus,
                "perfmodel_max_batch": a.max_batch,
                "perfmodel_delay_ms": a.max_queue_delay_s * 1000,
                "perfmodel_p99_ms": a.predicted_p99_s * 1000,
                "perfmodel_solve_s": took,
                "model_analyzer_gpus": ma_gpus,
                "model_analyzer_max_batch": ma_batch,
                "model_analyzer_concurrency": ma_c,
                "model_analyzer_throughput_per_gpu": ma_throughput,
                "model_analyzer_p99_ms_poisson": ma_p99 * 1000,
                "model_analyzer_meets_slo": bool(ma_p99 <= slo_s),
                "model_analyzer_measurements": measurements,
            }
        )
        print(f"{rate:g}/s: perfmodel {p.total_gpus} GPUs ({took:.2f} s), Model Analyzer's way {ma_gpus}", flush=True)
    table = pd.DataFrame(rows)
    table.to_csv(RESULTS / "gpu_curve.csv", index=False, float_format="%.4g")
    _plot_curve(table, slo_s)
    return table


def _plot_curve(table: pd.DataFrame, slo_s: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(table["rate_per_s"], table["perfmodel_gpus"], "o-", label="perfmodel (open-loop Poisson, p99 checked)")
    ok = table["model_analyzer_meets_slo"]
    ax.plot(
        table["rate_per_s"],
        table["model_analyzer_gpus"],
        "s--",
        color="tab:orange",
        label="Model Analyzer's way (closed-loop best, scaled)",
    )
    ax.plot(
        table.loc[~ok, "rate_per_s"],
        table.loc[~ok, "model_analyzer_gpus"],
        "x",
        color="red",
        ms=10,
        label="... misses the SLO under Poisson arrivals",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("requests/s (1 image each)")
    ax.set_ylabel("GPUs")
    ax.set_title(f"GPUs needed for p99 <= {slo_s * 1000:g} ms, synthetic ResNet-50-like GPU curve")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "gpu_curve.png", dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# speed


def bursty_trace(seed: int = 0) -> np.ndarray:
    """40 s of Poisson arrivals whose rate alternates between 30k/s and 10k/s every 5 s."""
    rng = np.random.default_rng(seed)
    parts = []
    for i in range(8):
        rate = 30_000 if i % 2 == 0 else 10_000
        times = 5.0 * i + np.cumsum(rng.exponential(1 / rate, int(rate * 5.5)))
        parts.append(times[times < 5.0 * (i + 1)])
    return np.concatenate(parts)


def speed(repeats: int) -> dict:
    base = gpu_service()
    types = []
    for k, factor in enumerate((0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 5.6)):
        service = ServiceTimes(base.p50_s / factor, base.p99_s / factor, label="synthetic")
        types.append(OnlineGpuType(f"gpu{k}", 1000, [service], cost_per_hour=2.0 * factor**0.8))
    out = {}
    gpu = OnlineGpuType("gpu", None, [base])
    for name, problem in {
        "1 type, any number, 1M requests/s": OnlineProblem([gpu], 1e6, 0.1, 99),
        "1 type, Poisson at 20k requests/s, p99 <= 50 ms": OnlineProblem([gpu], 2e4, 0.05, 99),
        "1 type, a trace alternating 30k/s and 10k/s every 5 s (40 s, mean 20k/s), p99 <= 50 ms": OnlineProblem(
            [gpu], None, 0.05, 99, arrivals_s=bursty_trace()
        ),
        "8 types x 1000 GPUs, 2M requests/s, fewest GPUs": OnlineProblem(types, 2e6, 0.1, 99),
        "8 types x 1000 GPUs, 2M requests/s, lowest cost": OnlineProblem(types, 2e6, 0.1, 99, objective="cost"),
    }.items():
        times, plan_ = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            plan_ = solve_online(problem)
            times.append(time.perf_counter() - t0)
        out[name] = {
            "median_s": float(np.median(times)),
            "max_s": float(max(times)),
            "gpus": plan_.total_gpus,
            "status": plan_.status,
        }
        print(f"{name}: {out[name]}", flush=True)
    (RESULTS / "speed.json").write_text(json.dumps(out, indent=2) + "\n")
    return out


# ---------------------------------------------------------------------------------------------
# summary


def summary(machine: dict) -> str:
    lines = [
        "# Experiment 007 results (written by run.py)",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, Python {platform.python_version()}; "
        f"load average (1 min) per part in the tables and below. {_placement_text(machine)}",
        "",
    ]
    for part, loads in machine["load"].items():
        lines.append(f"- {part}: load average {loads[0]} before, {loads[1]} after, {loads[2]:.0f} s")
    lines.append("")
    path = RESULTS / "validation.csv"
    if path.exists():
        v = pd.read_csv(path)
        margin = float(v["margin"].iloc[0]) if "margin" in v else 0.0
        pct = f"{margin * 100:g}%"
        held = (
            f"; planned with --margin {pct}: the SLO holds with every batch {pct} slower, loads are shares of "
            "that capacity"
            if margin
            else ""
        )
        lines += [
            f"## Predicted against measured (one server, the plan's config.pbtxt, open-loop Poisson load{held})",
            "",
            "| case | load | rate/s | max batch | delay ms | p50 pred | p50 meas | p99 pred | p99 meas | p99 "
            "meas/pred - 1 | "
            "SLO met pred/meas | answered/s | server batch | load avg |",
            "|" + "---|" * 14,
        ]
        for r in v.itertuples():
            lines.append(
                f"| {r.case} | {r.load_share:g} | {r.rate_per_s:g} | {r.max_batch} | {r.max_queue_delay_ms:g} | "
                f"{r.predicted_p50_ms:.3g} | {r.measured_p50_ms:.3g} | {r.predicted_p99_ms:.3g} | "
                f"{r.measured_p99_ms:.3g} | {r.p99_error:+.0%} | {_yes(r.predicted_meets_slo)}/"
                f"{_yes(r.measured_meets_slo)} | {r.achieved_rate_per_s:.4g} | {r.server_batch_mean:.3g} | "
                f"{r.load_avg_before:g}-{r.load_avg_after:g} |"
            )
        lines.append("")
        if margin:
            planned = v[v["case"] == "planned"]
            lines += [
                f"p99 predicted with every batch {pct} slower (what the plan holds within the SLO): "
                + ", ".join(f"{r.slowed_p99_ms:.3g} ms at {r.load_share:g}" for r in planned.itertuples())
                + ".",
                "",
            ]
        if "server_busy_share" in v:
            lines += [
                "The server during each run: its busy time per execution (Triton's compute input + infer + output) "
                "against the calibration's at the same mean batch, and the share of the run it was busy.",
                "",
                "| case | load | server batch | busy ms/execution, measured | calibrated | ratio | busy share |",
                "|---|---|---|---|---|---|---|",
            ]
            for r in v.itertuples():
                lines.append(
                    f"| {r.case} | {r.load_share:g} | {r.server_batch_mean:.3g} | {r.server_compute_ms:.3g} | "
                    f"{r.calibrated_compute_ms:.3g} | {r.server_compute_ms / r.calibrated_compute_ms:.2f} | "
                    f"{r.server_busy_share:.0%} |"
                )
            lines.append("")
        if "p99_at_served_speed_ms" in v:
            planned = v[v["case"] == "planned"]
            lines += [
                "The prediction again with every batch's server time scaled by that ratio (the speed the server "
                "ran at, not the one calibrated): the error left is the model's own, not the machine's drift.",
                "",
                "| load | p99 pred at served speed | p99 meas | meas/pred - 1 |",
                "|---|---|---|---|",
            ]
            for r in planned.itertuples():
                lines.append(
                    f"| {r.load_share:g} | {r.p99_at_served_speed_ms:.3g} | {r.measured_p99_ms:.3g} | "
                    f"{r.measured_p99_ms / r.p99_at_served_speed_ms - 1:+.0%} |"
                )
            lines.append("")
    path = RESULTS / "capacity.json"
    if path.exists():
        c = json.loads(path.read_text())
        lines += [
            f"One server's capacity within {c['slo']} at p99 (margin {c.get('margin', 0) * 100:g}%), as planned "
            "from each profile: "
            + "; ".join(
                f"{name}: {value:,.0f} requests/s" for name, value in c["capacity_per_s"].items() if value is not None
            )
            + ".",
            "",
        ]
    path, ordinary = RESULTS / "service-profile.csv", RESULTS / "ordinary-profile.csv"
    if path.exists() and ordinary.exists():
        d, o = load_profile(path).set_index("batch_size"), load_profile(ordinary).set_index("batch_size")
        lines += [
            "## Service time of a batch (ms, median): m one-image requests batched by Triton, or one request of m "
            "images",
            "",
            "| m | m requests, dynamic batch | its server compute | one request of m images | its server compute | "
            "ratio |",
            "|---|---|---|---|---|---|",
        ]
        for m in d.index:
            if m in o.index:
                lines.append(
                    f"| {m} | {d.latency_ms[m]:.3g} | {d.server_compute_ms[m]:.3g} | {o.latency_ms[m]:.3g} | "
                    f"{o.server_compute_ms[m]:.3g} | {d.latency_ms[m] / o.latency_ms[m]:.2f} |"
                )
        lines.append("")
    path = RESULTS / "accuracy.csv"
    if path.exists():
        a = pd.read_csv(path)
        lines += [
            "## Analytic model against the simulation (error = analytic / simulated - 1)",
            "",
            "| load | p50 median abs error | p50 worst | p99 median abs error | p99 worst | cases |",
            "|---|---|---|---|---|---|",
        ]
        for rho, g in a.groupby("load"):
            lines.append(
                f"| {rho:g} | {g.p50_error.abs().median():.1%} | {_worst(g.p50_error)} | "
                f"{g.p99_error.abs().median():.1%} | {_worst(g.p99_error)} | {len(g)} |"
            )
        lines.append(
            f"| all | {a.p50_error.abs().median():.1%} | {_worst(a.p50_error)} | {a.p99_error.abs().median():.1%} "
            f"| {_worst(a.p99_error)} | {len(a)} |"
        )
        within = [(a.p99_error.abs() <= x).mean() for x in (0.05, 0.10, 0.15)]
        lines += [
            "",
            f"p99 within 5% of the simulation in {within[0]:.0%} of the cases, within 10% in {within[1]:.0%}, "
            f"within 15% in {within[2]:.0%}. Seed-to-seed spread of the simulated p99 (3 seeds): median "
            f"{a.simulated_p99_seed_spread.median():.1%}, worst {a.simulated_p99_seed_spread.max():.1%}. Analytic "
            f"p50 + p99 per case: median {a.analytic_s.median() * 1000:.0f} ms.",
            "",
        ]
    path = RESULTS / "gpu_curve.csv"
    if path.exists():
        c = pd.read_csv(path)
        lines += [
            "## GPUs needed against the rate (synthetic GPU, p99 SLO)",
            "",
            "| requests/s | perfmodel GPUs | max batch | p99 ms | Model Analyzer's way GPUs | its p99 under "
            "Poisson ms | meets SLO |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in c.itertuples():
            lines.append(
                f"| {r.rate_per_s:,.0f} | {r.perfmodel_gpus} | {r.perfmodel_max_batch} | {r.perfmodel_p99_ms:.3g} | "
                f"{r.model_analyzer_gpus} | {r.model_analyzer_p99_ms_poisson:.3g} | "
                f"{_yes(r.model_analyzer_meets_slo)} |"
            )
        r0 = c.iloc[0]
        lines += [
            "",
            f"Model Analyzer's way: {int(r0.model_analyzer_measurements)} measurements (max_batch x delay x "
            f"concurrency) on one GPU; best max_batch {int(r0.model_analyzer_max_batch)} at concurrency "
            f"{int(r0.model_analyzer_concurrency)}, {r0.model_analyzer_throughput_per_gpu:,.0f} requests/s per GPU. "
            f"perfmodel: median solve {c.perfmodel_solve_s.median():.2f} s, worst {c.perfmodel_solve_s.max():.2f} s.",
            "",
        ]
    path = RESULTS / "speed.json"
    if path.exists():
        s = json.loads(path.read_text())
        lines += ["## Solve time", "", "| problem | GPUs | status | median s | worst s |", "|---|---|---|---|---|"]
        for name, r in s.items():
            lines.append(f"| {name} | {r['gpus']:,} | {r['status']} | {r['median_s']:.2f} | {r['max_s']:.2f} |")
        lines.append("")
    text = "\n".join(lines)
    (RESULTS / "summary.md").write_text(text)
    return text


def _placement_text(machine: dict) -> str:
    cores = machine.get("server_cpus", "any")
    if cores == "any":
        return "The server and the load generator shared all cores."
    return f"The server ran on core(s) {cores} and the load generator on the others (--server-cpus)."


def _yes(value) -> str:
    return "yes" if str(value).lower() in ("true", "1") else "no"


def _worst(errors: pd.Series) -> str:
    return f"{errors.iloc[int(np.argmax(errors.abs().to_numpy()))]:+.1%}"


def main() -> None:
    global RESULTS, SERVER_CPUS
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", default=",".join(PARTS))
    p.add_argument("--slo", default="100ms", help="the p99 objective of the validation (default: 100ms)")
    p.add_argument("--loads", default="0.3,0.55,0.8", help="planned rates, as shares of one server's capacity")
    p.add_argument("--over", type=float, default=1.2, help="the rate above capacity, as a share of it (default: 1.2)")
    p.add_argument(
        "--margin", default="0", help="validate: perfmodel plan --margin for every plan, e.g. 10%% (default: 0)"
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds counted per measured rate (default: 60)")
    p.add_argument("--max-batch", type=int, default=32, help="largest dynamic batch calibrated (default: 32)")
    p.add_argument("--calibration-seconds", type=float, default=10.0, help="per calibration rate (default: 10)")
    p.add_argument("--accuracy-requests", type=int, default=100_000)
    p.add_argument("--curve-slo", default="50ms")
    p.add_argument("--repeats", type=at_least_one, default=3)
    p.add_argument(
        "--server-cpus",
        default=None,
        metavar="LIST",
        help="calibrate and validate with the server on these cores and the load generator on the others "
        "(perfmodel profile --server-cpus; default: both anywhere)",
    )
    p.add_argument(
        "--results",
        help="an earlier run's folder to continue (its parts' files are inputs of the next parts); "
        "default: a new results/<date>-<machine>-<commit>/",
    )
    args = p.parse_args()
    RESULTS = Path(args.results) if args.results else new_results(HERE)
    if args.server_cpus:
        from perfmodel.profile.affinity import parse_cpus

        SERVER_CPUS = parse_cpus(args.server_cpus)
    parts = [x for x in args.parts.split(",") if x]
    unknown = [x for x in parts if x not in PARTS]
    if unknown:
        raise SystemExit(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}.")
    RESULTS.mkdir(exist_ok=True)
    meta_path = RESULTS / "machine.json"
    machine = json.loads(meta_path.read_text()) if meta_path.exists() else {"load": {}}
    machine.update(cpu=cpu_name(), cores=os.cpu_count(), host=platform.node())
    if {"calibrate", "validate"} & set(parts):
        machine["server_cpus"] = ",".join(map(str, SERVER_CPUS)) or "any"
    from perfmodel.units import parse_duration

    for part in parts:
        before, t0 = load_average(), time.perf_counter()
        if part == "calibrate":
            calibrate(args.max_batch, args.calibration_seconds)
        elif part == "validate":
            loads = [float(x) for x in args.loads.split(",")]
            print(validate(args.slo, loads, args.over, args.duration, args.margin).to_string(index=False))
        elif part == "accuracy":
            accuracy(args.accuracy_requests)
        elif part == "curve":
            rates = [float(r) for r in np.round(np.geomspace(1e3, 1e6, 13), -1)]
            curve(parse_duration(args.curve_slo), rates)
        elif part == "speed":
            speed(args.repeats)
        machine["load"][part] = [before, load_average(), time.perf_counter() - t0]
        meta_path.write_text(json.dumps(machine, indent=2) + "\n")
    print(summary(machine))


if __name__ == "__main__":
    main()
