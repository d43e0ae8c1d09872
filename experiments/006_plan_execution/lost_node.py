"""006 — a lost node: the makespan when one of two workers' node dies at 30% / 60% of the plan's
predicted makespan, against the plan's prediction (without the loss) and against the prediction the run
makes when it learns of the loss (the re-plan's p50 / p95 end of the survivors).

A two-node Ray cluster on this machine (perfmodel.run.cluster.LocalRay with a further node: the head
with one CPU, a node with one CPU and a resource "node1" of its own), a soft plan for two cpu workers
(ResNet-50 at 64 px, the shipped CPU profile), random inputs. The cpu workers go first to the node
without a resource of its own (the head), so cpu#0 runs on the head and cpu#1 on node 1; node 1 is
killed (every process of it, SIGKILL) when the run's clock passes the fraction of the predicted
makespan. Ray's own health check (its defaults) declares the node dead; then cpu#1's unfinished
batches go back to the queue and cpu#0 runs them. One run without a loss first, as the baseline.

    python experiments/006_plan_execution/lost_node.py            # ~6 min on the 2-core VM

Results: results/<date>-<machine>-<commit>/lost_node.csv and lost_node.md, the plan and run JSONs in
raw/. The Python API is used (not the `perfmodel run` command) to kill the node at a point of the
run's own clock.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, load_average, new_results, perfmodel  # noqa: E402

FRACTIONS = (None, 0.3, 0.6)  # None: no node lost (the baseline)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2400)
    parser.add_argument("--deadline", default="40s")
    args = parser.parse_args()
    results = new_results(HERE)
    raw = results / "raw"
    raw.mkdir()
    plan_path = raw / "plan.json"
    done = perfmodel(
        "plan", "--images", args.images, "--deadline", args.deadline, "--pool", "cpu=2", "--input-size", "64",
        "--profile", ROOT / "profiles" / "cpu-resnet50-torch.csv", "--json",
    )  # fmt: skip
    plan_path.write_text(done.stdout)
    rows = [run_case(plan_path, fraction, raw) for fraction in FRACTIONS]
    write_tables(results, rows)
    finish_results(results)
    print((results / "lost_node.md").read_text())
    return 0


def run_case(plan_path: Path, fraction: float | None, raw: Path) -> dict:
    from perfmodel.run.cluster import LocalRay, NodeSpec
    from perfmodel.run.execute import RunOptions, run_plan
    from perfmodel.run.planfile import read_run_plan

    plan = read_run_plan(plan_path)
    local = LocalRay(num_cpus=1, nodes=[NodeSpec(1, 0, {"node1": 1})])
    killed = {}

    def on_event(e) -> None:
        if fraction is not None and not killed and e.kind == "progress" and e.elapsed_s >= fraction * plan.makespan_s:
            local.lose_node(1)
            killed["at_s"] = e.elapsed_s

    saved = dict(os.environ)
    load_start = load_average()
    try:
        address = local.start()
        os.environ.update(local.settings)
        result = run_plan(plan, RunOptions(synthetic=True, address=address), on_event)
    finally:
        local.stop()
        os.environ.clear()
        os.environ.update(saved)
    data = result.to_dict()
    name = "none" if fraction is None else f"{round(fraction * 100)}pct"
    (raw / f"run-{name}.json").write_text(json.dumps(data, indent=2, default=str))
    lost = (data["lost_workers"] or [None])[0]
    replan = lost["replan"] if lost else None
    end = (replan or {}).get("end_with_survivors_s") or {}
    return {
        "lost_at_plan_share": fraction,
        "killed_at_s": killed.get("at_s"),
        "declared_lost_at_s": lost["lost_at_s"] if lost else None,
        "detection_s": lost["lost_at_s"] - killed["at_s"] if lost else None,
        "batches_put_back": lost["batches_put_back"] if lost else 0,
        "images_put_back": lost["images_put_back"] if lost else 0,
        "rerun_on": ",".join(lost["rerun_on"]) if lost else "",
        "status": data["status"],
        "images_done": data["images_done"],
        "images_planned": data["images_planned"],
        "predicted_makespan_s": data["predicted_makespan_s"],
        "predicted_after_loss_p50_s": end.get("p50"),
        "predicted_after_loss_p95_s": end.get("p95"),
        "measured_makespan_s": data["measured_makespan_s"],
        "later_than_planned_s": data["later_than_planned_s"],
        "deadline_s": data["deadline_s"],
        "met_deadline": data["met_deadline"],
        "survivors_probability": replan["probability_with_survivors"] if replan else None,
        "load_avg_start": load_start,
        "load_avg_end": load_average(),
    }


def write_tables(results: Path, rows: list[dict]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    frame.to_csv(results / "lost_node.csv", index=False)
    lines = [
        "| node lost at | killed at s | declared lost at s | put back (images) | predicted s | predicted "
        "after loss p50 / p95 s | measured s | later than planned s | deadline | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        share = "no loss" if r["lost_at_plan_share"] is None else f"{r['lost_at_plan_share']:.0%} of the plan"
        after = (
            "-"
            if r["predicted_after_loss_p50_s"] is None
            else f"{r['predicted_after_loss_p50_s']:.1f} / {r['predicted_after_loss_p95_s']:.1f}"
        )
        lines.append(
            f"| {share} | {_f(r['killed_at_s'])} | {_f(r['declared_lost_at_s'])} | {r['images_put_back']} | "
            f"{r['predicted_makespan_s']:.1f} | {after} | {_f(r['measured_makespan_s'])} | "
            f"{_f(r['later_than_planned_s'])} | {r['deadline_s']:g} s {'met' if r['met_deadline'] else 'MISSED'} | "
            f"{r['load_avg_start']:.1f} -> {r['load_avg_end']:.1f} |"
        )
    (results / "lost_node.md").write_text("\n".join(lines) + "\n")


def _f(x) -> str:
    return "-" if x is None else f"{x:.1f}"


if __name__ == "__main__":
    sys.exit(main())
