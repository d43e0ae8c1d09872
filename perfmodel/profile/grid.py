"""Parsing the sweep grid given on the command line: batch sizes and input sizes."""

from __future__ import annotations

import re

from perfmodel.errors import InputError
from perfmodel.units import MAX_BATCH_SIZE, MAX_INPUT_SIZE


def parse_positive_ints(text: str, option: str, example: str, largest: int = MAX_BATCH_SIZE) -> tuple[int, ...]:
    """'1,2,4' -> (1, 2, 4), sorted and without repeats, each 1 to `largest`; InputError for anything else."""
    items = [item.strip() for item in str(text).split(",")]
    if not text or not str(text).strip() or any(item == "" for item in items):
        raise InputError(f"{option} needs whole numbers separated by commas, e.g. {example}; got {text!r}.")
    values = []
    for item in items:
        if not re.fullmatch(r"[0-9]{1,12}", item) or int(item) < 1:  # ASCII digits only: int() takes any script's
            raise InputError(f"{option}: {item!r} is not a positive whole number; write e.g. {example}.")
        if int(item) > largest:
            raise InputError(
                f"{option}: {item} is more than {largest:,}, the most perfmodel measures; write e.g. {example}."
            )
        values.append(int(item))
    return tuple(sorted(set(values)))


def parse_batch_sizes(text: str) -> tuple[int, ...] | None:
    """Batch sizes as a tuple, or None for 'auto' (search up to the largest batch that fits)."""
    if str(text).strip().lower() == "auto":
        return None
    return parse_positive_ints(text, "--batch-sizes", "1,2,4,8 or auto")


def parse_input_sizes(text: str) -> tuple[int, ...]:
    return parse_positive_ints(text, "--input-sizes", "224,320", MAX_INPUT_SIZE)
