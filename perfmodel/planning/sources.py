"""What batch and online plans share about their sources: a predictor loaded from its file, the model
picked from what the profiles and predictors hold, an option's name, and the pool of hardware types
checked against those found.
"""

from __future__ import annotations

import warnings

from perfmodel.errors import InputError, PerfmodelWarning
from perfmodel.units import spoken_list

DEFAULT_INPUT_SIZE = 224
DEFAULT_MODEL = "resnet50"


def load_predictor(source):
    """A Predictor from its file (one given as an object is taken as it is)."""
    if hasattr(source, "select"):  # already a Predictor
        return source
    from perfmodel.fitting import Predictor

    return Predictor.load(source)


def warn_if_extrapolated(group, size: int, stacklevel: int) -> None:
    """A PerfmodelWarning when a predictor group is asked for an input size outside the sizes it measured."""
    low, high = min(group.input_sizes), max(group.input_sizes)
    if not low <= size <= high:
        warnings.warn(
            f"{group.hardware} {group.backend} {group.precision}: input size {size} is outside the "
            f"sizes measured ({low}-{high}); the predictor extrapolates.",
            PerfmodelWarning,
            stacklevel=stacklevel + 1,
        )


def pick_model(model: str | None, models: set[str], predictors=()) -> str:
    """The model to plan for: the one asked for, else the only one held, else resnet50 where held."""
    if model is not None:
        if model not in models:
            raise InputError(
                f"no {model} in the profiles or predictors given; they hold {', '.join(sorted(models))}"
                + _left_out_at_fit(model, predictors)
                + "."
            )
        return model
    if len(models) == 1:
        return next(iter(models))
    if DEFAULT_MODEL in models:
        return DEFAULT_MODEL
    raise InputError(f"the profiles hold several models ({', '.join(sorted(models))}): pick one with `model`.")


def _left_out_at_fit(model: str, predictors) -> str:
    """Why a predictor lacks `model`, where its fit left the model's groups out (provenance.skipped_groups)."""
    reasons = [
        f"{'/'.join(str(v) for v in s['group'].values())} has {s.get('reason', 'no reason given')}"
        for p in predictors
        for s in (p.provenance.get("skipped_groups") or [])
        if isinstance(s, dict) and isinstance(s.get("group"), dict) and s["group"].get("model") == model
    ]
    return f" (their fit left it out: {'; '.join(reasons)})" if reasons else ""


def option_label(row) -> str:
    """The candidate's name in the plan: backend and precision, plus the serving mode when recorded."""
    parts = [row.backend, row.precision]
    for name in ("protocol", "mode", "concurrency"):
        value = getattr(row, name, None)
        if value is not None and str(value) not in ("", "nan", "<NA>"):
            parts.append(f"c{value}" if name == "concurrency" else str(value))
    return " ".join(parts)


def pool_counts(found, pool, prices, objective) -> tuple[dict, dict]:
    """The pool (every type found, in any number, without a pool) and its prices, checked: every type
    named has a source, every price a type, and a cost objective a price for every type it may use."""
    unknown = [name for name in (pool or {}) if name not in found]
    if unknown:
        raise InputError(
            f"no profile or predictor for {', '.join(unknown)} (hardware found: {', '.join(sorted(found))})."
        )
    counts = dict(pool) if pool else {name: None for name in sorted(found)}
    prices = dict(prices or {})
    unknown = [name for name in prices if name not in counts]
    if unknown:
        raise InputError(
            f"`prices` names {spoken_list(unknown)}, which {'is' if len(unknown) == 1 else 'are'} not in the "
            f"pool ({', '.join(counts)})."
        )
    if objective == "cost":
        unpriced = [name for name, n in counts.items() if name not in prices and n != 0]
        if unpriced:
            raise InputError(
                f"`objective` cost needs a price per GPU-hour for {', '.join(unpriced)}: give `prices`, e.g. "
                f"{unpriced[0]}=2.5."
            )
    return counts, prices
