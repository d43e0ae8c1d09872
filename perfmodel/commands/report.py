"""perfmodel report: figures and one self-contained HTML page of profiles, predictors and a plan."""

from __future__ import annotations

from perfmodel import console, exit_codes
from perfmodel.commands.common import formatter

# make_report's parameters whose flag has another name (console.for_the_command_line: errors name parameters).
PARAMETER_FLAGS = {"predictors": "--predictor", "out_dir": "--out", "run": "--run"}

REPORT_EXAMPLES = """examples:
  perfmodel report profiles/cpu-resnet50-torch.csv --out /tmp/report
  perfmodel report h100.csv a100.csv --out /tmp/compare      # several profiles overlay
  perfmodel report p.csv --predictor p.json --plan plan.json --out /tmp/report
  perfmodel report --run run.json --out /tmp/report           # a run: predicted beside measured, per worker

Writes one PNG per figure and report.html, which embeds them all (it opens alone, offline).
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="draw profiles, predictors, a plan and a run as figures and one HTML page",
        description="Draw latency, throughput, memory and warm-up against batch size for one or more profiles "
        "(several overlay for comparison), a predictor's fitted curves over the measured points with its error "
        "report, a plan's per-GPU timeline against the deadline, and a run's measured timeline beside its plan; "
        "write PNGs "
        "and one self-contained HTML page.",
        epilog=REPORT_EXAMPLES + "\n" + exit_codes.help_text("report"),
        formatter_class=formatter,
    )
    p.add_argument("profiles", nargs="*", metavar="PROFILE.csv", help="profile CSV files (several overlay)")
    p.add_argument(
        "--predictor",
        action="append",
        default=[],
        metavar="FILE.json",
        help="a predictor from `perfmodel fit` (repeat for several)",
    )
    p.add_argument("--plan", default=None, metavar="PLAN.json", help="a plan from `perfmodel plan --json`")
    p.add_argument(
        "--run",
        dest="run_json",
        default=None,
        metavar="RUN.json",
        help="a run from `perfmodel run --json`: per worker, the predicted timeline beside the measured one",
    )
    p.add_argument(
        "-o", "--out", required=True, metavar="DIR", help="directory for report.html and the PNGs (created if missing)"
    )
    p.add_argument("--json", action="store_true", help="print what was written as JSON on stdout")
    p.set_defaults(run=run)


def run(args) -> int:
    from perfmodel.report import make_report  # imports matplotlib: only when this command runs

    report = make_report(args.profiles, args.predictor, args.plan, args.out, run=args.run_json)
    if args.json:
        console.print_json(
            {
                "out": str(report.out_dir),
                "page": str(report.page),
                "figures": [str(f) for f in report.figures],
                "notes": list(report.notes),
            }
        )
    else:
        for note in report.notes:
            console.note(f"note: {note}")
        console.note(f"wrote {report.page} and {len(report.figures)} figure(s) in {report.out_dir}")
    return 0
