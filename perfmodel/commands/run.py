"""perfmodel run: execute a plan on Ray and measure it against its prediction."""

from __future__ import annotations

import os
import sys

from perfmodel import console, exit_codes
from perfmodel.commands.common import Sigterm, formatter, positive, sigterm_as_interrupt

# The library parameters whose flag has another name (console.for_the_command_line: errors name parameters):
# RunOptions' model_path, and make_plan's that a run's messages advise re-planning with (flags of perfmodel plan).
PARAMETER_FLAGS = {"model_path": "--model", "pool": "--pool", "precision": "--precision", "backend": "--backend"}

RUN_EXAMPLES = """examples:
  perfmodel plan --images 2000 --deadline 90s --profile p.csv --json > plan.json
  perfmodel run plan.json --synthetic --json > run.json             # the model alone, on random tensors
  perfmodel run plan.json --images photos/ --out labels.csv         # a real job over image files
  perfmodel run plan.json --images photos/ --out labels.csv --resume   # finish what an interrupted run left
  perfmodel run plan.json --images photos/ --address auto           # on a running Ray cluster
  perfmodel report --run run.json --out report/                     # timelines: predicted beside measured

Without --address, perfmodel starts a Ray on this machine (127.0.0.1 only, no dashboard) and stops it
when the run ends, however it ends. Each planned GPU is one Ray actor: a cpu worker reserves one CPU
and runs torch on one thread (as the shipped CPU profiles were measured); a GPU worker reserves one
GPU, one CPU and its hardware type (a custom resource named after it, e.g. {"h100": 1}, or Ray's
accelerator_type label); perfmodel picks each worker's node before anything starts. The clock starts
when the workers are asked to load their models; each then runs exactly its share of the plan, its first
batch being its warm-up. On a cluster that loses a node, the batches of its workers are re-run by the
surviving workers of their input size (each image once), and the run says how much later it ended and
what would still have made the deadline.
"""

BEHIND_HELP = "the plan's margin, at least 5%"


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="execute a plan on Ray and measure it against its prediction",
        description="Execute a plan from `perfmodel plan --json` on Ray, on this machine or on a cluster, over image "
        "files or random inputs, and report worker by worker what was predicted beside what was measured.",
        epilog=RUN_EXAMPLES + "\n" + exit_codes.help_text("run"),
        formatter_class=formatter,
    )
    p.add_argument("plan", metavar="PLAN.json", help="a plan from `perfmodel plan --json`")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--images", metavar="DIR", help="a folder of JPEG, PNG or WebP files (searched recursively)")
    source.add_argument("--synthetic", action="store_true", help="random input tensors: the model alone, no files")
    p.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        help="labels, one row per image: path, class, score, worker, batch (.csv or .parquet)",
    )
    p.add_argument("--resume", action="store_true", help="skip the images already in --out (from an interrupted run)")
    p.add_argument(
        "--address", metavar="ADDR", help="an existing Ray cluster: host:port of its GCS, ray://host:port, or auto"
    )
    p.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        help="where GPU types run (default: cuda; cpu runs them on one CPU core each, a dry run); "
        "the cpu type always runs on the CPU",
    )
    p.add_argument(
        "--model", metavar="FILE.pt", help="the TorchScript file of the plan's model (default: the one the plan names)"
    )
    p.add_argument(
        "--weights", metavar="FILE", help="a torchvision state_dict for a built-in model (default: random weights)"
    )
    p.add_argument(
        "--steal",
        action="store_true",
        help="a worker that runs out of batches takes unstarted ones of a "
        "late worker of its input size (off by default, so that the plan is what is measured)",
    )
    p.add_argument(
        "--decode-threads",
        type=positive("", whole=True),
        default=1,
        metavar="N",
        help="image-decoding threads per worker, with --images (default: 1)",
    )
    p.add_argument("--json", action="store_true", help="print what was predicted and measured as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    from perfmodel.errors import InputError
    from perfmodel.readers import given
    from perfmodel.run import text
    from perfmodel.run.execute import RunOptions, run_plan
    from perfmodel.run.planfile import read_run_plan

    if args.synthetic and given(args, "decode_threads"):  # even at 1, the default: typed, so never ignored
        raise InputError("--decode-threads needs --images: random inputs are not decoded.")
    sigterm = Sigterm()
    live = _Live(args.flag_names, sigterm)  # the run's events as the command line shows them
    plan = read_run_plan(args.plan)
    options = RunOptions(
        images=args.images,
        synthetic=args.synthetic,
        out=args.out,
        resume=args.resume,
        address=args.address,
        device=args.device,
        weights=args.weights,
        model_path=args.model,
        steal=args.steal,
        decode_threads=args.decode_threads,
        fault=_fault_drill(),
    )
    with sigterm_as_interrupt(sigterm):
        with live:
            try:
                result = run_plan(plan, options, live.event)
            except KeyboardInterrupt:  # while the inputs were prepared: nothing started, nothing done
                if not sigterm.terminated:
                    raise
                console.error("terminated before the run started: nothing was done.")
                return exit_codes.TERMINATED
        sigterm.raising = False  # e.g. a resumed run with nothing left: never started, nothing to stop
        ending = text.ending(result, sigterm.terminated)
        if not args.json:
            rows, lines, notes = text.rows(result), [text.summary(result), *text.lost_lines(result)], text.notes(result)
            console.table(None, text.COLUMNS, rows)
            for line in lines:
                console.out.print(console.for_the_command_line(line, args.flag_names), markup=False)
            for line in notes:
                console.note(console.for_the_command_line(line, args.flag_names))
        else:
            console.print_json(console.clean_for_json(result.to_dict()))
        if (sigterm.terminated or sigterm.interrupted) and result.complete:
            came = text.complete_after("SIGTERM" if sigterm.terminated else "Ctrl-C")
            console.note(f"note: {console.for_the_command_line(came, args.flag_names)}")
        if ending is not None:  # and where the finished labels are
            ending = console.for_the_command_line(ending, args.flag_names)
            if args.out and not (result.images_done or result.images_resumed):  # no row: the file was not written
                ending += f"; no label was finished, so {args.out} was not written: run again to do them"
            elif args.out:
                ending += f"; the finished labels are in {args.out}: run again with --resume to do the rest"
            else:
                ending += "; give --out to keep labels and resume"
            console.error(ending + ".")
        sys.stdout.flush()  # before SIGTERM's default action (death, the output unwritten) is back
        if result.status == "interrupted":
            return exit_codes.TERMINATED if sigterm.terminated else exit_codes.INTERRUPTED
        return exit_codes.FAILURE if result.status == "worker-failed" else 0


def _fault_drill() -> tuple[int, int] | None:
    """PERFMODEL_RUN_KILL_WORKER=W:B makes worker W kill itself after B batches (tests, fault drills)."""
    value = os.environ.get("PERFMODEL_RUN_KILL_WORKER")
    if not value:
        return None
    worker, _, after = value.partition(":")
    return int(worker), int(after or 1)


class _Live:
    """The run's events as the command line shows them: a worker behind, dead or lost as a note, and live
    progress on a terminal (stderr): per hardware type, images done and ETA, measured vs planned. Once the
    run stops what it started, SIGTERM and Ctrl-C no longer interrupt (the command still prints what was done)."""

    def __init__(self, flag_names: dict[str, str], sigterm: Sigterm):
        self.flag_names = flag_names  # its text names the library's parameters: shown as these flags
        self.sigterm = sigterm
        self.bar = None
        self.tasks = {}

    def __enter__(self):
        if console.err.is_terminal:
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                console=console.err,
                transient=True,
            )
            self.bar.__enter__()
            self.tasks[None] = self.bar.add_task("perfmodel run", total=None, status="")
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)
        return False

    def event(self, e) -> None:
        from perfmodel.run import text

        if e.kind == "stopping":
            self.sigterm.raising = False
        if e.kind in ("behind", "died", "lost"):
            line = console.for_the_command_line(text.event_line(e.kind, e.worker.plan.name, e.text), self.flag_names)
            if self.bar is not None:  # above the live bars, not through them
                self.bar.console.print(line, markup=False, highlight=False)
            else:
                console.note(line)
            return
        if self.bar is None:
            return
        if e.kind == "phase":
            self.bar.update(self.tasks[None], status=console.for_the_command_line(e.text, self.flag_names))
            return
        if e.outlook is not None:
            self.bar.update(self.tasks[None], status=text.outlook_line(e.outlook))
        for t in e.progress:
            name, status = text.type_line(t)
            if t.hardware not in self.tasks:
                self.tasks[t.hardware] = self.bar.add_task(name, total=t.images_given, status="")
            self.bar.update(self.tasks[t.hardware], completed=t.images_done, status=status)
