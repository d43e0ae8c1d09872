"""Shared fixtures: a fast stability rule, a tiny profile sweep, and the GPU marker's skip."""

from __future__ import annotations

import signal

import pytest

from perfmodel.profile import ProfileConfig, StabilityRule

# Short sampling: tests check behaviour, not numbers, so a fraction of a second per point is enough.
FAST_RULE = StabilityRule(rel_ci=0.5, min_samples=5, max_samples=50, max_time_s=0.2, floor_samples=3, warmup_calls=1)


# Tests started in the background of a non-interactive shell inherit SIGINT ignored, and so would every
# perfmodel process they start, which then cannot be interrupted: the Ctrl-C tests need it at its default
# (a handler here resets to the default in every program started from this process).
signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
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
        base = dict(model="tiny", batch_sizes=(1, 2), input_sizes=(32,), warmup="in-process", rule=FAST_RULE)
        base.update(changes)
        return ProfileConfig(**base)

    return make
