"""What every subcommand shares: the help layout, argument types and SIGTERM handled as Ctrl-C (the exit
codes: perfmodel/exit_codes.py)."""

from __future__ import annotations

import argparse
import contextlib
import signal


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def positive(unit: str, whole: bool = False, allow_zero: bool = False):
    """An argparse type: a finite number above zero (or 0 too, `allow_zero`; a whole one if `whole`), read by
    perfmodel.readers (ASCII digits only), else one clear sentence."""
    from perfmodel.errors import InputError
    from perfmodel.readers import number, shown, whole_number

    what = "a positive whole number" if whole else f"a positive number of {unit}"
    if allow_zero:
        what = "a whole number, 0 or more" if whole else f"a number of {unit}, 0 or more"

    def parse(text: str):
        try:
            if whole:
                return whole_number(text, "", low=0 if allow_zero else 1)
            return number(text, "", low=0.0) if allow_zero else number(text, "", above=0.0)
        except InputError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {shown(text)}") from None

    return parse


def typed(read, *args, **kwargs):
    """An argparse type: the flag's text read once, as it is parsed, by `read(text, *args, **kwargs)` (a check
    of perfmodel.planning.arguments, a parser of perfmodel.units), so that the command gets numbers. Its
    InputError stays the one sentence it is, naming the parameter; the parser says it with the flag
    (cli.for_the_command_line), not as 'argument --x: ...'."""
    from perfmodel.errors import InputError

    def parse(text: str):
        try:
            return read(text, *args, **kwargs)
        except InputError as exc:
            raise argparse.ArgumentError(None, str(exc)) from None

    return parse


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled as Ctrl-C is: finished work kept, everything started stopped."""


class Sigterm:
    """What the handlers know: whether SIGTERM (or Ctrl-C) came, and whether they still raise."""

    def __init__(self):
        self.terminated = False
        self.interrupted = False  # Ctrl-C
        self.raising = True


@contextlib.contextmanager
def sigterm_as_interrupt(state: Sigterm | None = None):
    """SIGTERM raises Terminated (and Ctrl-C KeyboardInterrupt, as always) while the yielded Sigterm's
    `raising` holds; once a command turns it off (its work over: what it started being stopped, its results
    printed) either is only noted, so that a finished command still says what it did. The previous
    handlers are back afterwards. `state`: a Sigterm made beforehand, for a part of the command built
    before the signals are handled. A SIGINT that is ignored (a background job's) stays ignored."""
    state = state or Sigterm()

    def on_sigterm(signum, frame) -> None:
        state.terminated = True
        if state.raising:
            raise Terminated()

    def on_sigint(signum, frame) -> None:
        state.interrupted = True
        if state.raising:
            raise KeyboardInterrupt()

    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, on_sigterm)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield state
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
