"""perfmodel plan --mode online: GPUs, max batch and queue delay for a request rate and a latency SLO."""

from __future__ import annotations

from perfmodel import console
from perfmodel.commands.common import typed
from perfmodel.readers import whole_number
from perfmodel.units import MAX_BATCH_SIZE, parse_duration, parse_percentile, parse_rate

ONLINE_EXAMPLES = """online serving (--mode online):
  perfmodel plan --mode online --rate 400/s --slo 100ms --percentile 99 --profile p.csv
  perfmodel plan --mode online --rate 20k/s --slo 30ms --pool h100=8,a100=16 --objective cost \\
                 --price h100=4.5,a100=2.2 --json
  perfmodel plan --mode online --rate 400/s --slo 100ms --triton-config model_repository/resnet50/
  perfmodel plan --mode online --rate 400/s --slo 100ms --ray-serve-config serve.json
  perfmodel plan --mode online --arrivals trace.csv --slo 50ms --request-size 4
  perfmodel plan --mode online --rate 400/s --slo 100ms --margin 10% --profile p.csv

rates 400/s, 20k/s, 1.5k/s, 24000/min; --arrivals: a CSV with a column arrival_s (seconds). Requests
arrive as a Poisson process (or as in the trace), a load balancer spreads them over the GPUs, and each
GPU runs Triton's dynamic batcher; latency = queueing + batching delay + batch service time.
--margin 10%: the plan holds the SLO even with every batch's server time 10% longer than profiled
(a machine whose speed drifts); the p50/p99 it predicts are those at the profiled speed.
"""

# Flags of the batch modes, with the value they have when not given (readers.given says whether one was typed).
BATCH_ONLY = {
    "images": None,
    "mix": None,
    "deadline": None,
    "use": "p50",
    "load_time": None,
    "max_batches": None,
    "gap": None,
    "time_limit": 10.0,
    "confidence": None,
    "decode_time": None,
    "extrapolate": False,
    "transfer": False,
}  # --margin serves both
ONLINE_ONLY = {
    "rate": None,
    "slo": None,
    "percentile": None,
    "request_size": None,
    "arrivals": None,
    "triton_config": None,
    "ray_serve_config": None,
    "max_queue_delay": None,
    "no_simulation": False,
}


def add_arguments(p) -> None:
    g = p.add_argument_group("--mode online", "Plan for requests arriving at a rate, answered within an SLO.")
    g.add_argument(
        "--rate",
        type=typed(parse_rate),
        metavar="R",
        help="requests per second: 400/s, 20k/s, 24000/min (default with --arrivals: the trace's)",
    )
    g.add_argument(
        "--slo", type=typed(parse_duration, "`slo`"), metavar="T", help="latency objective per request, e.g. 100ms"
    )
    g.add_argument(
        "--percentile",
        type=typed(parse_percentile),
        metavar="P",
        help="share of requests that must meet the SLO, in percent (default: 99)",
    )
    g.add_argument(
        "--request-size",
        type=typed(whole_number, "`request_size`", high=MAX_BATCH_SIZE, unit="images"),
        metavar="K",
        help="images per request (default: 1)",
    )
    g.add_argument(
        "--arrivals", metavar="FILE", help="a CSV of arrival times (column arrival_s, seconds) to plan and check with"
    )
    g.add_argument(
        "--triton-config",
        metavar="DIR",
        help="write the config.pbtxt settings the plan assumes into this model directory",
    )
    g.add_argument(
        "--ray-serve-config",
        metavar="FILE",
        help="write the Ray Serve deployment settings the plan means (replicas, max_ongoing_requests, "
        "@serve.batch's max_batch_size and batch_wait_timeout_s) to this JSON file",
    )
    g.add_argument(
        "--max-queue-delay",
        type=typed(_delays),
        metavar="LIST",
        help="max_queue_delay candidates, e.g. 0,0.5ms,2ms (default: 0 and 1/4, 1/2, 1 x one request's time)",
    )
    g.add_argument(
        "--no-simulation",
        action="store_true",
        help="skip the simulation that checks the plan (faster; analytic figures only)",
    )


def _delays(text: str) -> list[float]:
    """'0,0.5ms,2ms' -> seconds, each 0 or more."""
    return [parse_duration(d.strip(), "`max_queue_delays`", allow_zero=True) for d in text.split(",")]


def wrong_mode_flags(args) -> list[str]:
    """The flags given that belong to the other kind of plan (at any value: `--use p50` is typed too)."""
    from perfmodel.readers import given

    other = BATCH_ONLY if args.mode == "online" else ONLINE_ONLY
    return [
        f"--{name.replace('_', '-')}"
        for name, default in other.items()
        if given(args, name) or getattr(args, name, default) != default
    ]


def run_online(args) -> int:
    from perfmodel.errors import InputError
    from perfmodel.planning.online import (
        ONLINE_COLUMNS,
        NoOnlinePlanError,
        make_online_plan,
        online_rows,
        online_summary,
        triton_header,
        triton_settings,
    )
    from perfmodel.readers import plain

    if args.slo is None:
        raise InputError("--mode online needs --slo, the latency objective, e.g. --slo 100ms.")
    inputs = [*args.profile, *args.predictor, *([args.arrivals] if args.arrivals else [])]
    triton_dir = None
    if args.triton_config is not None:
        from perfmodel.planning.triton_config import check_target

        triton_dir = check_target(args.triton_config, inputs)
    if args.ray_serve_config is not None:
        from perfmodel.planning.ray_serve_config import check_target as check_serve_target

        check_serve_target(args.ray_serve_config, inputs)
    try:
        plan = make_online_plan(
            rate=args.rate,
            slo=args.slo,
            percentile=99.0 if args.percentile is None else args.percentile,
            profiles=args.profile,
            predictors=args.predictor,
            pool=args.pool,
            prices=args.price,
            objective=args.objective,
            request_size=1 if args.request_size is None else args.request_size,
            input_size=args.input_size,
            model=args.model,
            backend=args.backend,
            precision=args.precision,
            arrivals=args.arrivals,
            max_queue_delays=args.max_queue_delay,
            simulate=not args.no_simulation,
            margin=args.margin,
        )
    except NoOnlinePlanError as exc:
        if args.json:
            console.print_json(console.clean_for_json(exc.diagnosis.to_dict()))
        raise
    from perfmodel import shipped
    from perfmodel.planning.slo_drift import lines, slo_drift

    profiles = args.profile or ([] if args.predictor else shipped.sources()[0])
    drift = slo_drift([a.hardware for a in plan.assignments], plan.margin, profiles)
    written = []
    if triton_dir is not None:
        from perfmodel.planning.triton_config import write_batching

        cpus = [a.hardware for a in plan.assignments if a.hardware.startswith("cpu")]
        written = write_batching(triton_dir, triton_settings(plan, cpus), triton_header(plan))
    if args.ray_serve_config is not None:
        from perfmodel.planning.ray_serve_config import ray_serve_settings, write_settings

        cpus = [a.hardware for a in plan.assignments if a.hardware.startswith("cpu")]
        write_settings(args.ray_serve_config, ray_serve_settings(plan, cpus), triton_header(plan))
    if args.json:
        data = {**plan.to_dict(), "drift": drift, "triton_config": [str(p) for p in written]}
        data["ray_serve_config"] = args.ray_serve_config
        console.print_json(console.clean_for_json(data))
        return 0
    console.out.print(online_summary(plan), markup=False)
    console.table(None, ONLINE_COLUMNS, online_rows(plan))
    how = "the simulation" if any(a.simulated for a in plan.assignments) else "the analytic model"
    console.note(
        f"p50 and p99 from {how} at each GPU's share of the rate; utilization = that share / the rate "
        "at which full batches keep the GPU busy."
    )
    if plan.margin:
        from solvers.online_solution import percent

        slowed = ", ".join(f"{a.hardware} {a.slowed_s * 1000:.3g} ms" for a in plan.assignments)
        console.note(
            f"those are at the profile's speed; with every batch {percent(plan.margin)} slower, "
            f"p{plain(plan.percentile)}: {slowed} (the SLO {plan.slo_s * 1000:g} ms)."
        )
    for line in lines(drift, plan.margin):
        console.note(console.for_the_command_line(line, args.flag_names))  # library text
    for path in [*written, *([args.ray_serve_config] if args.ray_serve_config else [])]:
        console.note(f"wrote {path}")
    if len(written) > 1:
        console.note("start each type's servers with tritonserver --model-config-name=<type>.")
    return 0
