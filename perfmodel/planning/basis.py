"""What a plan's numbers rest on, per hardware type: where they come from, what was not measured, how far
a predictor was trusted, and the spreads behind the makespan's distribution. perfmodel.planning.batch fills
a Basis while it gathers candidates; the plan carries `Basis.to_dict(plan)` in its JSON and `notes(plan)` in its output.
"""

from __future__ import annotations

import math
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


def transferred_lines(basis_dict: dict) -> list[str]:
    """The first lines of a plan on numbers transferred to a GPU nobody profiled: which types, and that the
    deadline probability counts the transfer's error."""
    types = [name for name, t in basis_dict.get("data_by_type", {}).items() if t.get("transferred")]
    if not types:
        return []
    them = "it" if len(types) == 1 else "them"
    return [
        f"TRANSFERRED: the numbers for {', '.join(types)} were never measured on {them}; "
        "they are other GPUs' curves carried through the GPU specifications, and the deadline probability counts "
        "the transfer's held-out error (below). Profile one before promising this deadline."
    ]


def notes(basis_dict: dict) -> list[str]:
    """Lines for the readable output: per type used, where its numbers come from and what they lack."""
    lines = []
    for name, t in basis_dict.get("data_by_type", {}).items():
        for option, sources in t["numbers_from"].items():
            line = f"{name} {option}: {t['kinds'][option]} numbers from {'; '.join(sources)}"
            added = ((t.get("fixed_costs") or {}).get("first_call_added_s") or {}).get(option)
            if not t["warmup_measured"]:
                line += "; no warm-up measured: the first batch is timed as a steady one"
                if added:
                    line += f" plus a first call of {added:.3g} s (above)"
            lines.append(line + ".")
        lines += list(t["transferred"].values())
        if "workers_when_measured" in t:
            w = t["workers_when_measured"]
            lines.append(
                f"{name}: {w['planned']} workers planned from times measured with {w['measured_with']} running; "
                f"workers on one machine slow each other: profile with --alongside {w['planned'] - 1} to "
                "time them as they will run."
            )
        for b in t.get("loosely_measured", []):
            if b.get("counted"):
                lines.append(
                    f"{name} {b['option']} at {b['input_size']} px: the profile knows batch {b['batch_size']}'s "
                    f"median time within +-{b['median_ci_rel']:.0%} only (95% interval); the deadline probability "
                    "counts it: profile again with a longer --max-time-per-point to narrow it."
                )
                continue
            lines.append(
                f"{name} {b['option']} at {b['input_size']} px: the profile knows batch {b['batch_size']}'s median "
                f"time within +-{b['median_ci_rel']:.0%} only (95% interval), wider than the {b['margin']:.0%} "
                f"margin: profile it again with a longer --max-time-per-point, or plan with --margin "
                f"{math.ceil(b['median_ci_rel'] * 100)}%."
            )
        for b in t["beyond_measured"]:
            lines.append(
                f"{name} {b['option']} at {b['input_size']} px: batch {b['batch_size']} lies beyond the largest "
                f"measured ({b['largest_measured']:g}); its time is extrapolated."
            )
    extrapolation = basis_dict.get("extrapolation", {})
    if extrapolation.get("allowed"):
        lines.append(
            "--extrapolate: predictors were used past 2x the largest batch measured, where their error was "
            "never measured."
        )
    return lines
