"""The Ray actor that does one planned GPU's work: load the model, then run its batches, one at a time,
while a thread pool decodes the next ones (PIL), and stream a record per batch back to the driver, a
list of them at a time (SEND_EVERY_S).

It runs what the plan's profile measured: the backend's options (channels-last, torch.compile, CUDA
graphs), the input batches the profile held, and every batch at the planned batch size. A last,
partial batch is filled up to that size and only its images are counted: the plan counts it as a full
batch, and a new shape would be autotuned by cuDNN (or captured again as a CUDA graph) inside the
timed window, a warm-up the plan does not have.

The class is plain Python (tests can use it without Ray); perfmodel.run.execute wraps it with
ray.remote and the resources the plan gave this worker.
"""

from __future__ import annotations

import os
import platform
import signal
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from perfmodel.errors import InputError

PREFETCH = 2  # batches decoded ahead of the one running
# Records go to the driver at most this often, not one Ray message per batch, which a GPU's short batches
# would feel (as they felt the batch queue's round trip: see SharedBatches.take).
SEND_EVERY_S = 0.5


@dataclass(frozen=True)
class WorkerSpec:
    """How one worker runs its model."""

    name: str
    model: str  # a built-in name
    model_path: str | None  # a TorchScript file (then `model` is only its name)
    weights: str | None  # a torchvision state_dict file
    device: str  # "cpu" or "cuda"
    precision: str
    backend: str  # one of torch_runner.BACKENDS: torch, torch-channels-last-cuda-graphs ...
    threads: int | None  # torch intra-op threads; 1 for a CPU worker
    decode_threads: int = 1
    seed: int = 0
    fault_after: int | None = None  # for fault drills and tests: SIGKILL itself after this many batches
    batch_size: int | None = None  # the planned batch size, which a partial batch is filled up to


def check_runnable(backend: str, precision: str, device: str, where: str) -> None:
    """InputError (one sentence) when a planned backend and precision cannot run on `device`, before
    anything starts: CUDA graphs (ours or torch.compile's reduce-overhead) and TF32 need a CUDA device."""
    from perfmodel.torch_runner import BACKEND_OPTIONS, BACKENDS

    if backend not in BACKEND_OPTIONS:
        raise InputError(f"{backend!r} is not a PyTorch backend perfmodel runs ({', '.join(BACKENDS)}).")
    options = BACKEND_OPTIONS[backend]
    graphs = options.cuda_graphs or options.compile_mode == "reduce-overhead"
    if device == "cpu" and (graphs or precision == "tf32"):
        what = "CUDA graphs" if graphs else "TF32 math"
        raise InputError(
            f"{where} runs {backend} {precision}, which needs a CUDA device ({what}): run it with `device` "
            "cuda, or re-plan with a `backend` and `precision` a CPU runs."
        )


class LocalBatches:
    """The worker's own batches, in order. Items are file lists, or image counts for random inputs."""

    def __init__(self, owner: int, items: list):
        self.owner, self.items, self.next = owner, list(items), 0

    def take(self):
        """A ticket: called, it gives (owner, batch number, items), or None when none is left."""
        if self.next >= len(self.items):
            return lambda: None
        self.next += 1
        item = self.owner, self.next - 1, self.items[self.next - 1]
        return lambda: item


class SharedBatches:
    """Batches taken from the work-stealing queue (perfmodel.run.steal.BatchQueue, a Ray actor)."""

    def __init__(self, queue, worker: int):
        self.queue, self.worker = queue, worker

    def take(self):
        """A ticket, as LocalBatches gives: the queue is asked now and its answer read when the batch is
        due, so that the round trip (1.4-2.7 ms on the 2-core VM, experiments/011 queue_call.py) passes
        while the batches before it run, not between two of them."""
        import ray

        answer = self.queue.take.remote(self.worker)
        return lambda: ray.get(answer)


class RunWorker:
    def __init__(self, spec: WorkerSpec):
        import torch

        from perfmodel.models import ModelSpec
        from perfmodel.torch_runner import TorchOptions, TorchRunner

        self.spec = spec
        self.torch = torch
        options = TorchOptions.from_backend(
            spec.backend, device=spec.device, precision=spec.precision, threads=spec.threads
        )
        self.runner = TorchRunner(ModelSpec(spec.model, spec.model_path), options, spec.seed)
        # Imports and the device's context before the clock starts: the plan's load time does not include them.
        self.runner.start()
        self.pool = ThreadPoolExecutor(max(1, spec.decode_threads), thread_name_prefix="decode")
        self.pending: deque = deque()
        self.source = None
        self.input_size = 0
        self.synthetic: list | None = None
        self.batch_size = spec.batch_size or 0

    def ready(self) -> dict:
        """Who and where this worker is (called before the clock starts)."""
        return {
            "pid": os.getpid(),
            "host": platform.node(),
            "threads": self.torch.get_num_threads(),
            "niceness": os.getpriority(os.PRIO_PROCESS, 0),
            "device": str(self.runner.device),
        }

    def load(
        self, input_size: int, batches=None, queue=None, worker: int = 0, synthetic_batch: int | None = None
    ) -> dict:
        """Build the model (and its weights) on the device, then start decoding the first batches.
        Returns the load's start and end (time.time(), seconds) and the parts, in ms, of its process's start
        (before the clock) and of the load."""
        start = time.time()
        self.runner.load(self.spec.weights)
        end = time.time()
        self.input_size = input_size
        self.source = SharedBatches(queue, worker) if queue is not None else LocalBatches(worker, batches or [])
        if synthetic_batch is not None:  # random batches (never zeros) to rotate between, made once
            runner = self.runner
            self.batch_size = max(self.batch_size, synthetic_batch)
            # As many as the profile held at this batch (three, or one for a large batch): three large
            # ones could run out of memory where the profile did not.
            count = runner.input_count(synthetic_batch, input_size, runner.device_memory_mb())
            self.synthetic = runner.inputs(synthetic_batch, input_size, count)
        for _ in range(PREFETCH):
            self._prefetch()
        return {"start": start, "end": end, "parts": {**self.runner.start_parts, **self.runner.load_parts}}

    def _prefetch(self) -> None:
        ticket = self.source.take()
        if self.synthetic is not None:
            self.pending.append(_Synthetic(ticket))
        else:
            self.pending.append(self.pool.submit(self._decode, ticket))

    def _decode(self, ticket):
        import numpy as np

        from perfmodel.run.images import decode, reason

        item = ticket()
        if item is None:
            return None
        owner, number, paths = item
        t0 = time.perf_counter()
        arrays, good, failed = [], [], []
        for path in paths:
            try:
                arrays.append(decode(path, self.input_size))
                good.append(path)
            except Exception as exc:  # an unreadable file is listed and skipped, never the end of the run
                failed.append((path, reason(exc)))
        batch = np.stack(arrays) if arrays else None
        return owner, number, good, batch, failed, time.perf_counter() - t0

    def run(self):
        """Run every batch; yield their records, a list at a time, SEND_EVERY_S apart (a generator: Ray
        streams each list as it is made). A fault drill's records all reach the driver before it dies."""
        chunk, sent = [], time.monotonic()
        for record in self.records():
            chunk.append(record)
            drill = self.spec.fault_after is not None and record["seq"] + 1 >= self.spec.fault_after
            if drill or time.monotonic() - sent >= SEND_EVERY_S:
                yield chunk
                chunk, sent = [], time.monotonic()
        if chunk:
            yield chunk

    def records(self):
        """Run every batch; yield one record per batch as it is made."""
        torch, runner = self.torch, self.runner
        done = 0
        if not self.pending:  # run again after a lost node's batches were put back in the queue
            for _ in range(PREFETCH):
                self._prefetch()
        with runner.inference():
            while self.pending:
                if self.spec.fault_after is not None and done >= self.spec.fault_after:
                    # A real death, as the OOM killer would do it, during the next batch: by then the
                    # records of the finished ones have reached the driver, as they would have in life.
                    time.sleep(1.0)
                    os.kill(os.getpid(), signal.SIGKILL)
                asked = time.time()
                batch = self.pending.popleft().result()
                if batch is None:  # nothing was left for this worker when it asked
                    continue
                owner, number, content, array, failed, decode_s = batch
                self._prefetch()
                start = time.time()
                classes, scores = [], []
                n = content if self.synthetic is not None else len(content)
                if n:
                    x = self._input(array, n, done)
                    # A single synthetic batch is never written to: it can be the CUDA graph's own input.
                    out = runner.forward(x, keep_input=self.synthetic is not None and len(self.synthetic) == 1)
                    runner.sync()
                    model_end = time.time()
                    if isinstance(out, (tuple, list)):
                        out = out[0]
                    top = torch.softmax(out[:n].float(), dim=1).max(dim=1)
                    classes, scores = top.indices.tolist(), top.values.tolist()
                else:
                    model_end = start
                end = time.time()
                yield {
                    "seq": done,
                    "owner": owner,
                    "batch": number,
                    "start": start,
                    "end": end,
                    "model_s": model_end - start,
                    "wait_s": start - asked,
                    "decode_s": decode_s,
                    "images": n,
                    "paths": None if self.synthetic is not None else content,
                    "classes": classes,
                    "scores": scores,
                    "failed": failed,
                }
                done += 1

    def _input(self, array, n: int, k: int):
        """The batch the model runs for n images: at least the planned batch size (the first n rows count)."""
        import numpy as np

        torch = self.torch
        if self.synthetic is not None:
            x = self.synthetic[k % len(self.synthetic)]
            # Larger than this worker's batch: never from the queue, which splits stolen and put-back
            # batches to the taker's size; drawn now, in its own shape, should it happen.
            return x if n <= len(x) else self.runner.inputs(n, self.input_size, count=1)[0]
        if n < self.batch_size:  # the last, partial batch: filled up to the planned shape
            array = np.concatenate([array, np.zeros((self.batch_size - n, *array.shape[1:]), array.dtype)])
        layout = torch.channels_last if self.runner.options.channels_last else torch.contiguous_format
        # The memory layout the profile measured: another layout runs at another speed.
        return torch.from_numpy(array).to(self.runner.device, self.runner.dtype).contiguous(memory_format=layout)


class _Synthetic:
    """A batch of random inputs: nothing to decode, only the queue's answer to read when it is due."""

    def __init__(self, ticket):
        self.ticket = ticket

    def result(self):
        item = self.ticket()
        return None if item is None else (*item, None, [], 0.0)
