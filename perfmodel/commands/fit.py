"""perfmodel fit: turn profiles into a predictor file (JSON) and report how accurate it is."""

from __future__ import annotations

from perfmodel import console
from perfmodel.commands.common import EXIT_CODES, formatter

FIT_EXAMPLES = """examples:
  perfmodel fit profiles/cpu-resnet50-torch.csv --out cpu-resnet50.json
  perfmodel fit profiles/cpu-resnet50-torch.csv --out cpu-resnet50.json --report
  perfmodel fit a100-*.csv h100-*.csv --out gpus.json --json

One predictor per (hardware, model, backend, precision) group in the profiles; in Python:
  perfmodel.Predictor.load("cpu-resnet50.json").latency_ms(b, s)
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit latency, warm-up, memory and max-batch predictors to profiles; report their error",
        description="Fit regression models of latency, p99 latency, warm-up and memory against batch size and input "
        "size, chosen per quantity by cross-validation, and write them as one predictor JSON file.",
        epilog=FIT_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=formatter,
    )
    p.add_argument("profiles", nargs="+", metavar="PROFILE", help="profile CSV files (several are concatenated)")
    p.add_argument("--out", required=True, metavar="FILE", help="the predictor JSON file to write")
    p.add_argument("--report", action="store_true", help="print the error report as tables")
    p.add_argument("--json", action="store_true", help="print the result (and the report) as JSON on stdout")
    p.add_argument("--families", default="roofline,linear,piecewise,tree", metavar="LIST",
                   help="model families to choose from by cross-validation (default: roofline,linear,piecewise,tree)")
    p.set_defaults(run=run)


def run(args) -> int:
    from perfmodel.files import check_writable
    from perfmodel.fitting.report import MAX_BATCH_HEADERS, QUANTITY_HEADERS, REPORT_LEGEND, max_batch_rows, noise_note, quantity_rows, report_json
    from perfmodel.fitting.train import fit

    check_writable(args.out)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    with console.progress("fitting") as update:
        count = [0]

        def on_progress(group: str, quantity: str) -> None:
            count[0] += 1
            update(count[0], None, f"{group}: {quantity}")

        predictor = fit(args.profiles, families=families, on_progress=on_progress)
    predictor.save(args.out)
    if args.json:
        console.print_json(console.clean_for_json({"out": args.out, "groups": report_json(predictor)}))
        return 0
    if args.report:
        for group in predictor.groups:
            console.table(group.name, QUANTITY_HEADERS, quantity_rows(group))
            console.table(f"{group.name}: max_batch", MAX_BATCH_HEADERS, max_batch_rows(group))
            if noise_note(group):
                console.note(noise_note(group))
        console.note(REPORT_LEGEND)
    console.note(f"wrote {len(predictor.groups)} group(s) to {args.out}")
    return 0
