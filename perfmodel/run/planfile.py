"""A plan typed for running: one WorkerPlan per planned GPU.

The file is read, and every field's value (the plan's, each assignment's, each per-GPU row's) checked, by
the one plan reader beside this module, plan_fields.py (report reads plans with it too); this module adds
what running needs on top: the fields it cannot run without, a model, and a backend and precision that
in-process PyTorch runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from perfmodel.errors import InputError
from perfmodel.planning.drift import Drift
from perfmodel.readers import is_number
from perfmodel.run.plan_fields import PLAN_HOW, PlanFile, read_plan
from perfmodel.torch_runner import BACKENDS as TORCH_BACKENDS
from perfmodel.torch_runner import PRECISIONS as TORCH_PRECISIONS

REMAKE = "make it again with `perfmodel plan ... --json` (this perfmodel records what running it needs)"
# One Ray actor per planned GPU. Ray's published scalability envelope is 20k+ actors in a cluster
# (ray-project/ray, release/benchmarks/README.md); a plan of 10^12 GPUs made this reader build a row for each.
MAX_WORKERS = 100_000


@dataclass(frozen=True)
class WorkerPlan:
    """One planned GPU (or CPU worker): its share of the work and the times the plan predicts for it."""

    index: int  # position in the plan, 0..n-1
    name: str  # "cpu#0", "h100#3": the type and its number within the type
    hardware: str
    input_size: int
    batch_size: int
    batches: int
    images: int
    backend: str
    precision: str
    load_s: float
    warmup_s: float
    latency_s: float
    finish_s: float
    fill_planned: bool = False  # a batch far above its images that the plan chose (solvers.batch_solution.MAX_FILL)

    def predicted_end(self, batches_done: int) -> float:
        """When the plan expects this worker's `batches_done`-th batch to end (s from the start)."""
        if batches_done <= 0:
            return self.load_s
        return self.load_s + self.warmup_s + (batches_done - 1) * self.latency_s


@dataclass(frozen=True)
class RunPlan:
    path: str
    sha256: str
    model: str
    model_path: str | None
    deadline_s: float
    margin: float
    makespan_s: float
    images_by_size: dict[int, int]
    workers: tuple[WorkerPlan, ...]
    deadline_probability: float | None = None  # what the plan stated (plans before it: None)
    confidence: float | None = None  # the probability it was made for (None: a fixed rule, or an older plan)
    drifts: dict[str, Drift] = field(default_factory=dict)  # hardware -> the drift the plan assumed, where measured

    @property
    def hardware_types(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for w in self.workers:
            counts[w.hardware] = counts.get(w.hardware, 0) + 1
        return counts

    @property
    def images(self) -> int:
        return sum(w.images for w in self.workers)


def read_run_plan(path) -> RunPlan:
    """Read and check a plan; InputError with one sentence for anything that cannot be run."""
    online = (
        "it sizes a server for a request rate, there is no set of images to run; deploy it with "
        "`perfmodel plan --mode online --triton-config`, or run a batch plan"
    )
    return runnable(read_plan(path, online))


def runnable(plan: PlanFile) -> RunPlan:
    """The plan read as what running it needs; InputError with one sentence for anything that cannot be run."""
    data, source = plan.data, plan.path
    if data["status"] == "infeasible":
        reason = data.get("reason") if isinstance(data.get("reason"), str) else "no plan met the deadline"
        raise InputError(
            f"{source} is an infeasible plan ({reason}): there is nothing to run; make a plan that "
            "meets the deadline first."
        )
    missing = [key for key in ("format", "schema_version") if key not in data]
    if missing:  # both came with "model" (perfmodel 0.2.0): a plan without them is edited, or too old to run
        raise InputError(f"{source} does not say its {' and '.join(missing)}; {REMAKE}.")
    model = data.get("model")
    if not isinstance(model, dict) or not isinstance(model.get("name"), str) or not model["name"]:
        raise InputError(f"{source} does not name its model; {REMAKE}.")
    model_path = model.get("path")
    if model_path is not None and not isinstance(model_path, str):
        raise InputError(f'{source}: "model"."path" is not a file name; {REMAKE}.')
    _require(data, ("deadline_s", "margin", "makespan_s"), source)
    # What the plan says of its odds: the probability it stated, the one it was made for, the drifts it assumed.
    probability, asked, drifts = _probability(data), _asked(data), _drifts(data)
    workers = tuple(_workers(data, source))
    if not workers:
        raise InputError(f"{source} assigns no GPU, so there is nothing to run.")
    by_size: dict[int, int] = {}
    for w in workers:
        by_size[w.input_size] = by_size.get(w.input_size, 0) + w.images
    return RunPlan(
        source,
        plan.sha256,
        model["name"],
        model_path,
        float(data["deadline_s"]),
        float(data["margin"]),
        float(data["makespan_s"]),
        by_size,
        workers,
        probability,
        asked,
        drifts,
    )


def _probability(data: dict) -> float | None:
    p = data.get("deadline_probability")  # a probability from 0 to 1 where given (checked by read_plan)
    return None if p is None else float(p)


def _asked(data: dict) -> float | None:
    asked = data.get("confidence")
    asked = asked.get("asked") if isinstance(asked, dict) else None
    return float(asked) if is_number(asked) and 0.5 <= asked < 1 else None


def _drifts(data: dict) -> dict[str, Drift]:
    """The machine drift the plan assumed, per hardware type (only what it names well; else the default)."""
    found = ((data.get("makespan_model") or {}) if isinstance(data.get("makespan_model"), dict) else {}).get("drift")
    out = {}
    for name, d in (found or {}).items() if isinstance(found, dict) else ():
        if not (isinstance(name, str) and name.startswith("drift ") and isinstance(d, dict)):
            continue
        rel_sd, corr_s = d.get("rel_sd"), d.get("corr_s")
        if all(is_number(x) and 0 <= x < 1e6 for x in (rel_sd, corr_s)) and corr_s > 0:
            out[name[len("drift ") :]] = Drift(float(rel_sd), float(corr_s), str(d.get("source", "the plan")))
    return out


def _workers(data: dict, source: str):
    rows = data.get("gpus")
    if not isinstance(rows, list):  # a plan too large to list every GPU lists groups with their count
        groups = data.get("assignments")
        if not isinstance(groups, list):
            raise InputError(f'{source} is not a plan (no "assignments" list); {PLAN_HOW}.')
        for i, g in enumerate(groups):
            _require(g, ("count",), f"{source}, assignment {i + 1}")
        total = sum(g["count"] for g in groups)
        if total > MAX_WORKERS:
            raise InputError(
                f"{source} plans {total:,} GPUs, one Ray actor each, more than the {MAX_WORKERS:,} perfmodel run "
                "starts: split the job into plans of fewer images."
            )
        rows = [g for g in groups for _ in range(g["count"])]
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        where = f"{source}, GPU {index + 1}"
        _require(row, _ROW_FIELDS, where)
        _check_backend(row["backend"], row["hardware"], where)
        if row["precision"] not in TORCH_PRECISIONS:
            raise InputError(
                f"{where} ({row['hardware']}) uses precision {row['precision']}, but perfmodel run executes "
                f"PyTorch in {', '.join(TORCH_PRECISIONS)} only: re-plan with `precision` fp16 (or another of them)."
            )
        hardware = row["hardware"]
        number = seen[hardware] = seen.get(hardware, -1) + 1
        values = {key: float(row[key]) if key.endswith("_s") else row[key] for key in _ROW_FIELDS}
        yield WorkerPlan(
            index=index, name=f"{hardware}#{number}", fill_planned=row.get("fill_planned") is True, **values
        )


# What running a GPU's share needs of its row; read_plan has checked the value of each one present.
_ROW_FIELDS = (
    "hardware",
    "input_size",
    "batch_size",
    "batches",
    "images",
    "backend",
    "precision",
    "load_s",
    "warmup_s",
    "latency_s",
    "finish_s",
)


def _require(row: dict, keys, where: str) -> None:
    missing = next((key for key in keys if row.get(key) is None), None)
    if missing is not None:
        raise InputError(f'{where} does not say its "{missing}"; {REMAKE}.')


def _check_backend(backend: str, hardware: str, where: str) -> None:
    """Every backend the in-process PyTorch profiler writes runs (torch_runner.BACKENDS); others do not."""
    if backend not in TORCH_BACKENDS:
        raise InputError(
            f"{where} ({hardware}) uses backend {backend!r}, but perfmodel run executes in-process "
            "PyTorch only (the backends `perfmodel profile --backend torch` measures): re-plan with `backend` torch."
        )
