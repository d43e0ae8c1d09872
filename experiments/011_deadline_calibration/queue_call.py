"""011 — What does the batch queue's call cost a `perfmodel run` worker between two batches?

A worker of `perfmodel run` asks the batch queue (perfmodel.run.steal.BatchQueue, a Ray actor) for its
next batch once per batch and waits for the answer. Here a stand-in queue and worker in a local Ray
(2 CPUs, as run starts it): the round trip `ray.get(queue.take.remote())`, and the same call asked one
batch ahead (20 ms of busy CPU between the ask and the read): what the ask and the read of a ready
answer cost apart. Medians of 300 calls, twice.

    python experiments/011_deadline_calibration/queue_call.py      # ~20 s
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.lab import no_options  # noqa: E402

CALLS = 300
BATCH_S = 0.02


class Queue:
    def __init__(self):
        self.n = 0

    def take(self, worker: int):
        self.n += 1
        return worker, self.n, 32


class Worker:
    def measure(self, queue) -> dict:
        import ray

        round_trip, ask, read = [], [], []
        for _ in range(CALLS):
            t0 = time.perf_counter()
            ray.get(queue.take.remote(0))
            round_trip.append(time.perf_counter() - t0)
        for _ in range(CALLS):
            t0 = time.perf_counter()
            answer = queue.take.remote(0)
            t1 = time.perf_counter()
            while time.perf_counter() < t1 + BATCH_S:  # a batch's worth of busy CPU
                pass
            t2 = time.perf_counter()
            ray.get(answer)
            ask.append(t1 - t0)
            read.append(time.perf_counter() - t2)
        return {
            name: round(statistics.median(xs) * 1e3, 3)
            for name, xs in (("round_trip_ms", round_trip), ("ask_ms", ask), ("read_ready_ms", read))
        }


def main() -> None:
    no_options(__doc__)
    import ray

    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1")
    try:
        queue = ray.remote(Queue).options(num_cpus=0).remote()
        worker = ray.remote(Worker).options(num_cpus=1).remote()
        for _ in range(2):
            print(ray.get(worker.measure.remote(queue)), f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
