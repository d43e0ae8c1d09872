"""What perfmodel profile says: the estimate (as text and JSON), each point's progress line, what an interrupted
sweep left, the warnings on a sweep's points, and the profile as tables."""

from __future__ import annotations

from perfmodel import console
from perfmodel.errors import PerfmodelError


def estimate_summary(plan, flag_names: dict, resume_into: str | None = None) -> str:
    """The estimate in one line, its parameters named by their flags; `resume_into`: the --out of --resume."""
    summary = console.for_the_command_line(plan.describe(), flag_names)
    if resume_into is not None:  # the estimate does not read --out
        summary += f"; that is the whole sweep: --resume measures only the points not yet in {resume_into}"
    return summary


def estimate_json(plan, summary: str) -> dict:
    """--estimate --json."""
    return {
        "points": plan.points,
        "points_is_bound": plan.bound,
        "fresh_workers": plan.fresh_workers,
        "sampling_s_max": plan.sampling_s,
        **_calls_json(plan),
        "summary": summary,
        **({"processes": plan.processes} if plan.processes > 1 else {}),
    }


def point_line(event, message: str) -> str:
    """A measured (or resumed) point's progress line; `message`: the event's library text, flags named."""
    from perfmodel.profile.config import duration_text

    state = "from file" if event.resumed else event.status
    load = f", {message}" if message else ""
    eta = f" (about {duration_text(event.eta_s)} left)" if event.eta_s is not None else ""
    where = f"{event.input_size} px, batch {event.batch_size}{load}"
    return f"{where}: {state}{eta}"


def _calls_json(plan) -> dict:
    """--estimate --json: what the calls add, and at which call time (none for a backend whose points are bounded)."""
    if not plan.slowest:
        return {}
    return {
        "process_starts": plan.fresh_workers + plan.extra_workers + 1,
        "slowest_call": plan.slowest,
        # at slowest_call_s, or (null) per second of the slowest call
        "slowest_call_s": plan.slowest_s,
        "calls_s": plan.calls_s * plan.processes,
        "measuring_s": plan.measuring_s,
    }


def saved(out: str, new: int, finished: bool = False) -> str:
    """What an interrupted sweep left: one sentence that names only a file that exists, and --resume only
    when something is left to measure (`finished`: the last point was done)."""
    from pathlib import Path

    from perfmodel.schema import load_profile

    if not Path(out).exists():
        return "stopped before the first point was measured; nothing was written."
    try:
        held = f"{out} holds {len(load_profile(out))} point(s)"
    except PerfmodelError:
        held = f"{out} keeps what was measured"
    if finished:
        return f"{new} new point(s) were measured and {held}: every point of the sweep is done."
    return f"{new} new point(s) were measured and {held}; run the same command with --resume to measure the rest."


def warn_late_sender(df, limit_ms: float = 10.0) -> None:
    """Open-loop rows whose sender fell behind its schedule: the client machine was too busy for the rate."""
    if "sender_lag_p99_ms" not in df.columns:
        return
    late = df[df["sender_lag_p99_ms"].astype(float) > limit_ms]
    if len(late):
        console.note(
            f"warning: at {len(late)} rate(s) the sender was more than {limit_ms:g} ms behind its schedule for 1% of "
            f"the requests (worst {late['sender_lag_p99_ms'].max():.3g} ms; sender_lag_p99_ms): the client machine "
            "is too busy for those rates, so the requests came burstier than a Poisson process."
        )


def warn_unstable(df, rule) -> None:
    """One line for all points whose median did not settle (a busy machine), not one per point."""
    if "stable" not in df.columns:
        return
    ok = df[df["status"] == "ok"]
    unstable = ok[ok["stable"].astype(str).str.lower() == "false"]
    if len(unstable):
        worst = unstable["latency_ci_rel"].max() if "latency_ci_rel" in unstable.columns else float("nan")
        console.note(
            f"warning: {len(unstable)} of {len(ok)} point(s) did not reach a median known to +-1% "
            f"(worst +-{worst:.1%}) within {rule.max_time_s:g} s"
            + (f" ({rule.longest_s:g} s for short calls)" if rule.longest_s > rule.max_time_s else "")
            + "; the machine may be busy (see the load_avg_1m column), or allow more time with "
            "--max-time-per-point (--max-time-short-calls for short calls)."
        )


def print_profile(df) -> None:
    columns = [
        "input_size",
        "batch_size",
        "mode",
        "concurrency",
        "rate_per_s",
        "status",
        "latency_ms",
        "latency_p99_ms",
        "warmup_ms",
        "memory_mb",
        "throughput_ips",
        "achieved_rate_per_s",
        "server_batch_mean",
        "kept_up",
    ]
    headers = dict(
        zip(
            columns,
            [
                "size px",
                "batch",
                "mode",
                "in flight",
                "rate/s",
                "status",
                "median ms",
                "p99 ms",
                "warm-up ms",
                "memory MiB",
                "images/s",
                "answered/s",
                "server batch",
                "kept up",
            ],
        )
    )
    for key, group in df.groupby(["hardware", "model", "backend", "precision"], sort=False):
        shown = [
            c
            for c in columns
            if c in group.columns and group[c].astype(str).str.strip().ne("").any() and not group[c].isna().all()
        ]
        order = [c for c in ("input_size", "batch_size", "mode", "concurrency", "rate_per_s") if c in shown]
        rows = group.sort_values(order)[shown]
        console.table(" ".join(str(k) for k in key), [headers[c] for c in shown], rows.itertuples(index=False))
