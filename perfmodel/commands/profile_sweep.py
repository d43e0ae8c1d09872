"""perfmodel profile's run: the flags read into a ProfileConfig (profile_config.py), then the estimate, or the
sweep with its progress and, however it ends, what it wrote (the words: profile_text.py)."""

from __future__ import annotations

from perfmodel import console, exit_codes
from perfmodel.commands import profile_config, profile_text
from perfmodel.commands.common import Terminated, sigterm_as_interrupt
from perfmodel.errors import PerfmodelError


def run(args) -> int:
    from perfmodel.profile import estimate_profile, run_profile
    from perfmodel.readers import output_file

    output_file(args.out, "--out")  # before the model is built or a server started (the sweep checks it again)
    config = profile_config.config(args)
    if args.estimate:
        plan = estimate_profile(config)
        summary = profile_text.estimate_summary(plan, args.flag_names, args.out if args.resume else None)
        if args.json:
            console.print_json(profile_text.estimate_json(plan, summary))
        else:
            console.note(f"{args.model}: {summary}")
        return 0
    new_points = []
    counted = {"done": 0, "total": None}  # the sweep's last point event: is anything left after an interrupt?
    with sigterm_as_interrupt():  # finished points kept, workers and servers stopped
        try:
            with console.progress(f"profiling {args.model}") as update:

                def on_progress(event) -> None:
                    message = console.for_the_command_line(event.message, args.flag_names)  # library text
                    if event.kind == "start":
                        console.note(f"planned: {message}")
                    elif event.kind == "point":
                        counted.update(done=event.done, total=event.total)
                        update(event.done, event.total, profile_text.point_line(event, message))
                        if not event.resumed:
                            new_points.append(event.status)
                    elif event.kind == "search":
                        console.note(f"{event.input_size} px: {message}")

                df = run_profile(config, args.out, resume=args.resume, on_progress=on_progress)
        except KeyboardInterrupt as exc:
            what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
            finished = counted["total"] is not None and counted["done"] >= counted["total"]
            console.error(f"{what}: {profile_text.saved(args.out, len(new_points), finished)}")
            return exit_codes.TERMINATED if isinstance(exc, Terminated) else exit_codes.INTERRUPTED
    if new_points and all(s == "error" for s in new_points):
        first = df.loc[df["status"] == "error", "error"].iloc[-1]
        raise PerfmodelError(f"no point could be measured; the last error was: {first}")
    profile_text.warn_unstable(df, config.rule)
    profile_text.warn_late_sender(df)
    if args.json:
        console.print_json({"out": args.out, "rows": console.clean_for_json(df.to_dict("records"))})
    else:
        profile_text.print_profile(df)
        console.note(f"wrote {len(df)} point(s) to {args.out} ({len(new_points)} measured now)")
    return 0
