"""What a run holds in memory, checked against what this machine has before anything is built or started.

The driver keeps a record of every batch (its times, and the class and score of each image) and, with
--out, a label row per image. Each worker holds input batches at its planned batch size: on random inputs
up to three tensors (as the profile held them, torch_runner.input_count), over files the decoded batches
ahead (worker.PREFETCH), the one running and its copy filled up to the planned size, as float32 on the
host, and the batch on its device. A plan can ask for more than any machine holds (10^12 images; a batch
of 2^20 images or of 20,000 px images, within the plan checker's bounds): it is refused here, in one
sentence, rather than by a MemoryError or the kernel's OOM killer minutes later.
"""

from __future__ import annotations

import os
import resource

import psutil

from perfmodel.errors import InputError
from perfmodel.run.planfile import RunPlan, WorkerPlan
from perfmodel.torch_runner import ROTATE_BELOW_MB
from perfmodel.units import figure
from solvers.batch_solution import MAX_FILL

# The driver's memory per batch record and per image in it (the class and score lists), and per label row
# (a tuple of five, its path, and the rows' DataFrame at each flush): tracemalloc on CPython 3.11, records of
# 1, 8, 64 and 256 images (877, 1,254, 4,659 and 16,525 bytes), label rows of 40-character paths (251 bytes).
RECORD_BYTES = 900
IMAGE_BYTES = 70
LABEL_BYTES = 500
PREFETCH_HELD = 4  # a worker over files: two decoded batches ahead, the one running, and its filled-up copy


def check(plan: RunPlan, device_of: dict[str, str], synthetic: bool, labels: bool, local: bool) -> None:
    """InputError (one sentence) when a batch is far larger than its worker's images and the plan did not
    choose it (solvers.batch_solution.MAX_FILL: an edited plan), or when the run needs more memory than this
    machine has: the driver's records (always here) and, on a local Ray, every worker's input batches."""
    for w in plan.workers:
        if w.batch_size > MAX_FILL * w.images and not w.fill_planned:
            raise InputError(
                f"{plan.path}, GPU {w.index + 1} ({w.name}) plans batches of {w.batch_size:,} for its "
                f"{w.images:,} images: perfmodel run fills a batch up to the planned size, here "
                f"{w.batch_size / w.images:,.0f} times the images, and perfmodel plan did not choose it (it marks "
                f'such a row "fill_planned"); give that row a batch_size of at most {MAX_FILL * w.images:,}, or '
                "make the plan again with `perfmodel plan`."
            )
    batches = sum(w.batches for w in plan.workers)
    driver = batches * RECORD_BYTES + plan.images * (IMAGE_BYTES + (LABEL_BYTES if labels else 0))
    room = driver_room()
    if driver > room:
        raise InputError(
            f"the run of {plan.path} keeps a record of each of its {batches:,} batches and {plan.images:,} images "
            f"on this machine, about {_size(driver)}, more than the {_size(room)} available: split the job "
            "into plans of fewer images."
        )
    if not local:
        return
    need = {w.index: worker_bytes(w, device_of[w.hardware], synthetic) for w in plan.workers}
    free = psutil.virtual_memory().available
    if driver + sum(need.values()) > free:
        big = plan.workers[max(need, key=need.get)]
        raise InputError(
            f"the {len(plan.workers):,} worker(s) of {plan.path} need about {_size(sum(need.values()))} for their "
            f"input batches on this machine ({big.name}: batches of {big.batch_size:,} images of {big.input_size} "
            f"px, {_size(batch_bytes(big, 4))} each as float32), more than the {_size(free)} available: make a "
            "plan with smaller batches or input sizes, or run it on a cluster (`address`)."
        )


def check_nodes(plan: RunPlan, device_of: dict[str, str], synthetic: bool, placements, nodes: list[dict]) -> None:
    """On a cluster (`address`), once each worker's node is chosen and before any starts: the input batches
    of the workers of each node against the memory Ray gives that node (its "memory" resource)."""
    memory = {n.get("NodeID"): n.get("Resources", {}).get("memory") for n in nodes}
    need: dict = {}
    for w in plan.workers:
        node = placements[w.index].node_id
        need[node] = need.get(node, 0) + worker_bytes(w, device_of[w.hardware], synthetic)
    for node, n in need.items():
        has = memory.get(node)
        if has and n > has:
            raise InputError(
                f"the workers of {plan.path} that run on node {str(node)[:16]} need about {_size(n)} for their "
                f"input batches, more than the {_size(has)} of memory Ray gives that node: make a plan with smaller "
                "batches or input sizes, or run it on nodes with more memory."
            )


def batch_bytes(w: WorkerPlan, element_bytes: int) -> int:
    """One input batch of the worker at its planned size."""
    return w.batch_size * 3 * w.input_size**2 * element_bytes


def worker_bytes(w: WorkerPlan, device: str, synthetic: bool) -> int:
    """The host memory of a worker's input batches (those on a GPU are in its memory, not the host's)."""
    own = batch_bytes(w, 2 if w.precision in ("fp16", "bf16") else 4)
    if synthetic:
        return 0 if device != "cpu" else own * (3 if own <= ROTATE_BELOW_MB * 2**20 else 1)
    return PREFETCH_HELD * batch_bytes(w, 4) + (own if device == "cpu" else 0)


def driver_room() -> int:
    """The memory this process may still take: what the machine has free, or less under an address-space
    limit (ulimit -v)."""
    free = psutil.virtual_memory().available
    limit, _ = resource.getrlimit(resource.RLIMIT_AS)
    if limit != resource.RLIM_INFINITY:
        free = min(free, max(0, limit - psutil.Process(os.getpid()).memory_info().vms))
    return free


def _size(n: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{figure(n / scale)} {unit}"
    return f"{figure(n / 1e3)} kB"
