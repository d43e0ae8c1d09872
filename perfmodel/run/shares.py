"""Which images each worker does, and in which batches.

Within an input-size class, the files (in sorted order) are dealt to that class's workers in plan
order, each taking as many as the plan gives it. With fewer files than planned, every worker's share
shrinks in proportion (largest remainders first), so they still finish together. The split depends
only on the file list and the plan, so a resumed run splits alike and then drops what is done.
"""

from __future__ import annotations

from perfmodel.errors import InputError
from perfmodel.run.planfile import RunPlan, WorkerPlan


def split(plan: RunPlan, files_by_size: dict[int, list[str]]) -> dict[int, list[str]]:
    """worker index -> its files. InputError when a class has more files than the plan covers."""
    shares: dict[int, list[str]] = {}
    for size, planned in plan.images_by_size.items():
        files = files_by_size.get(size, [])
        if len(files) > planned:
            raise InputError(
                f"there are {len(files):,} images for the {size} px class but the plan covers "
                f"{planned:,}: make a plan for {len(files):,} images (perfmodel plan --images "
                f"{len(files)}), or give a folder with fewer."
            )
        workers = [w for w in plan.workers if w.input_size == size]
        counts = _proportional([w.images for w in workers], len(files))
        start = 0
        for w, n in zip(workers, counts):
            shares[w.index] = files[start : start + n]
            start += n
    extra = sorted(set(files_by_size) - set(plan.images_by_size))
    if extra and any(files_by_size[s] for s in extra):
        raise InputError(f"images were sorted into input sizes the plan does not have ({extra}).")
    return shares


def _proportional(planned: list[int], available: int) -> list[int]:
    total = sum(planned)
    if available >= total:
        return list(planned)
    exact = [p * available / total for p in planned]
    counts = [int(x) for x in exact]
    order = sorted(range(len(planned)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in order[: available - sum(counts)]:
        counts[i] += 1
    return counts


def batches(items: list, batch_size: int) -> list[list]:
    return [items[i : i + batch_size] for i in range(0, len(items), batch_size)]


def synthetic_batches(worker: WorkerPlan) -> list[int]:
    """The batch sizes of a worker on random inputs: full batches, the last one possibly partial (a plan too
    large for this machine's memory is refused before, by perfmodel.run.budget)."""
    full, rest = divmod(worker.images, worker.batch_size)
    return [worker.batch_size] * full + ([rest] if rest else [])
