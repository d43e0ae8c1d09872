"""What make_online_plan is asked, checked before any work, as batch_request.py checks make_plan's parameters.

Each parameter has one declared check (CHECKS): the value as a caller gives it -> the value planned with, or
InputError in one sentence that names the parameter in backquotes. Numbers pass as they are (the solver's
OnlineProblem checks their ranges); text is read as the command line takes it ('400/s', '100ms', 'p99',
'10%'). The command line reads each of its flags with the same check as it parses them (commands/plan.py),
so that it hands over numbers. What comes out is an OnlineAsked, which every later step reads instead of
the caller's values.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial

from perfmodel.errors import InputError
from perfmodel.planning import arguments
from perfmodel.planning.sources import DEFAULT_INPUT_SIZE
from perfmodel.readers import whole_number
from perfmodel.units import MAX_BATCH_SIZE, parse_duration, parse_fraction, parse_percentile, parse_rate
from solvers.online_problem import OBJECTIVES


@dataclass(frozen=True)
class OnlineAsked:
    """make_online_plan's parameters, checked: requests/s, seconds, percent and fractions; names as text."""

    rate: float | None  # None: the trace's own rate (`arrivals`)
    slo: float
    percentile: float = 99.0
    profiles: tuple = ()
    predictors: tuple = ()
    pool: Mapping[str, int] | None = None
    prices: Mapping[str, float] | None = None
    objective: str = "gpus"
    request_size: int = 1
    input_size: int | None = None  # checked: DEFAULT_INPUT_SIZE when not given
    model: str | None = None
    backend: str | None = None
    precision: str | None = None
    arrivals: object = None  # a CSV's path (read by online_sources.read) or arrival times
    max_queue_delays: Iterable[float] | None = None
    simulate: bool = True
    seed: int = 0
    margin: float = 0.0

    @property
    def inputs(self) -> list:
        """The files given to read, which no output may overwrite."""
        trace = [self.arrivals] if isinstance(self.arrivals, (str, os.PathLike)) else []
        return [*self.profiles, *self.predictors, *trace]


def _number_or(parse: Callable, value, what: str, **kwargs):
    """A number as it is, else text read by `parse` (a parser of perfmodel.units)."""
    return value if isinstance(value, (int, float)) else parse(value, f"`{what}`", **kwargs)


def rate(value, what: str) -> float | None:
    """None (the trace's rate), requests/s, or text: '400/s', '20k/s', '24000/min'."""
    return None if value is None else _number_or(parse_rate, value, what)


def delays(value, what: str) -> list[float] | None:
    """None (the default candidates), or max_queue_delay candidates in seconds: numbers, or text ('0,0.5ms,2ms'
    or a list of such durations)."""
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    return [_number_or(parse_duration, d.strip() if isinstance(d, str) else d, what, allow_zero=True) for d in items]


def request_size(value, what: str) -> int:
    """Images per request: a whole number from 1 to MAX_BATCH_SIZE ('4' as text)."""
    return whole_number(value, f"`{what}`", high=MAX_BATCH_SIZE, unit="images")


# Each parameter of make_online_plan with its check: (value, the parameter's name) -> the value planned with,
# in the order of OnlineAsked's fields.
CHECKS: dict[str, Callable] = {
    "rate": rate,
    "slo": partial(_number_or, parse_duration),
    "percentile": partial(_number_or, parse_percentile),
    "profiles": lambda value, what: tuple(arguments.sources(value, what)),
    "predictors": lambda value, what: tuple(arguments.sources(value, what, objects=True)),
    "pool": partial(arguments.named_numbers, example="{'a100': 8}"),
    "prices": partial(arguments.named_numbers, example="{'a100': 2.5}"),
    "objective": partial(arguments.one_of, choices=OBJECTIVES),
    "request_size": request_size,
    "input_size": lambda value, what: arguments.input_size(value, what) or DEFAULT_INPUT_SIZE,
    "model": arguments.name,
    "backend": arguments.name,
    "precision": arguments.name,
    "arrivals": lambda value, what: value,  # a path, read with the other files; or times, which the solver checks
    "max_queue_delays": delays,
    "simulate": arguments.switch,
    "seed": lambda value, what: value,  # the solver checks it
    "margin": partial(_number_or, parse_fraction),
}


def asked(rate, slo, **settings) -> OnlineAsked:
    """make_online_plan's parameters checked (`settings` as its keywords). A misspelt keyword stays a
    TypeError (a programming error, as for any Python function)."""
    given = dataclasses.replace(OnlineAsked(rate, slo), **settings)
    a = OnlineAsked(**{name: check(getattr(given, name), name) for name, check in CHECKS.items()})
    if a.rate is None and a.arrivals is None:
        raise InputError(
            "give `rate` (e.g. 400/s) or `arrivals` (a file of arrival times): online plans need a request rate."
        )
    return a
