"""011 on one GPU (issue 37, item 4): plans from the shipped profile of that GPU type, executed, counted.

ResNet-50 at 224 and 448 px on a pool of one GPU (the one lent), deadlines from 10 s to 60 s, relaxed and
soft plans at P = 0.5 and 0.95. Each plan is made in this process (make_plan, the code behind `perfmodel
plan`) from profiles/<hw>-resnet50-torch-fp16.csv and executed with run_plan (`perfmodel run --synthetic`)
on one local Ray started once for all of them: Ray's start and the plans' making are paid once, not per
plan (the H100 run of 2026-11-27 spent ~28 s of device time around each plan that validate.py ran through
the commands). A relaxed plan is as many images as fit; a soft one is 0.9 x what the P = 0.5 relaxed plan
of its case fits (C1), as in run.py. Every plan, executed or refused, is one line of --out (JSON: the row,
the plan, the run without its per-batch timeline), appended as it ends: a cut call resumes, skipping the
names already there.

The shortest deadlines come first (within one deadline the order is shuffled, seed 37), so that the first
5 device-minutes run as many plans as they can: a plan's makespan is close to its deadline, so 20 plans in
5 minutes leave ~12 s each (budget.py). --until-executed N stops once N plans of the file were executed
(the campaign's first slot: 20), --budget S before a plan would end past S seconds; both exit 3 when
cases are left (the campaign's later slot runs them).

    python gpu_calibration.py --hardware h100 --out h100-calibration.jsonl --budget 300 --until-executed 20
    python gpu_calibration.py --table h100-calibration.jsonl [more.jsonl]       # the reliability table
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import log, wilson  # noqa: E402

SIZES = (224, 448)
DEADLINES = (10, 15, 20, 30, 60)
MODES = ("relaxed", "soft")
PROBABILITIES = (0.5, 0.95)
SOFT_SHARE = 0.9  # of C1, as run.py's soft-1
RUN_OVERHEAD_S = 8.0  # per plan beyond its makespan, assumed (each row's wall_s measures it): the worker's
# process and torch (before the clock), the driver's connection, the result; budget.py counts the same
LATE = 1.25  # a plan that misses may end this much past its deadline (for the budget's look ahead)
MISSING = 3  # exit code: cases left for a later call


def cases(sizes, deadlines, modes, probabilities, seed: int = 37) -> list[dict]:
    """Every case, the shortest deadline first, shuffled within a deadline."""
    out = []
    for deadline in sorted(deadlines):
        group = [
            {"input_size": s, "deadline_s": deadline, "mode": m, "p": p}
            for s in sizes
            for m in modes
            for p in probabilities
        ]
        random.Random(f"{seed}-{deadline}").shuffle(group)
        out += group
    for c in out:
        c["name"] = f"{c['input_size']}px-{c['deadline_s']:g}s-{c['mode']}-p{c['p']:g}"
    return out


class Planner:
    def __init__(self, hardware: str, profile: Path):
        self.hardware, self.profile = hardware, profile
        self.c1: dict[tuple[int, float], int] = {}

    def _settings(self, case: dict, mode: str, p: float) -> dict:
        return dict(
            mode=mode, pool={self.hardware: 1}, profiles=[self.profile], input_size=case["input_size"], confidence=p
        )

    def capacity(self, case: dict) -> int:
        """C1: what the GPU finishes by the deadline at P = 0.5 (the median plan); 0 when nothing."""
        from perfmodel.planning.batch import NoPlanError, make_plan

        key = (case["input_size"], case["deadline_s"])
        if key not in self.c1:
            try:
                self.c1[key] = int(
                    make_plan(None, case["deadline_s"], **self._settings(case, "relaxed", 0.5)).total_images
                )
            except NoPlanError:
                self.c1[key] = 0
        return self.c1[key]

    def plan(self, case: dict) -> tuple[dict | None, str]:
        """The plan (as `perfmodel plan --json` writes it), or None and why not."""
        from perfmodel import console
        from perfmodel.planning.batch import NoPlanError, make_plan

        images = None
        if case["mode"] == "soft":
            c1 = self.capacity(case)
            if c1 < 1:
                return None, "the median plan fits no image (C1 = 0)"
            images = max(1, int(SOFT_SHARE * c1))
        try:
            job = make_plan(images, case["deadline_s"], **self._settings(case, case["mode"], case["p"]))
        except NoPlanError as exc:
            return None, str(exc)
        return console.clean_for_json(job.to_dict()), ""


def execute(plan: dict, address: str, device: str) -> dict:
    from perfmodel import console
    from perfmodel.run.execute import RunOptions, run_plan
    from perfmodel.run.planfile import read_run_plan

    with tempfile.TemporaryDirectory(prefix="perfmodel-calibration-") as folder:
        path = Path(folder) / "plan.json"
        path.write_text(json.dumps(plan))
        result = run_plan(read_run_plan(path), RunOptions(synthetic=True, address=address, device=device))
    return console.clean_for_json(result.to_dict())


def without_timeline(run: dict) -> dict:
    """The run's JSON less each worker's per-batch times (thousands in a 60 s run): their count stays."""
    out = dict(run)
    out["workers"] = []
    for w in run.get("workers", []):
        w = dict(w)
        timeline = dict(w.get("timeline") or {})
        batches = timeline.pop("batches", [])
        timeline["batches_timed"] = len(batches)
        timeline["first_batch"] = batches[0] if batches else None
        w["timeline"] = timeline
        out["workers"].append(w)
    return out


def row(case: dict, plan: dict | None, run: dict | None, reason: str, c1: int | None) -> dict:
    r = {**case, "c1": c1, "planned": plan is not None, "executed": run is not None, "reason": reason}
    if plan is not None:
        q = plan["makespan_quantiles_s"]
        r.update(
            images=plan["images_planned"],
            batch_size=[a["batch_size"] for a in plan["assignments"]],
            deadline_probability=plan["deadline_probability"],
            p5_s=q["p5"],
            p50_s=q["p50"],
            p95_s=q["p95"],
        )
    if run is not None:
        (w,) = run["workers"]
        r.update(
            status=run["status"],
            measured_s=run["measured_makespan_s"],
            met=bool(run["met_deadline"]),
            error_rel=run["error_rel"],
            load_s=[w["load_s"]["predicted"], w["load_s"]["measured"]],
            first_call_s=[w["warmup_s"]["predicted"], w["warmup_s"]["measured"]],
            batch_s=[w["batch_s"]["predicted"], w["batch_s"]["measured"]],
            load_avg=run["load_avg_1m"],
        )
    return r


def append(path: Path, record: dict) -> None:
    with open(path, "a") as f:  # one whole line per plan
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def done(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line)["row"] for line in path.read_text().splitlines() if line.strip()]


def calibrate(args) -> int:
    from perfmodel.run import cluster as clusters

    started = time.monotonic()
    rows = done(args.out)
    finished = {r["name"] for r in rows}
    executed = sum(r["executed"] for r in rows)
    todo = [c for c in cases(args.sizes, args.deadlines, args.modes, args.probabilities) if c["name"] not in finished]
    if not todo or executed >= args.until_executed:
        log(f"calibration: {executed} plans executed in {args.out}, {len(todo)} cases left; nothing to do now")
        return 0 if not todo else MISSING
    planner = Planner(args.hardware, args.profile)
    gpus = clusters.local_gpus() if args.device == "cuda" else {}
    local = clusters.LocalRay(args.cpus, gpus)
    os.environ.update(local.settings)  # this process is the driver of every run: Ray's settings before Ray loads
    log(f"calibration: {len(todo)} cases left on {args.hardware} ({executed} executed before); starting Ray")
    address = local.start()
    try:
        for i, case in enumerate(todo):
            left = len(todo) - i
            if executed >= args.until_executed:
                log(f"calibration: {executed} plans executed: this slot is done, {left} cases left")
                return MISSING
            plan, reason = planner.plan(case)
            c1 = planner.c1.get((case["input_size"], case["deadline_s"]))
            if plan is None:
                append(args.out, {"row": row(case, None, None, reason, c1)})
                log(f"  {case['name']}: no plan ({reason.splitlines()[0][:120]})")
                continue
            needed = LATE * case["deadline_s"] + RUN_OVERHEAD_S
            if args.budget is not None and time.monotonic() - started + needed > args.budget:
                log(f"calibration: {case['name']} would end past the {args.budget:g} s budget; {left} cases left")
                return MISSING
            t0 = time.monotonic()
            run = without_timeline(execute(plan, address, args.device))
            r = row(case, plan, run, "", c1)
            r["wall_s"] = time.monotonic() - t0  # the plan's device time: its makespan and what surrounds it
            append(args.out, {"row": r, "plan": plan, "run": run})
            executed += 1
            log(
                f"  {case['name']}: {r['images']:,} images at batch {r['batch_size']}, stated P "
                f"{r['deadline_probability']:.3f}, p50 {r['p50_s']:.2f} s, measured {r['measured_s']:.2f} s "
                f"({'met' if r['met'] else 'MISSED'})"
            )
    finally:
        local.stop()
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM (the campaign's time limit) as Ctrl-C: Ray stops in `finally`


def table(paths: list[Path]) -> str:
    """The reliability table: per P asked (and kind), the executed plans that met their deadline."""
    rows = [r for p in paths for r in done(p)]
    ran = [r for r in rows if r["executed"]]
    lines = [
        f"{len(ran)} plans executed, {sum(not r['planned'] for r in rows)} refused (no plan at their P); "
        f"from {', '.join(p.name for p in paths)}",
        "",
        "| P asked | kind | runs | met | observed | Wilson 95% | mean stated P | in [p5, p95] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in sorted({r["p"] for r in ran}):
        at = [r for r in ran if r["p"] == p]
        for kind in ("all", *sorted({r["mode"] for r in at})):
            group = at if kind == "all" else [r for r in at if r["mode"] == kind]
            k, n = sum(r["met"] for r in group), len(group)
            lo, hi = wilson(k, n)
            stated = sum(r["deadline_probability"] for r in group) / n
            inside = sum(r["p5_s"] <= r["measured_s"] <= r["p95_s"] for r in group)
            lines.append(f"| {p:g} | {kind} | {n} | {k} | {k / n:.2f} | {lo:.2f}-{hi:.2f} | {stated:.3f} | {inside} |")
    return "\n".join(lines)


def numbers(text: str, kind=float) -> tuple:
    return tuple(kind(x) for x in text.split(","))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", nargs="+", type=Path, metavar="JSONL", help="print the reliability table")
    parser.add_argument("--hardware", help="the GPU type lent (h100, h200), or cpu for a dry run")
    parser.add_argument("--profile", type=Path, help="default: profiles/HW-resnet50-torch-fp16.csv")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out", type=Path, help="the JSON-lines file of plans and runs (appended)")
    parser.add_argument("--budget", type=float, help="stop before a plan would end past this many seconds")
    parser.add_argument("--until-executed", type=int, default=10**9, help="stop once this many were executed")
    parser.add_argument("--cpus", type=int, help="the local Ray's CPUs (default: this machine's)")
    parser.add_argument("--sizes", type=lambda t: numbers(t, int), default=SIZES)
    parser.add_argument("--deadlines", type=numbers, default=DEADLINES)
    parser.add_argument("--modes", type=lambda t: tuple(t.split(",")), default=MODES)
    parser.add_argument("--probabilities", type=numbers, default=PROBABILITIES)
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return 0
    if not (args.hardware and args.out):
        parser.error("give --hardware and --out (or --table)")
    args.profile = args.profile or ROOT / "profiles" / f"{args.hardware}-resnet50-torch-fp16.csv"
    if not args.profile.is_file():
        parser.error(f"no profile {args.profile}: the calibration plans from the shipped profile of that GPU type")
    if set(args.modes) - set(MODES):
        parser.error(f"--modes: choose from {', '.join(MODES)}")
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return calibrate(args)
    except KeyboardInterrupt:
        log("calibration: stopped; the plans finished so far are in the file, the same command goes on")
        return 124


if __name__ == "__main__":
    raise SystemExit(main())
