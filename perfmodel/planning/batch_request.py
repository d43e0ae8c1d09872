"""What make_plan is asked: the images and deadline, and a PlanRequest of every other setting, each checked
before any work (InputError in one sentence naming the parameter).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

import solvers
from perfmodel.errors import InputError
from perfmodel.planning import arguments
from perfmodel.planning.batch_search import DEFAULT_CONFIDENCE, MAX_CONFIDENCE, MIN_CONFIDENCE
from perfmodel.planning.sources import DEFAULT_INPUT_SIZE
from perfmodel.readers import number, plain
from perfmodel.units import parse_count, shown

# The most images (in all) and GPUs (of one type) a plan may hold: beyond them the solver's
# arithmetic would stop being exact (solvers.problem.MAX_COUNT); no real job comes near.
MAX_IMAGES = MAX_GPUS = solvers.problem.MAX_COUNT
LATENCY_COLUMNS = {"p50": "latency_ms", "p99": "latency_p99_ms"}  # what `use` plans on


@dataclass(frozen=True)
class PlanRequest:
    """How to plan, beyond what and by when: every setting of `make_plan`, with its default.

    Text is accepted where the command line takes it (margin '5%', load_time '2s', decode '2ms').
    """

    input_size: int | None = None
    mix: Mapping[int, int] | None = None
    pool: Mapping[str, int] | None = None
    profiles: tuple = ()
    predictors: tuple = ()
    model: str | None = None
    mode: str = "soft"
    objective: str = "gpus"
    margin: float | str | None = None  # None: not given (0, and the confidence rule); 0 given: the fixed rule
    use: str = "p50"
    load_time: float | str | None = None
    decode: float | str | None = None
    max_batches: int | None = None
    prices: Mapping[str, float] | None = None
    backend: str | None = None
    precision: str | None = None
    gap: float | None = None
    time_limit: float = 10.0
    extrapolate: bool = False
    confidence: float | str | None = None
    transfer: bool = False  # plan pool types nobody profiled on the other GPUs' curves, carried (transfer.py)


def checked_request(request, settings: dict) -> PlanRequest:
    """The request with the settings given as keywords, each checked for its type and shape (arguments.py).
    A misspelt keyword stays a TypeError (a programming error, as for any Python function)."""
    if request is not None and not isinstance(request, PlanRequest):
        raise InputError(f"request must be a PlanRequest (or None), not an object of type {type(request).__name__}.")
    r = dataclasses.replace(request or PlanRequest(), **settings)
    return dataclasses.replace(
        r,
        input_size=arguments.input_size(r.input_size),
        mix=arguments.mix(r.mix),
        pool=arguments.named_numbers(r.pool, "pool", "{'a100': 8}"),
        prices=arguments.named_numbers(r.prices, "prices", "{'a100': 2.5}"),
        profiles=tuple(arguments.sources(r.profiles, "profiles")),
        predictors=tuple(arguments.sources(r.predictors, "predictors", objects=True)),
        **{what: arguments.name(getattr(r, what), what) for what in ("model", "backend", "precision")},
        transfer=_flag(r.transfer, "transfer"),
    )


def _flag(value, what: str) -> bool:
    """A yes/no setting: True or False only ('no' is a truthy string)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{what} must be True or False, not {shown(value)}.")
    return bool(value)


def workload_of(images, input_size, mix, mode) -> dict[int, int | None]:
    count = images if images is None or isinstance(images, int) else parse_count(images, "--images", maximum=MAX_IMAGES)
    if isinstance(count, bool) or (count is not None and not 0 <= count <= MAX_IMAGES):
        raise InputError(f"--images must be a whole number from 0 to {MAX_IMAGES:,}, not {shown(images)}.")
    if mix and sum(mix.values()) > MAX_IMAGES:
        raise InputError(f"--mix adds up to more than {MAX_IMAGES:,} images, the most perfmodel plans at once.")
    if mix:
        if input_size is not None:
            raise InputError("give either --input-size or --mix, not both.")
        if count is not None and sum(mix.values()) != count:
            raise InputError(f"--mix adds up to {sum(mix.values()):,} images, but --images says {count:,}.")
        return {int(s): int(n) for s, n in mix.items()}
    if count is None and mode != "relaxed":
        raise InputError("soft mode needs --images (or --mix): how many images must be done by the deadline?")
    return {int(input_size or DEFAULT_INPUT_SIZE): count}


def confidence_target(confidence, margin_given: bool, use: str) -> float | None:
    """The deadline probability to plan for, or None for the fixed rule (a margin given, even 0; or p99)."""
    if isinstance(confidence, str) and confidence.strip().lower() in ("none", "off"):
        return None
    if confidence is None:  # the default: a probability, unless a fixed rule was asked for
        return None if margin_given or use == "p99" else DEFAULT_CONFIDENCE
    value = number(confidence, "confidence", example="0.95 (a probability), or 'none' for a fixed rule")
    if not MIN_CONFIDENCE <= value <= MAX_CONFIDENCE:
        raise InputError(
            f"--confidence must lie from {MIN_CONFIDENCE} (the median plan) to {MAX_CONFIDENCE}, not "
            f"{confidence.strip() if isinstance(confidence, str) else plain(value)}; e.g. --confidence 0.95."
        )
    if margin_given or use == "p99":
        raise InputError(
            "give either --confidence (a probability of meeting the deadline) or a fixed rule (--margin, "
            "--use p99), not both."
        )
    return value
