"""What a plan's numbers rest on, per hardware type: where they come from, what was not measured, how far
a predictor was trusted, and the spreads behind the makespan's distribution. perfmodel.planning.batch fills
a Basis while it gathers candidates; the plan carries `Basis.to_dict(plan)` in its JSON, which batch_text.notes
says for people.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from perfmodel.fixed_costs import FixedCost, is_cpu
from perfmodel.planning.drift import Drift

EXTRAPOLATION_FACTOR = 2.0  # a predictor's batch sizes go up to this x the largest measured, unless --extrapolate
SPREAD_NOTED = 0.05  # a planned batch whose profiled median is known less well than this (and than the margin) is noted


@dataclass
class TypeBasis:
    """One hardware type: its sources and what they lack."""

    sources: dict[str, dict[str, None]] = field(default_factory=dict)  # option -> an ordered set of sources
    kinds: dict[str, str] = field(default_factory=dict)  # option -> measured, published, predicted, transferred
    warmup_measured: bool = True
    warmup_filled: Counter = field(default_factory=Counter)  # option -> profile points whose warm-up was interpolated
    warmup_unmeasured: Counter = field(default_factory=Counter)  # option -> points planned with latency as warm-up
    # (option, size, batch) -> first-call excess carried past the largest batch with a fresh warm-up (s)
    warmup_carried: dict[tuple[str, int, int], float] = field(default_factory=dict)
    no_warmup_model: dict[str, str] = field(default_factory=dict)  # predicted option -> its group, if no warm-up model
    transferred: dict[str, str] = field(default_factory=dict)  # option -> what it was transferred from
    measured: dict[tuple[str, int], float] = field(default_factory=dict)  # (option, size) -> largest batch measured
    measured_workers: dict[str, int] = field(default_factory=dict)  # CPU option -> workers running when measured
    median_ci: dict[tuple[str, int, int], float] = field(default_factory=dict)  # (option, size, batch) -> ci_rel
    # What the makespan's distribution needs (planning/spread.py):
    moments: dict[tuple[str, int, int], tuple[float, float]] = field(default_factory=dict)  # -> batch mean, sd (s)
    errors: dict[tuple[str, str], tuple[float, ...]] = field(default_factory=dict)  # (option, region) -> rel errors
    drift: Drift | None = None  # measured by the profile's probe; None: the default for the hardware
    load: FixedCost | None = None  # the load, as measured or stated (fixed_costs.py)
    first_call: dict[str, FixedCost] = field(default_factory=dict)  # option -> its first call's excess


@dataclass
class Basis:
    types: dict[str, TypeBasis] = field(default_factory=dict)
    extrapolate: bool = False
    probability: bool = True  # the plan is made for a deadline probability (False: a fixed margin or p99)

    def of(self, hardware: str) -> TypeBasis:
        return self.types.setdefault(hardware, TypeBasis())

    def cite(self, hardware: str, option: str, source: str, kind: str) -> None:
        t = self.of(hardware)
        t.sources.setdefault(option, {})[source] = None
        t.kinds[option] = kind

    def to_dict(self, plan) -> dict:
        """The plan JSON's keys about its data (for the types the plan uses)."""
        used = set(plan.gpus_by_type)
        types = {name: self._type_dict(name, t, plan) for name, t in self.types.items() if name in used}
        out = {
            "warmup_measured": all(t["warmup_measured"] for t in types.values()),
            "data_by_type": types,
            "extrapolation": {
                "allowed": self.extrapolate,
                "limit": None
                if self.extrapolate
                else f"{EXTRAPOLATION_FACTOR:g}x the largest batch measured at each input size (predictors)",
            },
        }
        return out

    def _type_dict(self, name: str, t: TypeBasis, plan) -> dict:
        beyond, loose, options = [], [], []
        for a in plan.assignments:
            if a.hardware != name:
                continue
            options.append(a.label)
            largest = t.measured.get((a.label, a.input_size))
            if largest is not None and a.batch_size > largest:
                beyond.append(
                    {
                        "option": a.label,
                        "input_size": a.input_size,
                        "batch_size": a.batch_size,
                        "largest_measured": largest,
                    }
                )
            ci = t.median_ci.get((a.label, a.input_size, a.batch_size))
            if ci is not None and ci > (SPREAD_NOTED if self.probability else max(SPREAD_NOTED, plan.margin)):
                loose.append(
                    {
                        "option": a.label,
                        "input_size": a.input_size,
                        "batch_size": a.batch_size,
                        "median_ci_rel": ci,
                        "margin": plan.margin,
                        "counted": self.probability,
                    }
                )
        options = list(dict.fromkeys(options))
        fixed = [a.load_s + a.warmup_s for a in plan.assignments if a.hardware == name and a.count]
        out = {
            "numbers_from": {o: list(t.sources.get(o, {})) for o in options},
            "kinds": {o: t.kinds.get(o) for o in options},
            "warmup_measured": t.warmup_measured,
            "transferred": {o: t.transferred[o] for o in options if o in t.transferred},
            "beyond_measured": beyond,
            "loosely_measured": loose,
        }
        if t.load is not None:
            first = {o: t.first_call[o] for o in options if o in t.first_call}
            out["fixed_costs"] = {
                "load": t.load.to_dict(),
                "first_call_excess": {o: cost.to_dict() for o, cost in first.items()},
                # on a GPU, added to the first batch of an option whose warm-up nobody measured
                "first_call_added_s": {
                    o: cost.median_s for o, cost in first.items() if not cost.per_batch and not is_cpu(name)
                },
                # the largest load + first batch of the type's workers, and its share of the deadline
                "load_and_first_call_s": max(fixed, default=0.0),
                "share_of_deadline": max(fixed, default=0.0) / plan.deadline_s,
            }
        measured_with = min((t.measured_workers[o] for o in options if o in t.measured_workers), default=None)
        if measured_with is not None and plan.gpus_by_type[name] > measured_with:
            out["workers_when_measured"] = {"planned": plan.gpus_by_type[name], "measured_with": measured_with}
        return out
