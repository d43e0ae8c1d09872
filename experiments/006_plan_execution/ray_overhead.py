"""006 — Where the CPU goes while `perfmodel run` executes a plan: the workers, or Ray and the driver?

    python experiments/006_plan_execution/ray_overhead.py PLAN.json [--runs 3] [--results DIR]

Runs the plan on random inputs (as `perfmodel run PLAN --synthetic` does, through perfmodel.run_plan)
while a thread samples every process of the machine 4 times a second (psutil CPU times), and adds up
the CPU seconds of each kind of process in each phase of the run: Ray starting, the actors starting,
the models loading (the plan's clock has started), the batches (until the last one ends), and Ray
stopping. A plan whose workers fill every core is slowed by whatever else runs then. The sampler
itself runs in the driver, so the driver's row includes it (about 1-3% of a core here).

Writes DIR/ray-overhead.csv (one row per run, phase and kind of process) and DIR/ray-overhead.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import perfmodel  # noqa: E402
from experiments.lab import at_least_one, new_results  # noqa: E402
from perfmodel.run import RunOptions, read_run_plan, run_plan  # noqa: E402

SAMPLE_S = 0.25
PHASES = ["Ray starting", "actors starting", "models loading", "batches", "stopping"]
# How each phase's event text begins (perfmodel.run.execute's "phase" events).
PHASE_EVENTS = {
    "starting a local Ray": "Ray starting",
    "starting ": "actors starting",
    "loading": "models loading",
    "running": "batches",
}

KINDS = [  # (kind, test on the lowered command line), first match wins; the driver and the workers by PID
    ("raylet", lambda c: "raylet" in c.split(" ")[0]),
    ("gcs_server", lambda c: "gcs_server" in c.split(" ")[0]),
    ("dashboard", lambda c: "dashboard/dashboard.py" in c),
    ("dashboard agent", lambda c: "dashboard/agent.py" in c),
    ("runtime-env agent", lambda c: "runtime_env/agent" in c),
    ("log monitor", lambda c: "log_monitor.py" in c),
    ("autoscaler monitor", lambda c: "autoscaler/_private/monitor.py" in c),
    ("client server", lambda c: "ray.util.client.server" in c),
    ("ray start + keeper", lambda c: "ray.scripts.scripts" in c or "perfmodel.run.keeper" in c),
    ("idle Ray workers", lambda c: c.startswith("ray::") or "default_worker.py" in c),
]


class Sampler(threading.Thread):
    """CPU seconds (user + system) of every process, 4 times a second, until stopped."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[tuple[float, dict[int, float]]] = []
        self.names: dict[int, str] = {}
        self.actors: set[int] = set()
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            now, cpu = time.time(), {}
            for p in psutil.process_iter(["pid", "cmdline", "name", "cpu_times"]):
                times = p.info["cpu_times"]
                if times is None:
                    continue
                cpu[p.info["pid"]] = times.user + times.system
                line = " ".join(p.info["cmdline"] or [p.info["name"] or ""]).lower()
                if "runworker" in line:  # Ray names an actor's process after its class while it is one
                    self.actors.add(p.info["pid"])
                self.names.setdefault(p.info["pid"], line)
            self.samples.append((now, cpu))
            self.halt.wait(SAMPLE_S)

    def kind(self, pid: int) -> str:
        if pid == os.getpid():
            return "driver (perfmodel)"
        if pid in self.actors:
            return "plan's workers"
        line = self.names.get(pid, "")
        return next((kind for kind, test in KINDS if test(line)), "everything else")


def one_run(plan_path: Path) -> tuple[list[dict], dict]:
    plan = read_run_plan(plan_path)
    marks = []

    def on_event(event):
        if event.kind == "phase":
            phase = next((name for word, name in PHASE_EVENTS.items() if event.text.startswith(word)), None)
            if phase is not None:
                marks.append((phase, time.time()))

    sampler = Sampler()
    sampler.start()
    time.sleep(2 * SAMPLE_S)  # a first sample before anything starts
    result = run_plan(plan, RunOptions(synthetic=True), on_event)
    end = time.time()
    sampler.halt.set()
    sampler.join()
    data = result.to_dict()
    # The batches end with the last worker's last batch (the plan's clock starts as the models load);
    # after it, Ray and the actors stop.
    clock = next(t for name, t in marks if name == "models loading")
    bounds = [t for _, t in marks] + [clock + data["measured_makespan_s"], end]
    names = [name for name, _ in marks] + ["stopping"]
    kinds = ["plan's workers", "driver (perfmodel)", *(k for k, _ in KINDS), "everything else"]
    seconds = {(phase, kind): 0.0 for phase in names for kind in kinds}
    for (t_a, a), (t_b, b) in zip(sampler.samples, sampler.samples[1:]):
        middle = (t_a + t_b) / 2
        i = next((k for k in range(len(names)) if bounds[k] <= middle < bounds[k + 1]), None)
        if i is None:
            continue
        for pid, used in b.items():
            delta = used - a.get(pid, 0.0)  # a process born in the interval: all of it
            if delta > 0:
                seconds[(names[i], sampler.kind(pid))] += delta
    rows = []
    for (phase, kind), cpu in seconds.items():
        i = names.index(phase)
        rows.append({"phase": phase, "kind": kind, "cpu_s": cpu, "phase_s": bounds[i + 1] - bounds[i]})
    return rows, {
        "predicted_makespan_s": data["predicted_makespan_s"],
        "measured_makespan_s": data["measured_makespan_s"],
        "error_rel": data["error_rel"],
        "workers": len(data["workers"]),
    }


def table(frame: pd.DataFrame) -> str:
    """CPU cores used by each kind of process in each phase (CPU seconds over the phase's length), median of runs."""
    frame = frame.assign(cores=frame.cpu_s / frame.phase_s)
    cores = (
        frame.groupby(["phase", "kind"])
        .cores.median()
        .unstack("phase")
        .reindex(columns=[p for p in PHASES if p in set(frame.phase)])
    )
    cores = cores[(cores > 0.005).any(axis=1)].sort_values(cores.columns[-1], ascending=False)
    length = frame.groupby("phase").phase_s.median()
    lines = [
        "| process | " + " | ".join(f"{p} ({length[p]:.1f} s)" for p in cores.columns) + " |",
        "|---|" + "---|" * len(cores.columns),
    ]
    for kind, row in cores.iterrows():
        lines.append(f"| {kind} | " + " | ".join(f"{v:.2f}" for v in row) + " |")
    total = cores.sum()
    lines.append("| all | " + " | ".join(f"{v:.2f}" for v in total) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("plan", type=Path)
    p.add_argument("--runs", type=at_least_one, default=3)
    p.add_argument("--results", type=Path, help="folder for the results (default: a new one in results/)")
    args = p.parse_args()
    args.results = args.results or new_results(HERE)
    args.results.mkdir(parents=True, exist_ok=True)
    rows, runs = [], []
    for k in range(args.runs):
        load = os.getloadavg()[0]
        found, summary = one_run(args.plan)
        rows += [dict(r, run=k) for r in found]
        runs.append(dict(summary, run=k, load_avg_before=load, load_avg_after=os.getloadavg()[0]))
        print(
            f"run {k + 1}/{args.runs}: predicted {summary['predicted_makespan_s']:.2f} s, measured "
            f"{summary['measured_makespan_s']:.2f} s ({summary['error_rel']:+.1%}); load {load:.2f}",
            flush=True,
        )
    frame = pd.DataFrame(rows)
    frame.to_csv(args.results / "ray-overhead.csv", index=False, float_format="%.4g")
    runs = pd.DataFrame(runs)
    text = (
        f"# Where the CPU went during `perfmodel run {args.plan.name} --synthetic` ({args.runs} runs, "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, {psutil.cpu_count()} cores, perfmodel "
        f"{perfmodel.__version__})\n\n"
        "CPU cores used by each kind of process in each phase (CPU seconds over the phase's length; median of runs). "
        "The plan's clock starts with `models loading`.\n\n" + table(frame) + "\n\n"
        "| run | predicted s | measured s | error | load avg before-after |\n|---|---|---|---|---|\n"
        + "\n".join(
            f"| {r.run + 1} | {r.predicted_makespan_s:.2f} | {r.measured_makespan_s:.2f} | {r.error_rel:+.1%} | "
            f"{r.load_avg_before:.2f}-{r.load_avg_after:.2f} |"
            for r in runs.itertuples()
        )
        + "\n"
    )
    (args.results / "ray-overhead.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
