"""The `perfmodel` command: parses arguments, runs one subcommand, turns errors into exit codes.

Only this module and perfmodel/commands/ print; library code raises PerfmodelError subclasses,
each with the exit code it stands for (perfmodel/exit_codes.py lists them).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from perfmodel import console, exit_codes
from perfmodel._version import __version__
from perfmodel.commands import fit, import_, plan, profile, report, run
from perfmodel.commands.common import formatter
from perfmodel.errors import PerfmodelError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit code 2), not a usage dump, and a value
    that starts with '-' (--deadline -5s, --mix -64=100) reaches its option's parser, which says what
    is wrong with it, instead of being taken for an unknown option."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # argparse takes only '-5' and '-.5' for negative numbers (values); '-5s', '-5%', '-1e3' too.
        self._negative_number_matcher = re.compile(r"^-\.?[0-9]")

    def error(self, message: str) -> None:  # type: ignore[override]
        console.error(f"{message} (see '{self.prog} --help')")
        sys.exit(exit_codes.BAD_INPUT)


class OutputError(PerfmodelError):
    """Standard output could not be written (a full disk, a device error): exit code 1."""


class _Stdout:
    """sys.stdout while a command runs: a failed write becomes an OutputError, raised once, here."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._guard(self._stream.write, text)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def _guard(self, call, *args):
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(f"cannot write the output: {exc.strerror or exc}.") from None

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfmodel",
        description="How fast a ready-made neural network serves, and how to meet a deadline with the fewest GPUs.",
        epilog=exit_codes.help_text(),
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"perfmodel {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for command in (profile, import_, fit, plan, report, run):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already reported in one line
        return exc.code if isinstance(exc.code, int) else 2
    if not hasattr(args, "run"):
        parser.print_help(sys.stderr)
        return exit_codes.BAD_INPUT
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    try:
        with console.show_warnings():
            code = args.run(args)
        sys.stdout.flush()  # a write error on buffered output shows here, not at exit
        return code
    except PerfmodelError as exc:
        if isinstance(exc, OutputError):
            console.discard_pending()
            _discard_stdout(stdout)
        console.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        console.error("interrupted.")
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `perfmodel ... | head`: the reader left; stop quietly, as Unix tools do
        _discard_stdout(stdout)
        return exit_codes.OUTPUT_CLOSED
    finally:
        sys.stdout = stdout


def _discard_stdout(stream) -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not fail on the same output again."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): nothing to flush at exit
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
