"""The `perfmodel` command: parses arguments, runs one subcommand, turns errors into exit codes.

Only this module and perfmodel/commands/ print; library code raises PerfmodelError subclasses,
each with the exit code it stands for (commands/common.py lists them).
"""

from __future__ import annotations

import argparse
import os
import sys

from perfmodel import __version__, console
from perfmodel.commands import fit, plan, profile, report, run
from perfmodel.commands.common import EXIT_CODES, formatter
from perfmodel.errors import PerfmodelError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit code 2), not a usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        console.error(f"{message} (see '{self.prog} --help')")
        sys.exit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="perfmodel",
        description="How fast a ready-made neural network serves, and how to meet a deadline with the fewest GPUs.",
        epilog=EXIT_CODES,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"perfmodel {__version__}")
    sub = parser.add_subparsers(title="commands", metavar="COMMAND", parser_class=_Parser)
    for command in (profile, fit, plan, report, run):
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
        return 2
    try:
        with console.show_warnings():
            return args.run(args)
    except PerfmodelError as exc:
        console.error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        console.error("interrupted.")
        return 130
    except BrokenPipeError:  # `perfmodel ... | head`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
