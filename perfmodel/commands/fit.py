"""perfmodel fit: turn profiles into a predictor file (JSON) and report how accurate it is."""

from __future__ import annotations

from perfmodel import console, exit_codes
from perfmodel.commands.common import formatter

FIT_EXAMPLES = """examples:
  perfmodel fit profiles/cpu-resnet50-torch.csv --out /tmp/cpu-resnet50.json
  perfmodel fit profiles/cpu-resnet50-torch.csv --out /tmp/cpu-resnet50.json --report
  perfmodel fit a100-*.csv h100-*.csv --out /tmp/gpus.json --json
  perfmodel fit profiles/reference/*.csv --target-hardware h100 --out /tmp/h100.json --report

One predictor per (hardware, model, backend, precision) group in the profiles; in Python:
  perfmodel.Predictor.load("/tmp/cpu-resnet50.json").latency_ms(b, s)

--target-hardware predicts GPUs nobody profiled (or leaves a profiled one out to check the method):
each way of serving profiled on one or more GPUs of the specification table (perfmodel/data/gpu_specs.csv)
is carried to the target by the ratio another model measured on both GPUs, where the profiles hold one
from the same campaign (one `source` document, or your own profiles: same stack, ~7% median error), else
through the GPU specifications (peak FLOP/s, memory bandwidth, L2; for a model whose memory traffic
perfmodel counted, that traffic); the file says which groups are transferred, from which GPUs, and the
error measured on held-out published curves:
  perfmodel fit one-gpu.csv --target-hardware h100 --out /tmp/h100.json   # one source: ~25% median error
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit latency, warm-up, memory and max-batch predictors to profiles; report their error",
        description="Fit regression models of latency, p99 latency, warm-up and memory against batch size and input "
        "size, chosen per quantity by cross-validation, and write them as one predictor JSON file.",
        epilog=FIT_EXAMPLES + "\n" + exit_codes.help_text("fit"),
        formatter_class=formatter,
    )
    p.add_argument("profiles", nargs="+", metavar="PROFILE", help="profile CSV files (several are concatenated)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the predictor JSON file to write")
    p.add_argument("--report", action="store_true", help="print the error report as tables")
    p.add_argument("--json", action="store_true", help="print the result (and the report) as JSON on stdout")
    p.add_argument(
        "--target-hardware",
        metavar="LIST",
        help="GPUs to predict from the other GPUs' profiles and their specifications, e.g. h100 or v100,a10",
    )
    p.add_argument(
        "--gpu-specs",
        metavar="FILE",
        help="GPU specification table for --target-hardware (default: perfmodel/data/gpu_specs.csv)",
    )
    p.add_argument(
        "--families",
        default="roofline,linear,piecewise,tree",
        metavar="LIST",
        help="model families to choose from by cross-validation (default: roofline,linear,piecewise,tree)",
    )
    p.set_defaults(run=run)


def run(args) -> int:
    from perfmodel.fitting.report import (
        GUESS_HEADERS,
        MAX_BATCH_HEADERS,
        REPORT_LEGEND,
        TRANSFER_LEGEND,
        few_points_note,
        guess_rows,
        max_batch_rows,
        noise_note,
        quantity_table,
        report_json,
        transfer_note,
    )
    from perfmodel.fitting.train import fit
    from perfmodel.readers import output_file

    if args.gpu_specs is not None and args.target_hardware is None:
        from perfmodel.errors import InputError

        raise InputError(
            "--gpu-specs is the table --target-hardware predicts from: add --target-hardware, or leave it out."
        )
    output_file(args.out, "--out", args.profiles)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    with console.progress("fitting") as update:
        count, total = [0], [None]

        def on_total(steps: int) -> None:
            total[0] = steps

        def on_progress(group: str, quantity: str) -> None:
            count[0] += 1
            update(count[0], total[0], f"{group}: {quantity}")

        # an empty name ("" or "a100,") is kept, for fit to refuse: never silently dropped
        targets = [] if args.target_hardware is None else [t.strip() for t in args.target_hardware.split(",")]
        predictor = fit(
            args.profiles,
            families=families,
            on_progress=on_progress,
            target_hardware=targets,
            gpu_specs=args.gpu_specs,
            on_total=on_total,
        )
    predictor.save(args.out)
    if args.json:
        console.print_json(console.clean_for_json({"out": args.out, "groups": report_json(predictor)}))
        return 0
    if args.report:
        for group in predictor.groups:
            console.table(group.name, *quantity_table(group))
            console.table(f"{group.name}: max_batch", MAX_BATCH_HEADERS, max_batch_rows(group))
            if group.transfer is not None:
                console.table(f"{group.name}: beside the one-line guesses", GUESS_HEADERS, guess_rows(group))
            for note in (noise_note(group), transfer_note(group)):
                if note:
                    console.note(note)
        if any(g.transfer is None for g in predictor.groups):
            console.note(REPORT_LEGEND)
        if any(g.transfer is not None for g in predictor.groups):
            console.note(TRANSFER_LEGEND)
    for note in filter(None, map(few_points_note, predictor.groups)):
        console.note(note)
    transferred = [g for g in predictor.groups if g.transfer is not None]
    if transferred and not args.report:
        for group in transferred:
            console.note(transfer_note(group))
    for skipped in predictor.provenance.get("transfer", {}).get("skipped", []):
        console.note(f"not transferred: {console.for_the_command_line(skipped, args.flag_names)}")  # library text
    left_out = predictor.provenance.get("open_loop_rows_left_out")
    if left_out:
        console.note(
            f"left out {left_out} open-loop row(s) (profile --rate): they time queueing at a rate, "
            "not a batch; plan --mode online models the queueing itself"
        )
    console.note(f"wrote {len(predictor.groups)} group(s) to {args.out}")
    return 0
