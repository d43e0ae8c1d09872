"""What every subcommand shares: the help layout and argument types (the exit codes: perfmodel/exit_codes.py)."""

from __future__ import annotations

import argparse
import math


def formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def positive(unit: str, whole: bool = False, allow_zero: bool = False):
    """An argparse type: a finite number above zero (or 0 too, `allow_zero`; a whole one if `whole`), else one
    clear sentence."""
    what = "a positive whole number" if whole else f"a positive number of {unit}"
    if allow_zero:
        what = "a whole number, 0 or more" if whole else f"a number of {unit}, 0 or more"

    def parse(text: str):
        try:
            if whole and not text.strip().isascii():  # int() would read '٣' as 3
                raise ValueError(text)
            value = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if not (math.isfinite(value) and (value >= 0 if allow_zero else value > 0)):
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return value

    return parse
