"""011 — Do plans keep their deadline at the probability they state? Many plans, executed, counted.

On this machine (a shared 2-core VM) for ResNet-50 at 64 px and EfficientNet-B0 at 96 px:
  1. profile each with `perfmodel profile` at the start (its default drift probe included): alone
     ("solo") and with a second worker alongside ("pair", --alongside 1);
  2. for each deadline (8, 15, 30, 60 s), find what one worker finishes by it at P = 0.5 (C1, a relaxed plan with a pool
     of one), then make plans at P = 0.5, 0.9 and 0.95 of four kinds:
        relaxed-1   as many images as fit, one worker, solo profile;
        relaxed-2   as many images as fit, two workers, pair profile;
        soft-1      0.9 x C1 images, up to two workers (the planner picks), solo profile;
  3. execute every plan with `perfmodel run PLAN --synthetic --json`, in a shuffled order (so the time
     of the machine's slow spells does not line up with one P); with --steal, the two-worker plans at
     P = 0.95 once more with --steal (paired: the same plan, run with and without work stealing);
  4. write runs.csv (one row per run; each run's JSON in runs/) and results.md: the reliability table
     (stated P against the fraction met, with a Wilson 95% interval), the cost of safety, the accuracy of the predicted
     quantiles, the closed form against drawing every batch, stealing; reliability.png.

    python experiments/011_deadline_calibration/run.py            # ~60 min on an idle 2-core machine
    python experiments/011_deadline_calibration/run.py --quick    # two deadlines, one model: ~8 min
    python experiments/011_deadline_calibration/run.py --profile-processes 3   # each point in 3 processes

Results land in a new results/<date>-<machine>-<commit>/ (experiments/lab.py); profiles in work/.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, log, new_results, perfmodel, wilson  # noqa: E402

MODELS = {"resnet50": 64, "efficientnet_b0": 96}
BATCHES = "1,2,4,8,16,32"
DEADLINES = (8, 15, 30, 60)
QUICK_DEADLINES = (8, 14)
PROBABILITIES = (0.5, 0.9, 0.95)
KINDS = {  # name: (mode, profile, pool size, share of C1 for soft plans)
    "relaxed-1": ("relaxed", "solo", 1, None),
    "relaxed-2": ("relaxed", "pair", 2, None),
    "soft-1": ("soft", "solo", 2, 0.9),
}


def profile(model: str, size: int, work: Path, alongside: int, processes: int = 1) -> Path:
    # K in the name: --resume refuses to add K-process points to a profile of another K
    k = f"-k{processes}" if processes > 1 else ""
    out = work / f"profile-{model}-{size}-{'pair' if alongside else 'solo'}{k}.csv"
    extra = f", each point in {processes} processes" if processes > 1 else ""
    log(f"profiling {model} at {size} px{' with a worker alongside' if alongside else ''}{extra}")
    perfmodel(
        "profile",
        "--model",
        model,
        "--input-sizes",
        size,
        "--batch-sizes",
        BATCHES,
        "--alongside",
        alongside,
        "--processes",
        processes,
        "--out",
        out,
        "--resume",
        capture=False,
    )
    return out


def plan(kind: str, model: str, size: int, deadline: int, p: float, profile_csv: Path, c1: int, path: Path):
    """The plan JSON (a dict, as `perfmodel plan --json` writes it), or None when no plan meets the deadline
    at p. Planned in this process with make_plan, the code behind `perfmodel plan` (72 commands would spend
    most of their time starting Python on a busy 2-core machine)."""
    from perfmodel import console
    from perfmodel.planning.batch import NoPlanError, make_plan

    mode, _, pool, share = KINDS[kind]
    images = None if share is None else int(share * c1)
    settings = dict(mode=mode, pool={"cpu": pool}, profiles=[profile_csv], input_size=size, confidence=p)
    try:
        job = make_plan(images, deadline, **settings)
    except NoPlanError:
        return None
    data = console.clean_for_json(job.to_dict())
    path.write_text(json.dumps(data, indent=1))
    return data


def capacity(model: str, size: int, deadline: int, profile_csv: Path) -> int:
    """C1: what one worker finishes by the deadline at P = 0.5 (the median plan)."""
    from perfmodel.planning.batch import NoPlanError, make_plan

    settings = dict(mode="relaxed", pool={"cpu": 1}, profiles=[profile_csv], input_size=size, confidence=0.5)
    try:
        return int(make_plan(None, deadline, **settings).total_images)
    except NoPlanError:
        return 0


def execute(plan_path: Path, steal: bool, keep: Path) -> dict:
    """The run's JSON, also kept in `keep` (its load, warm-up and batch times per worker: where an error came from)."""
    args = ["run", plan_path, "--synthetic", "--json"] + (["--steal"] if steal else [])
    out = perfmodel(*args).stdout
    keep.write_text(out)
    return json.loads(out)


def record_profile_processes(out: Path, processes: int) -> None:
    """The run record (run.json) says how many processes measured each profiled point."""
    path = out / "run.json"
    record = json.loads(path.read_text()) if path.is_file() else {}
    record["profile_processes"] = processes
    path.write_text(json.dumps(record, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="two deadlines, ResNet-50 only")
    parser.add_argument("--steal", action="store_true", help="run the two-worker plans at P = 0.95 with --steal too")
    parser.add_argument(
        "--results", type=Path, help="the results folder (default: a new dated one); a cut run's goes on"
    )
    parser.add_argument("--tables-only", type=Path, metavar="DIR", help="rebuild results.md from DIR/runs.csv")
    parser.add_argument(
        "--profile-processes",
        type=int,
        default=1,
        metavar="K",
        help="perfmodel profile --processes K: each point's steady state measured in K processes (default: 1)",
    )
    args = parser.parse_args()
    if args.profile_processes < 1:
        parser.error(f"--profile-processes must be 1 or more, not {args.profile_processes}")
    if args.tables_only:
        write_tables(args.tables_only, pd.read_csv(args.tables_only / "runs.csv"))
        return 0
    out = args.results or new_results(HERE)
    out.mkdir(parents=True, exist_ok=True)
    work = HERE / "work"
    work.mkdir(exist_ok=True)
    (out / "plans").mkdir(exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    models = {"resnet50": 64} if args.quick else MODELS
    deadlines = QUICK_DEADLINES if args.quick else DEADLINES

    record_profile_processes(out, args.profile_processes)
    k = args.profile_processes
    profiles = {m: {"solo": profile(m, s, work, 0, k), "pair": profile(m, s, work, 1, k)} for m, s in models.items()}
    log("planning")
    jobs = []
    for model, size in models.items():
        for deadline in deadlines:
            c1 = capacity(model, size, deadline, profiles[model]["solo"])
            for kind, (_, which, _, _) in KINDS.items():
                for p in PROBABILITIES:
                    name = f"{model}-{deadline}s-{kind}-p{p:g}"
                    path = out / "plans" / f"{name}.json"
                    made = plan(kind, model, size, deadline, p, profiles[model][which], c1, path)
                    base = dict(model=model, input_size=size, deadline_s=deadline, kind=kind, p=p, c1=c1, plan=name)
                    if made is None:
                        jobs.append({**base, "planned": False})
                        continue
                    jobs.append({**base, "planned": True, "steal": False, "path": path, "made": made})
                    if args.steal and KINDS[kind][2] > 1 and p == 0.95:
                        jobs.append({**base, "planned": True, "steal": True, "path": path, "made": made})
    random.Random(11).shuffle(jobs)
    # --results of a cut run: its rows are kept and its plans (the same, from the same profiles) not run again
    rows = pd.read_csv(out / "runs.csv").to_dict("records") if (out / "runs.csv").is_file() else []
    ran = {(r["plan"], bool(r["steal"])) for r in rows}
    runnable = [j for j in jobs if j["planned"]]
    for i, job in enumerate(runnable, 1):
        if (job["plan"], job["steal"]) in ran:
            continue
        made = job["made"]
        log(f"{i}/{len(runnable)} {job['plan']}{' --steal' if job['steal'] else ''}")
        run = execute(job["path"], job["steal"], out / "runs" / f"{job['plan']}{'-steal' if job['steal'] else ''}.json")
        q = made["makespan_quantiles_s"]
        rows.append(
            {
                **{k: job[k] for k in ("model", "input_size", "deadline_s", "kind", "p", "c1", "plan", "steal")},
                "workers": made["total_gpus"],
                "images": made["images_planned"],
                "deadline_probability": made["deadline_probability"],
                "simulated_probability": made["makespan_model"]["simulated_probability"],
                "reserve": made["margin"],
                "p5_s": q["p5"],
                "p50_s": q["p50"],
                "p95_s": q["p95"],
                "solver_makespan_s": made["makespan_s"],
                "measured_s": run["measured_makespan_s"],
                "met": bool(run["met_deadline"]),
                "load_avg_start": run["load_avg_1m"][0],
                "load_avg_end": run["load_avg_1m"][1],
            }
        )
        measured = run["measured_makespan_s"]
        log(f"  P {made['deadline_probability']:.3f}, p50 {q['p50']:.2f} s, measured {measured:.2f} s")
        pd.DataFrame(rows).to_csv(out / "runs.csv", index=False)  # kept after every run: a cut run keeps its rows
    columns = ("model", "deadline_s", "kind", "p", "c1")
    unplanned = pd.DataFrame([{k: j[k] for k in columns} for j in jobs if not j["planned"]], columns=columns)
    unplanned.to_csv(out / "unplanned.csv", index=False)
    write_tables(out, pd.DataFrame(rows))
    finish_results(out)
    print(out)
    return 0


def write_tables(out: Path, runs: pd.DataFrame) -> None:
    plain = runs[~runs["steal"].astype(bool)]
    load = plain["load_avg_start"]
    lines = ["# 011 — deadline calibration", ""]
    meta = out / "run.json"
    if meta.exists():
        m = json.loads(meta.read_text())
        lines += [f"{m['machine']}, commit {m['commit']}, started {m['started_utc']}.", ""]
    lines += [
        f"{len(plain)} plans executed (without --steal); load average at their starts: median "
        f"{load.median():.2f}, range {load.min():.2f}-{load.max():.2f}.",
        "",
        "## Reliability: stated probability against the fraction of runs that met the deadline",
        "",
        "| P asked | kind | runs | met | observed | Wilson 95% | mean stated P |",
        "|---|---|---|---|---|---|---|",
    ]
    for p, at in plain.groupby("p"):
        for kind, group in [("all", at), *at.groupby("kind")]:
            k, n = int(group["met"].sum()), len(group)
            lo, hi = wilson(k, n)
            stated = group["deadline_probability"].mean()
            lines.append(f"| {p:g} | {kind} | {n} | {k} | {k / n:.2f} | {lo:.2f}-{hi:.2f} | {stated:.3f} |")
    lines += ["", "## Cost of safety (against the P = 0.5 plan of the same case)", ""]
    key = ["model", "deadline_s", "kind"]
    median = plain[plain["p"] == 0.5].set_index(key)
    for p in sorted(set(plain["p"]) - {0.5}):
        sure = plain[plain["p"] == p].set_index(key)
        both = sure.join(median, rsuffix="_median", how="inner")
        relaxed = both[both.index.get_level_values("kind").str.startswith("relaxed")]
        soft = both[both.index.get_level_values("kind").str.startswith("soft")]
        kept = relaxed["images"] / relaxed["images_median"]
        extra = soft["workers"] - soft["workers_median"]
        lines.append(
            f"- P = {p:g}: relaxed plans keep {kept.median():.0%} of the median plan's images (min {kept.min():.0%}; "
            f">= 85% in {int((kept >= 0.85).sum())} of {len(kept)}); soft plans need at most one worker more in "
            f"{int((extra <= 1).sum())} of {len(extra)} (extra workers: {', '.join(map(str, extra.astype(int)))})."
        )
    lines += ["", "## Accuracy of the predicted distribution", ""]
    one = plain[plain["workers"] == 1]
    ratio = one["p50_s"] / one["measured_s"] - 1
    inside = (plain["measured_s"] >= plain["p5_s"]) & (plain["measured_s"] <= plain["p95_s"])
    lines += [
        f"- one worker: predicted p50 against measured, median {ratio.median():+.1%} (|error| median "
        f"{ratio.abs().median():.1%}, {len(one)} runs); per case below.",
        f"- measured makespan within the predicted [p5, p95]: {int(inside.sum())} of {len(plain)} "
        f"({inside.mean():.0%}); above p95: {int((plain['measured_s'] > plain['p95_s']).sum())}, below p5: "
        f"{int((plain['measured_s'] < plain['p5_s']).sum())}.",
    ]
    both = plain.dropna(subset=["simulated_probability"])
    gap = (both["deadline_probability"] - both["simulated_probability"]).abs()
    lines += [
        f"- closed form against drawing every batch (2,000 draws each): |difference in P| median {gap.median():.3f}, "
        f"max {gap.max():.3f} over {len(both)} plans.",
        "",
    ]
    stolen = runs[runs["steal"].astype(bool)]
    if len(stolen):
        pair = stolen.merge(plain, on="plan", suffixes=("_steal", ""))
        lines += [
            "## Work stealing (the same two-worker plans at P = 0.95, with and without --steal)",
            "",
            f"- met: {int(pair['met_steal'].sum())} of {len(pair)} with --steal, {int(pair['met'].sum())} of "
            f"{len(pair)} without; makespan with/without: median ratio "
            f"{(pair['measured_s_steal'] / pair['measured_s']).median():.3f}.",
            "",
        ]
    lines += ["Every run, with its plan's predicted quantiles and the load average: runs.csv.", ""]
    (out / "results.md").write_text("\n".join(lines))
    figure(out, plain)


def figure(out: Path, plain: pd.DataFrame) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4.5))
    ax.plot([0.45, 1], [0.45, 1], color="grey", linestyle=":", label="observed = stated")
    for p, group in plain.groupby("p"):
        k, n = int(group["met"].sum()), len(group)
        lo, hi = wilson(k, n)
        ax.errorbar([p], [k / n], yerr=[[k / n - lo], [hi - k / n]], fmt="o", color="C0", capsize=4)
        ax.annotate(f"{k}/{n}", (p, k / n), textcoords="offset points", xytext=(8, -4))
    ax.set_xlabel("stated probability of meeting the deadline (--confidence)")
    ax.set_ylabel("fraction of executed plans that met it")
    ax.set_xlim(0.45, 1.0)
    ax.set_ylim(0.0, 1.05)
    ax.set_title("Plans executed on a 2-core VM (Wilson 95% intervals)", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "reliability.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
