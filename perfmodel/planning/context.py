"""What a plan was made of, so that it can be run and checked: the model, the option and precision of
each candidate, the input sizes, the files it was planned from (with their sha256), the margin, p50 or
p99, and where the load time came from.

solvers/ knows nothing of models or files: this context lives beside its Plan, and PlannedJob.to_dict
merges both into the plan JSON that `perfmodel run` and `perfmodel report --plan` read (batch_text.describe
says it for people).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import solvers
from perfmodel.planning.choice import OptionChoice
from perfmodel.planning.makespan import DeadlineProbability

PLAN_FORMAT = "perfmodel-plan"  # written here, checked by the one reader of plan files (run/plan_fields.py)
PLAN_SCHEMA_VERSION = 1
GIVEN_LOAD = "--load-time"  # the plan JSON's load source where the caller gave `load_time` (its name there)
TORCHSCRIPT_SUFFIXES = (".pt", ".pth", ".ts", ".jit")
_SERVING_FIELDS = ("protocol", "mode", "concurrency")  # recorded for served (Triton) profiles


@dataclass(frozen=True)
class Option:
    """One candidate's backend and precision, plus the serving mode where the profile records one."""

    backend: str
    precision: str
    protocol: str | None = None
    mode: str | None = None
    concurrency: int | None = None

    def to_dict(self) -> dict:
        extra = {k: getattr(self, k) for k in _SERVING_FIELDS if getattr(self, k) is not None}
        return {"backend": self.backend, "precision": self.precision, **extra}


@dataclass(frozen=True)
class Source:
    """A file the plan was made from. path and sha256 are None for an object given in Python."""

    kind: str  # "profile" or "predictor"
    path: str | None
    sha256: str | None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "path": self.path, "sha256": self.sha256}


@dataclass(frozen=True)
class LoadTime:
    """The model load time per GPU that the plan assumed, and where it came from."""

    seconds: float
    source: str  # GIVEN_LOAD, "profile load_ms", "predictor load_ms", "default" or "none"

    def to_dict(self) -> dict:
        return {"s": self.seconds, "source": self.source}


@dataclass(frozen=True)
class PlanContext:
    model: str
    model_path: str | None  # a TorchScript file, when the plan was asked for one
    input_sizes: tuple[int, ...]
    use: str  # "p50" or "p99"
    margin: float
    sources: tuple[Source, ...]
    load_times: dict[str, LoadTime]  # per hardware type
    options: dict[tuple[str, str], Option]  # (hardware, candidate label) -> what it stands for
    decode_s: float = 0.0  # decoding time per image added to every batch (--decode-time)

    def to_dict(self) -> dict:
        return {
            "format": PLAN_FORMAT,
            "schema_version": PLAN_SCHEMA_VERSION,
            "model": {"name": self.model, "path": self.model_path},
            "input_sizes": list(self.input_sizes),
            "use": self.use,
            "margin": self.margin,
            "load_time": {name: t.to_dict() for name, t in self.load_times.items()},
            "decode_s_per_image": self.decode_s,
            "sources": [s.to_dict() for s in self.sources],
        }

    def option(self, hardware: str, label: str) -> dict:
        found = self.options.get((hardware, label))
        return found.to_dict() if found is not None else {}


@dataclass(frozen=True)
class PlanAnnotations:
    """What make_plan says about its plan beyond the solver's answer, as values; to_dict gives the plan JSON's
    keys, at the JSON edge."""

    basis: Mapping[str, Any]  # where the numbers come from and what they lack: Basis.to_dict, read as in a file
    deadline: DeadlineProbability  # how surely the plan finishes by its deadline
    option_choice: tuple[OptionChoice, ...]  # why each type serves with its option

    def to_dict(self) -> dict:
        return {
            **self.basis,
            **self.deadline.to_dict(),
            "option_choice": [choice.to_dict() for choice in self.option_choice],
        }


@dataclass(frozen=True)
class PlannedJob:
    """A plan (solvers.Plan) with the context it was made in and what make_plan says about it. Attributes of
    the plan read through: `job.makespan_s` is `job.plan.makespan_s`."""

    plan: solvers.Plan
    context: PlanContext
    annotations: PlanAnnotations

    def __getattr__(self, name: str):
        if name in ("plan", "context", "annotations") or name.startswith("__"):  # not set yet (copy, unpickling)
            raise AttributeError(name)
        return getattr(self.plan, name)

    def to_dict(self, per_gpu_limit: int = solvers.batch_solution.PER_GPU_LIMIT) -> dict:
        """The plan JSON: the context's keys first, then the plan's, then the annotations'; each assignment and
        GPU names its backend and precision beside its option label."""
        data = self.plan.to_dict(per_gpu_limit)
        for row in data["assignments"] + (data["gpus"] or []):
            row.update(self.context.option(row["hardware"], row["option"]))
        return {**self.context.to_dict(), **data, **self.annotations.to_dict()}


def option_of(item) -> Option:
    """The Option of a profile row (a namedtuple) or a predictor group: anything with backend and precision."""
    serving = {}
    for name in _SERVING_FIELDS:
        value = getattr(item, name, None)
        if value is not None and str(value) not in ("", "nan", "<NA>"):
            serving[name] = int(float(value)) if name == "concurrency" else str(value)
    return Option(str(item.backend), str(item.precision), **serving)


def model_argument(model: str | None) -> tuple[str | None, str | None]:
    """--model as (name, TorchScript path): a file path plans for the model named by its stem."""
    if model is not None and (os.sep in model or model.endswith(TORCHSCRIPT_SUFFIXES)):
        return os.path.splitext(os.path.basename(model))[0], os.path.abspath(model)
    return model, None


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_context(
    model: str,
    model_path: str | None,
    input_sizes,
    use: str,
    margin: float,
    profiles,
    predictors,
    options: dict,
    basis,
    decode_s: float = 0.0,
) -> PlanContext:
    """The context of a plan made by make_plan. `options` maps each hardware type to what _gather found, the
    Option of each candidate label (details); `basis` holds each type's load (planning/basis.py)."""
    sources = [_source("profile", p) for p in profiles if _profile_has(p, model)]
    sources += [_source("predictor", p) for p in predictors]
    load_times = {name: _load_time(basis.of(name).load) for name in options}
    details = {(name, label): option for name, o in options.items() for label, option in o.details.items()}
    return PlanContext(
        model,
        model_path,
        tuple(int(s) for s in input_sizes),
        use,
        float(margin),
        tuple(sources),
        load_times,
        details,
        decode_s,
    )


def _load_time(load) -> LoadTime:
    """The load the solver planned with (the median of the processes measured, the one given, or a default)."""
    if load.own.source == GIVEN_LOAD:
        return LoadTime(load.median_s, GIVEN_LOAD)
    if load.guessed:
        return LoadTime(load.median_s, "none" if load.default is None else "default")
    kinds = sorted({part.split(" ", 1)[0] for part in load.own.source.split("; ")})
    return LoadTime(load.median_s, " and ".join(f"{kind} load_ms" for kind in kinds))


def _profile_has(path, model: str) -> bool:
    """Whether a profile file holds rows of `model` (the shipped folder holds several models)."""
    import pandas as pd

    try:
        return model in set(pd.read_csv(path, usecols=["model"], dtype=str, index_col=False)["model"])
    except (OSError, ValueError):
        return True  # it was read once already; keep it listed rather than hide a source


def _source(kind: str, item) -> Source:
    if isinstance(item, (str, os.PathLike)):
        path = os.fspath(item)
        return Source(kind, path, sha256_of(path))
    return Source(kind, None, None)  # a Predictor object given in Python
