"""Why a plan serves each GPU type with the option it does: the chosen option beside the runner-up.

Every option measured on a type (eager, channels-last, torch.compile's modes, CUDA graphs; precisions) is a
candidate the solver weighs with its load and its first call, compilation included: a compiled model that
needs a minute to compile loses a 10 s deadline to eager and may win a 10 min one. After the solve, each
(type, input size) the plan uses with more than one option is explained in one line: what the chosen option
does per GPU by the plan's time limit, and what the best other one would have needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import solvers
from solvers.capacity import fits


@dataclass(frozen=True)
class OptionBest:
    """One option's best batch on a type: the most images one GPU does by the plan's time limit."""

    option: str
    gpus: int | None  # the chosen option: the GPUs the plan gives it; the runner-up: what it would need
    batch_size: int
    images_per_gpu: int
    first_batch_s: float
    finish_s: float  # when a GPU would finish its share of the images (inf: never by the limit)

    def to_dict(self) -> dict:
        return {
            "option": self.option,
            "gpus": self.gpus,
            "batch_size": self.batch_size,
            "images_per_gpu": self.images_per_gpu,
            "first_batch_s": self.first_batch_s,
            "finish_s": self.finish_s,
        }


@dataclass(frozen=True)
class OptionChoice:
    """Why a type serves an input size with the option the plan gives it: the chosen one beside the runner-up."""

    hardware: str
    input_size: int
    chosen: OptionBest
    runner_up: OptionBest
    why: str  # one line for people

    def to_dict(self) -> dict:
        return {
            "hardware": self.hardware,
            "input_size": self.input_size,
            "chosen": self.chosen.to_dict(),
            "runner_up": self.runner_up.to_dict(),
            "why": self.why,
        }


def explain(plan: solvers.Plan, candidates: dict[tuple[str, int], solvers.Candidates]) -> tuple[OptionChoice, ...]:
    """The plan's `option_choice`: per (type, input size) used with a choice of options, the chosen option
    and the runner-up (the other option with the most images per GPU by the plan's time limit)."""
    out = []
    for (hardware, size), groups in _used(plan).items():
        c = candidates.get((hardware, size))
        labels = sorted(set(c.labels)) if c is not None else []
        if len(labels) < 2:
            continue
        chosen = max(groups, key=lambda a: a.count).label
        gpus, images = sum(a.count for a in groups), sum(a.images_total for a in groups)
        load, limit = groups[0].load_s, plan.usable_s
        best = {label: _best(c, label, load, limit, images / gpus) for label in labels}
        others = [label for label in labels if label != chosen]
        runner_up = max(others, key=lambda label: (best[label]["images_per_gpu"], -best[label]["finish_s"]))
        first = OptionBest(chosen, gpus, **best[chosen])
        second = OptionBest(runner_up, _gpus(best[runner_up], images, plan.mode), **best[runner_up])
        why = _why(f"{hardware} at {size} px", first, second, images, limit, plan.mode)
        out.append(OptionChoice(hardware, size, first, second, why))
    return tuple(out)


def _used(plan: solvers.Plan) -> dict[tuple[str, int], list]:
    groups: dict[tuple[str, int], list] = {}
    for a in plan.assignments:
        groups.setdefault((a.hardware, a.input_size), []).append(a)
    return groups


def _best(c: solvers.Candidates, label: str, load: float, limit: float, per_gpu: float) -> dict:
    """One option's best batch: the most images one GPU does by `limit`, when its first batch is done, and
    when it would finish `per_gpu` images (inf where it cannot by the limit, or at all)."""
    mine = np.array([x == label for x in c.labels])
    b, latency, first = c.batch_size[mine], c.latency_s[mine], load + c.warmup_s[mine]
    with np.errstate(over="ignore", invalid="ignore"):
        further = np.floor(np.maximum((limit - first) / latency, -1.0) + 1e-9)
    batches = np.where(fits(first, limit), further + 1, 0)
    images = batches * b
    i = int(np.lexsort((-b, -images))[0])  # the most images; ties to the larger batch, as the solver
    finish = first + (np.ceil(per_gpu / b) - 1) * latency
    return {
        "batch_size": int(b[i]),
        "images_per_gpu": int(images[i]),
        "first_batch_s": float(first[i]),
        "finish_s": float(np.min(finish)),
    }


def _gpus(best: dict, images: int, mode: str) -> int | None:
    """GPUs the option needs for the images by the limit (soft mode); None where it does none by then."""
    if mode != "soft" or not best["images_per_gpu"]:
        return None
    return math.ceil(images / best["images_per_gpu"])


def _why(where: str, chosen: OptionBest, other: OptionBest, images: int, limit: float, mode: str) -> str:
    said = (
        f"{where}: {chosen.option} (batch {chosen.batch_size}, first batch done at "
        f"{_seconds(chosen.first_batch_s)}, {chosen.images_per_gpu:,} images per GPU by {_seconds(limit)})"
    )
    if not other.images_per_gpu:
        return (
            f"{said}; the runner-up {other.option} would finish its first batch only at "
            f"{_seconds(other.first_batch_s)}, after the {_seconds(limit)} the plan has."
        )
    runner = f"the runner-up {other.option} does {other.images_per_gpu:,} (batch {other.batch_size})"
    if mode != "soft":
        return f"{said}; {runner}."
    if other.gpus != chosen.gpus:
        return f"{said}; {runner}: {other.gpus:,} GPUs for these {images:,} images instead of {chosen.gpus:,}."
    return (
        f"{said}; {runner}: as many GPUs, but they would finish at {_seconds(other.finish_s)} "
        f"instead of {_seconds(chosen.finish_s)}."
    )


def _seconds(value: float) -> str:
    if not math.isfinite(value):
        return "never"
    return f"{value:,.1f} s" if value >= 1 else f"{value * 1000:.0f} ms"
