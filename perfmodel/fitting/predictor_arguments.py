"""What a predictor's queries are given, checked: batch and input sizes as float arrays of one shape, a
quantity's name; InputError in one sentence otherwise."""

from __future__ import annotations

import numpy as np

from perfmodel.errors import InputError
from perfmodel.fitting.predictor_file import QUANTITIES
from perfmodel.units import shown


def check_quantity(quantity, known=QUANTITIES) -> None:
    if not isinstance(quantity, str) or quantity not in known:
        raise InputError(f"unknown quantity {shown(quantity)}; one of {', '.join(QUANTITIES)}.")


def numbers(values, what: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be numbers (a number, a list or an array), not {shown(values)}.") from None


def pair(b, s, positive: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Batch and input sizes as float arrays of one shape (numpy's broadcasting), each finite and > 0 where
    `positive`; InputError otherwise."""
    check = positive_numbers if positive else numbers
    b, s = check(b, "batch sizes"), check(s, "input sizes")
    try:
        return tuple(np.broadcast_arrays(b, s))
    except ValueError:
        raise InputError(
            f"batch sizes of shape {b.shape} and input sizes of shape {s.shape} do not broadcast to one shape."
        ) from None


def positive_numbers(values, what: str) -> np.ndarray:
    array = numbers(values, what)
    if not np.all(array > 0) or not np.all(np.isfinite(array)):
        raise InputError(f"{what} must be finite numbers > 0.")
    return array
