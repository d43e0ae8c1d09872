"""006 — Plans executed on Ray: the measured makespan against the predicted one, per plan and per worker.

For each model (ResNet-50 and EfficientNet-B0 at a small input size on a CPU; at 224 px on a GPU):
  1. profile it here with `perfmodel profile` (fresh-process warm-up, one torch thread on a CPU): once
     alone ("solo"), and on a CPU once more with `--alongside 1` ("pair": every point timed while a
     second worker runs the same batch, as when two workers share the two cores);
  2. for each deadline, find what one worker finishes by it (a relaxed plan with a pool of one) and make
     soft plans (`perfmodel plan --json`) for 90% of that with one worker and 180% with two, batch
     sizes the planner's choice: 1 worker on the solo profile; 2 workers on the solo profile; 2
     workers on the pair profile;
  3. execute each with `perfmodel run PLAN --synthetic --json`; for the middle deadline also over
     generated JPEG files of several sizes (`--images`): 1 worker (solo), 2 workers (pair), and 2 workers
     (pair) planned with `--decode-time`, the decoding cost per image measured here beforehand;
  4. write summary.csv (one row per run), workers.csv (one row per worker) and results.md (the tables
     for the README), with the load average beside each run; every plan and run JSON goes to raw/ (kept
     out of git: the two CSVs hold what the tables use, `--tables-only` rebuilds them from raw/).

    python experiments/006_plan_execution/run.py                  # CPU: ~25 min on an idle 2-core machine
    python experiments/006_plan_execution/run.py --quick          # shorter deadlines: ~17 min
    python experiments/006_plan_execution/run.py --device cuda    # on a GPU machine, unchanged

Everything goes through the `perfmodel` command (the code users run); results land in a new folder
results/<date>-<machine>-<commit>/ (experiments/lab.py; `--results DIR` names one), the generated images
and profiles in work/ (ignored by git; reused by a re-run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, log, new_results, perfmodel  # noqa: E402

CPU_MODELS = {"resnet50": 64, "efficientnet_b0": 96}  # small input sizes: seconds, not hours, on 2 cores
GPU_MODELS = {"resnet50": 224, "efficientnet_b0": 224}
CPU_BATCHES = "1,2,4,8,16,32"
GPU_BATCHES = "1,2,4,8,16,32,64,128,256"
DEADLINES = {"cpu": (15, 30, 60), "cuda": (10, 20, 40)}
QUICK_DEADLINES = {"cpu": (10, 20, 30), "cuda": (5, 10, 20)}
SHARE = {1: 0.9, 2: 1.8}  # images planned, as a share of what one worker finishes by the deadline
IMAGE_SIDES = (80, 128, 200, 320)  # the generated JPEGs: several sizes, decoded and resized to the input size


@dataclass(frozen=True)
class Case:
    profile: str  # "solo" or "pair"
    workers: int
    inputs: str  # "synthetic" or "files"
    decode: bool = False  # plan with --decode-time

    @property
    def name(self) -> str:
        return f"{self.workers}w-{self.profile}-{self.inputs}" + ("-decode" if self.decode else "")


def cases(device: str, devices: int, files: bool) -> list[Case]:
    two = devices >= 2
    out = [Case("solo", 1, "synthetic")]
    if two:
        out.append(Case("solo", 2, "synthetic"))
    if two and device == "cpu":
        out.append(Case("pair", 2, "synthetic"))
    if files:
        out.append(Case("solo", 1, "files"))
        if two:
            out.append(Case("pair" if device == "cpu" else "solo", 2, "files"))
        if two and device == "cpu":
            out.append(Case("pair", 2, "files", decode=True))
    return out


def profile_args(model: str, size: int, device: str, out: Path) -> list:
    batches = CPU_BATCHES if device == "cpu" else GPU_BATCHES
    return [
        "profile",
        "--model",
        model,
        "--device",
        device,
        "--input-sizes",
        size,
        "--batch-sizes",
        batches,
        "--out",
        out,
        "--resume",
    ]


def profiles(model: str, size: int, device: str, work: Path) -> dict[str, Path]:
    """solo: measured alone; pair (CPU): measured --alongside 1, a second worker running the same batch."""
    solo = work / f"profile-{device}-{model}-{size}-solo.csv"
    log(f"profiling {model} at {size} px on {device}, alone")
    perfmodel(*profile_args(model, size, device, solo), capture=False)
    if device != "cpu":
        return {"solo": solo}
    pair = work / f"profile-{device}-{model}-{size}-alongside-1.csv"
    log(f"profiling {model} at {size} px on {device}, with a worker alongside")
    perfmodel(*profile_args(model, size, device, pair), "--alongside", "1", capture=False)
    return {"solo": solo, "pair": pair}


def capacity(profile_csv: Path, size: int, deadline: float, hardware: str, decode: list) -> int:
    """What one worker finishes by the deadline (a relaxed plan with a pool of one); 0 if not even a batch."""
    done = perfmodel(
        "plan",
        "--mode",
        "relaxed",
        "--deadline",
        f"{deadline}s",
        "--pool",
        f"{hardware}=1",
        "--profile",
        profile_csv,
        "--input-size",
        size,
        "--json",
        *decode,
        allow=(3,),
    )
    return 0 if done.returncode == 3 else int(json.loads(done.stdout)["images_planned"])


def hardware_of(profile_csv: Path) -> str:
    return str(pd.read_csv(profile_csv, usecols=["hardware"])["hardware"].iloc[0])


def master_images(folder: Path, count: int) -> list[Path]:
    """`count` JPEG files of several sizes (smooth random pictures, quality 90), made once and reused."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(6)
    paths = []
    for i in range(count):
        side = IMAGE_SIDES[i % len(IMAGE_SIDES)]
        path = folder / f"img{i:06d}-{side}px.jpg"
        coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)  # drawn even when the file exists
        paths.append(path)
        if path.exists():
            continue
        picture = np.asarray(Image.fromarray(coarse).resize((side * 4 // 3, side), Image.BICUBIC), dtype=float)
        noise = rng.normal(0, 10, size=picture.shape)
        Image.fromarray(np.clip(picture + noise, 0, 255).astype(np.uint8)).save(path, quality=90)
    return paths


def image_folder(work: Path, count: int) -> Path:
    """A folder of exactly `count` images: hard links to the first `count` of the master set."""
    master = master_images(work / "images-master", count)
    folder = work / f"images-{count}"
    if not folder.is_dir() or sorted(p.name for p in folder.iterdir()) != sorted(p.name for p in master):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for path in master:
            os.link(path, folder / path.name)
    return folder


def decode_time(work: Path, size: int, sample: int = 200) -> float:
    """Seconds to decode one of the generated images to `size` px (median of a sample), with the code
    the workers use."""
    from perfmodel.run.images import decode

    times = []
    for path in master_images(work / "images-master", sample):
        t0 = time.perf_counter()
        decode(str(path), size)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def plan_and_run(args, work: Path, out: Path) -> list[dict]:
    models = CPU_MODELS if args.device == "cpu" else GPU_MODELS
    deadlines = (QUICK_DEADLINES if args.quick else DEADLINES)[args.device]
    devices = 2 if args.device == "cpu" else _gpu_count()
    for sub in ("plans", "runs"):  # this run's files only: none left from an earlier one
        (out / "raw" / sub).mkdir(parents=True, exist_ok=True)
        for old in (out / "raw" / sub).glob("*.json"):
            old.unlink()
    rows = []
    for model, size in models.items():
        measured = profiles(model, size, args.device, work)
        hardware = hardware_of(measured["solo"])
        decode_s = decode_time(work, size)
        log(f"decoding one generated image to {size} px: {decode_s * 1000:.2f} ms")
        for deadline in deadlines:
            middle = deadline == deadlines[len(deadlines) // 2]
            for case in cases(args.device, devices, files=middle and not args.no_files):
                row = run_case(
                    case,
                    model,
                    size,
                    deadline,
                    hardware,
                    measured[case.profile],
                    decode_s,
                    work,
                    out,
                    args.decode_threads,
                )
                if row is not None:
                    rows.append(row)
    return rows


def run_case(
    case: Case,
    model: str,
    size: int,
    deadline: float,
    hardware: str,
    profile_csv: Path,
    decode_s: float,
    work: Path,
    out: Path,
    decode_threads: int,
) -> dict | None:
    decode = ["--decode-time", f"{decode_s * 1000:.4f}ms"] if case.decode else []
    images = int(SHARE[case.workers] * capacity(profile_csv, size, deadline, hardware, decode))
    plan_id = f"{model}-{size}px-{deadline}s-{case.name}"
    if images < case.workers:  # the profile says one worker cannot even load and warm up in time
        log(f"{plan_id}: skipped, no worker finishes a batch by {deadline} s on this profile")
        return None
    plan_path = out / "raw" / "plans" / f"{plan_id}.json"
    made = perfmodel(
        "plan",
        "--images",
        images,
        "--deadline",
        f"{deadline}s",
        "--profile",
        profile_csv,
        "--input-size",
        size,
        "--pool",
        f"{hardware}={case.workers}",
        "--json",
        *decode,
    )
    plan_path.write_text(made.stdout)
    run_args = ["run", plan_path, "--json", "--decode-threads", decode_threads]
    run_args += ["--images", image_folder(work, images)] if case.inputs == "files" else ["--synthetic"]
    log(f"{plan_id}: {images:,} images on {case.workers} worker(s)")
    run = json.loads(perfmodel(*run_args).stdout)
    (out / "raw" / "runs" / f"{plan_id}.json").write_text(json.dumps(run, indent=1))
    log(
        f"  predicted {run['predicted_makespan_s']:.2f} s, measured {run['measured_makespan_s']:.2f} s "
        f"({run['error_rel']:+.1%})"
    )
    return summary_row(plan_id, run, json.loads(made.stdout))


def summary_row(plan_id: str, run: dict, plan: dict) -> dict:
    """One row of summary.csv, from a run and its plan (the plan id names model, size, deadline and case)."""
    model, size, deadline, workers_, profile, inputs = plan_id.split("-")[:6]
    workers = run["workers"]
    return {
        "plan": plan_id,
        "model": model,
        "input_size": int(size[:-2]),
        "deadline_s": int(deadline[:-1]),
        "profile": profile,
        "inputs": inputs,
        "decode_time_ms": plan.get("decode_s_per_image", 0.0) * 1000,
        "workers": len(workers),
        "images": run["images_planned"],
        "batch_sizes": ",".join(str(w["batch_size"]) for w in workers),
        "predicted_s": run["predicted_makespan_s"],
        "measured_s": run["measured_makespan_s"],
        "error_rel": run["error_rel"],
        "met_deadline": run["met_deadline"],
        "decode_ms_per_image": None if run["decode_s_per_image"] is None else run["decode_s_per_image"] * 1000,
        "bottleneck": run["bottleneck"],
        "load_avg_start": run["load_avg_1m"][0],
        "load_avg_end": run["load_avg_1m"][1],
    }


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


def worker_rows(out: Path, plans: set[str]) -> pd.DataFrame:
    rows = []
    for plan_id in sorted(plans):
        run = json.loads((out / "raw" / "runs" / f"{plan_id}.json").read_text())
        barrier = max(w["load_s"]["measured"] for w in run["workers"])
        for w in run["workers"]:
            batches = w["timeline"]["batches"]
            rows.append(
                {
                    "plan": plan_id,
                    "worker": w["worker"],
                    "batch_size": w["batch_size"],
                    "batches": w["batches"],
                    **{
                        f"{q}_{k}": w[f"{q}_s"][k]
                        for q in ("load", "warmup", "batch", "finish")
                        for k in ("predicted", "measured")
                    },
                    "model_s_median": w["model_s_median"],
                    "barrier_wait_s": barrier - w["load_s"]["measured"],
                    "start_after_barrier_s": (
                        batches[0][0] - max(v["timeline"]["load"][1] for v in run["workers"]) if batches else None
                    ),
                    "wait_s": w["wait_s"],
                    "decode_ms_per_image": (w["decode_s_per_image"] or 0) * 1000,
                    "bottleneck": w["bottleneck"],
                }
            )
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame, workers: pd.DataFrame, meta: dict) -> str:
    lines = [
        f"Machine: {meta['machine']}; {meta['started']} to {meta['ended']} ({meta['minutes']:.0f} min); "
        f"load average {meta['load_avg_start']:.2f} at the start, {meta['load_avg_end']:.2f} at the end.",
        "",
        "| plan | workers | profile | inputs | batch | images | predicted s | measured s | error | deadline | met "
        "| load avg |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary.itertuples():
        inputs = r.inputs + (f" (+{r.decode_time_ms:.2f} ms decode in plan)" if r.decode_time_ms else "")
        lines.append(
            f"| {r.model} {r.input_size} px, {r.deadline_s} s | {r.workers} | {r.profile} | {inputs} | "
            f"{r.batch_sizes} | {r.images:,} | {r.predicted_s:.2f} | {r.measured_s:.2f} | {r.error_rel:+.1%} | "
            f"{r.deadline_s} s | {'yes' if r.met_deadline else 'NO'} | {r.load_avg_start:.1f}-{r.load_avg_end:.1f} |"
        )
    lines += [
        "",
        "Makespan error by kind of run (median |error|, worst error, within 5%, deadline met):",
        "",
        "| workers | profile | inputs | runs | median abs error | worst | within 5% | met deadline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    summary = summary.assign(
        kind_inputs=summary["inputs"] + np.where(summary["decode_time_ms"] > 0, " + decode in plan", "")
    )
    for (n, prof, inputs), g in summary.groupby(["workers", "profile", "kind_inputs"], sort=False):
        worst = g.loc[g["error_rel"].abs().idxmax(), "error_rel"]
        lines.append(
            f"| {n} | {prof} | {inputs} | {len(g)} | {g['error_rel'].abs().median():.1%} | {worst:+.1%} | "
            f"{int((g['error_rel'].abs() <= 0.05).sum())} of {len(g)} | {int(g['met_deadline'].sum())} of {len(g)} |"
        )
    lines += [
        "",
        "Per worker, measured / predicted (median over the workers of that kind of run), the wait for the "
        "slowest load, Ray's start of the batches after it, and decoding:",
        "",
        "| workers | profile | inputs | load | warm-up | steady batch | finish | wait for all loads s | "
        "batches start after s | decode ms/image |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    kinds = summary.set_index("plan")[["workers", "profile", "kind_inputs"]]
    joined = workers.join(kinds, on="plan")
    for (n, prof, inputs), g in joined.groupby(["workers", "profile", "kind_inputs"], sort=False):
        ratio = {q: (g[f"{q}_measured"] / g[f"{q}_predicted"]).median() for q in ("load", "warmup", "batch", "finish")}
        lines.append(
            f"| {n} | {prof} | {inputs} | {ratio['load']:.2f} | {ratio['warmup']:.2f} | {ratio['batch']:.2f} | "
            f"{ratio['finish']:.2f} | {g['barrier_wait_s'].median():.2f} | {g['start_after_barrier_s'].median():.3f} | "
            f"{g['decode_ms_per_image'].median():.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--quick", action="store_true", help="shorter deadlines")
    parser.add_argument("--no-files", action="store_true", help="random inputs only (no JPEG files)")
    parser.add_argument(
        "--decode-threads",
        type=int,
        help="image-decoding threads per worker (default: 1 on a "
        "CPU, where each worker has one core; the spare cores on a GPU machine)",
    )
    parser.add_argument("--work", default=str(HERE / "work"), help="generated images and profiles (reused)")
    parser.add_argument(
        "--results", help="where the plans, runs and tables go (default: a new results/<date>-<machine>-<commit>/)"
    )
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="only rebuild summary.csv, workers.csv and results.md from the plans and runs written",
    )
    args = parser.parse_args()
    if args.decode_threads is None:
        args.decode_threads = 1 if args.device == "cpu" else max(1, (os.cpu_count() or 2) - 2)
    work, out = Path(args.work), Path(args.results) if args.results else new_results(HERE, device=args.device)
    work.mkdir(parents=True, exist_ok=True)
    started, load_start, t0 = time.strftime("%Y-%m-%d %H:%M"), os.getloadavg()[0], time.time()
    if args.tables_only:
        rows = [
            summary_row(p.stem, json.loads(p.read_text()), json.loads((out / "raw" / "plans" / p.name).read_text()))
            for p in sorted((out / "raw" / "runs").glob("*.json"))
        ]
        started = json.loads(sorted((out / "raw" / "runs").glob("*.json"))[0].read_text())["started_at"][:16].replace(
            "T", " "
        )
    else:
        rows = plan_and_run(args, work, out)
    summary = pd.DataFrame(rows)
    workers = worker_rows(out, set(summary["plan"]))
    meta = {
        "machine": _machine(args.device),
        "started": started,
        "ended": time.strftime("%Y-%m-%d %H:%M"),
        "minutes": (time.time() - t0) / 60,
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg()[0],
        "quick": args.quick,
        "decode_threads": args.decode_threads,
        "command": " ".join(sys.argv),
    }
    summary.to_csv(out / "summary.csv", index=False)
    workers.to_csv(out / "workers.csv", index=False)
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    table = markdown(summary, workers, meta)
    (out / "results.md").write_text(table)
    if (out / "run.json").exists():
        finish_results(out)
    print(table)
    return 0


def _machine(device: str) -> str:
    from perfmodel.profile.provenance import cpu_name

    if device == "cuda":
        import torch

        return f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPU cores ({cpu_name()})"
    return f"{cpu_name()}, {os.cpu_count()} cores, {platform.system()}"


if __name__ == "__main__":
    sys.exit(main())
