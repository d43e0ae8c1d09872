"""What people give perfmodel, read by class: one reader per class of input, for every command and the library.

Each reader takes a value as it was given (command-line text, a CSV cell, a JSON value, or a Python value
from a caller of the library) and `what`, the name a message says: the flag where the command line reads it
("--margin"), the parameter in backquotes where the library does ("`margin`", shown on the command line as
its flag: errors.py), the place in a file ("p.csv, row 3, column 'x'").
It returns the value, or raises InputError (or the `error` class given) with one sentence.

Numbers
    decimal(text)                  a plain ASCII decimal -> float, or None: the building block of every number
                                   read from text (units.py reads durations, counts, rates ... on top of it)
    number(value, what, ...)       a finite number, from text or a Python int/float, optionally within bounds
    whole_number(value, what, ...) a whole number within bounds
    whole_numbers(text, what, ...) '1,8,32' -> (1, 8, 32), in the order given
    Everywhere: ASCII digits only ('٣', '３' and '²' are no digits here, though Python's float() reads them),
    no '_' separators, no NaN or infinity; a message echoes the value as it was given, never rounded.
    plain(x)                       a number for a message, exact: 99.9999999, never rounded to 100
    is_number(value)               whether a JSON value is a finite number (not a bool): a file checker's test

Echoed text
    text(value, what, ...)         free text perfmodel prints or writes again (names, sources, labels):
                                   printable (no escape sequence, newline or other control character), not
                                   empty, at most `limit` characters
    shown(value)                   any value inside a message: quoted, control characters escaped, cut short

Output paths
    output_file(path, what, inputs)             a file to write: not a folder, nor named like one ('out/'),
                                                not a symbolic link, not a device, in a folder that exists,
                                                not one of the command's inputs; nothing is created here
    output_folder(path, what, inputs, writes)   a folder to write into (made later if missing): not a file,
                                                and none of the files it will write (`writes`, glob patterns)
                                                is a folder or one of the inputs
    not_an_input(path, inputs, what)            the part of both that refuses to write over an input

Flags
    given(args, dest)              whether the user typed the flag (the command line records it), so that a
                                   flag given at its default value (--margin 0) is taken as asked, never
                                   ignored
    switch(value, what)            True or False from a caller of the library: 'no' is not taken as true

JSON
    version(data, source, kind, readable, hint)   a file's schema_version: a JSON whole number this perfmodel reads
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from perfmodel.errors import InputError

# --- numbers -----------------------------------------------------------------------------------------------

UNSIGNED = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"  # [0-9], never \d: \d matches '٣'
_DECIMAL = re.compile(rf"[-+]?{UNSIGNED}")
_WHOLE = re.compile(r"[-+]?[0-9]+")
MAX_DIGITS = 18  # a whole number of more digits is no count or size, and int() of thousands of digits stalls
NOT_A_NUMBER = "digits 0-9, a point, an exponent"


def decimal(text: str) -> float | None:
    """The value of a plain decimal in ASCII ('12', '-1.5', '.5', '2e-3'; spaces around it are ignored), or
    None for anything else ('١٢', '1_000', 'nan', 'inf', '0x10', '', '5 5'). '1e309' is inf: check bounds."""
    text = str(text).strip(" \t\r\n")  # str.strip() would also take \x1c-\x1f, which float() refuses
    return float(text) if _DECIMAL.fullmatch(text) else None


def number(
    value,
    what: str,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    example: str = "",
    text: bool = True,
    error: type[InputError] = InputError,
) -> float:
    """A finite number: text in ASCII digits, or an int or float (not a bool) from a caller of the library or
    a JSON file (text=False: there "3" is text, not a number); at least `low`, more than `above`, at most
    `high` where given."""
    _check_kind(value, what, "a number", example, text, error)
    try:
        parsed = decimal(value) if isinstance(value, str) else float(value)
    except OverflowError:  # an int beyond any float: 10**400
        parsed = math.inf
    if parsed is None:
        raise error(f"{what} {shown(value)} is not a number: write {NOT_A_NUMBER}{_eg(example)}.")
    if not math.isfinite(parsed):
        raise error(f"{what} {shown(value)} is not a finite number{_eg(example)}.")
    if (
        (low is not None and parsed < low)
        or (above is not None and not parsed > above)
        or (high is not None and parsed > high)
    ):
        raise error(f"{what} {shown(value)} {_range(low, above, high)}{_eg(example)}.")
    return parsed


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def whole_number(
    value,
    what: str,
    *,
    low: int | None = 1,
    high: int | None = None,
    unit: str = "",
    example: str = "",
    text: bool = True,
    error: type[InputError] = InputError,
) -> int:
    """A whole number in ASCII digits (or a Python int, or a float that is whole), within `low` to `high`;
    text=False for a JSON value, where "3" is text."""
    kind = (
        "a positive whole number" if low == 1 else "a whole number" if low is None else f"a whole number, {low} or more"
    )
    kind += f" of {unit}" if unit else ""
    _check_kind(value, what, kind, example, text, error)
    parsed = None
    if isinstance(value, float) and value.is_integer():
        parsed = int(value)
    elif isinstance(value, int):
        parsed = value
    elif isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        if len(value.strip().lstrip("+-0")) > MAX_DIGITS:
            raise error(f"{what} {shown(value)} is far too large{_eg(example)}.")
        parsed = int(value.strip())
    if parsed is None or (low is not None and parsed < low):
        raise error(f"{what} {shown(value)} is not {kind}{_eg(example)}.")
    if high is not None and parsed > high:
        raise error(f"{what} {shown(value)} is more than {high:,}, the most perfmodel takes{_eg(example)}.")
    return parsed


def _check_kind(value, what: str, kind: str, example: str, text: bool, error) -> None:
    if isinstance(value, str) and not text:
        raise error(f"{what} is {shown(value)}, text where {kind} belongs{_eg(example)}.")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise error(f"{what} must be {kind}{_eg(example)}, not {shown(value)}.")


def whole_numbers(
    text, what: str, *, low: int | None = 1, high: int | None = None, example: str = "", error=InputError
) -> tuple[int, ...]:
    """'1,8,32' -> (1, 8, 32) in the order given (repeats kept: the caller decides), each by whole_number."""
    items = str(text).split(",")
    if not str(text).strip() or any(not item.strip() for item in items):
        raise error(f"{what} needs whole numbers separated by commas{_eg(example)}; got {shown(text)}.")
    return tuple(whole_number(item, what, low=low, high=high, example=example, error=error) for item in items)


def plain(value: float) -> str:
    """A number for people, as short as it can be written without changing it: 99, 0.95, 99.9999999 (never
    100), 1e-09, and whole ones with thousands separators (1,048,576)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def _range(low, above, high) -> str:
    if above is not None:
        return f"must be more than {plain(above)}" + (f" and at most {plain(high)}" if high is not None else "")
    if low is not None and high is not None:
        return f"must lie from {plain(low)} to {plain(high)}"
    return f"must be at least {plain(low)}" if low is not None else f"must be at most {plain(high)}"


def _eg(example: str) -> str:
    return f", e.g. {example}" if example else ""


# --- echoed text -------------------------------------------------------------------------------------------

MAX_TEXT = 2000  # characters: a name, a source citing several URLs with versions; more is a slip (a file pasted in)


def shown(value, limit: int = 40) -> str:
    """A value for a message: text quoted with control characters escaped, anything else as Python writes it;
    either cut short when long."""
    if not isinstance(value, str):
        text = repr(value)
        return text if len(text) <= limit else text[:limit] + "..."
    return repr(value if len(value) <= limit else value[:limit] + "...")


def text(value, what: str, *, limit: int = MAX_TEXT, error: type[InputError] = InputError) -> str:
    """Free text that perfmodel echoes to terminals, files and reports, as given (spaces around it removed; no
    other white space, a newline is refused wherever it is): not empty, printable, at most `limit`
    characters. An escape sequence ('\\x1b[31m') would recolour or
    rewrite a terminal; a newline would split a table row or a CSV cell."""
    if not isinstance(value, str):
        raise error(f"{what} must be text, not an object of type {type(value).__name__}.")
    stripped = value.strip(" ")
    if not stripped:
        raise error(f"{what} is empty: give some text, or leave it out.")
    odd = next((c for c in stripped if not c.isprintable()), None)
    if odd is not None:
        raise error(
            f"{what} {shown(value)} holds the control character {odd!r}: write it on one line, without escape "
            "sequences or other control characters."
        )
    if len(stripped) > limit:
        raise error(f"{what} is {len(stripped):,} characters long, more than the {limit:,} perfmodel takes.")
    return stripped


# --- output paths ------------------------------------------------------------------------------------------


def path_text(path, what: str, error: type[InputError] = InputError) -> str:
    """The text of a path the user gave: a path (not None, a number ...), not empty (which would mean the
    current folder), without a NUL byte."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise error(f"{what} must be the path of a file, not an object of type {type(path).__name__}.") from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text.strip():
        raise error(f"{what} is empty: give a path.")
    if "\0" in text:
        raise error(f"{what} {shown(text)} holds a NUL byte, which no file name can.")
    return text


def names_a_folder(text: str) -> bool:
    """'out/', '.', 'a/..': a name that can only be a folder, whatever exists."""
    return text.endswith(("/", os.sep)) or os.path.basename(text) in ("", ".", "..")


def output_file(path, what: str = "`out`", inputs: Iterable = (), error: type[InputError] = InputError) -> Path:
    """Fail early, before any work, unless `path` can be written as a file; nothing is created here.

    Refused: a name that is a folder's ('newdir/', '.'), an existing folder, a symbolic link (the atomic
    write would replace the link, not write where it points), a device or pipe (/dev/null), a folder that
    does not exist or is a file, a read-only file or folder, and one of the command's `inputs`."""
    text = path_text(path, what, error)
    if names_a_folder(text):
        raise error(f"{what} {text} names a directory: give the name of a file to write, e.g. {_example(text)}.")
    not_an_input(text, inputs, what, error=error)
    path = Path(text)
    if path.is_symlink():
        raise error(
            f"{what} {text} is a symbolic link (to {os.readlink(text)}): writing would replace the link with a "
            "file; give the file it points to, or another name."
        )
    if path.is_dir():
        raise error(f"{what} {text} is a directory: give the name of a file to write, e.g. {_example(text)}.")
    if path.exists() and not path.is_file():  # the atomic rename would replace the device or pipe itself
        raise error(f"{what} {text} is not a regular file (a device or a pipe): give the name of a file to write.")
    parent = path.parent
    if not parent.exists():
        raise error(
            f"{what} {text}: cannot write it, the directory {parent} does not exist; create it, or write elsewhere."
        )
    if not parent.is_dir():
        raise error(f"{what} {text}: cannot write it, {parent} is a file, not a directory.")
    if path.exists() and not os.access(path, os.W_OK):
        raise error(f"{what} {text}: cannot write it, the file is read-only.")
    try:  # the real test (os.access is optimistic for root and for special file systems)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise error(
            f"{what} {text}: cannot write it, cannot create files in {parent} ({exc.strerror or exc})."
        ) from None
    return path


def output_folder(
    path, what: str = "`out`", inputs: Iterable = (), writes: Iterable[str] = (), error: type[InputError] = InputError
) -> Path:
    """Fail early unless `path` is a folder that can be written into, or can be made (with the folders above
    it) where it is missing; nothing is created here. `writes`: the names (glob patterns) of the files the
    command writes there, none of which may be a folder or one of the command's `inputs`, nor lie in a folder
    that is a file."""
    text = path_text(path, what, error)
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise error(f"{what} {text} is a file: give a directory to write into.")
    existing = path
    while not existing.exists() and existing != existing.parent:  # folders still missing are made when writing
        existing = existing.parent
    if not existing.is_dir():
        raise error(f"{what} {text}: cannot write into it, {existing} is a file, not a directory.")
    if not os.access(existing, os.W_OK):
        raise error(f"{what} {text}: cannot write into it, cannot create files in {existing}.")
    if path.is_dir():
        for pattern in writes:
            folder = path / Path(pattern).parent  # a file there would make the write fail after the work
            if folder.exists() and not folder.is_dir():
                raise error(
                    f"{what} {text}: {folder} is a file, where the command writes {pattern}: move it away, or give "
                    "another directory."
                )
            for target in sorted(path.glob(pattern)):
                if target.is_dir():
                    raise error(f"{what} {text}: {target} is a directory, where the command writes a file.")
                not_an_input(target, inputs, f"{what} {text}: the file {target}", f"choose another {what}")
    return path


def not_an_input(
    path, inputs: Iterable, what: str = "`out`", fix: str = "choose another output file", error=InputError
) -> None:
    """Refuse to write `path` when it is one of `inputs`: the same file (device and inode), whatever the
    spelling (./x.csv, a symbolic link, a hard link)."""
    target = _identity(path)
    if target is None:  # does not exist yet, so it is nobody's input
        return
    for source in inputs:
        if _identity(source) == target:
            same = "" if os.fspath(source) == os.fspath(path) else f" (the same file as {os.fspath(source)})"
            raise error(
                f"{what} {os.fspath(path)} is one of this command's inputs{same}: writing it would "
                f"destroy the input; {fix}."
            )


def _identity(path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError, TypeError):  # missing, unreadable, a name with a NUL byte, not a path
        return None
    return st.st_dev, st.st_ino


def _example(text: str) -> str:
    folder = text.rstrip("/" + os.sep) or "."
    return os.path.join(folder, "out.csv") if os.path.basename(folder) not in (".", "..") else "out.csv"


# --- flags ---------------------------------------------------------------------------------------------------

GIVEN = "given_flags"  # the attribute of the parsed arguments that names the flags the user typed


def given(args, dest: str) -> bool:
    """Whether the user typed the flag whose argparse dest is `dest` (at any value, its default included)."""
    return dest in getattr(args, GIVEN, ())


def switch(value, what: str, error: type[InputError] = InputError) -> bool:
    """A yes/no setting from a caller of the library: True or False (or 0 and 1), never text such as 'no',
    which Python would take as true."""
    if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
        return bool(value)
    raise error(f"{what} must be True or False, not {shown(value)}.")


# --- JSON ----------------------------------------------------------------------------------------------------


def version(data: dict, source: str, kind: str, readable: Iterable[int], hint: str, error=InputError) -> int | None:
    """The schema_version of a JSON file of `kind` ('plan', 'predictor', 'run'), None where it has none; one
    sentence where it is not a JSON whole number (\"1\" is text) or not a version this perfmodel reads."""
    readable = tuple(readable)
    if "schema_version" not in data:
        return None
    value = data["schema_version"]
    reads = f"version{'s' if len(readable) > 1 else ''} {', '.join(map(str, readable))}"
    if isinstance(value, bool) or not isinstance(value, int):
        written = json.dumps(value)  # as the file holds it: "1" (text) is not 1
        written = written if len(written) <= 40 else written[:40] + "..."
        kind_of = "text" if isinstance(value, str) else "not a whole number"
        raise error(
            f"{source} has the {kind} schema_version {written}, which is {kind_of}: a version is a whole number "
            f"(this perfmodel reads {reads}, written without quotes); {hint}."
        )
    if value not in readable:
        raise error(f"{source} has {kind} schema_version {value}, but this perfmodel reads {reads}; {hint}.")
    return value
