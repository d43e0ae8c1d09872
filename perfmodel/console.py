"""What the CLI shows a person: tables, progress, warnings and errors (stdout for results, stderr for the rest)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sys
import warnings
from collections.abc import Iterator, Sequence

import rich.markup
from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from perfmodel.errors import PerfmodelWarning

# Off a terminal (a pipe, a CI log) rich would wrap tables at 80 columns; give them room instead.
out = Console(highlight=False, soft_wrap=True)
if not out.is_terminal:
    out = Console(highlight=False, soft_wrap=True, width=200)
err = Console(stderr=True, highlight=False, soft_wrap=True)


_PARAMETER = re.compile(r"`([A-Za-z_]\w*)`")


def for_the_command_line(text: str, flag_names: dict[str, str]) -> str:
    """Library text as the command line says it: each `parameter` it names becomes the flag that sets it
    (errors.py: library messages name Python parameters, never flags); other backquoted text stays. For
    errors and warnings (cli.py) and for the library's progress and plan text that a command prints; a
    command's parser holds its `flag_names` (cli.py's _flag_names)."""
    return _PARAMETER.sub(lambda m: flag_names.get(m[1], m[0]), text)


def error(message: str) -> None:
    message = one_line(message)
    if err.is_terminal:
        err.print(f"[bold red]error:[/] {rich.markup.escape(message)}", markup=True, highlight=False)
    else:
        print(f"error: {message}", file=sys.stderr)


def one_line(text: str) -> str:
    """The text on one line: newlines and other control characters (from a file name, a cell) escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def discard_pending() -> None:
    """Drop what rich holds back for stdout after a failed write (else the next print repeats it)."""
    quiet, out.quiet = out.quiet, True  # quiet: the capture ends without writing anything
    try:
        out.begin_capture()
        out.end_capture()
    finally:
        out.quiet = quiet


def note(message: str) -> None:
    print(message, file=sys.stderr)


def print_json(value) -> None:
    print(json.dumps(value, indent=2, default=_json_default, allow_nan=False))


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def clean_for_json(value):
    """NaN becomes null (JSON has no NaN); numpy values become Python ones."""
    if isinstance(value, dict):
        return {k: clean_for_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_for_json(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is not None and type(value).__name__ == "NAType":
        return None
    return value


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[_cell(v) for v in row] for row in rows]
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for i, column in enumerate(columns):
        # Never cut a header or a value to "med…": a narrow terminal wraps the lines instead.
        width = max([len(column), *(len(row[i]) for row in cells)])
        t.add_column(column, justify="left" if i == 0 else "right", no_wrap=True, min_width=width)
    for row in cells:
        t.add_row(*row)
    out.print(t)


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


@contextlib.contextmanager
def show_warnings(flag_names: dict[str, str] | None = None) -> Iterator[None]:
    """Print every warning as one 'warning:' line, each message once (never a flood of repeats); the
    parameters perfmodel's warnings name as their flags (`flag_names`: for_the_command_line)."""
    seen: set[str] = set()

    def show(message, category, filename, lineno, file=None, line=None):
        text = one_line(message)
        if issubclass(category, PerfmodelWarning):
            text = for_the_command_line(text, flag_names or {})
        else:  # another library's: say whose, but still in one line
            text = f"{text} ({category.__name__} from {os.path.basename(filename)}:{lineno})"
        if text not in seen:
            seen.add(text)
            note(f"warning: {text}")

    with warnings.catch_warnings():  # restores showwarning and the filters on exit
        warnings.simplefilter("always", PerfmodelWarning)
        warnings.showwarning = show
        yield


@contextlib.contextmanager
def progress(description: str) -> Iterator[callable]:
    """A progress bar on a terminal, one line per step otherwise; yields update(done, total, text)."""
    if err.is_terminal:
        bar = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=False,
        )
        with bar:
            task = bar.add_task(description, total=None)

            def update(done: int, total: int | None, text: str) -> None:
                bar.update(task, completed=done, total=total, description=f"{description} {text}")

            yield update
    else:

        def update(done: int, total: int | None, text: str) -> None:
            note(f"[{done}/{total if total is not None else '?'}] {text}")

        yield update
