"""What the experiments share: perfmodel run as a user runs it (a subprocess of this checkout), and a new
results folder for every run that says where and when it ran.

An experiment's script puts the repository on sys.path (as it does for perfmodel) and imports this:

    from experiments.lab import finish_results, new_results, perfmodel

    out = new_results(HERE, device="cpu")        # results/2026-11-25-amd-epyc-7763-64-core-1a2b3c4d5e/
    perfmodel("plan", "--images", 1000, "--deadline", "60s", "--json")
    finish_results(out)                          # adds the end time and load average to out/run.json

A folder is never reused: a second run of the same day, machine and commit gets a `-2` suffix, so
committed results are never overwritten. run.json records the machine, the commit (with `-dirty` when the
checkout had uncommitted changes), the start and end (UTC), the 1-minute load average at both, and the
command line. The start is the experiment's (when it imported this module), also where the folder is made
only at the end. A run stopped before it wrote a file but run.json (Ctrl-C, an error) leaves
no folder behind; one stopped later keeps what it wrote, and its run.json has no `ended_utc`.
"""

from __future__ import annotations

import argparse
import atexit
import calendar
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The experiment's start, and the load then: it imports this module as it begins.
STARTED = (time.time(), round(os.getloadavg()[0], 2))


def perfmodel(
    *args,
    check: bool = True,
    allow: tuple[int, ...] = (),
    capture: bool = True,
    echo: bool = False,
    prefix: tuple[str, ...] | list[str] = (),
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess:
    """`perfmodel ARGS` in a subprocess that imports this checkout. With `check`, an exit code other than 0
    and those in `allow` stops the experiment with perfmodel's own message. `prefix` goes before the
    interpreter (e.g. `ip netns exec NS`); `env` adds variables."""
    command = [*prefix, sys.executable, "-m", "perfmodel", *map(str, args)]
    if echo:
        print("$", " ".join(command), flush=True)
    environment = dict(os.environ, **(env or {}))
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), environment.get("PYTHONPATH")) if p)
    done = subprocess.run(command, capture_output=capture, text=True, env=environment)
    if check and done.returncode not in (0, *allow):
        message = (done.stderr or "").strip() if capture else ""
        raise SystemExit(f"failed ({done.returncode}): perfmodel {' '.join(map(str, args))}\n{message}")
    return done


def at_least_one(text: str) -> int:
    """An argparse type for counts (--repeats, --seeds, --rounds): a whole number, 1 or more."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"give a whole number of 1 or more, not {text!r}")
    return int(text)


def no_options(doc: str) -> None:
    """For a script that takes no options: --help prints `doc`, anything else is refused in one sentence."""
    argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson 95% interval of a proportion k of n (NaN, NaN for n = 0)."""
    if n == 0:
        return (math.nan, math.nan)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def log(message: str) -> None:
    """A progress line on stderr, with the time and the load average it ran at."""
    print(f"[{time.strftime('%H:%M:%S')}, load {load_average():.2f}] {message}", file=sys.stderr, flush=True)


def load_average() -> float:
    """The 1-minute load average, rounded: every result is shown beside it."""
    return round(os.getloadavg()[0], 2)


def commit() -> str:
    """This checkout's commit (10 hex digits), `-dirty` when tracked files have uncommitted changes."""
    try:
        head = _git("rev-parse", "--short=10", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def machine(device: str = "cpu") -> str:
    """What ran it, in words: the GPU's name on `cuda`, else the CPU's; with the core count."""
    from perfmodel.profile.provenance import cpu_name

    cores = f"{os.cpu_count()} CPU cores"
    if device.startswith("cuda"):
        import torch

        return f"{torch.cuda.get_device_name(0)}, {cores} ({cpu_name()})"
    return f"{cpu_name()}, {cores}"


def new_results(here: Path, device: str = "cpu", argv: list[str] | None = None) -> Path:
    """A new folder here/results/<date>-<machine>-<commit>/ (UTC date), with run.json started."""
    described = machine(device)
    slug = re.sub(r"[^a-z0-9]+", "-", described.split(",")[0].lower()).strip("-")[:40].strip("-")
    base = Path(here) / "results" / f"{time.strftime('%Y-%m-%d', time.gmtime())}-{slug}-{commit()}"
    folder, n = base, 1
    while True:
        try:
            folder.mkdir(parents=True)
            break
        except FileExistsError:
            n += 1
            folder = base.with_name(f"{base.name}-{n}")
    record = {
        "machine": described,
        "commit": commit(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(STARTED[0])),
        "load_avg_start": STARTED[1],
        "command": " ".join(argv if argv is not None else [Path(sys.argv[0]).name, *sys.argv[1:]]),
    }
    (folder / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    atexit.register(drop_if_empty, folder)
    return folder


def drop_if_empty(folder: Path) -> None:
    """At exit: remove `folder` if the run stopped before it wrote anything but run.json (and empty folders)."""
    folder = Path(folder)
    if not folder.is_dir() or [p for p in folder.rglob("*") if not p.is_dir()] != [folder / "run.json"]:
        return
    if "ended_utc" not in json.loads((folder / "run.json").read_text()):
        shutil.rmtree(folder)
        print(f"nothing was measured: removed {folder}", file=sys.stderr)


def finish_results(folder: Path) -> dict:
    """Add the end (UTC), the minutes taken and the load average now to folder/run.json; return it."""
    path = Path(folder) / "run.json"
    record = json.loads(path.read_text())
    started = calendar.timegm(time.strptime(record["started_utc"], "%Y-%m-%dT%H:%M:%SZ"))
    now = time.time()
    record.update(
        ended_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
        minutes=round((now - started) / 60, 1),
        load_avg_end=load_average(),
    )
    path.write_text(json.dumps(record, indent=2) + "\n")
    return record


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()
