"""Atomic file writes: a reader never sees a half-written file, a crash never leaves one."""

from __future__ import annotations

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


def read_json(path: str | os.PathLike, error: type[PerfmodelError], what: str, hint: str):
    """Parse a JSON file, or raise `error` with one sentence: what is wrong, and `hint` to fix it."""
    source = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise error(f"{source} does not exist: {hint}.") from None
    except IsADirectoryError:
        raise error(f"{source} is a directory: {hint}.") from None
    except PermissionError:
        raise error(f"cannot read {source}: permission denied.") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{source} is not {what}: it is not JSON ({exc}); {hint}.") from None
