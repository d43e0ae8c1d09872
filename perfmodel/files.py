"""Files in and out: atomic writes (a reader never sees a half-written file, a crash never leaves one) and
input files read with bounds (size, nesting, numbers). Which output paths may be written: readers.py."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

from perfmodel.errors import PerfmodelError

# What any file we read may hold: our own files are a few MiB, nest ~10 deep and hold numbers far
# inside these limits; anything beyond is refused in one sentence before it can exhaust memory,
# overflow the stack (deep nesting) or stall int() (thousands of digits).
MAX_INPUT_BYTES = 64 * 2**20
MAX_JSON_DEPTH = 64
MAX_INTEGER_DIGITS = 18  # |n| < 10**18 < 2**63: an int64 holds it


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Also on KeyboardInterrupt: never leave the temporary file behind.
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_texts(texts: dict) -> None:
    """Each file {path: text} written atomically, in order, with the folders it needs."""
    for path, text in texts.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)


def source_of(path, error: type[PerfmodelError], hint: str) -> str:
    """The text of a path given as an argument, or `error` with one sentence where it is none (None, a
    number, a DataFrame: a caller of the library, not the command line)."""
    try:
        return os.fspath(path)
    except TypeError:
        raise error(f"expected the path of a file, not an object of type {type(path).__name__}: {hint}.") from None


def read_bytes(path: str | os.PathLike, error: type[PerfmodelError], hint: str, limit: int | None = None) -> bytes:
    """The bytes of an input file (at most `limit`, default MAX_INPUT_BYTES), or `error` with one sentence:
    what is wrong, and `hint`."""
    source = source_of(path, error, hint)
    limit = MAX_INPUT_BYTES if limit is None else limit
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{source} does not exist: {hint}.") from None
    except IsADirectoryError:
        raise error(f"{source} is a directory: {hint}.") from None
    except PermissionError:
        raise error(f"cannot read {source}: permission denied.") from None
    except (OSError, ValueError) as exc:  # a name with a NUL byte, an I/O error, a device that cannot be read
        raise error(f"cannot read {source} ({getattr(exc, 'strerror', None) or exc}): {hint}.") from None
    if len(data) > limit:
        raise error(f"{source} is larger than {limit // 2**20} MiB, more than any file perfmodel writes: {hint}.")
    return data


class _Refused(ValueError):
    """Raised by the parser hooks: the reason a JSON document is refused."""


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INTEGER_DIGITS:
        raise _Refused(
            f"it holds a whole number of {len(text.lstrip('-')):,} digits, too large to be a count or a size"
        )
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"it holds the number {text[:20]}{'...' if len(text) > 20 else ''}, too large for a float")
    return value


def _constant(name: str):
    raise _Refused(f"it holds {name}, which is not a JSON number (JSON has no NaN or Infinity)")


def _object(pairs: list[tuple[str, object]]) -> dict:
    result = dict(pairs)
    if len(result) < len(pairs):
        keys = [k for k, _ in pairs]
        twice = next(k for k in keys if keys.count(k) > 1)
        raise _Refused(f"an object names the key {twice[:40]!r} twice, so which value counts is unclear")
    return result


def _depth(value) -> int:
    """How deep lists and objects nest (iteratively: a deep document cannot overflow the stack here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > MAX_JSON_DEPTH:
                break
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def read_json(path: str | os.PathLike, error: type[PerfmodelError], what: str, hint: str):
    """Parse a JSON file, or raise `error` with one sentence: what is wrong, and `hint` to fix it.

    Strict JSON only, within bounds: no NaN or Infinity, no number too large for a float or an int64,
    no key twice in one object, no nesting deeper than MAX_JSON_DEPTH, no file over MAX_INPUT_BYTES.
    """
    source = source_of(path, error, hint)
    return decode_json(read_bytes(path, error, hint), source, error, what, hint)


def decode_json(data: bytes, source: str, error: type[PerfmodelError], what: str, hint: str):
    """read_json on the bytes of a file already read (`source` names it), e.g. to hash the same bytes."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{source} is not {what}: it is not UTF-8 text (byte {exc.start + 1}); {hint}.") from None
    return parse_json(text, source, error, what, hint)


def parse_json(text: str, source: str, error: type[PerfmodelError], what: str, hint: str):
    """read_json's parser and checks on text already read (`source` names it in messages), e.g. to read back
    a file before writing it."""
    if not text.strip():
        raise error(f"{source} is empty, not {what}: {hint}.")
    try:
        value = json.loads(
            text, parse_int=_integer, parse_float=_float, parse_constant=_constant, object_pairs_hook=_object
        )
    except _Refused as exc:
        raise error(f"{source} is not {what}: {exc}; {hint}.") from None
    except RecursionError:
        value = None  # nested deeper than Python's stack: reported below like any too-deep document
        depth = MAX_JSON_DEPTH + 1
    except json.JSONDecodeError as exc:
        raise error(f"{source} is not {what}: it is not JSON ({exc}); {hint}.") from None
    else:
        depth = _depth(value)
    if depth > MAX_JSON_DEPTH:
        raise error(f"{source} is not {what}: its lists and objects nest more than {MAX_JSON_DEPTH} deep; {hint}.")
    return value


def _check_field_counts(text: str, header: list[str]) -> None:
    """Every data row has as many fields as the header names columns, or raise _Refused naming the first
    that does not. Empty cells past the header's last column (a trailing comma) are allowed, and so are rows
    that stop before columns the header leaves unnamed; blank lines are skipped, as pandas skips them."""
    import csv
    import io

    named = len(header)
    while named and not header[named - 1].strip():
        named -= 1
    rows = csv.reader(io.StringIO(text), skipinitialspace=True)
    next(rows, None)
    number = 0
    for fields in rows:
        if not fields:
            continue
        number += 1
        if len(fields) < named or any(cell.strip() for cell in fields[len(header) :]):
            count = len(fields)
            while count > len(header) and not fields[count - 1].strip():
                count -= 1
            raise _Refused(
                f"data row {number} (line {rows.line_num}) has {count} field{'s' if count != 1 else ''} where the "
                f"header names {named} column{'s' if named != 1 else ''} (a truncated or misaligned file)"
            )


def read_csv_text(path: str | os.PathLike, error: type[PerfmodelError], what: str):
    """A CSV as a DataFrame of strings (empty cells as ''), or `error` with one sentence on why it cannot be read.

    Bounded like read_json: no file over MAX_INPUT_BYTES, UTF-8 only, no NUL byte (the CSV parser would end
    a cell there: '4\\x002' would read as 4), no column named twice. what: the kind of file expected, e.g.
    "a profile CSV"; it completes "give the path of ...".
    """
    import csv
    import io

    import pandas as pd

    source = source_of(path, error, f"give the path of {what}")
    data = read_bytes(path, error, f"give the path of {what}")
    if not data.strip():
        raise error(f"{source} is empty: {what} needs a header row and at least one data row.")
    if data.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"["):  # read as CSV, '{' heads one odd column
        raise error(f"{source} holds JSON, not {what}: give the path of {what}.")
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise error(
            f"{source} is not a readable CSV file: line {line} holds a NUL byte, which no CSV text "
            f"has (the file is damaged, or not {what})."
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"{source} is not a readable CSV file: it is not UTF-8 text (byte {exc.start + 1}).") from None
    try:
        header = next(csv.reader(io.StringIO(text)), [])
        _check_field_counts(text, header)
    except csv.Error as exc:
        raise error(f"{source} is not a readable CSV file ({exc}).") from None
    except _Refused as exc:
        raise error(f"{source} is not a readable CSV file: {exc}.") from None
    names = [h.strip() for h in header]
    twice = sorted({c for c in names if c and names.count(c) > 1})
    if twice:
        raise error(
            f"{source} names the column{'s' if len(twice) > 1 else ''} {', '.join(map(repr, twice))} "
            "twice in its header; keep one of each."
        )
    try:
        with warnings.catch_warnings():  # rows with empty cells past the header's last column: checked above
            warnings.simplefilter("ignore", pd.errors.ParserWarning)
            # index_col=False: with pandas' default, rows one field longer than the header (a trailing comma)
            # make the first column the index and shift every other one place left.
            return pd.read_csv(
                io.StringIO(text), dtype=str, keep_default_na=False, skipinitialspace=True, index_col=False
            )
    except pd.errors.EmptyDataError:
        raise error(f"{source} is empty: {what} needs a header row and at least one data row.") from None
    except (pd.errors.ParserError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise error(f"{source} is not a readable CSV file ({reason}).") from None
