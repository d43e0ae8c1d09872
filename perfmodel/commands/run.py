"""perfmodel run: execute a plan on Ray and measure it against its prediction."""

from __future__ import annotations

import os
import sys

from perfmodel import console, exit_codes
from perfmodel.commands.common import formatter, positive, sigterm_as_interrupt

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
    from perfmodel.run.execute import RunOptions, run_plan
    from perfmodel.run.planfile import read_run_plan

    if args.synthetic and given(args, "decode_threads"):  # even at 1, the default: typed, so never ignored
        raise InputError("--decode-threads needs --images: random inputs are not decoded.")
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
    with sigterm_as_interrupt() as state:
        with _Live(plan) as live:

            def on_event(e) -> None:
                if e.kind == "stopping":
                    state.raising = False
                live.event(e)

            try:
                result = run_plan(plan, options, on_event)
            except KeyboardInterrupt:  # while the inputs were prepared: nothing started, nothing done
                if not state.terminated:
                    raise
                console.error("terminated before the run started: nothing was done.")
                return exit_codes.TERMINATED
        state.raising = False  # e.g. a resumed run with nothing left: never started, nothing to stop
        data = console.clean_for_json(result.to_dict())
        if args.json:
            console.print_json(data)
        else:
            _print_result(data)
        code = _exit_code(result, data, state.terminated, args)
        sys.stdout.flush()  # before SIGTERM's default action (death, the output unwritten) is back
        return code


def _fault_drill() -> tuple[int, int] | None:
    """PERFMODEL_RUN_KILL_WORKER=W:B makes worker W kill itself after B batches (tests, fault drills)."""
    value = os.environ.get("PERFMODEL_RUN_KILL_WORKER")
    if not value:
        return None
    worker, _, after = value.partition(":")
    return int(worker), int(after or 1)


def _exit_code(result, data: dict, terminated: bool, args) -> int:
    if terminated and result.status == "complete":
        console.note("note: SIGTERM came once every batch was done: the run is complete.")
    if result.status == "interrupted":
        console.error(
            f"{'terminated' if terminated else 'interrupted'}: {data['images_done']:,} images done"
            + _kept(args, data)
            + "."
        )
        return exit_codes.TERMINATED if terminated else exit_codes.INTERRUPTED
    if result.status == "worker-failed":
        dead = [w for w in data["workers"] if w["status"] in ("died", "lost")]
        names = ", ".join(
            f"{w['worker']} (after {w['batches_done']} of {w['batches_given']} batches"
            + (", lost with its node, no worker of its input size left)" if w["status"] == "lost" else ")")
            for w in dead
        )
        console.error(f"worker {names} died: {data['images_unfinished']:,} images not done" + _kept(args, data) + ".")
        return exit_codes.FAILURE
    return 0


def _kept(args, data: dict) -> str:
    if args.out and not (data["images_done"] or data["images_resumed"]):  # no row: the file was not written
        return f"; no label was finished, so {args.out} was not written: run again to do them"
    if args.out:
        return f"; the finished labels are in {args.out}: run again with --resume to do the rest"
    return "; give --out to keep labels and resume"


class _Live:
    """Live progress on a terminal (stderr): per hardware type, images done and ETA, measured vs planned."""

    def __init__(self, plan):
        self.plan = plan
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
        if e.kind in ("behind", "died", "lost"):
            text = f"error: {e.worker.plan.name} died: {e.text}" if e.kind == "died" else f"warning: {e.text}"
            if self.bar is not None:  # above the live bars, not through them
                self.bar.console.print(text, markup=False, highlight=False)
            else:
                console.note(text)
            return
        if self.bar is None:
            return
        if e.kind == "phase":
            self.bar.update(self.tasks[None], status=e.text)
            return
        if e.outlook is not None:
            o = e.outlook
            status = f"expected end {o.expected_end_s:.1f} s; P(by {self.plan.deadline_s:g} s) {o.probability:.2f}"
            self.bar.update(self.tasks[None], status=status)
        for t in e.progress:
            if t.hardware not in self.tasks:
                self.tasks[t.hardware] = self.bar.add_task(
                    f"{t.workers} x {t.hardware}", total=t.images_given, status=""
                )
            self.bar.update(
                self.tasks[t.hardware],
                completed=t.images_done,
                status=f"ETA {t.eta_s:.1f} s (plan {t.planned_s:.1f} s)",
            )


def _print_result(data: dict) -> None:
    rows = []
    for w in data["workers"]:
        rows.append(
            (
                w["worker"],
                w["input_size"],
                w["batch_size"],
                f"{w['batches_done']}/{w['batches_given']}",
                w["images_done"],
                *_pair(w["load_s"]),
                *_pair(w["warmup_s"]),
                *_pair(w["batch_s"]),
                *_pair(w["finish_s"]),
                w["bottleneck"] or "-",
            )
        )
    console.table(
        None,
        (
            "worker",
            "size px",
            "batch",
            "batches",
            "images",
            "load plan",
            "load",
            "warm-up plan",
            "warm-up",
            "batch plan",
            "batch",
            "finish plan",
            "finish",
            "bottleneck",
        ),
        rows,
    )
    predicted, measured = data["predicted_makespan_s"], data["measured_makespan_s"]
    line = f"{data['images_done']:,} of {data['images_planned']:,} images"
    if data["images_resumed"]:
        line += f" (+{data['images_resumed']:,} done before)"
    if measured is not None:
        met = "met" if data["met_deadline"] else "MISSED"
        line += (
            f"; makespan {measured:.2f} s measured vs {predicted:.2f} s predicted ({data['error_rel']:+.1%}); "
            f"deadline {data['deadline_s']:g} s {met}"
        )
        if data.get("deadline_probability") is not None:
            from perfmodel.planning.batch_text import shown_probability

            line += f" (the plan gave it probability {shown_probability(data['deadline_probability'])})"
    if data["decode_s_per_image"] is not None:
        line += f"; decoding {data['decode_s_per_image'] * 1000:.2f} ms per image, bottleneck: {data['bottleneck']}"
    console.out.print(line, markup=False)
    for lost in data["lost_workers"]:
        console.out.print(_lost_line(lost, data), markup=False)
        if lost["replan"]:
            console.out.print(_replan_line(lost["replan"], data["deadline_s"]), markup=False)
    failed = data["skipped_files"]
    if failed:
        console.note(
            f"{len(failed)} file(s) skipped: "
            + "; ".join(f"{f['path']} ({f['reason']})" for f in failed[:5])
            + (" ..." if len(failed) > 5 else "")
        )
    load = data["load_avg_1m"]
    if load:
        console.note(
            f"load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end; "
            f"{sys.platform} {os.cpu_count()} CPUs"
        )


def _lost_line(lost: dict, data: dict) -> str:
    """What a lost node cost: what was lost, where its batches were re-run, how much later, the deadline."""
    line = (
        f"node lost: {lost['worker']} at {lost['lost_at_s']:.1f} s, after {lost['batches_done']} batches; "
        f"{lost['batches_put_back']} batch(es) ({lost['images_put_back']:,} images) "
    )
    if not lost["batches_put_back"]:
        return line + "to re-run: it had finished"
    if not lost["rerun_on"]:
        return line + "not re-run: no worker of its input size was left"
    line += f"re-run on {', '.join(lost['rerun_on'])}"
    if data["later_than_planned_s"] is not None:
        held = "held" if data["met_deadline"] else "MISSED"
        line += (
            f"; the run ended {data['later_than_planned_s']:+.2f} s from the plan's makespan, "
            f"deadline {data['deadline_s']:g} s {held}"
        )
    return line


def _replan_line(r: dict, deadline_s: float) -> str:
    """The suggestion made when the node was lost: enough survivors, or which workers to add."""
    head = (
        f"  at {r['at_s']:.1f} s, {r['images_left']:,} images left: the {r['survivors']} surviving worker(s) of "
        f"its input size make the {deadline_s:g} s deadline with probability {r['probability_with_survivors']:.2f}"
    )
    if r["enough"]:
        return head
    if not r["add"]:
        return head + "; no number of added workers of the plan's types would hold it"
    options = " or ".join(f"{a['workers']} {a['hardware']} (P {a['probability']:.2f})" for a in r["add"])
    return (
        head + f"; to hold it with probability {r['confidence']:g}, add {options} (adding nodes is the cluster's job)"
    )


def _pair(value: dict) -> tuple:
    return value["predicted"], value["measured"]
