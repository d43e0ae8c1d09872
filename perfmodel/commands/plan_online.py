"""perfmodel plan --mode online: GPUs, max batch and queue delay for a request rate and a latency SLO, from the
flags read into numbers by commands/plan.py; the Triton and Ray Serve settings the plan means, where asked.

The data flows one way: the request checked; the files read, and where the configs go checked against them
(before any work: a path that cannot take them would fail after the solve); the plan made; the config files
and the text made; then the files written and the text printed."""

from __future__ import annotations

from perfmodel import console


def run(args) -> int:
    from perfmodel.errors import InputError
    from perfmodel.planning.online import NoOnlinePlanError, plan_online
    from perfmodel.planning.online_configs import config_files
    from perfmodel.planning.online_request import asked
    from perfmodel.planning.online_sources import read
    from perfmodel.planning.online_text import ONLINE_COLUMNS, plan_text
    from perfmodel.planning.triton_config import WRITES
    from perfmodel.readers import output_file, output_folder

    if args.slo is None:
        raise InputError("--mode online needs --slo, the latency objective, e.g. --slo 100ms.")
    a = asked(
        args.rate,
        args.slo,
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
    found = read(a)
    triton = None
    if args.triton_config is not None:
        triton = output_folder(args.triton_config, "--triton-config", a.inputs, writes=WRITES)
    if args.ray_serve_config is not None:
        output_file(args.ray_serve_config, "--ray-serve-config", a.inputs)
    try:
        job = plan_online(a, found)
    except NoOnlinePlanError as exc:
        if args.json:
            console.print_json(console.clean_for_json(exc.diagnosis.to_dict()))
        raise
    files = config_files(job.plan, triton, args.ray_serve_config)
    said = plan_text(job, list(files.triton), args.ray_serve_config)
    files.write()
    if args.json:
        data = {**job.to_dict(), "triton_config": [str(p) for p in files.triton]}
        data["ray_serve_config"] = args.ray_serve_config
        console.print_json(console.clean_for_json(data))
        return 0
    for line in said.lines:
        console.out.print(line, markup=False)
    console.table(None, ONLINE_COLUMNS, said.rows)
    for line in said.notes:
        console.note(console.for_the_command_line(line, args.flag_names))  # library text
    return 0
