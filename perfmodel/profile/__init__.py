"""The profiler: measure latency, warm-up and memory over batch size and input size."""

from perfmodel.profile.sweep import ProfileConfig, SweepEvent, run_profile
from perfmodel.profile.timing import LatencySummary, StabilityRule, measure_latency

__all__ = ["LatencySummary", "ProfileConfig", "StabilityRule", "SweepEvent", "measure_latency", "run_profile"]
