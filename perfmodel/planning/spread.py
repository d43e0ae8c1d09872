"""From a solved plan and what its numbers rest on (Basis) to its makespan's distribution (Makespan).

Where each spread comes from:
- a batch's mean and standard deviation: the profile's latency_mean_ms and latency_std_ms, else a
  lognormal through its p50 and p99, else none (a published median alone);
- load and first call: their samples, one per process that measured them (perfmodel/fixed_costs.py), as a
  mean and an sd; with fewer than two, the stated default's relative spread (this project's GPU
  measurements; none on a CPU); a first call carried past the largest batch measured in a fresh process
  (planning/batch_sources.py) adds what was carried to its sd;
- drift: the profile's drift probe (drift_rel_sd, drift_corr_s), else a stated default (drift.py); on a
  CPU the machine's drift is shared by its workers, a GPU drifts on its own; a CPU worker's speed also
  differs from the profile's by its own factor for the whole run (drift.CPU_LEVEL, measured run against profile);
- the profile median's 95% interval (latency_ci_rel), as one shared normal error per option; on a CPU
  also the level of the process that measured the point (drift.CPU_POINT_LEVEL: the profile is one draw too);
- a predictor's measured errors (cross-validated inside its batch range, extrapolation tested beyond,
  held-out transfer errors for a transferred group, and for a line through two batch sizes those of
  such lines on published curves), drawn as they were measured (source "transfer" for a transferred group);
- co-location: CPU workers planned beyond the number that ran while the profile was measured slow each
  other down by the ratios measured in experiments/006 (below).
"""

from __future__ import annotations

import numpy as np

from perfmodel.planning.drift import default_for, level_for, point_level_for
from perfmodel.planning.makespan import Makespan, Shared, Workers

# Two CPU workers on this project's 2-core VM against one, planned from the same solo profile:
# (measured / predicted makespan with 2 workers) / (the same with 1), 24 pairs of runs in
# experiments/006_plan_execution/results/{cpu,cpu-nice0,cpu-run5,cpu-run6}/summary.csv.
COLOCATION_RATIOS = (
    1.548, 1.311, 1.169, 1.065, 1.068, 1.027, 1.068, 1.101, 1.149, 1.113, 1.054, 1.053,
    1.003, 1.253, 1.363, 1.155, 1.241, 1.186, 1.311, 0.979, 1.219, 1.308, 1.078, 1.089,
)  # fmt: skip
_Z99 = 2.3263478740408408  # the standard normal's 99th percentile


# Fewer measured errors than this (a fit on 3-4 batch sizes) tell their size, not their direction.
MIN_DIRECTED_ERRORS = 5


def undirected(errors) -> np.ndarray:
    """A predictor's relative errors as the plan draws them. Five or more: as measured. Fewer: one
    held-out batch size's error says how far the fit can be off, not which way it is off at another
    batch size, and as a distribution it would move the whole plan by it (a fit on 3 batch sizes has one
    such error, once +132%: every plan's median 2.3x its finish). Each ratio is then taken both ways
    (1 + e and 1 / (1 + e)), beside the fit itself (no error)."""
    errors = np.asarray(errors, float)
    if len(errors) >= MIN_DIRECTED_ERRORS:
        return errors
    ratios = 1.0 + errors[errors > -1]
    return np.concatenate(([0.0], ratios - 1.0, 1.0 / ratios - 1.0))


def batch_moments(p50, p99=None, mean=None, sd=None) -> tuple[np.ndarray, np.ndarray]:
    """(mean, sd) of one batch's time, arrays like p50: measured mean and sd where given, else a
    lognormal through p50 and p99, else (p50, 0)."""
    p50 = np.asarray(p50, float)
    out_mean, out_sd = p50.copy(), np.zeros_like(p50)
    if p99 is not None:
        p99 = np.broadcast_to(np.asarray(p99, float), p50.shape)
        ok = np.isfinite(p99) & (p99 > p50) & (p50 > 0)
        s = np.where(ok, np.log(np.where(ok, p99 / np.where(p50 > 0, p50, 1), 1)) / _Z99, 0.0)
        out_mean = np.where(ok, p50 * np.exp(s * s / 2), out_mean)
        out_sd = np.where(ok, out_mean * np.sqrt(np.expm1(s * s)), out_sd)
    if mean is not None and sd is not None:
        mean = np.broadcast_to(np.asarray(mean, float), p50.shape)
        sd = np.broadcast_to(np.asarray(sd, float), p50.shape)
        ok = np.isfinite(mean) & (mean > 0) & np.isfinite(sd) & (sd >= 0)
        out_mean, out_sd = np.where(ok, mean, out_mean), np.where(ok, sd, out_sd)
    return out_mean, out_sd


def makespan_of(plan, basis) -> Makespan:
    """The plan's makespan model."""
    groups, shared, drifts = [], {}, {}
    for a in plan.assignments:
        if a.count == 0 or a.images == 0:
            continue
        t = basis.of(a.hardware)
        key = (a.label, a.input_size, a.batch_size)
        mean, sd = t.moments.get(key, (a.latency_s, 0.0))
        warmup = a.warmup_s + (mean - a.latency_s)  # the first batch: its warm-up excess over the batch's mean
        load_s, load_sd, warmup_sd = a.load_s, 0.0, 0.0
        if t.load is not None:  # the solver plans on the median load; the distribution has its mean and sd
            load_s = t.load.mean_s
            load_sd = t.load.sd_at(load_s)
            warmup_sd = t.first_call[a.label].sd_at(max(a.warmup_s - a.latency_s, 0.0))
        # a first call carried past the largest batch measured in a fresh process: as unsure as the carry
        warmup_sd = float(np.hypot(warmup_sd, t.warmup_carried.get(key, 0.0)))
        compute_s = warmup + (a.batches - 1) * mean
        drift = t.drift or default_for(a.hardware)
        names: list[tuple[str, float]] = []
        level = level_for(a.hardware)
        if level is not None:  # a CPU: one machine's cores, its workers share its speed
            name = f"drift {a.hardware}"
            shared[name], drifts[name] = Shared("drift"), drift
            names.append((name, drift.run_rel_sd(compute_s)))
            # and each worker process's speed against the profile's, minutes later: its own, for the run
            own = drifts[f"level {a.hardware}"] = level
        else:
            own = drift
        # The profile point's median: its own 95% interval and, on a CPU, the level of the process that
        # measured it (one draw, shared by the workers planned from that point).
        ci_sd = (t.median_ci.get(key) or 0.0) / 1.96
        point, point_sd = point_level_for(a.hardware), ci_sd
        if point is not None:
            drifts[f"profile level {a.hardware}"] = point
            point_sd = float(np.hypot(ci_sd, point.rel_sd))
        if point_sd > 0:
            name = f"profile {a.hardware} {a.label} {a.input_size}px batch {a.batch_size}"
            shared[name] = Shared("profile")
            names.append((name, point_sd))
        largest = t.measured.get((a.label, a.input_size))
        region = "beyond" if largest is not None and a.batch_size > largest else "inside"
        errors = t.errors.get((a.label, region))
        if errors:
            # a transferred group's errors are those of carrying a curve to a GPU never profiled
            source = "transfer" if a.label in t.transferred else "predictor"
            name = f"{source} {a.hardware} {a.label} {region}"
            shared[name] = Shared(source, "samples", tuple(errors))
            names.append((name, 1.0))
        measured_with = t.measured_workers.get(a.label)
        if measured_with is not None and plan.gpus_by_type.get(a.hardware, 0) > measured_with:
            name = f"co-location {a.hardware}"
            shared[name] = Shared("co-location", "samples", tuple(r - 1 for r in COLOCATION_RATIOS))
            names.append((name, 1.0))
        groups.append(
            Workers(
                count=a.count,
                load_s=load_s,
                warmup_s=warmup,
                batches=a.batches - 1,
                batch_mean_s=mean,
                batch_sd_s=sd,
                load_sd_s=load_sd,
                warmup_sd_s=warmup_sd,
                drift=own,
                shared=tuple(names),
                name=f"{a.hardware} {a.label} batch {a.batch_size}",
            )
        )
    return Makespan(tuple(groups), shared, drifts)
