"""What the solver answers: a Plan (groups of identical GPUs and totals), or a Diagnosis of why there is none."""

from __future__ import annotations

from dataclasses import dataclass, field

# Above this many GPUs, Plan.to_dict lists groups only (each with its count), not every GPU.
PER_GPU_LIMIT = 1000
# `perfmodel run` fills a GPU's batch up to its planned size, the shape that was timed. A batch more than this
# many times the GPU's images is nearly all padding: in a hand-edited plan, work (and memory) nobody timed
# (65,536 for 100 images took 3 GB), which run refuses. The solver picks such a batch only where it finishes
# those images first (a profile measured at batches 512 and 1024 only, for 3 images; a large batch a shade
# faster than every small one), timed at the full batch, so the plan is honest; it marks the row
# ("fill_planned") and run runs it. A mark rather than a looser rule: run cannot tell a plan's choice from an
# edit (it has not the profile), and a rule any plan passes would pass the edit too.
MAX_FILL = 64


@dataclass(frozen=True)
class Assignment:
    """A group of `count` identical GPUs: same type, input size, batch size and images per GPU.

    Each GPU loads the model (load_s), runs its first batch (warmup_s, in place of its latency), then
    batches - 1 more (latency_s each). The last batch holds last_batch <= batch_size images.
    """

    hardware: str
    input_size: int
    batch_size: int
    count: int
    batches: int
    images: int  # per GPU
    last_batch: int
    load_s: float
    warmup_s: float
    latency_s: float
    finish_s: float  # per GPU, from the start: load_s + warmup_s + (batches - 1) * latency_s
    label: str = ""  # which candidate, e.g. "torch fp16"

    @property
    def images_total(self) -> int:
        return self.count * self.images

    def to_dict(self) -> dict:
        row = {
            "hardware": self.hardware,
            "input_size": self.input_size,
            "option": self.label,
            "batch_size": self.batch_size,
            "count": self.count,
            "batches": self.batches,
            "images": self.images,
            "images_total": self.images_total,
            "last_batch": self.last_batch,
            "load_s": self.load_s,
            "warmup_s": self.warmup_s,
            "latency_s": self.latency_s,
            "finish_s": self.finish_s,
        }
        if self.batch_size > MAX_FILL * self.images:
            row["fill_planned"] = True
        return row


@dataclass(frozen=True)
class Plan:
    """A plan that meets the deadline. `status` is 'optimal' when HiGHS proved it (gap 0), else 'feasible'.

    objective_value: GPUs used ('gpus'), cost ('cost'), or images done (relaxed mode). cost assumes
    every GPU used is paid for the whole deadline window (reserved), not only while busy.
    build_time_s is Pyomo building the models, solver_time_s HiGHS's own run time, solve_time_s the
    whole solve() call (capacity tables, every model, assignment and re-check).
    """

    mode: str
    objective: str
    status: str
    gap: float
    deadline_s: float
    margin: float
    usable_s: float
    images_requested: dict[int, int | None]
    images_planned: dict[int, int]
    assignments: tuple[Assignment, ...]
    gpus_by_type: dict[str, int]
    makespan_s: float
    objective_value: float
    cost: float | None
    build_time_s: float
    solver_time_s: float
    solve_time_s: float
    # Extra top-level JSON keys from the caller (perfmodel: where the numbers come from); not used here.
    annotations: dict = field(default_factory=dict)

    @property
    def total_gpus(self) -> int:
        return sum(a.count for a in self.assignments)

    @property
    def total_images(self) -> int:
        return sum(self.images_planned.values())

    def per_gpu(self) -> list[dict]:
        """One entry per GPU, numbered within its type (`gpu`)."""
        rows, seen = [], {}
        for a in self.assignments:
            for _ in range(a.count):
                index = seen.get(a.hardware, 0)
                seen[a.hardware] = index + 1
                row = a.to_dict()
                del row["count"], row["images_total"]
                rows.append({"gpu": index, **row})
        return rows

    def to_dict(self, per_gpu_limit: int = PER_GPU_LIMIT) -> dict:
        requested = [v for v in self.images_requested.values()]
        return {
            "status": self.status,
            "mode": self.mode,
            "objective": self.objective,
            "objective_value": self.objective_value,
            "gap": self.gap,
            "images": None if None in requested else sum(requested),
            "images_by_size": {str(k): v for k, v in self.images_requested.items()},
            "images_planned": self.total_images,
            "images_planned_by_size": {str(k): v for k, v in self.images_planned.items()},
            "deadline_s": self.deadline_s,
            "margin": self.margin,
            "usable_s": self.usable_s,
            "makespan_s": self.makespan_s,
            "total_gpus": self.total_gpus,
            "gpus_by_type": dict(self.gpus_by_type),
            "cost": self.cost,
            "cost_billing": "each GPU used is paid for the whole deadline window",
            "build_time_s": self.build_time_s,
            "solver_time_s": self.solver_time_s,
            "solve_time_s": self.solve_time_s,
            "assignments": [a.to_dict() for a in self.assignments],
            "gpus": self.per_gpu() if self.total_gpus <= per_gpu_limit else None,
            **self.annotations,
        }


@dataclass(frozen=True)
class Diagnosis:
    """Why no plan meets the deadline, and what would make one.

    max_images: the most images the pool finishes by the deadline (a plan does that many; the true
    most is at most max_images_gap higher, relatively). extra_gpus: per GPU type with a count, how
    many more of that type alone (the others as given) make the problem feasible; None where no
    number of that type does. min_deadline_s: the shortest
    deadline (before the margin is taken off) that the pool as given meets; None if none does.
    """

    reason: str
    deadline_s: float
    usable_s: float
    images: int | None
    unservable: tuple[int, ...]
    fastest_first_batch_s: dict[int, float | None]
    max_images: int | None
    max_images_gap: float  # max_images is within this relative gap of the true most (0: exact)
    max_images_by_size: dict[int, int]
    extra_gpus: dict[str, int | None]
    min_deadline_s: float | None
    exact: bool = True  # False: a time limit stopped some hint early; each is still enough, maybe not the least

    def to_dict(self) -> dict:
        return {
            "status": "infeasible",
            "reason": self.reason,
            "deadline_s": self.deadline_s,
            "usable_s": self.usable_s,
            "images": self.images,
            "unservable_sizes": list(self.unservable),
            "fastest_first_batch_s": {str(k): v for k, v in self.fastest_first_batch_s.items()},
            "max_images": self.max_images,
            "max_images_gap": self.max_images_gap,
            "max_images_by_size": {str(k): v for k, v in self.max_images_by_size.items()},
            "extra_gpus": dict(self.extra_gpus),
            "min_deadline_s": self.min_deadline_s,
            "exact": self.exact,
        }
