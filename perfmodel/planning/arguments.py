"""The checks of make_plan's and make_online_plan's parameters as a library caller gives them, before any work.

Each check takes the value and the parameter's Python name and returns the value planned with, or raises
InputError in one sentence that names the parameter in backquotes (perfmodel/errors.py): a list where a
mapping belongs, an input size that is not a whole number of pixels, a setting that is not text, a number
out of its range. One path (or Predictor) where a list of them belongs is taken as a list of one. Numbers
may come as text, as the command line takes them ('100k', '60s', '5%'): the command line reads its flags
into numbers first (commands/plan.py), so for it these checks find everything in order.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

import numpy as np

from perfmodel.errors import InputError
from perfmodel.readers import number, text
from perfmodel.units import (
    MAX_INPUT_SIZE,
    MAX_SECONDS,
    parse_count,
    parse_duration,
    parse_fraction,
    parse_input_size,
    shown,
)


def _kind(value) -> str:
    return f"an object of type {type(value).__name__}"


def sources(value, what: str, objects: bool = False) -> list:
    """Profiles (paths) or predictors (paths or Predictor objects, `objects`): none (None or empty), one,
    or a list of them."""
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)) or (objects and hasattr(value, "select")):
        return [value]
    accepted = "paths of files" + (" or Predictor objects" if objects else "")
    if isinstance(value, (bytes, Mapping)) or hasattr(value, "columns") or not isinstance(value, Iterable):
        raise InputError(f"`{what}` must be a list of {accepted}, not {_kind(value)}.")
    items = list(value)
    for item in items:
        if not (isinstance(item, (str, os.PathLike)) or (objects and hasattr(item, "select"))):
            raise InputError(f"`{what}` must be a list of {accepted}; it holds {_kind(item)}.")
    return items


def input_size(value, what: str = "input_size") -> int | None:
    """An image side in pixels, 1 to MAX_INPUT_SIZE (a whole number, or text as the command line takes it)."""
    return None if value is None else _size(value, f"`{what}`")


def _size(value, said: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_INPUT_SIZE:
        return value
    return parse_input_size(value, said)


def named_numbers(value, what: str, example: str) -> dict | None:
    """pool or prices: None, or a mapping of GPU type names (text) to numbers (the solver checks those)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"`{what}` must be a mapping of GPU type to a number, e.g. {example}, not {_kind(value)}.")
    odd = [name for name in value if not isinstance(name, str)]
    if odd:
        raise InputError(f"`{what}` names GPU types by text (e.g. {example}), not {shown(odd[0])}.")
    return dict(value)


def mix(value, what: str = "mix") -> dict[int, int] | None:
    """None, or a mapping of input size to a whole number of images."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"`{what}` must be a mapping of input size to images, e.g. {{224: 7000}}, not {_kind(value)}.")
    counts = {}
    for size, count in value.items():
        size = _size(size, f"a `{what}` input size")
        said = f"`{what}`[{size}]"
        counts[size] = count if isinstance(count, int) and not isinstance(count, bool) else parse_count(count, said)
    return counts


def name(value, what: str) -> str | None:
    """model, backend or precision: None (any), or text (readers.text: printable, not empty); a model may be a
    path (a TorchScript file)."""
    if what == "model" and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if value is None:
        return value
    if isinstance(value, str):
        return text(value, f"`{what}`")
    example = {"model": "'resnet50'", "backend": "'torch'", "precision": "'fp16'"}.get(what, "'fp16'")
    raise InputError(f"`{what}` must be text, e.g. {example}, not {_kind(value)}.")


def count(value, what: str, maximum: int, least: int = 0, unit: str = "images") -> int | None:
    """None, or a whole number from `least` to `maximum` ('100k' as text)."""
    if value is None:
        return None
    found = value if isinstance(value, int) else parse_count(value, f"`{what}`", unit, maximum)
    if isinstance(found, bool) or not least <= found <= maximum:
        raise InputError(f"`{what}` must be a whole number of {unit} from {least} to {maximum:,}, not {shown(value)}.")
    return found


def seconds(value, what: str, allow_zero: bool = False) -> float | None:
    """None, or a duration in seconds ('60s', '250ms' as text): finite, above 0 (or 0 too, `allow_zero`) and
    at most MAX_SECONDS."""
    if value is None:
        return None
    found = value if isinstance(value, (int, float)) else parse_duration(value, f"`{what}`", allow_zero=allow_zero)
    low_ok = found >= 0 if allow_zero else found > 0
    if isinstance(found, bool) or not (math.isfinite(found) and low_ok and found <= MAX_SECONDS):
        least = "0 or more" if allow_zero else "above 0"
        raise InputError(
            f"`{what}` must be a number of seconds, {least} and at most {MAX_SECONDS:,.0f} (10 years), "
            f"not {shown(value)}."
        )
    return float(found)


def fraction(value, what: str) -> float | None:
    """None, or a fraction in [0, 1) ('5%' or '0.05' as text)."""
    if value is None:
        return None
    found = value if isinstance(value, (int, float)) else parse_fraction(value, f"`{what}`")
    if isinstance(found, bool) or not 0 <= found < 1:  # NaN too
        raise InputError(f"`{what}` must be a fraction in [0, 1), not {shown(value)}.")
    return float(found)


def below_one(value, what: str, example: str) -> float | None:
    """None, or a number from 0 to below 1 (a relative gap)."""
    if value is None:
        return None
    found = number(value, f"`{what}`", low=0, example=example)
    if not found < 1:
        raise InputError(f"`{what}` {shown(value)} must be a fraction below 1, e.g. {example}.")
    return found


def one_of(value, what: str, choices: Iterable[str]) -> str:
    """One of `choices` (text)."""
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"`{what}` must be {' or '.join(map(repr, choices))}, not {shown(value)}.")
    return value


def switch(value, what: str) -> bool:
    """A yes/no setting: True or False (numpy's too, or 0 and 1), never text such as 'no', which Python would
    take as true."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise InputError(f"`{what}` must be True or False, not {shown(value)}.")
