"""perfmodel plan, soft and relaxed modes: make_plan on the flags (read into numbers by commands/plan.py),
then the plan as JSON or for people (planning/batch_text.py)."""

from __future__ import annotations

from perfmodel import console


def run(args) -> int:
    from perfmodel.planning.batch import MAX_IMAGES, NoPlanError, make_plan
    from perfmodel.planning.batch_text import PLAN_COLUMNS, plan_text
    from perfmodel.planning.context import PLAN_FORMAT, PLAN_SCHEMA_VERSION
    from perfmodel.readers import given
    from perfmodel.units import parse_mix

    mix = None if args.mix is None else parse_mix(args.mix, args.images, maximum=MAX_IMAGES)  # shares of --images
    try:
        job = make_plan(
            images=args.images,
            deadline=args.deadline,
            input_size=args.input_size,
            mix=mix,
            pool=args.pool,
            profiles=args.profile,
            predictors=args.predictor,
            model=args.model,
            mode=args.mode,
            objective=args.objective,
            margin=args.margin if given(args, "margin") or args.margin != 0 else None,  # --margin 0 typed: fixed rule
            use=args.use,
            load_time=args.load_time,
            decode=args.decode_time,
            max_batches=args.max_batches,
            prices=args.price,
            backend=args.backend,
            precision=args.precision,
            gap=args.gap,
            time_limit=args.time_limit,
            extrapolate=args.extrapolate,
            confidence=args.confidence,
            transfer=args.transfer,
        )
    except NoPlanError as exc:
        if args.json:
            head = {"format": PLAN_FORMAT, "schema_version": PLAN_SCHEMA_VERSION}
            console.print_json(console.clean_for_json({**head, **exc.diagnosis.to_dict()}))
        raise
    if not args.json:
        said = plan_text(job)
        for line in said.lines:
            console.out.print(console.for_the_command_line(line, args.flag_names), markup=False)  # library text
        if said.rows:
            console.table(None, PLAN_COLUMNS, said.rows)
        for line in said.notes:
            console.note(console.for_the_command_line(line, args.flag_names))
        return 0
    console.print_json(console.clean_for_json(job.to_dict()))
    return 0
