"""Atomic file writes (a reader never sees a half-written file, a crash never leaves one), and reads
that fail in one sentence."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path

from perfmodel.errors import InputError, PerfmodelError


def check_writable(path: str | os.PathLike) -> Path:
    """Fail early, before any work, if `path` cannot be written."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"{path} is a directory: give a file name to write to.")
    if not parent.is_dir():
        raise InputError(f"cannot write {path}: the directory {parent} does not exist.")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"cannot write {path}: the file is read-only.")
    try:  # the real test (os.access is optimistic for root and for special file systems)
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write {path}: cannot create files in {parent} ({exc.strerror or exc}).") from None
    return path


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


@contextlib.contextmanager
def reading(path: str | os.PathLike, error: type[PerfmodelError], hint: str):
    """Turn the usual ways a file cannot be opened into `error`, one sentence ending with `hint`."""
    source = os.fspath(path)
    try:
        yield source
    except FileNotFoundError:
        raise error(f"{source} does not exist: {hint}.") from None
    except IsADirectoryError:
        raise error(f"{source} is a directory: {hint}.") from None
    except PermissionError:
        raise error(f"cannot read {source}: permission denied.") from None


def read_json(path: str | os.PathLike, error: type[PerfmodelError], what: str, hint: str):
    """Parse a JSON file, or raise `error` with one sentence: what is wrong, and `hint` to fix it."""
    with reading(path, error, hint) as source:
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise error(f"{source} is not {what}: it is not JSON ({exc}); {hint}.") from None


def read_csv_text(path: str | os.PathLike, error: type[PerfmodelError], hint: str, empty: str | None = None):
    """A CSV as a DataFrame of text cells (pandas), or `error` with one sentence: what is wrong, and `hint`."""
    import pandas as pd

    with reading(path, error, hint) as source:
        try:
            return pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
        except pd.errors.EmptyDataError:
            raise error(f"{source} is empty: {empty or hint}.") from None
        except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise error(f"{source} is not a readable CSV file ({reason}).") from None
