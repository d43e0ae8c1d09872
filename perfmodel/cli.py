"""The `perfmodel` command: parses arguments, runs one subcommand, turns errors into exit codes.

Only this module and perfmodel/commands/ print; library code raises PerfmodelError subclasses,
each with the exit code it stands for (perfmodel/exit_codes.py lists them).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from perfmodel import console, exit_codes, readers
from perfmodel._version import __version__
from perfmodel.commands import fit, import_, inputs, plan, profile, report, run
from perfmodel.commands.common import formatter
from perfmodel.console import for_the_command_line
from perfmodel.errors import InputError, PerfmodelError

_NO_VALUE_ACTIONS = (argparse._HelpAction, argparse._VersionAction)  # --help, --version: nothing to record


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit code 2), not a usage dump, and a value
    that starts with '-' (--deadline -5s, --mix -64=100) reaches its option's parser, which says what
    is wrong with it, instead of being taken for an unknown option.

    It records which flags the user typed (readers.given: `--margin 0` is asked for, though 0 is the
    default) and reads every text flag (commands/inputs.py) with readers.text as it parses."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # argparse takes only '-5' and '-.5' for negative numbers (values); '-5s', '-5%', '-1e3' too.
        self._negative_number_matcher = re.compile(r"^-\.?[0-9]")

    def parse_known_args(self, args=None, namespace=None):
        # A flag left out is absent from the namespace while parsing (default SUPPRESS), so that one typed at
        # its default value is still seen as typed; the defaults are filled in afterwards.
        flags = [
            a
            for a in self._actions
            if a.option_strings and a.default is not argparse.SUPPRESS and not isinstance(a, _NO_VALUE_ACTIONS)
        ]
        defaults = {a: a.default for a in flags}
        for action in flags:
            action.default = argparse.SUPPRESS
        try:
            namespace, extras = super().parse_known_args(args, namespace)
        finally:
            for action, default in defaults.items():
                action.default = default
        typed = {a.dest for a in flags if hasattr(namespace, a.dest)}
        for action in flags:
            if action.dest not in typed:
                default = defaults[action]
                setattr(
                    namespace,
                    action.dest,
                    action.type(default) if isinstance(default, str) and callable(action.type) else default,
                )
        setattr(namespace, readers.GIVEN, frozenset(typed) | getattr(namespace, readers.GIVEN, frozenset()))
        self._read_text(namespace, [a for a in flags if a.dest in typed])
        return namespace, extras

    def _read_text(self, namespace, typed) -> None:
        """Every text flag the user typed (commands/inputs.py), read by readers.text: printable, bounded."""
        classes = inputs.ARGUMENTS.get(self.prog.split()[-1], {})
        for action in typed:
            name = inputs.name_of(action)
            value = getattr(namespace, action.dest)
            if classes.get(name) == inputs.TEXT and isinstance(value, str):
                try:
                    setattr(namespace, action.dest, readers.text(value, name))
                except InputError as exc:
                    self.error(str(exc))

    def error(self, message: str) -> None:  # type: ignore[override]
        message = for_the_command_line(message, self._defaults.get("flag_names", {}))
        console.error(f"{message.rstrip('.')} (see '{self.prog} --help')")
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
        before = set(sub.choices)
        command.add_parser(sub)
        for name in set(sub.choices) - before:
            sub.choices[name].set_defaults(flag_names=_flag_names(sub.choices[name], command))
    return parser


def _flag_names(parser: argparse.ArgumentParser, command) -> dict[str, str]:
    """Python parameter name -> the flag that sets it: argparse's dests, and a command's PARAMETER_FLAGS
    where the library's name differs (make_plan's `profiles` is --profile)."""
    names = {a.dest: max(a.option_strings, key=len) for a in parser._actions if a.option_strings}
    return names | getattr(command, "PARAMETER_FLAGS", {})


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
        with console.show_warnings(getattr(args, "flag_names", {})):
            code = args.run(args)
        sys.stdout.flush()  # a write error on buffered output shows here, not at exit
        return code
    except PerfmodelError as exc:
        if isinstance(exc, OutputError):
            console.discard_pending()
            _discard_stdout(stdout)
        console.error(for_the_command_line(str(exc), getattr(args, "flag_names", {})))
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
