"""What make_plan is asked, checked before any work: the images and the deadline, and a PlanRequest of every
other setting.

Each parameter has one declared check (CHECKS, as scikit-learn declares its estimators' parameter
constraints): the value as a caller gives it -> the value planned with, or InputError in one sentence that
names the parameter in backquotes. Then the checks between parameters (a mix or an input size; a deadline
probability or a fixed rule). What comes out is an Asked: numbers in seconds, fractions and image counts,
which every later step reads instead of the caller's values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import solvers
from perfmodel.errors import InputError
from perfmodel.planning import arguments
from perfmodel.planning.sources import DEFAULT_INPUT_SIZE
from perfmodel.readers import number, plain

# The most images (in all) and GPUs (of one type) a plan may hold: beyond them the solver's
# arithmetic would stop being exact (solvers.batch_problem.MAX_COUNT); no real job comes near.
MAX_IMAGES = MAX_GPUS = solvers.batch_problem.MAX_COUNT
LATENCY_COLUMNS = {"p50": "latency_ms", "p99": "latency_p99_ms"}  # what `use` plans on
DEFAULT_CONFIDENCE = 0.95  # the probability that the whole plan finishes by the deadline
MIN_CONFIDENCE, MAX_CONFIDENCE = 0.5, 0.999
FIXED_RULE = ("none", "off")  # a `confidence` that asks for no probability: the fixed rule (margin, p50 or p99)


@dataclass(frozen=True)
class PlanRequest:
    """How to plan, beyond what and by when: every setting of `make_plan`, with its default.

    Text is accepted where the command line takes it (margin '5%', load_time '2s', decode '2ms'): CHECKS
    reads each setting.
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


def confidence(value, what: str) -> float | str | None:
    """None (not given), 'none' (the fixed rule: 'off' too) or a probability from MIN_CONFIDENCE to
    MAX_CONFIDENCE ('0.95' as text)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in FIXED_RULE):
        return None if value is None else "none"
    found = number(value, f"`{what}`", example="0.95 (a probability), or 'none' for a fixed rule")
    if not MIN_CONFIDENCE <= found <= MAX_CONFIDENCE:
        raise InputError(
            f"`{what}` must lie from {MIN_CONFIDENCE} (the median plan) to {MAX_CONFIDENCE}, not "
            f"{value.strip() if isinstance(value, str) else plain(found)}; e.g. 0.95."
        )
    return found


def deadline_seconds(value, what: str) -> float:
    """A duration in seconds ('60s' as text), above 0: the time by which the images must be done."""
    if value is None:
        raise InputError(f"`{what}` is needed: the time by which the images must be done, e.g. 60 (seconds).")
    return arguments.seconds(value, what)


# Each parameter of make_plan with its check: (value, the parameter's name) -> the value planned with. The
# settings follow the order of PlanRequest's fields.
CHECKS: dict[str, Callable] = {
    "images": partial(arguments.count, maximum=MAX_IMAGES),
    "deadline": deadline_seconds,
    "input_size": arguments.input_size,
    "mix": arguments.mix,
    "pool": partial(arguments.named_numbers, example="{'a100': 8}"),
    "profiles": lambda value, what: tuple(arguments.sources(value, what)),
    "predictors": lambda value, what: tuple(arguments.sources(value, what, objects=True)),
    "model": arguments.name,
    "mode": partial(arguments.one_of, choices=solvers.batch_problem.MODES),
    "objective": partial(arguments.one_of, choices=solvers.batch_problem.OBJECTIVES),
    "margin": arguments.fraction,
    "use": partial(arguments.one_of, choices=LATENCY_COLUMNS),
    "load_time": partial(arguments.seconds, allow_zero=True),
    "decode": partial(arguments.seconds, allow_zero=True),
    "max_batches": partial(arguments.count, maximum=MAX_IMAGES, least=1, unit="batches"),
    "prices": partial(arguments.named_numbers, example="{'a100': 2.5}"),
    "backend": arguments.name,
    "precision": arguments.name,
    "gap": partial(arguments.below_one, example="1e-4"),
    "time_limit": arguments.seconds,
    "extrapolate": arguments.switch,
    "confidence": confidence,
    "transfer": arguments.switch,
}


@dataclass(frozen=True)
class Asked:
    """What make_plan was asked, checked: what the later steps read, never the caller's values."""

    request: PlanRequest  # every setting checked: numbers in seconds and fractions, names as text
    workload: dict[int, int | None]  # images per input size; None: as many as fit (relaxed mode)
    deadline_s: float
    target: float | None  # the deadline probability planned for; None: the fixed rule (margin, p50 or p99)

    @property
    def margin(self) -> float:
        """The margin the fixed rule plans with (0 when none was given)."""
        return self.request.margin or 0.0


def asked(images, deadline, request, settings: dict) -> Asked:
    """make_plan's parameters checked: `request` (a PlanRequest or None) with the `settings` given as keywords
    in its place. A misspelt keyword stays a TypeError (a programming error, as for any Python function)."""
    if request is not None and not isinstance(request, PlanRequest):
        raise InputError(f"`request` must be a PlanRequest (or None), not an object of type {type(request).__name__}.")
    given = dataclasses.replace(request or PlanRequest(), **settings)
    values = {"images": images, "deadline": deadline, **vars(given)}
    checked = {name: check(values[name], name) for name, check in CHECKS.items()}
    count, deadline_s = checked.pop("images"), checked.pop("deadline")
    r = PlanRequest(**checked)
    workload = _workload(count, r.input_size, r.mix, r.mode)
    if r.mode == "relaxed" and None in workload.values() and not r.pool:
        raise InputError(
            "relaxed mode with no `images` plans as many images as a fixed pool can do: give `pool`, the GPUs of "
            "each type."
        )
    return Asked(r, workload, deadline_s, _target(r.confidence, r.margin is not None, r.use))


def _workload(count: int | None, input_size: int | None, mix: dict | None, mode: str) -> dict[int, int | None]:
    """Images per input size: the mix, or the images at the input size (224 px when not given)."""
    if mix and sum(mix.values()) > MAX_IMAGES:
        raise InputError(f"`mix` adds up to more than {MAX_IMAGES:,} images, the most perfmodel plans at once.")
    if mix:
        if input_size is not None:
            raise InputError("give either `input_size` or `mix`, not both.")
        if count is not None and sum(mix.values()) != count:
            raise InputError(f"`mix` adds up to {sum(mix.values()):,} images, but `images` says {count:,}.")
        return dict(mix)
    if count is None and mode != "relaxed":
        raise InputError("soft mode needs `images` (or `mix`): how many images must be done by the deadline?")
    return {input_size or DEFAULT_INPUT_SIZE: count}


def _target(confidence: float | str | None, margin_given: bool, use: str) -> float | None:
    """The deadline probability to plan for, or None for the fixed rule (a margin given, even 0; or p99)."""
    if confidence == "none":
        return None
    if confidence is None:  # the default: a probability, unless a fixed rule was asked for
        return None if margin_given or use == "p99" else DEFAULT_CONFIDENCE
    if margin_given or use == "p99":
        raise InputError(
            "give either `confidence` (a probability of meeting the deadline) or a fixed rule (`margin`, "
            "`use` p99), not both."
        )
    return confidence
