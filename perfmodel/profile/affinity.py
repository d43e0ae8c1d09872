"""CPU cores for a local server and for the load generator beside it (Linux scheduler affinity).

On one machine, a load generator that shares the server's cores slows the server exactly when the load
is highest (it has the most requests to send then), and the measured tail is the generator's as much as
the server's; perf_analyzer's users run it on another machine for that reason. `--server-cpus` keeps
them apart on one machine: the server (all its processes and threads) on the cores named, the
generator on the others.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from perfmodel.errors import InputError

EXAMPLE = "1 or 2-3 or 0,2"


def usable_cpus() -> frozenset[int]:
    """The cores this process may run on; InputError where the system cannot pin (not Linux)."""
    if not hasattr(os, "sched_getaffinity"):
        raise InputError("`server_cpus` needs Linux (the scheduler's CPU affinity); leave it out here.")
    return frozenset(os.sched_getaffinity(0))


def parse_cpus(text: str, option: str = "`server_cpus`") -> tuple[int, ...]:
    """'1', '2-3', '0,2-3' -> the sorted core numbers, each one this process may use, and at least one
    of those left over (for the load generator); InputError for anything else."""
    usable = usable_cpus()
    cores = set(cores_of(text, option))
    missing = sorted(cores - usable)
    if missing:
        raise InputError(
            f"{option}: core {missing[0]} is not one this process may use (it may use "
            f"{shown_cpus(usable)}); name those."
        )
    if not usable - cores:
        raise InputError(
            f"{option} {text} names every core this process may use ({shown_cpus(usable)}): leave at "
            "least one for the load generator."
        )
    return tuple(sorted(cores))


def cores_of(text: str, option: str) -> tuple[int, ...]:
    """'0,2-3' -> (0, 2, 3), whatever this process may use (the server is started from the pinned generator)."""
    cores: set[int] = set()
    for item in str(text).split(","):
        match = re.fullmatch(r"\s*([0-9]{1,6})\s*(?:-\s*([0-9]{1,6})\s*)?", item)  # ASCII digits only
        if not match or (match[2] is not None and int(match[2]) < int(match[1])):
            raise InputError(
                f"{option} needs core numbers or ranges separated by commas, e.g. {EXAMPLE}; got {text!r}."
            )
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        cores.update(range(first, last + 1))
    return tuple(sorted(cores))


def shown_cpus(cpus: Iterable[int]) -> str:
    """(0, 1, 2, 5) -> '0-2,5'."""
    runs: list[list[int]] = []
    for core in sorted(cpus):
        if runs and core == runs[-1][1] + 1:
            runs[-1][1] = core
        else:
            runs.append([core, core])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def pin_process(cpus: Iterable[int]) -> None:
    """Every thread of this process onto `cpus`: threads started before (a client library's) move too,
    threads and processes started after inherit it."""
    cpus = set(cpus)
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except (ProcessLookupError, FileNotFoundError):  # the thread ended meanwhile
            pass


@contextmanager
def pinned_apart_from(server_cpus: tuple[int, ...]) -> Iterator[None]:
    """This process (the load generator) on every usable core but the server's, for the block; as before after.
    No server cores named: nothing is pinned."""
    if not server_cpus:
        yield
        return
    before = usable_cpus()
    pin_process(before - set(server_cpus))
    try:
        yield
    finally:
        pin_process(before)
