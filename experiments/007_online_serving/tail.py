"""007 — Where does the measured p99 go beyond the predicted one? A look at each request.

    python experiments/007_online_serving/tail.py [--results DIR] [--rates 384,704,1025] [--max-batch 22]
        [--seconds 30] [--server-cpus 1]

Run E measured p99 24-59% above the prediction even with the service curve scaled to the speed the
server ran at, while the p50 was within 15%. The prediction assumes (1) Poisson arrivals, (2) a
batch's service time lognormal around the calibrated median, independent from batch to batch, and
(3) a constant round trip outside the server. This replays the validation's load against a server
deployed as planned (no delay, max_batch --max-batch, server on --server-cpus, the load generator on the
other cores) with the profiler's open-loop sender, keeping every request's send and answer times, and asks which
assumption fails:

- the simulation again, on the **actual send times** (the sender runs late at times, and then sends
  what it owes at once: burstier than Poisson);
- Triton's statistics over the window: the mean time a request waited in the server's queue and the
  mean time it was in the server, beside the simulation's mean wait and the client's mean latency
  (what is left, client mean less server mean, is the round trip under load);
- the latency percentiles, measured and simulated.

- Triton's statistics every second: the server's busy time per execution against the calibration's at
  that second's mean batch (how fast the server ran that second), beside the p99 of that second's requests.

Needs the calibration of run.py (DIR/service-profile.csv). Writes DIR/tail.csv, DIR/tail-seconds.csv (one
row per rate and second) and DIR/tail.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from run import batching_server  # noqa: E402

from experiments.lab import new_results  # noqa: E402
from perfmodel.profile.backends.triton_stats import batch_totals, server_times_ms  # noqa: E402
from solvers.online_simulate import poisson_arrivals, simulate_gpu  # noqa: E402

MODEL, SIZE, WARMUP_S = "tiny", 64, 3.0


def service(results: Path):
    from perfmodel.planning.online_sources import service_options

    return service_options([results / "service-profile.csv"], [], MODEL, SIZE)["cpu"][0]


def measure(rate: float, max_batch: int, seconds: float, cpus: tuple[int, ...]) -> dict:
    """One open-loop run: every request's actual send time and latency (s), and Triton's statistics."""
    from perfmodel.profile.backends.triton_rate import send_open_loop

    stats, seconds_stats = {}, []
    with batching_server(max_batch, cpus) as (work, statistics):

        def every_second(stop: threading.Event) -> None:  # the server's speed second by second
            while not stop.wait(1.0 - (time.perf_counter() - started) % 1.0):
                seconds_stats.append((time.perf_counter() - started, statistics()))

        stop, started = threading.Event(), time.perf_counter()
        watcher = threading.Thread(target=every_second, args=(stop,), daemon=True)
        watcher.start()
        try:
            requests = send_open_loop(
                work,
                rate,
                WARMUP_S,
                seconds,
                seed=int(rate),
                on_window=lambda when: stats.__setitem__(when, statistics()),
            )
        finally:
            stop.set()
            watcher.join()
    return {
        "stats": stats,
        "per_second": seconds_stats,
        "schedule": requests.schedule,
        "sent": requests.sent,
        "answered": requests.answered,
        "failed": requests.failed,
    }


def server_means(before: dict, after: dict) -> dict:
    """Per request, over the window: mean ms in the server (queue + compute) and in its queue, from Triton's
    cumulative statistics; and the model's executions."""

    times = server_times_ms(before, after)
    return {
        "server_request_ms": times["server_request_ms"],
        "server_queue_ms": times["server_queue_ms"],
        "executions": _busy(after)[0] - _busy(before)[0],
    }


def per_second(m: dict, calibration: pd.DataFrame) -> pd.DataFrame:
    """Second by second over the counted window: the server's busy time per execution against the
    calibration's at that second's mean batch (its speed then), its busy share, and the p99 latency of
    the requests sent in that second."""
    curve = calibration.sort_values("batch_size")
    latency = (m["answered"] - m["sent"]) * 1000
    rows = []
    for (t_a, a), (t_b, b) in zip(m["per_second"], m["per_second"][1:]):
        if not a or not b or t_a < WARMUP_S:
            continue
        (ea, ia, ba), (eb, ib, bb) = _busy(a), _busy(b)
        if eb <= ea:
            continue
        batch = (ib - ia) / (eb - ea)
        busy_ms = (bb - ba) / (eb - ea) / 1e6
        sent = (m["sent"] >= t_a) & (m["sent"] < t_b) & np.isfinite(latency)
        rows.append(
            {
                "second": t_a,
                "executions": eb - ea,
                "batch_mean": batch,
                "busy_ms_per_execution": busy_ms,
                "speed_ratio": busy_ms / float(np.interp(batch, curve.batch_size, curve.server_compute_ms)),
                "busy_share": (bb - ba) / 1e9 / (t_b - t_a),
                "p99_ms": float(np.percentile(latency[sent], 99)) if sent.any() else math.nan,
            }
        )
    return pd.DataFrame(rows)


def _busy(stats: dict) -> tuple[int, int, int]:
    """Executions, images and busy ns (compute input + infer + output) so far, from Triton's statistics per
    batch size (each execution once; the per-request statistics count a batch's time once per request)."""
    sizes = batch_totals(stats)
    return (
        sum(count for count, _ in sizes.values()),
        sum(size * count for size, (count, _) in sizes.items()),
        sum(ns for _, ns in sizes.values()),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--results",
        type=Path,
        default=HERE / "results" / "2026-11-25-f7b5530-run-e",
        help="the run.py folder calibrated from",
    )
    p.add_argument("--rates", default="384.3,704.5,1024.8")
    p.add_argument("--max-batch", type=int, default=22)
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--server-cpus", default="1")
    args = p.parse_args()
    cpus = tuple(int(c) for c in args.server_cpus.split(",")) if args.server_cpus else ()
    svc = service(args.results)
    median, sigma = svc.per_request(1, args.max_batch)
    overhead_ms = svc.overhead_s * 1000
    calibration = pd.read_csv(args.results / "service-profile.csv")
    rows, all_seconds = [], []
    for rate in (float(r) for r in args.rates.split(",")):
        m = measure(rate, args.max_batch, args.seconds, cpus)
        window = (m["schedule"] >= WARMUP_S) & ~m["failed"] & np.isfinite(m["answered"])
        latency = (m["answered"] - m["sent"])[window] * 1000
        sent = m["sent"]  # in order: the sender sends one request after the other, late or not
        # The whole run through the simulation (no warm-up share dropped), then the counted window.
        real = simulate_gpu(sent, args.max_batch, 0.0, median, sigma, seed=1, warmup_share=0.0)
        replay = real.latency_s[m["schedule"] >= WARMUP_S] * 1000 + overhead_ms
        ideal = poisson_arrivals(rate, 200_000, seed=2)
        poisson = simulate_gpu(ideal, args.max_batch, 0.0, median, sigma, seed=3).latency_s * 1000 + overhead_ms
        server = server_means(m["stats"]["start"], m["stats"]["end"])
        gaps = np.diff(sent[(sent >= WARMUP_S)])
        row = {
            "rate_per_s": rate,
            "requests": int(window.sum()),
            "gap_cv": float(gaps.std() / gaps.mean()),  # 1 for Poisson; above: burstier
            "gaps_under_0.1ms": float((gaps < 1e-4).mean()),
            "measured_p50_ms": float(np.percentile(latency, 50)),
            "measured_p99_ms": float(np.percentile(latency, 99)),
            "measured_mean_ms": float(latency.mean()),
            "sim_poisson_p50_ms": float(np.percentile(poisson, 50)),
            "sim_poisson_p99_ms": float(np.percentile(poisson, 99)),
            "sim_poisson_mean_ms": float(poisson.mean()),
            "sim_actual_sends_p50_ms": float(np.percentile(replay, 50)),
            "sim_actual_sends_p99_ms": float(np.percentile(replay, 99)),
            "sim_actual_sends_mean_ms": float(replay.mean()),
            "overhead_ms": overhead_ms,
            **server,
            "server_batch_mean": float(window.sum()) / max(1, server["executions"]),
        }
        row["round_trip_under_load_ms"] = row["measured_mean_ms"] - row["server_request_ms"]
        seconds = per_second(m, calibration)
        seconds.insert(0, "rate_per_s", rate)
        all_seconds.append(seconds)
        if len(seconds):
            q = seconds.speed_ratio.quantile([0.1, 0.5, 0.9])
            slow = seconds.speed_ratio > 1.15 * q[0.1]
            row.update(
                speed_p10=q[0.1],
                speed_p50=q[0.5],
                speed_p90=q[0.9],
                slow_seconds=int(slow.sum()),
                seconds=len(seconds),
                p99_slow_seconds_ms=seconds.p99_ms[slow].median(),
                p99_other_seconds_ms=seconds.p99_ms[~slow].median(),
            )
        rows.append(row)
        print(", ".join(f"{k} {v:.4g}" for k, v in row.items()), flush=True)
    frame = pd.DataFrame(rows)
    out = new_results(HERE)
    frame.to_csv(out / "tail.csv", index=False, float_format="%.5g")
    pd.concat(all_seconds).to_csv(out / "tail-seconds.csv", index=False, float_format="%.5g")
    lines = [
        f"# Where the p99 goes: tiny {SIZE} px, max_batch {args.max_batch}, no delay, server on core(s) "
        f"{args.server_cpus} ({time.strftime('%Y-%m-%d %H:%M')} UTC)",
        "",
        "| rate/s | gap CV | p99 meas | p99 sim Poisson | p99 sim actual sends | p50 meas | p50 sim | mean meas | "
        "mean in server (Triton) | of it queued | round trip under load | calibrated round trip |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in frame.itertuples():
        lines.append(
            f"| {r.rate_per_s:g} | {r.gap_cv:.2f} | {r.measured_p99_ms:.1f} | {r.sim_poisson_p99_ms:.1f} | "
            f"{r.sim_actual_sends_p99_ms:.1f} | {r.measured_p50_ms:.1f} | {r.sim_poisson_p50_ms:.1f} | "
            f"{r.measured_mean_ms:.1f} | {r.server_request_ms:.1f} | {r.server_queue_ms:.1f} | "
            f"{r.round_trip_under_load_ms:.1f} | {r.overhead_ms:.1f} |"
        )
    lines += [
        "",
        "The server's speed second by second (its busy time per execution over the calibration's at that "
        "second's mean batch; above 1: slower), and the p99 of the requests sent in the seconds more than 15% "
        "slower than its fast state (10th percentile) against the other seconds (median over seconds):",
        "",
        "| rate/s | speed p10 | p50 | p90 | slow seconds | p99 in slow seconds | p99 in the others |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in frame.itertuples():
        lines.append(
            f"| {r.rate_per_s:g} | {r.speed_p10:.2f} | {r.speed_p50:.2f} | {r.speed_p90:.2f} | "
            f"{r.slow_seconds} of {r.seconds} | {r.p99_slow_seconds_ms:.1f} | {r.p99_other_seconds_ms:.1f} |"
        )
    (out / "tail.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
