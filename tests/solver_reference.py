"""An independent reference for the solver tests: exact arithmetic, no code shared with solvers/.

Instances are given in whole milliseconds (`Instance`), so every time is an exact Fraction here and
the solver's floating-point tolerance is put to the test on the boundary cases (W + t*L == T).

- exhaustive(): every choice of (input size, batch size, number of batches) for every single GPU,
  searched by dynamic programming over the images covered so far (capped at the images asked).
- evaluate(): checks a returned plan against the instance, GPU by GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

from solvers import Candidates, GpuType, Problem


@dataclass(frozen=True)
class Column:
    batch: int
    latency_ms: int
    warmup_ms: int


@dataclass(frozen=True)
class Kind:
    name: str
    count: int
    columns: dict  # input size -> tuple[Column, ...]
    load_ms: int = 0
    price: int | None = None
    max_batches: int | None = None


@dataclass(frozen=True)
class Instance:
    kinds: tuple[Kind, ...]
    images: dict  # input size -> count (None: as many as possible)
    deadline_ms: int
    mode: str = "soft"
    objective: str = "gpus"
    margin_pct: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def usable(self) -> Fraction:
        return Fraction(self.deadline_ms, 1000) * (1 - Fraction(self.margin_pct, 100))

    def problem(self, **changes) -> Problem:
        types = [
            GpuType(
                k.name,
                k.count,
                [
                    Candidates(
                        size,
                        [c.batch for c in cols],
                        [c.latency_ms / 1000 for c in cols],
                        [c.warmup_ms / 1000 for c in cols],
                    )
                    for size, cols in k.columns.items()
                ],
                cost_per_hour=k.price,
                load_s=k.load_ms / 1000,
                max_batches=k.max_batches,
            )
            for k in self.kinds
        ]
        args = dict(
            gpu_types=types,
            images=dict(self.images),
            deadline_s=self.deadline_ms / 1000,
            mode=self.mode,
            objective=self.objective,
            margin=self.margin_pct / 100,
            mip_rel_gap=0.0,
            **self.extra,
        )
        args.update(changes)
        return Problem(**args)


def finish(kind: Kind, column: Column, batches: int) -> Fraction:
    return Fraction(kind.load_ms + column.warmup_ms + (batches - 1) * column.latency_ms, 1000)


def gpu_options(kind: Kind, sizes, caps, usable: Fraction) -> set:
    """Every (size index, images) one GPU of this kind can contribute by `usable` (images capped)."""
    options = set()
    for s, size in enumerate(sizes):
        for column in kind.columns.get(size, ()):
            batches = 1
            while finish(kind, column, batches) <= usable and (kind.max_batches is None or batches <= kind.max_batches):
                options.add((s, min(batches * column.batch, caps[s])))
                if batches * column.batch >= caps[s]:
                    break
                batches += 1
    return options


def exhaustive(inst: Instance, usable: Fraction | None = None, counts: dict | None = None) -> dict:
    """The minimum weight (GPUs, or price sum) to reach every coverage state; {state: weight}.

    A state is the images covered per input size, capped at the images asked; a partial last batch
    means any coverage >= the images asked is enough.
    """
    usable = inst.usable if usable is None else usable
    sizes = sorted(inst.images)
    caps = [inst.images[s] if inst.images[s] is not None else _most(inst, s, usable, counts) for s in sizes]
    best = {tuple(0 for _ in sizes): 0}
    for kind in inst.kinds:
        options = gpu_options(kind, sizes, caps, usable)
        weight = 1 if inst.objective == "gpus" else kind.price
        for _ in range((counts or {}).get(kind.name, kind.count)):
            nxt = dict(best)
            for state, w in best.items():
                for s, images in options:
                    new = list(state)
                    new[s] = min(caps[s], new[s] + images)
                    new = tuple(new)
                    if w + weight < nxt.get(new, math.inf):
                        nxt[new] = w + weight
            best = nxt
    return best


def _most(inst, size, usable, counts) -> int:
    """A cap for 'as many as possible': all GPUs on this size, each doing its most."""
    total = 0
    for kind in inst.kinds:
        per = [
            c.batch * b
            for c in kind.columns.get(size, ())
            for b in range(1, 10_000)
            if finish(kind, c, b) <= usable and (kind.max_batches is None or b <= kind.max_batches)
        ]
        total += (counts or {}).get(kind.name, kind.count) * max(per, default=0)
    return total


def soft_optimum(inst: Instance, usable=None, counts=None) -> int | None:
    """Least weight covering every image, or None when no choice of GPUs does."""
    full = tuple(inst.images[s] for s in sorted(inst.images))
    return exhaustive(inst, usable, counts).get(full)


def relaxed_optimum(inst: Instance, usable=None) -> tuple[int, int]:
    """(most images, least weight doing that many)."""
    best = exhaustive(inst, usable)
    most = max(sum(state) for state in best)
    return most, min(w for state, w in best.items() if sum(state) == most)


def finish_values(inst: Instance, horizon: Fraction) -> list[Fraction]:
    """Every time at which some GPU could finish a batch, up to `horizon`."""
    values = set()
    for kind in inst.kinds:
        for cols in kind.columns.values():
            for c in cols:
                b = 1
                while finish(kind, c, b) <= horizon and (kind.max_batches is None or b <= kind.max_batches):
                    values.add(finish(kind, c, b))
                    b += 1
    return sorted(values)


def evaluate(plan, inst: Instance) -> None:
    """Assert that `plan` is feasible for `inst`, GPU by GPU, in exact arithmetic."""
    kinds = {k.name: k for k in inst.kinds}
    used: dict[str, int] = {}
    done = {s: 0 for s in inst.images}
    latest = Fraction(0)
    for a in plan.assignments:
        kind = kinds[a.hardware]
        assert a.count >= 1
        used[a.hardware] = used.get(a.hardware, 0) + a.count
        matches = [
            c
            for c in kind.columns[a.input_size]
            if c.batch == a.batch_size and c.latency_ms / 1000 == a.latency_s and c.warmup_ms / 1000 == a.warmup_s
        ]
        assert matches, f"{a} is not a candidate of {kind.name}"
        column = matches[0]
        assert 1 <= a.batches and (kind.max_batches is None or a.batches <= kind.max_batches), a
        assert (a.batches - 1) * a.batch_size < a.images <= a.batches * a.batch_size, a
        assert a.last_batch == a.images - (a.batches - 1) * a.batch_size
        end = finish(kind, column, a.batches)
        assert end <= inst.usable, f"{a} ends at {float(end)} s, after {float(inst.usable)} s"
        assert math.isclose(a.finish_s, float(end), rel_tol=1e-9, abs_tol=1e-12)
        latest = max(latest, end)
        done[a.input_size] += a.count * a.images
    for name, n in used.items():
        assert n <= kinds[name].count, f"{n} x {name} used, {kinds[name].count} exist"
    assert plan.gpus_by_type == {k: v for k, v in used.items()}
    assert plan.total_gpus == sum(used.values())
    for size, wanted in inst.images.items():
        assert plan.images_planned[size] == done[size]
        if wanted is not None:
            assert done[size] <= wanted
            if inst.mode == "soft":
                assert done[size] == wanted
    assert math.isclose(plan.makespan_s, float(latest), rel_tol=1e-9, abs_tol=1e-12)


def feasible_with_unlimited(inst: Instance, name: str) -> bool:
    """Whether any number of GPUs of kind `name` (the others as given) covers every image."""
    sizes = sorted(inst.images)
    caps = [inst.images[s] for s in sizes]
    kind = next(k for k in inst.kinds if k.name == name)
    states = set(exhaustive(inst, counts={name: 0}))
    options = gpu_options(kind, sizes, caps, inst.usable)
    frontier = list(states)
    while frontier:  # closure: add one more GPU of this kind to every state until nothing new
        state = frontier.pop()
        for s, images in options:
            new = list(state)
            new[s] = min(caps[s], new[s] + images)
            new = tuple(new)
            if new not in states:
                states.add(new)
                frontier.append(new)
    return tuple(caps) in states


def first_true(values: list, predicate):
    """The first value for which a monotone predicate holds (bisection), or None."""
    lo, hi = 0, len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if predicate(values[mid]) else (mid + 1, hi)
    return values[lo] if lo < len(values) else None
