"""The exit codes of the `perfmodel` command: the one table that cli.py, every --help, the errors' codes
(errors.py) and docs/exit-codes.md take from (tests/commands/test_exit_codes.py holds them to it)."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

SUCCESS = 0
FAILURE = 1
BAD_INPUT = 2
NO_PLAN = 3
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it
OUTPUT_CLOSED = 141  # 128 + SIGPIPE
TERMINATED = 143  # 128 + SIGTERM


@dataclass(frozen=True)
class ExitCode:
    code: int
    meaning: str
    commands: tuple[str, ...] = ()  # the commands that can end with it; () for every one


TABLE = (
    ExitCode(SUCCESS, "success"),
    ExitCode(
        FAILURE,
        "a failure while measuring or running: a worker or server died (the finished points or results are "
        "kept, and --resume goes on from them), or the output could not be written (a full disk)",
    ),
    ExitCode(BAD_INPUT, "bad input: an argument, a file, a model, a device; nothing is written"),
    ExitCode(
        NO_PLAN,
        "no plan meets the deadline (online: the SLO): the message says why, and how many more GPUs, how "
        "many images (requests/s), or how long a deadline (SLO) would make one",
        ("plan",),
    ),
    ExitCode(INTERRUPTED, "interrupted (Ctrl-C); finished work is kept"),
    ExitCode(OUTPUT_CLOSED, "standard output was closed by its reader (perfmodel plan --json | head): a quiet stop"),
    ExitCode(TERMINATED, "terminated (SIGTERM); finished work is kept", ("profile", "run")),
)


def for_command(command: str | None = None) -> tuple[ExitCode, ...]:
    """The codes `perfmodel COMMAND` can end with (None: the program as a whole, every code)."""
    return tuple(e for e in TABLE if command is None or not e.commands or command in e.commands)


def help_text(command: str | None = None) -> str:
    """The 'exit codes:' block at the end of a --help."""
    lines = ["exit codes:"]
    for entry in for_command(command):
        first, *rest = textwrap.wrap(entry.meaning, width=92)
        lines += [f"  {entry.code:<4} {first}", *(" " * 7 + line for line in rest)]
    return "\n".join(lines) + "\n"


def markdown() -> str:
    """The table as docs/exit-codes.md shows it."""
    rows = ["| code | meaning | commands |", "|---|---|---|"]
    for entry in TABLE:
        commands = ", ".join(f"`{c}`" for c in entry.commands) or "every one"
        rows.append(f"| {entry.code} | {entry.meaning.replace('|', chr(92) + '|')} | {commands} |")
    return "\n".join(rows) + "\n"
