"""What an online plan answers: GPUs and batching settings per type (OnlinePlan), or why none (OnlineDiagnosis)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OnlineAssignment:
    """`count` GPUs of one type with the same settings, each taking rate_per_gpu_s requests/s."""

    hardware: str
    option: str
    input_size: int | None
    count: int
    max_batch: int
    max_queue_delay_s: float
    preferred_batch_sizes: tuple[int, ...]
    rate_per_gpu_s: float
    capacity_per_gpu_s: float
    peak_per_gpu_s: float
    utilization: float  # rate per GPU / its peak (every batch full)
    predicted_p50_s: float
    predicted_p99_s: float
    predicted_s: float  # at the SLO's percentile
    analytic_s: float  # the analytic model's latency at the SLO's percentile
    slowed_s: float  # at the SLO's percentile with every batch slower by the plan's margin (predicted_s without one)
    simulated: bool  # the predicted_* figures come from the simulation (else from the analytic model)
    mean_batch: float  # requests per batch in the simulation (nan without it)

    def to_dict(self) -> dict:
        ms = 1000.0
        return {
            "hardware": self.hardware,
            "option": self.option,
            "input_size": self.input_size,
            "count": self.count,
            "max_batch": self.max_batch,
            "max_queue_delay_ms": self.max_queue_delay_s * ms,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "utilization": self.utilization,
            "predicted_p50_ms": self.predicted_p50_s * ms,
            "predicted_p99_ms": self.predicted_p99_s * ms,
            "predicted_ms_at_percentile": self.predicted_s * ms,
            "analytic_ms_at_percentile": self.analytic_s * ms,
            "slowed_ms_at_percentile": self.slowed_s * ms,
            "simulated": self.simulated,
            "rate_per_gpu_per_s": self.rate_per_gpu_s,
            "capacity_per_gpu_per_s": self.capacity_per_gpu_s,
            "peak_per_gpu_per_s": self.peak_per_gpu_s,
            "mean_batch_requests": self.mean_batch,
        }


@dataclass(frozen=True)
class OnlinePlan:
    """GPUs and batching settings that meet the SLO. status 'optimal': the fewest GPUs (lowest cost)
    under the analytic model, confirmed by the simulation; 'feasible': the simulation asked for more
    GPUs than the model, or the cost is within `gap` of the best. With a `margin` the SLO holds with every
    batch's server time 1 + margin times the profile's: the counts, settings and capacities are those of
    the slowed service; the predicted latencies those at the profile's speed (slowed_s: with the margin)."""

    status: str
    objective: str
    rate_per_s: float
    slo_s: float
    percentile: float
    margin: float  # a fraction: the SLO holds with every batch that much slower
    request_size: int
    arrivals: str  # 'poisson' or 'trace'
    assignments: tuple[OnlineAssignment, ...]
    gpus_by_type: dict[str, int]
    cost: float | None  # per hour
    capacity_per_s: float  # the highest rate these GPUs hold within the SLO
    gap: float
    solve_time_s: float

    @property
    def total_gpus(self) -> int:
        return sum(self.gpus_by_type.values())

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "mode": "online",
            "objective": self.objective,
            "rate_per_s": self.rate_per_s,
            "slo_ms": self.slo_s * 1000.0,
            "percentile": self.percentile,
            "margin": self.margin,
            "request_size": self.request_size,
            "arrivals": self.arrivals,
            "total_gpus": self.total_gpus,
            "gpus_by_type": dict(self.gpus_by_type),
            "cost": self.cost,
            "cost_billing": "per hour, every GPU of the plan",
            "capacity_per_s": self.capacity_per_s,
            "gap": self.gap,
            "solve_time_s": self.solve_time_s,
            "assignments": [a.to_dict() for a in self.assignments],
        }


@dataclass(frozen=True)
class OnlineDiagnosis:
    """Why no GPUs of the pool meet the SLO at the rate, and what would.

    fastest_s: per type, the latency at the percentile of a request alone (the SLO must exceed it).
    max_rate_per_s: the highest rate the pool holds within the SLO. extra_gpus: per type with a count,
    how many more of it alone (the others as given) hold the rate; None where none do. min_slo_s: the
    smallest SLO at which the pool holds the rate (None: none does, the rate is above its peak). With a
    `margin` every figure is that of the service slowed by it (what a plan must hold).
    """

    reason: str
    rate_per_s: float
    slo_s: float
    percentile: float
    margin: float
    unservable: tuple[str, ...]
    fastest_s: dict[str, float | None]
    max_rate_per_s: float | None
    extra_gpus: dict[str, int | None]
    min_slo_s: float | None

    def to_dict(self) -> dict:
        return {
            "status": "infeasible",
            "mode": "online",
            "reason": self.reason,
            "rate_per_s": self.rate_per_s,
            "slo_ms": self.slo_s * 1000.0,
            "percentile": self.percentile,
            "margin": self.margin,
            "unservable": list(self.unservable),
            "fastest_ms": {k: None if v is None else v * 1000.0 for k, v in self.fastest_s.items()},
            "max_rate_per_s": self.max_rate_per_s,
            "extra_gpus": dict(self.extra_gpus),
            "min_slo_ms": None if self.min_slo_s is None else self.min_slo_s * 1000.0,
        }


def percent(share: float) -> str:
    """0.1 -> '10%', 0.125 -> '12.5%'."""
    return f"{share * 100:.3g}%"
