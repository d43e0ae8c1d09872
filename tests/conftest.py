"""Shared helpers: a fast stability rule, a tiny profile sweep, the CLI in-process (run_cli, refused) and
as a subprocess (perfmodel_command, repo_env, descendants), and the markers' rules (the GPU skip; Triton
tests are integration tests; timeouts).

Test files import the plain helpers with `from conftest import repo_env, run_cli`: the tests live in folders
that mirror the package, and pyproject.toml puts tests/ on sys.path.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from perfmodel.cli import main
from perfmodel.profile import ProfileConfig, StabilityRule

REPO = Path(__file__).resolve().parents[1]

# Short sampling: tests check behaviour, not numbers, so a fraction of a second per point is enough.
FAST_RULE = StabilityRule(rel_ci=0.5, min_samples=5, max_samples=50, max_time_s=0.2, floor_samples=3, warmup_calls=1)


# Tests started in the background of a non-interactive shell inherit SIGINT ignored, and so would every
# perfmodel process they start, which then cannot be interrupted: the Ctrl-C tests need it at its default
# (a handler here resets to the default in every program started from this process).
signal.signal(signal.SIGINT, signal.default_int_handler)


# pyproject's `timeout` (300 s) bounds a unit test; a test marked slow or integration waits on other
# programs (a Ray cluster, a Triton server, a sweep in a subprocess) and gets this bound unless it names its own.
LONG_TIMEOUT_S = 1800


def repo_env(**extra: str) -> dict[str, str]:
    """This process's environment with the checkout first on PYTHONPATH: a subprocess imports this tree."""
    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def perfmodel_command(*args) -> list[str]:
    """The command line of `perfmodel ARGS` as a subprocess of this interpreter (run it with repo_env())."""
    return [sys.executable, "-m", "perfmodel", *map(str, args)]


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """`perfmodel ARGS` in this process: its exit code, stdout and stderr."""
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def refused(capsys, *args) -> str:
    """`perfmodel ARGS` in this process must refuse: exit code 2, one line `error: ...`, no traceback."""
    code, _, err = run_cli(capsys, *args)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    return err


def descendants(proc: subprocess.Popen | int) -> list[psutil.Process]:
    """Every process below `proc` (a Popen or a pid); none once it is gone."""
    try:
        return psutil.Process(proc if isinstance(proc, int) else proc.pid).children(recursive=True)
    except psutil.Error:
        return []


@pytest.hookimpl(tryfirst=True)  # before -m deselects: a Triton test's implied `integration` must count
def pytest_collection_modifyitems(config, items):
    for item in items:
        if "triton" in item.keywords:  # a Triton server is another program
            item.add_marker(pytest.mark.integration)
        long = item.get_closest_marker("slow") or item.get_closest_marker("integration")
        if long and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LONG_TIMEOUT_S))
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip)


@pytest.fixture
def tiny_config():
    """A sweep of the tiny CNN that takes about a second (warm-up measured in-process)."""

    def make(**changes) -> ProfileConfig:
        base = dict(
            model="tiny", batch_sizes=(1, 2), input_sizes=(32,), warmup="in-process", rule=FAST_RULE, drift_probe_s=0
        )
        base.update(changes)
        return ProfileConfig(**base)

    return make
