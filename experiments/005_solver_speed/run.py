"""How fast `perfmodel plan` solves, and where the time goes (Pyomo building, Pyomo's interface, HiGHS).

    python experiments/005_solver_speed/run.py [--repeats 7] [--seeds 5] [--profile profiles/cpu-resnet50-torch.csv]

Cases, on synthetic latency curves (L = (3 ms + 0.25 ms x b x (s/224)^2) / speed, with 3% noise;
warm-up = 1.5 L + 0.2..0.8 s; model load 2..5 s; the largest batch limited by memory):

    homogeneous      1 type (any number of GPUs), 1 input size, batch sizes 1..2048, 100k images, 60 s
    large            8 types x 1000 GPUs x 4 input sizes (224, 320, 384, 512) x batch sizes 1..2048,
                     images = 35-65% of what the pool can do by 60 s, soft mode, fewest GPUs
    large-no-cuts    the same without the count cuts of milp.greedy_lower_bound (ablation)
    large-relaxed    the same pool, 3x the images, relaxed mode (most images within the default gap
                     1e-4, then fewest GPUs)
    large-cost       the same, objective cost, HiGHS's default gap 1e-4, and gap 0 (time limit 30 s)
    infeasible       the same, 3x the images, soft mode: the time to diagnose (why, and what would help)

Each case is solved `repeats` times per seed; the median per seed is kept, and the table shows the
median and the worst over seeds. Writes results.json and results.md in a new folder results/<date>-<machine>-<commit>/.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from experiments.lab import at_least_one, finish_results, new_results, perfmodel  # noqa: E402
from perfmodel.profile.provenance import cpu_name  # noqa: E402
from solvers import Candidates, GpuType, InfeasibleProblem, Problem, milp, solve  # noqa: E402
from solvers.capacity import Columns, availability, clip, needs  # noqa: E402

SIZES = (224, 320, 384, 512)
DEADLINE_S = 60.0


def curve(rng, speed: float, size: int, largest: int) -> Candidates:
    b = np.arange(1, largest + 1)
    area = (size / 224) ** 2
    latency = (0.003 + 0.00025 * b * area) / speed * rng.lognormal(0.0, 0.03, b.size)
    warmup = 1.5 * latency + rng.uniform(0.2, 0.8)
    return Candidates(size, b, latency, warmup)


def homogeneous(seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    gpu = GpuType("gpu", None, [curve(rng, 1.0, 224, 2048)], load_s=3.0)
    return Problem([gpu], {224: 100_000}, DEADLINE_S)


def large_pool(seed: int, count: int = 1000) -> list[GpuType]:
    rng = np.random.default_rng(seed)
    types = []
    for k in range(8):
        speed, memory = rng.uniform(0.5, 4.0), rng.uniform(0.25, 1.0)
        cands = [curve(rng, speed, s, int(np.clip(2048 * memory / (s / 224) ** 2, 1, 2048))) for s in SIZES]
        price = round(float(rng.uniform(0.6, 1.4) * 2.0 * speed**0.8), 2)
        types.append(GpuType(f"gpu{k}", count, cands, cost_per_hour=price, load_s=float(rng.uniform(2, 5))))
    return types


def large(seed: int, fill: float = 1.0, **changes) -> Problem:
    """Images per input size: 35-65% (x fill) of what the whole pool could do on that size alone, / 4."""
    rng = np.random.default_rng(seed + 1000)
    types = large_pool(seed)
    probe = Problem(types, {s: 1 for s in SIZES}, DEADLINE_S)
    cap = Columns(probe).capacity(DEADLINE_S)
    counts = np.array([t.count for t in types])
    images = {
        s: int(fill * rng.uniform(0.35, 0.65) * (counts * cap[:, i]).sum() / len(SIZES)) for i, s in enumerate(SIZES)
    }
    return Problem(types, images, DEADLINE_S, **changes)


def breakdown(problem: Problem, strengthen: bool = True) -> dict:
    """Seconds spent in each step of a soft, fewest-GPUs solve, measured step by step."""
    t0 = time.perf_counter()
    columns = Columns(problem)
    cap = columns.capacity(problem.usable_s)
    t1 = time.perf_counter()
    need = needs(problem)
    result = milp.min_gpus(
        clip(cap, need),
        need,
        availability(problem),
        np.ones(len(problem.gpu_types)),
        strengthen=strengthen,
        time_limit=60,
    )
    return {
        "capacity_s": t1 - t0,
        "build_s": result.build_s,
        "pyomo_call_s": result.call_s,
        "highs_s": result.solve_s,
        "gap": result.gap,
        "gpus": result.objective,
    }


def timed_solve(problem: Problem) -> dict:
    try:
        plan = solve(problem)
    except InfeasibleProblem as exc:
        return {"status": "infeasible", "reason": exc.diagnosis.reason}
    return {
        "status": plan.status,
        "gap": plan.gap,
        "total_s": plan.solve_time_s,
        "build_s": plan.build_time_s,
        "highs_s": plan.solver_time_s,
        "gpus": plan.total_gpus,
        "images": plan.total_images,
        "objective": plan.objective_value,
        "makespan_s": plan.makespan_s,
    }


def timed_infeasible(problem: Problem) -> dict:
    t0 = time.perf_counter()
    try:
        solve(problem)
    except InfeasibleProblem as exc:
        d = exc.diagnosis
        return {
            "status": "infeasible",
            "total_s": time.perf_counter() - t0,
            "max_images": d.max_images,
            "min_deadline_s": d.min_deadline_s,
            "extra_gpus": d.extra_gpus,
        }
    raise AssertionError("the infeasible case was feasible")


def median_runs(run, repeats: int) -> dict:
    runs = [run() for _ in range(repeats)]
    out = dict(runs[0])
    for key in runs[0]:
        values = [r[key] for r in runs]
        if key.endswith("_s") and all(isinstance(v, float) for v in values):
            out[key] = statistics.median(values)
    return out


def cli_seconds(profile: str, repeats: int) -> dict:
    """Wall time of the whole `perfmodel plan` command (Python start, imports, profile, solve, output)."""
    args = ["plan", "--images", "100k", "--deadline", "60s", "--profile", profile, "--json"]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        done = perfmodel(*args, check=False)
        times.append(time.perf_counter() - t0)
        if done.returncode != 0:
            return {"error": done.stderr.strip()}
    solve_s = json.loads(done.stdout)["solve_time_s"]
    return {"command": " ".join(["-m", "perfmodel", *args]), "wall_s": statistics.median(times), "solve_s": solve_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=at_least_one, default=7)
    parser.add_argument("--seeds", type=at_least_one, default=5)
    parser.add_argument("--profile", help="a profile CSV for the end-to-end `perfmodel plan` timing")
    args = parser.parse_args()
    if args.profile and not Path(args.profile).is_file():  # found out only at the end, after every case
        parser.error(f"--profile {args.profile}: no such file; e.g. profiles/cpu-resnet50-torch.csv")

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    milp.load_pyomo()
    import_s = time.perf_counter() - t0

    cases = {
        "homogeneous": lambda seed: median_runs(lambda: timed_solve(homogeneous(seed)), args.repeats),
        "homogeneous-steps": lambda seed: median_runs(lambda: breakdown(homogeneous(seed)), args.repeats),
        "large": lambda seed: median_runs(lambda: timed_solve(large(seed)), args.repeats),
        "large-steps": lambda seed: median_runs(lambda: breakdown(large(seed)), args.repeats),
        "large-no-cuts-steps": lambda seed: median_runs(lambda: breakdown(large(seed), strengthen=False), args.repeats),
        "large-relaxed": lambda seed: median_runs(lambda: timed_solve(large(seed, 3.0, mode="relaxed")), args.repeats),
        "large-cost": lambda seed: median_runs(lambda: timed_solve(large(seed, objective="cost")), args.repeats),
        "large-cost-gap0": lambda seed: median_runs(
            lambda: timed_solve(large(seed, objective="cost", mip_rel_gap=0.0, time_limit_s=30.0)), 1
        ),
        "infeasible": lambda seed: median_runs(lambda: timed_infeasible(large(seed, 3.0)), max(1, args.repeats // 3)),
    }
    results = {}
    for name, case in cases.items():
        results[name] = [case(seed) for seed in range(args.seeds)]
        print(name, json.dumps(summarise(results[name])), flush=True)

    report = {
        "machine": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "pyomo": _version("pyomo"),
            "highspy": _version("highspy"),
            "numpy": np.__version__,
        },
        "load_avg_before": load_before,
        "load_avg_after": os.getloadavg(),
        "pyomo_import_s": import_s,
        "repeats": args.repeats,
        "seeds": args.seeds,
        "cases": results,
        "summary": {name: summarise(rows) for name, rows in results.items()},
    }
    if args.profile:
        report["cli"] = cli_seconds(args.profile, 3)
    out = new_results(HERE)
    (out / "results.json").write_text(json.dumps(report, indent=2, default=float) + "\n")
    (out / "results.md").write_text(markdown(report))
    finish_results(out)
    print((out / "results.md").read_text())
    print(f"wrote {out}")


def summarise(rows: list[dict]) -> dict:
    out = {}
    for key in rows[0]:
        values = [r[key] for r in rows]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out[key] = {"median": statistics.median(values), "max": max(values)}
        elif all(isinstance(v, str) for v in values):
            out[key] = sorted(set(values))
    return out


def markdown(report: dict) -> str:
    m = report["machine"]
    lines = [
        "# Solver speed: results",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores (shared), Python {m['python']}, Pyomo {m['pyomo']}, "
        f"highspy {m['highspy']}. Load average before/after: "
        f"{', '.join(f'{x:.2f}' for x in report['load_avg_before'])} / "
        f"{', '.join(f'{x:.2f}' for x in report['load_avg_after'])}.",
        f"Median of {report['repeats']} solves per seed, over {report['seeds']} seeds: median (worst seed). "
        f"Pyomo import, once per process: {report['pyomo_import_s'] * 1000:.0f} ms (not in any figure below).",
        "",
        "| case | status | gap (worst) | total ms | numpy capacity ms | Pyomo build ms | Pyomo solve call ms | "
        "HiGHS ms | GPUs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["summary"].items():

        def cell(key, scale=1000.0):
            return f"{s[key]['median'] * scale:.1f} ({s[key]['max'] * scale:.1f})" if key in s else "-"

        status = ", ".join(s.get("status", ["-"])) if "status" in s else "-"
        gap = f"{s['gap']['max']:.2g}" if "gap" in s else "-"
        gpus = f"{s['gpus']['median']:,.0f}" if "gpus" in s else "-"
        lines.append(
            f"| {name} | {status} | {gap} | {cell('total_s')} | {cell('capacity_s')} | {cell('build_s')} | "
            f"{cell('pyomo_call_s')} | {cell('highs_s')} | {gpus} |"
        )
    if "cli" in report:
        c = report["cli"]
        lines += [
            "",
            f"End to end, `{c.get('command', '')}`: "
            + (
                f"{c['wall_s']:.2f} s wall (median of 3), of which the solve {c['solve_s'] * 1000:.0f} ms."
                if "wall_s" in c
                else c.get("error", "")
            ),
        ]
    return "\n".join(lines) + "\n"


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
