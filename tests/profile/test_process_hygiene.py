"""However `perfmodel profile` ends (SIGTERM, SIGKILL), it leaves no process and no temporary folder.

Each test starts the real command, waits until it has started what it starts (a measuring worker,
a fresh warm-up worker, a Triton server), ends it with a signal, and then gives its children a few
seconds to go. Waits are bounds against hanging, not timings.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import descendants, perfmodel_command, repo_env

pytestmark = pytest.mark.integration  # each test starts `perfmodel profile` in a subprocess
GRACE_S = 20  # how long the children may take to notice and go (a bound, not a measurement)


def _profile(tmp_path: Path, *args: str) -> subprocess.Popen:
    command = perfmodel_command(
        "profile",
        "--model",
        "tiny",
        "--input-sizes",
        "32",
        "--out",
        str(tmp_path / "p.csv"),
        "--drift-probe",
        "0",
        *args,
    )
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=repo_env(), cwd=tmp_path)


def _wait_until(proc: subprocess.Popen, predicate, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"the profiler ended early (exit {proc.returncode}): {proc.stderr.read()[-2000:]}")
        assert time.monotonic() < deadline, "the profiler did not get there in time"
        time.sleep(0.1)


def profile_workers(proc: subprocess.Popen | int) -> list[psutil.Process]:
    """The profiler's worker processes below `proc` (a Popen or a pid), told apart by their command line."""
    found = []
    for child in descendants(proc):
        try:
            if "perfmodel.profile.worker" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:
            pass
    return found


def _temp_folders(prefix: str, owner: int) -> set[Path]:
    """The temp folders `prefix*` that name `owner` as their owner (others' runs may share this machine)."""
    found = set()
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            if int((path / "owner.pid").read_text().split()[0]) == owner:
                found.add(path)
        except (OSError, ValueError, IndexError):
            pass
    return found


def _assert_all_gone(procs: list[psutil.Process]) -> None:
    _, alive = psutil.wait_procs(procs, timeout=GRACE_S)
    alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"still running: {[' '.join(p.cmdline()[:4]) for p in alive]}"


def _assert_no_folders_left(prefix: str, owner: int) -> None:
    deadline = time.monotonic() + GRACE_S
    while _temp_folders(prefix, owner) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _temp_folders(prefix, owner)


def _signal_when(proc: subprocess.Popen, ready, sig: int) -> list[psutil.Process]:
    """Wait until `ready()`, note the profiler's children, send `sig`, wait for the profiler's end."""
    try:
        _wait_until(proc, ready)
        children = descendants(proc)
        proc.send_signal(sig)
        proc.wait(timeout=60)
        return children
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_torch_profile_with_fresh_workers(tmp_path, sig):
    """Ended while a fresh warm-up worker runs beside the measuring worker (and the monitor)."""
    proc = _profile(tmp_path, "--batch-sizes", "1,2,4,8,16,32", "--max-time-per-point", "1")
    children = _signal_when(proc, lambda: len(profile_workers(proc)) >= 2, sig)  # the measuring worker and a fresh one
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 143)
    _assert_all_gone(children)


def test_a_profile_with_a_worker_alongside_leaves_none_when_killed(tmp_path):
    """Ended by SIGKILL while the measuring worker, its neighbour (--alongside 1) and a fresh worker run."""
    proc = _profile(tmp_path, "--batch-sizes", "1,2,4,8,16,32", "--max-time-per-point", "1", "--alongside", "1")
    children = _signal_when(proc, lambda: len(profile_workers(proc)) >= 3, signal.SIGKILL)
    _assert_all_gone(children)


def test_a_profile_in_several_processes_leaves_none_when_killed(tmp_path):
    """Ended by SIGKILL while an extra steady-state worker (--processes 2) runs beside the measuring one."""
    args = ("--batch-sizes", "1,2,4", "--max-time-per-point", "1", "--warmup", "in-process", "--processes", "2")
    proc = _profile(tmp_path, *args)  # in-process warm-up: a second worker can only be an extra one
    children = _signal_when(proc, lambda: len(profile_workers(proc)) >= 2, signal.SIGKILL)
    _assert_all_gone(children)


def test_compile_workers_remove_their_cache_folders_when_the_profiler_is_killed(tmp_path):
    proc = _profile(tmp_path, "--batch-sizes", "1,2", "--compile")
    ready = lambda: len(_temp_folders("perfmodel-worker-", proc.pid)) >= 2  # noqa: E731 (measuring + fresh)
    children = _signal_when(proc, ready, signal.SIGKILL)
    _assert_all_gone(children)
    _assert_no_folders_left("perfmodel-worker-", proc.pid)


def _triton_ready() -> str | None:
    try:
        import pytriton  # noqa: F401
        import tritonclient.grpc  # noqa: F401
    except ImportError as exc:
        return f"Triton is not installed ({exc})"
    return None


@pytest.mark.triton
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_triton_profile(tmp_path, sig):
    why = _triton_ready()
    if why:
        pytest.skip(why)
    proc = _profile(
        tmp_path,
        "--backend",
        "triton",
        "--batch-sizes",
        "1,2,4",
        "--concurrency",
        "1,2",
        "--warmup",
        "in-process",
        "--max-time-per-point",
        "2",
    )
    out = tmp_path / "p.csv"
    children = _signal_when(proc, out.exists, sig)  # the server is up and measuring
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 143)
    _assert_all_gone(children)
    _assert_no_folders_left("perfmodel-triton-", proc.pid)


def test_stale_folders_of_dead_runs_are_removed_at_the_next_start(tmp_path):
    from perfmodel.errors import InputError
    from perfmodel.profile import ProfileConfig, run_profile
    from perfmodel.profile.lifetime import OWNER_FILE, owned_tempdir

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = Path(tempfile.mkdtemp(prefix="perfmodel-triton-"))
    (stale / OWNER_FILE).write_text(f"{dead.stdout.strip()} {psutil.Process().create_time():.3f}\n")
    mine = owned_tempdir("perfmodel-triton-")
    unowned = Path(tempfile.mkdtemp(prefix="perfmodel-triton-"))  # not ours to judge: no owner file
    existing = tmp_path / "p.csv"
    existing.write_text("")
    try:
        with pytest.raises(InputError, match="already exists"):  # the run stops at once, after the clean-up
            run_profile(ProfileConfig(model="tiny"), existing)
        assert not stale.exists()
        assert mine.exists() and unowned.exists()
    finally:
        for path in (stale, mine, unowned):
            subprocess.run(["rm", "-rf", str(path)], check=False)
