"""A run in words, for people: the table per worker, the summary, what a lost node cost and what would
still hold the deadline, the notes, how an unfinished run ended, and the live progress's lines. Words only:
the CLI (perfmodel/commands/run.py) prints them, adds what its flags can do next, and chooses the exit code."""

from __future__ import annotations

import os
import sys

from perfmodel.planning.batch_text import shown_probability
from perfmodel.run.progress import Outlook, TypeProgress
from perfmodel.run.result import LostWorker, Replan, RunResult

COLUMNS = (
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
)
SHOWN_SKIPPED = 5  # files named in the note of those skipped


def rows(result: RunResult) -> list[tuple]:
    """One row per worker, under COLUMNS: predicted beside measured."""
    return [
        (
            w.plan.name,
            w.plan.input_size,
            w.plan.batch_size,
            f"{w.batches_done}/{w.batches_given}",
            w.images_done,
            w.load_s.predicted,
            w.load_s.measured,
            w.warmup_s.predicted,
            w.warmup_s.measured,
            w.batch_s.predicted,
            w.batch_s.measured,
            w.finish_s.predicted,
            w.finish_s.measured,
            w.bottleneck or "-",
        )
        for w in result.workers
    ]


def summary(result: RunResult) -> str:
    """The images done, the makespan against the plan's and the deadline, and the decoding."""
    plan = result.plan
    line = f"{result.images_done:,} of {plan.images:,} images"
    if result.images_resumed:
        line += f" (+{result.images_resumed:,} done before)"
    if result.measured_makespan_s is not None:
        met = "met" if result.met_deadline else "MISSED"
        line += (
            f"; makespan {result.measured_makespan_s:.2f} s measured vs {plan.makespan_s:.2f} s predicted "
            f"({result.error_rel:+.1%}); deadline {plan.deadline_s:g} s {met}"
        )
        if plan.deadline_probability is not None:
            line += f" (the plan gave it probability {shown_probability(plan.deadline_probability)})"
    if result.decode_s_per_image is not None:
        line += f"; decoding {result.decode_s_per_image * 1000:.2f} ms per image, bottleneck: {result.bottleneck}"
    return line


def lost_lines(result: RunResult) -> list[str]:
    """Per node lost: what it cost, and the suggestion made then."""
    lines = []
    for lost in result.lost_workers:
        lines.append(lost_line(lost, result))
        if lost.replan is not None:
            lines.append(replan_line(lost.replan, result.plan.deadline_s))
    return lines


def lost_line(lost: LostWorker, result: RunResult) -> str:
    """What a lost node cost: what was lost, where its batches were re-run, how much later, the deadline."""
    line = (
        f"node lost: {lost.worker} at {lost.lost_at_s:.1f} s, after {lost.batches_done} batches; "
        f"{lost.batches_put_back} batch(es) ({lost.images_put_back:,} images) "
    )
    if not lost.batches_put_back:
        return line + "to re-run: it had finished"
    if not lost.rerun_on:
        return line + "not re-run: no worker of its input size was left"
    line += f"re-run on {', '.join(lost.rerun_on)}"
    if result.later_than_planned_s is not None:
        held = "held" if result.met_deadline else "MISSED"
        line += (
            f"; the run ended {result.later_than_planned_s:+.2f} s from the plan's makespan, "
            f"deadline {result.plan.deadline_s:g} s {held}"
        )
    return line


def replan_line(r: Replan, deadline_s: float) -> str:
    """The suggestion made when the node was lost: enough survivors, or which workers to add."""
    head = (
        f"  at {r.at_s:.1f} s, {r.images_left:,} images left: the {r.survivors} surviving worker(s) of "
        f"its input size make the {deadline_s:g} s deadline with probability {r.probability_with_survivors:.2f}"
    )
    if r.enough:
        return head
    if not r.add:
        return head + "; no number of added workers of the plan's types would hold it"
    options = " or ".join(f"{a.workers} {a.hardware} (P {a.probability:.2f})" for a in r.add)
    return head + f"; to hold it with probability {r.confidence:g}, add {options} (adding nodes is the cluster's job)"


def notes(result: RunResult) -> list[str]:
    """The files skipped, and the load average the run had on this machine."""
    out = []
    skipped = result.skipped_files
    if skipped:
        named = "; ".join(f"{f.path} ({f.reason})" for f in skipped[:SHOWN_SKIPPED])
        out.append(f"{len(skipped)} file(s) skipped: {named}" + (" ..." if len(skipped) > SHOWN_SKIPPED else ""))
    load = result.load_avg_1m
    if load:
        out.append(
            f"load average (1 min) {load[0]:.2f} at the start, {load[1]:.2f} at the end; "
            f"{sys.platform} {os.cpu_count()} CPUs"
        )
    return out


def complete_after(signal_name: str) -> str:
    """What a SIGTERM or Ctrl-C that came once every batch was done (while Ray was stopped) did: nothing."""
    return f"{signal_name} came once every batch was done: the run is complete."


def ending(result: RunResult, terminated: bool) -> str | None:
    """What a run that did not finish did, and did not do (None for a complete one), as the start of a sentence."""
    if result.status == "interrupted":
        return f"{'terminated' if terminated else 'interrupted'}: {result.images_done:,} images done"
    if result.status == "worker-failed":
        names = ", ".join(
            f"{w.plan.name} (after {w.batches_done} of {w.batches_given} batches"
            + (", lost with its node, no worker of its input size left)" if w.status == "lost" else ")")
            for w in result.workers
            if w.status in ("died", "lost")
        )
        return f"worker {names} died: {result.images_unfinished:,} images not done"
    return None


def event_line(kind: str, worker: str, text: str) -> str:
    """A worker behind its plan, dead, or lost with its node (`kind`), as one line."""
    return f"error: {worker} died: {text}" if kind == "died" else f"warning: {text}"


def outlook_line(o: Outlook) -> str:
    return f"expected end {o.expected_end_s:.1f} s; P(by {o.deadline_s:g} s) {o.probability:.2f}"


def type_line(t: TypeProgress) -> tuple[str, str]:
    """A hardware type's progress bar: its name, and its expected end beside the plan's."""
    return f"{t.workers} x {t.hardware}", f"ETA {t.eta_s:.1f} s (plan {t.planned_s:.1f} s)"
