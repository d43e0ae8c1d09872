"""The profiler: measure latency, warm-up and memory over batch size and input size.

The names below load on first use, so that the profiler's worker and monitor programs
(`python -m perfmodel.profile.worker`, `... .monitor`) start without the sweep's imports.
"""

from perfmodel.lazy import lazy_getattr

_LAZY = {
    "Estimate": "perfmodel.profile.config",
    "ProfileConfig": "perfmodel.profile.config",
    "SweepEvent": "perfmodel.profile.config",
    "estimate_profile": "perfmodel.profile.sweep",
    "run_profile": "perfmodel.profile.sweep",
    "LatencySummary": "perfmodel.profile.timing",
    "StabilityRule": "perfmodel.profile.timing",
    "measure_latency": "perfmodel.profile.timing",
}

__all__ = sorted(_LAZY)


__getattr__ = lazy_getattr(__name__, _LAZY)
