"""013 — The serving options on this machine: eager, channels-last, torch.compile's modes; and which a plan picks.

1. `perfmodel profile` of each option the CPU runs (CUDA graphs and reduce-overhead are refused on a CPU),
   every point's first call in a fresh worker process with an empty compile cache of its own:
     tiny      at 64 px, batch 1, 16, 64: torch, torch-channels-last, torch-compile, torch-compile-max-autotune,
               torch-channels-last-compile
     resnet50  at 64 px, batch 1, 8:      torch, torch-channels-last, torch-compile   (--quick leaves it out)
2. Per model, from its options' profiles together: the most images one CPU worker does by a short and by a
   long deadline (`perfmodel plan --mode relaxed --pool cpu=1 --confidence none --json`, on the medians):
   which option each picks and why.
3. results.md: per option and point, the median call, the first call and its compilation, the load; the plans.

    python experiments/013_serving_options/run.py            # ~40 min on a busy 2-core VM (compiling dominates)
    python experiments/013_serving_options/run.py --quick    # the tiny model only
    python experiments/013_serving_options/run.py --plans-only results/<folder>   # step 2-3 on its profiles

Results land in a new results/<date>-<machine>-<commit>/ (experiments/lab.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, load_average, log, new_results, perfmodel  # noqa: E402

OPTIONS = {  # backend name: its flags
    "torch": [],
    "torch-channels-last": ["--channels-last"],
    "torch-compile": ["--compile"],
    "torch-compile-max-autotune": ["--compile", "--compile-mode", "max-autotune"],
    "torch-channels-last-compile": ["--channels-last", "--compile"],
}
MODELS = {  # model: (input size, batch sizes, options)
    "tiny": (64, "1,16,64", list(OPTIONS)),
    "resnet50": (64, "1,8", ["torch", "torch-channels-last", "torch-compile"]),
}
# The plans: as many images as one CPU worker does by a short and by a long deadline.
DEADLINES = ("10s", "600s")
COLUMNS = [
    "model",
    "backend",
    "batch_size",
    "status",
    "latency_ms",
    "throughput_ips",
    "warmup_ms",
    "compile_ms",
    "compile_graphs",
    "compile_cache",
    "warmup_includes",
    "load_ms",
    "load_avg_1m",
]


def profile(model: str, backend: str, out: Path) -> Path:
    size, batches, _ = MODELS[model]
    path = out / f"cpu-{model}-{backend}.csv"
    log(f"profiling {model} {backend}")
    perfmodel(
        "profile",
        "--model",
        model,
        "--batch-sizes",
        batches,
        "--input-sizes",
        size,
        "--max-time-per-point",
        5,
        "--drift-probe",
        0,
        "--worker-timeout",
        3600,
        "--call-timeout",
        3600,
        *OPTIONS[backend],
        "--out",
        path,
    )
    return path


def plans(paths: list[Path], out: Path) -> list[dict]:
    """Per model, from all its options' profiles together, one plan per deadline: which option, and why."""
    found = []
    for model, (size, _, _) in MODELS.items():
        profiles = [p for p in paths if p.name.startswith(f"cpu-{model}-")]
        if not profiles:
            continue
        hardware = str(pd.read_csv(profiles[0])["hardware"].iloc[0])
        for deadline in DEADLINES:
            # On the medians (--confidence none): the choice between options, not this busy VM's spread
            args = ["plan", "--mode", "relaxed", "--pool", f"{hardware}=1", "--deadline", deadline, "--json"]
            args += ["--confidence", "none"]
            args += ["--input-size", size, *(x for p in profiles for x in ("--profile", p))]
            plan = json.loads(perfmodel(*args, allow=(3,)).stdout)
            (out / f"plan-{model}-{deadline}.json").write_text(json.dumps(plan, indent=1) + "\n")
            found.append({"model": model, "deadline": deadline, "plan": plan})
    return found


def report(frame: pd.DataFrame, found: list[dict], out: Path) -> None:
    lines = [
        "# 013 results",
        "",
        f"Machine, commit, times and load average: `run.json` (load now {load_average()}).",
        "",
        "| model | option | batch | median ms | images/s | first call ms | of it compiling ms | load ms | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in frame.itertuples(index=False):
        compiling = "" if pd.isna(r.compile_ms) else f"{r.compile_ms:,.0f}"
        lines.append(
            f"| {r.model} | {r.backend} | {r.batch_size} | {r.latency_ms:.3f} | {r.throughput_ips:,.0f} | "
            f"{r.warmup_ms:,.0f} | {compiling} | {r.load_ms:,.0f} | {r.load_avg_1m:.1f} |"
        )
    for item in found:
        plan = item["plan"]
        lines += ["", f"## The most images of {item['model']} one worker does by {item['deadline']}", ""]
        if "assignments" not in plan:
            lines.append(f"no plan: {plan.get('reason', plan)}")
            continue
        for a in plan["assignments"]:
            lines.append(
                f"- {a['count']} x {a['hardware']} {a['option']}, batch {a['batch_size']}, {a['images']:,} images, "
                f"first batch done at {a['load_s'] + a['warmup_s']:.2f} s, finish {a['finish_s']:.1f} s"
            )
        for choice in plan.get("option_choice", []):
            lines.append(f"- why: {choice['why']}")
    (out / "results.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the tiny model only")
    parser.add_argument("--plans-only", type=Path, metavar="FOLDER", help="plan from that run's profiles again")
    args = parser.parse_args()
    if args.plans_only:
        out = args.plans_only
    else:
        out = new_results(HERE)
        for model in ["tiny"] if args.quick else list(MODELS):
            for backend in MODELS[model][2]:
                profile(model, backend, out)
    paths = sorted(out.glob("cpu-*.csv"))
    frame = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    frame[[c for c in COLUMNS if c in frame.columns]].to_csv(out / "options.csv", index=False)
    found = plans(paths, out)
    report(frame.reindex(columns=COLUMNS), found, out)
    if not args.plans_only:
        finish_results(out)
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
