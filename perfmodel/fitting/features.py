"""Engineered features of batch size b and input size s for the linear family.

A feature is named by a short formula ("b*p", "p*ceil(b/32)") so that a predictor file says what it
computes and loading it needs no code but this module: names are parsed by pattern, never evaluated.
p is the image area relative to a 224 x 224 ImageNet image, p = (s/224)^2, so coefficients read as
"milliseconds per 224-px image".
"""

from __future__ import annotations

import re

import numpy as np

from perfmodel.errors import PredictorFormatError

REFERENCE_SIZE = 224.0
INTERCEPT = "1"
BASE_FEATURES: tuple[str, ...] = ("b", "p", "b*p", "log(b)", "p*log(b)")
_WAVE = re.compile(r"^(p\*)?ceil\(b/([0-9]+)\)$")  # ASCII digits: \d matches '٣


def pixels(s: np.ndarray) -> np.ndarray:
    return (np.asarray(s, dtype=float) / REFERENCE_SIZE) ** 2


def wave_periods(largest_batch: float) -> list[int]:
    """Candidate occupancy periods k for ceil(b/k): 2^i and 3*2^i, up to half the largest batch.

    A GPU runs a batch in waves of k images; larger k than half the range cannot be told from a
    constant by the data, so it is not offered.
    """
    periods, k = set(), 2
    while k <= largest_batch / 2:
        periods.add(k)
        if 3 * k // 2 <= largest_batch / 2 and k >= 4:
            periods.add(3 * k // 2)
        k *= 2
    return sorted(periods)


def candidate_features(batch_sizes: np.ndarray) -> list[str]:
    """Everything forward selection may choose from, for data measured at these batch sizes."""
    waves = wave_periods(float(np.max(batch_sizes)))
    return [*BASE_FEATURES, *(f"ceil(b/{k})" for k in waves), *(f"p*ceil(b/{k})" for k in waves)]


def check_feature(name: str) -> str:
    if name in (INTERCEPT, *BASE_FEATURES) or _WAVE.match(name):
        return name
    raise PredictorFormatError(
        f"unknown feature {name!r}; this perfmodel knows {', '.join(BASE_FEATURES)} and ceil(b/k) terms."
    )


def design_matrix(names: list[str] | tuple[str, ...], b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Columns of the named features for flat arrays b and s (shape (n, len(names)))."""
    b = np.asarray(b, dtype=float)
    p = pixels(s)
    cache: dict[str, np.ndarray] = {}

    def log_b() -> np.ndarray:
        if "log" not in cache:
            cache["log"] = np.log(b)
        return cache["log"]

    columns = []
    for name in names:
        if name == INTERCEPT:
            column = np.ones_like(b)
        elif name == "b":
            column = b
        elif name == "p":
            column = p * np.ones_like(b)
        elif name == "b*p":
            column = b * p
        elif name == "log(b)":
            column = log_b()
        elif name == "p*log(b)":
            column = p * log_b()
        else:
            match = _WAVE.match(name)
            if match is None:
                check_feature(name)
            column = np.ceil(b / int(match.group(2)))
            if match.group(1):
                column = column * p
        columns.append(column)
    return np.stack(columns, axis=-1) if columns else np.empty((b.size, 0))
