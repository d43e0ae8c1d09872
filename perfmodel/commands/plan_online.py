"""perfmodel plan --mode online: GPUs, max batch and queue delay for a request rate and a latency SLO, from the
flags read into numbers by commands/plan.py; the Triton and Ray Serve settings the plan means, where asked."""

from __future__ import annotations

from perfmodel import console


def run(args) -> int:
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
