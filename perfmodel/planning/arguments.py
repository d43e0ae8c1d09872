"""The arguments of make_plan and make_online_plan as a library caller gives them, checked for type and
shape before any work: InputError in one sentence for a list where a mapping belongs, an input size that
is not a whole number of pixels, a setting that is not text. One path (or Predictor) where a list of
them belongs is taken as a list of one. The command line parses its flags into these types first
(perfmodel.units); these checks are for callers of the library."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from perfmodel.errors import InputError
from perfmodel.readers import text
from perfmodel.units import MAX_INPUT_SIZE, parse_count, parse_input_size, shown


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
        raise InputError(f"{what} must be a list of {accepted}, not {_kind(value)}.")
    items = list(value)
    for item in items:
        if not (isinstance(item, (str, os.PathLike)) or (objects and hasattr(item, "select"))):
            raise InputError(f"{what} must be a list of {accepted}; it holds {_kind(item)}.")
    return items


def input_size(value, what: str = "input_size") -> int | None:
    """An image side in pixels, 1 to MAX_INPUT_SIZE (a whole number, or text as the command line takes it)."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_INPUT_SIZE:
        return value
    return parse_input_size(value, what)


def named_numbers(value, what: str, example: str) -> dict | None:
    """pool or prices: None, or a mapping of GPU type names (text) to numbers (the solver checks those)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"{what} must be a mapping of GPU type to a number, e.g. {example}, not {_kind(value)}.")
    odd = [name for name in value if not isinstance(name, str)]
    if odd:
        raise InputError(f"{what} names GPU types by text (e.g. {example}), not {shown(odd[0])}.")
    return dict(value)


def mix(value) -> dict[int, int] | None:
    """None, or a mapping of input size to a whole number of images."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InputError(f"mix must be a mapping of input size to images, e.g. {{224: 7000}}, not {_kind(value)}.")
    counts = {}
    for size, count in value.items():
        size = input_size(size, "a mix input size")
        what = f"mix[{size}]"
        counts[size] = count if isinstance(count, int) and not isinstance(count, bool) else parse_count(count, what)
    return counts


def name(value, what: str) -> str | None:
    """model, backend or precision: None (any), or text (readers.text: printable, not empty); a model may be a
    path (a TorchScript file)."""
    if what == "model" and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if value is None:
        return value
    if isinstance(value, str):
        return text(value, what)
    example = {"model": "'resnet50'", "backend": "'torch'", "precision": "'fp16'"}.get(what, "'fp16'")
    raise InputError(f"{what} must be text, e.g. {example}, not {_kind(value)}.")
