"""One plan for one GPU, executed with `perfmodel run --synthetic`: predicted against measured.

campaign.sh's `validate` step calls this once per plan. It plans (`perfmodel plan --json`) from a
predictor with a pool of one GPU of the given type; when that GPU cannot do all the images by the deadline
it plans 80% of the most it can do (the plan's own `max_images`), so that every plan runs. Then it runs the
plan (`perfmodel run --synthetic --json`) and appends one JSON line to --results: the plan, the run, and the
summary (predicted and measured makespan, error, deadline met). `--summary FILE` prints the table.

    python validate.py --predictor h100-resnet50.json --model resnet50 --hardware h100 --input-size 224 \\
        --images 60000 --deadline 20s --device cuda --name r50-224 --results h100-validate.jsonl
    python validate.py --summary h100-validate.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SHRINK = 0.8  # of the most images one GPU can do by the deadline, when it cannot do all that were asked


def perfmodel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True)


def plan(args: argparse.Namespace, images: int) -> tuple[int, dict]:
    done = perfmodel(
        "plan",
        "--predictor",
        args.predictor,
        "--model",
        args.model,
        "--pool",
        f"{args.hardware}=1",
        "--input-size",
        str(args.input_size),
        "--images",
        str(images),
        "--deadline",
        args.deadline,
        *args.plan_args,
        "--json",
    )
    if done.returncode not in (0, 3):
        raise SystemExit(f"perfmodel plan failed (exit {done.returncode}): {done.stderr.strip()}")
    return done.returncode, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--summary", metavar="JSONL", help="print the table of a results file and exit")
    parser.add_argument("--predictor")
    parser.add_argument("--model")
    parser.add_argument("--hardware")
    parser.add_argument("--input-size", type=int)
    parser.add_argument("--images", type=int)
    parser.add_argument("--deadline")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--name")
    parser.add_argument("--results", metavar="JSONL")
    parser.add_argument("--plan-args", nargs=argparse.REMAINDER, default=[], help="more `perfmodel plan` flags")
    args = parser.parse_args()
    if args.summary:
        return summary(Path(args.summary))

    code, planned = plan(args, args.images)
    if code == 3:
        most = int(planned.get("max_images") or 0)
        if most < 1:
            raise SystemExit(f"one {args.hardware} finishes no image by {args.deadline}: {planned.get('reason')}")
        code, planned = plan(args, max(1, int(most * SHRINK)))
        if code != 0:
            raise SystemExit(f"no plan even for {int(most * SHRINK)} images: {planned.get('reason')}")
    with tempfile.TemporaryDirectory(prefix="perfmodel-validate-") as folder:
        plan_file = Path(folder) / "plan.json"
        plan_file.write_text(json.dumps(planned))
        done = perfmodel("run", str(plan_file), "--synthetic", "--device", args.device, "--json")
    sys.stderr.write(done.stderr[-4000:])
    if done.returncode != 0:
        return 124 if done.returncode in (130, 143) else done.returncode  # interrupted, as timeout(1) says
    measured = json.loads(done.stdout)
    keys = ("predicted_makespan_s", "measured_makespan_s", "error_rel", "deadline_s", "met_deadline", "images_done")
    line = {
        "name": args.name,
        "model": args.model,
        "hardware": args.hardware,
        "input_size": args.input_size,
        "images": planned.get("images"),
        "batch_size": [a["batch_size"] for a in planned.get("assignments", [])],
        "extrapolated": extrapolated(planned, Path(args.predictor)),
        **{k: measured.get(k) for k in keys},
        "plan": planned,
        "run": measured,
    }
    with open(args.results, "a") as f:  # one line per plan, appended whole
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())
    return 0


def extrapolated(planned: dict, predictor: Path) -> bool:
    """Whether a batch of the plan lies past the largest its option was measured at for its input size
    (then the plan rests on the fit's extrapolation, not on measured points). Per size: the largest batch
    at 224 px says nothing about 448 px, where about a quarter as many images fit."""
    largest: dict[tuple, int] = {}
    for group in json.loads(predictor.read_text())["groups"]:
        key = group["key"]
        for size, batch in group["ok_batches"]:
            option = (key.get("hardware"), key.get("backend"), key.get("precision"), int(size))
            largest[option] = max(largest.get(option, 0), int(batch))
    return any(
        a["batch_size"] > largest.get((a.get("hardware"), a.get("backend"), a.get("precision"), a.get("input_size")), 0)
        for a in planned.get("assignments", [])
    )


def summary(path: Path) -> int:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    print(f"{'plan':34} {'images':>8} {'batch':>7} {'predicted s':>12} {'measured s':>11} {'error':>7} {'deadline':>9}")
    for r in rows:
        error = "-" if r["error_rel"] is None else f"{100 * r['error_rel']:+.1f}%"
        met = "met" if r["met_deadline"] else "MISSED"
        measured = "-" if r["measured_makespan_s"] is None else f"{r['measured_makespan_s']:.2f}"
        batch = ",".join(map(str, r["batch_size"])) + ("*" if r.get("extrapolated") else "")
        print(
            f"{r['name']:34} {r['images'] or 0:>8} {batch:>7} "
            f"{r['predicted_makespan_s']:>12.2f} {measured:>11} {error:>7} {met:>9}"
        )
    if any(r.get("extrapolated") for r in rows):
        print("* a batch larger than its option was measured at: the prediction is the fit's extrapolation")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
