"""Parsing the sweep grid given as text (as on the command line): batch sizes and input sizes."""

from __future__ import annotations

from perfmodel.readers import whole_numbers
from perfmodel.units import MAX_BATCH_SIZE, MAX_INPUT_SIZE


def parse_positive_ints(text: str, option: str, example: str, largest: int = MAX_BATCH_SIZE) -> tuple[int, ...]:
    """'1,2,4' -> (1, 2, 4), sorted and without repeats, each 1 to `largest` (readers.whole_numbers)."""
    return tuple(sorted(set(whole_numbers(text, option, high=largest, example=example))))


def parse_batch_sizes(text: str) -> tuple[int, ...] | None:
    """Batch sizes as a tuple, or None for 'auto' (search up to the largest batch that fits)."""
    if str(text).strip().lower() == "auto":
        return None
    return parse_positive_ints(text, "`batch_sizes`", "1,2,4,8 or auto")


def parse_input_sizes(text: str) -> tuple[int, ...]:
    return parse_positive_ints(text, "`input_sizes`", "224,320", MAX_INPUT_SIZE)
