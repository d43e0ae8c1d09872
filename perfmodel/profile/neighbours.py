"""`--alongside N`: N more workers run the model while a point is measured, as a plan's workers do.

A plan that puts several CPU workers on one machine runs them all at once: they share its cores'
caches and its memory bandwidth, and each runs slower than it would alone (experiment 006, two
workers on two cores: a batch took 1.03-1.07x its time alone for ResNet-50, 1.25-1.49x for
EfficientNet-B0, whose depthwise convolutions wait on memory). A
profile measured `--alongside 1` times every point (its load, warm-up and steady state) while another
worker process runs the same model at the same batch and input size back to back, and keeps running it
between points, so that the measured worker is never alone.
"""

from __future__ import annotations

import os

from perfmodel.errors import BackendError, InputError
from perfmodel.profile.worker_process import WorkerProcess


def check_alongside(alongside: int, threads: int, is_cuda: bool) -> None:
    """InputError when the machine cannot run `alongside` more workers beside the measured one."""
    if not alongside:
        return
    if is_cuda:
        raise InputError(
            "`alongside` is for CPU workers that share one machine's cores; a plan gives each GPU "
            "worker a GPU of its own: leave `alongside` out with `device` cuda."
        )
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    needed = (alongside + 1) * threads
    if needed > cores:
        raise InputError(
            f"`alongside` {alongside} with {threads} thread(s) each needs {needed} cores and this process may "
            f"use {cores}: give at most `alongside` {max(0, cores // threads - 1)}."
        )


class Neighbours:
    """`count` worker processes with the model loaded, each running the current point's batch back to back."""

    def __init__(self, count: int, load_request: dict, load_timeout_s: float, call_timeout_s: float):
        self.count = count
        self.load_request = load_request
        self.load_timeout_s = load_timeout_s
        self.call_timeout_s = call_timeout_s
        self.workers: list[WorkerProcess | None] = [None] * count

    def __enter__(self) -> Neighbours:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def busy(self, batch_size: int, input_size: int, memory_limit_mb: float | None) -> dict:
        """Set every neighbour running this point; the first failure's reply, or {"status": "ok"}."""
        request = {"op": "busy", "batch_size": batch_size, "input_size": input_size, "memory_limit_mb": memory_limit_mb}
        return self._ask_all(request, self.call_timeout_s + 60)

    def still_busy(self) -> dict:
        """Whether every neighbour ran without a failure since `busy`; as `busy` answers."""
        return self._ask_all({"op": "still_busy"}, 60)

    def _ask_all(self, request: dict, timeout_s: float) -> dict:
        for i in range(self.count):
            reply = self._worker(i).request(request, timeout_s, "`call_timeout_s`")
            if reply["status"] != "ok":
                self._drop(i)  # a new one takes over at the next point
                return {**reply, "error": f"a worker alongside (`alongside`): {reply.get('error', '')}"}
        return {"status": "ok"}

    def _worker(self, i: int) -> WorkerProcess:
        """Neighbour i, started and loaded if it is not running; BackendError if it cannot load."""
        worker = self.workers[i]
        if worker is not None and worker.is_alive():
            return worker
        self._drop(i)
        worker = WorkerProcess()
        self.workers[i] = worker
        worker.start()
        loaded = worker.request(self.load_request, self.load_timeout_s, "`worker_timeout_s`")
        if loaded["status"] != "ok":
            self._drop(i)
            raise BackendError(f"a worker alongside (`alongside`) could not load the model: {loaded.get('error', '')}")
        return worker

    def _drop(self, i: int) -> None:
        worker, self.workers[i] = self.workers[i], None
        if worker is not None:
            worker.stop()

    def stop(self) -> None:
        for i in range(self.count):
            self._drop(i)
