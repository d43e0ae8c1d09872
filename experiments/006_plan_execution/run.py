"""006 — Plans executed on Ray: the measured makespan against the predicted one, per plan and per worker.

For each model (ResNet-50 and EfficientNet-B0 at a small input size on a CPU; at 224 px on a GPU):
  1. profile it here with `perfmodel profile` (fresh-process warm-up, one torch thread on a CPU),
  2. for each deadline, find what one worker finishes by it (a relaxed plan with a pool of one), and
     make soft plans (`perfmodel plan --json`) for 90% of that (the planner picks one worker) and, where
     the machine has two devices, for 180% with a pool of two (it picks two), batch sizes its choice,
  3. execute each with `perfmodel run PLAN --synthetic --json` and, for the middle deadline, once more
     over generated JPEG files of several sizes (`--images`), as a user would,
  4. write every plan, every run JSON, summary.csv (one row per run), workers.csv (one row per worker)
     and results.md (the tables for the README), with the load average beside each run.

    python experiments/006_plan_execution/run.py                  # CPU: ~25 min on an idle 2-core machine
    python experiments/006_plan_execution/run.py --quick          # shorter deadlines: ~12 min
    python experiments/006_plan_execution/run.py --device cuda    # on a GPU machine, unchanged

Everything goes through the `perfmodel` command (the same code users run); the results land in
results/<device>/ beside this file, the generated images and profiles in work/ (ignored by git).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

CPU_MODELS = {"resnet50": 64, "efficientnet_b0": 96}  # small input sizes: seconds, not hours, on 2 cores
GPU_MODELS = {"resnet50": 224, "efficientnet_b0": 224}
CPU_BATCHES = "1,2,4,8,16,32"
GPU_BATCHES = "1,2,4,8,16,32,64,128,256"
DEADLINES = {"cpu": (15, 30, 60), "cuda": (10, 20, 40)}
QUICK_DEADLINES = {"cpu": (10, 20, 30), "cuda": (5, 10, 20)}
ONE, TWO = 0.9, 1.8  # images planned, as a share of what one worker finishes by the deadline
IMAGE_SIDES = (80, 128, 200, 320)  # the generated JPEGs: several sizes, decoded and resized to the input size


def perfmodel(*args, capture: bool = True, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    command = [sys.executable, "-m", "perfmodel", *map(str, args)]
    done = subprocess.run(command, capture_output=capture, text=True, env=env)
    if check and done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command[2:])}\n{done.stderr}")
    return done


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}, load {os.getloadavg()[0]:.2f}] {message}", file=sys.stderr, flush=True)


def profile(model: str, size: int, device: str, work: Path) -> Path:
    out = work / f"profile-{device}-{model}-{size}.csv"
    batches = CPU_BATCHES if device == "cpu" else GPU_BATCHES
    log(f"profiling {model} at {size} px on {device} (batch sizes {batches})")
    perfmodel("profile", "--model", model, "--device", device, "--input-sizes", size, "--batch-sizes", batches,
              "--out", out, "--resume", capture=False)
    return out


def capacity(profile_csv: Path, size: int, deadline: float, hardware: str) -> int:
    """What one worker finishes by the deadline (a relaxed plan with a pool of one)."""
    done = perfmodel("plan", "--mode", "relaxed", "--deadline", f"{deadline}s", "--pool", f"{hardware}=1",
                     "--profile", profile_csv, "--input-size", size, "--images", 10**9, "--json")
    return int(json.loads(done.stdout)["images_planned"])


def hardware_of(profile_csv: Path) -> str:
    return str(pd.read_csv(profile_csv, usecols=["hardware"])["hardware"].iloc[0])


def make_images(folder: Path, count: int) -> Path:
    """`count` JPEG files of several sizes (smooth random pictures, quality 90), made once and reused."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(6)
    for i in range(count):
        side = IMAGE_SIDES[i % len(IMAGE_SIDES)]
        path = folder / f"{side}px" / f"img{i:06d}.jpg"
        coarse = rng.integers(0, 256, size=(6, 8, 3), dtype=np.uint8)  # drawn even when the file exists
        if path.exists():
            continue
        path.parent.mkdir(exist_ok=True)
        picture = np.asarray(Image.fromarray(coarse).resize((side * 4 // 3, side), Image.BICUBIC), dtype=float)
        noise = rng.normal(0, 10, size=picture.shape)
        Image.fromarray(np.clip(picture + noise, 0, 255).astype(np.uint8)).save(path, quality=90)
    return folder


def execute(plan_path: Path, run_path: Path, images: Path | None, decode_threads: int) -> dict:
    args = ["run", plan_path, "--json", "--decode-threads", decode_threads]
    args += ["--images", images] if images is not None else ["--synthetic"]
    done = perfmodel(*args, check=False)
    if done.returncode != 0:
        raise SystemExit(f"perfmodel run {plan_path.name} failed ({done.returncode}): {done.stderr.strip()}")
    run_path.write_text(done.stdout)
    return json.loads(done.stdout)


def plan_and_run(args, work: Path, out: Path) -> list[dict]:
    models = CPU_MODELS if args.device == "cpu" else GPU_MODELS
    deadlines = (QUICK_DEADLINES if args.quick else DEADLINES)[args.device]
    devices = 2 if args.device == "cpu" else _gpu_count()
    (out / "plans").mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    rows = []
    for model, size in models.items():
        profile_csv = profile(model, size, args.device, work)
        hardware = hardware_of(profile_csv)
        for deadline in deadlines:
            one = capacity(profile_csv, size, deadline, hardware)
            cases = [(1, int(ONE * one))] + ([(2, int(TWO * one))] if devices >= 2 else [])
            for workers, images in cases:
                plan_id = f"{model}-{size}px-{deadline}s-{workers}w"
                plan_path = out / "plans" / f"{plan_id}.json"
                made = perfmodel("plan", "--images", images, "--deadline", f"{deadline}s", "--profile", profile_csv,
                                 "--input-size", size, "--pool", f"{hardware}={workers}", "--json")
                plan_path.write_text(made.stdout)
                plan = json.loads(made.stdout)
                inputs = ["synthetic"] + (["files"] if deadline == deadlines[len(deadlines) // 2] else [])
                for kind in inputs:
                    folder = None
                    if kind == "files":
                        folder = make_images(work / f"images-{images}", images)
                    log(f"{plan_id}: {images} images, {plan['total_gpus']} worker(s), {kind}")
                    run = execute(plan_path, out / "runs" / f"{plan_id}-{kind}.json", folder, args.decode_threads)
                    rows.append(_summary(plan_id, model, size, deadline, kind, plan, run))
                    log(f"  predicted {run['predicted_makespan_s']:.2f} s, measured {run['measured_makespan_s']:.2f} s "
                        f"({run['error_rel']:+.1%})")
    return rows


def _gpu_count() -> int:
    try:
        import torch

        return torch.cuda.device_count()
    except ImportError:
        return 0


def _summary(plan_id, model, size, deadline, kind, plan, run) -> dict:
    workers = run["workers"]
    return {
        "plan": plan_id, "model": model, "input_size": size, "deadline_s": deadline, "inputs": kind,
        "workers": len(workers), "images": run["images_planned"],
        "batch_sizes": ",".join(str(w["batch_size"]) for w in workers),
        "predicted_s": run["predicted_makespan_s"], "measured_s": run["measured_makespan_s"],
        "error_rel": run["error_rel"], "met_deadline": run["met_deadline"],
        "decode_ms_per_image": None if run["decode_s_per_image"] is None else run["decode_s_per_image"] * 1000,
        "bottleneck": run["bottleneck"], "load_avg_start": run["load_avg_1m"][0], "load_avg_end": run["load_avg_1m"][1],
    }


def worker_rows(out: Path) -> pd.DataFrame:
    rows = []
    for path in sorted((out / "runs").glob("*.json")):
        run = json.loads(path.read_text())
        barrier = max(w["load_s"]["measured"] for w in run["workers"])
        for w in run["workers"]:
            first_start = w["timeline"]["batches"][0][0] if w["timeline"]["batches"] else None
            rows.append({
                "run": path.stem, "worker": w["worker"], "batch_size": w["batch_size"], "batches": w["batches"],
                **{f"{q}_{k}": w[f"{q}_s"][k] for q in ("load", "warmup", "batch", "finish")
                   for k in ("predicted", "measured")},
                "model_s_median": w["model_s_median"],
                "start_after_load_s": None if first_start is None else first_start - w["timeline"]["load"][1],
                "barrier_wait_s": barrier - w["load_s"]["measured"],
                "wait_s": w["wait_s"], "decode_ms_per_image": (w["decode_s_per_image"] or 0) * 1000,
                "bottleneck": w["bottleneck"],
            })
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame, workers: pd.DataFrame, meta: dict) -> str:
    lines = [f"Machine: {meta['machine']}; {meta['started']} to {meta['ended']} ({meta['minutes']:.0f} min); "
             f"load average {meta['load_avg_start']:.2f} at the start, {meta['load_avg_end']:.2f} at the end.", "",
             "| plan | inputs | workers | batch | images | predicted s | measured s | error | deadline | met | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary.itertuples():
        lines.append(f"| {r.plan} | {r.inputs} | {r.workers} | {r.batch_sizes} | {r.images:,} | {r.predicted_s:.2f} | "
                     f"{r.measured_s:.2f} | {r.error_rel:+.1%} | {r.deadline_s} s | {'yes' if r.met_deadline else 'NO'} | "
                     f"{r.load_avg_start:.1f}-{r.load_avg_end:.1f} |")
    errors = summary["error_rel"].abs()
    lines += ["", f"Makespan error: median {errors.median():.1%}, worst {errors.max():.1%}; within 5%: "
              f"{int((errors <= 0.05).sum())} of {len(summary)}; deadline met: {int(summary['met_deadline'].sum())} "
              f"of {len(summary)}.", "",
              "Per worker, measured / predicted (median over workers of runs of that kind):", "",
              "| runs | load | warm-up | steady batch | finish | barrier wait s | decode ms/image |", "|---|---|---|---|---|---|---|"]
    for kind, group in workers.groupby(workers["run"].str.rsplit("-", n=1).str[1]):
        ratio = {q: (group[f"{q}_measured"] / group[f"{q}_predicted"]).median() for q in ("load", "warmup", "batch", "finish")}
        lines.append(f"| {kind} | {ratio['load']:.2f} | {ratio['warmup']:.2f} | {ratio['batch']:.2f} | "
                     f"{ratio['finish']:.2f} | {group['barrier_wait_s'].median():.2f} | "
                     f"{group['decode_ms_per_image'].median():.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--quick", action="store_true", help="shorter deadlines")
    parser.add_argument("--decode-threads", type=int, help="image-decoding threads per worker (default: 1 on a "
                        "CPU, where each worker has one core; the spare cores on a GPU machine)")
    parser.add_argument("--work", default=str(HERE / "work"), help="generated images and profiles (reused)")
    args = parser.parse_args()
    if args.decode_threads is None:
        args.decode_threads = 1 if args.device == "cpu" else max(1, (os.cpu_count() or 2) - 2)
    work, out = Path(args.work), HERE / "results" / args.device
    work.mkdir(parents=True, exist_ok=True)
    started, load_start, t0 = time.strftime("%Y-%m-%d %H:%M"), os.getloadavg()[0], time.time()
    summary = pd.DataFrame(plan_and_run(args, work, out))
    workers = worker_rows(out)
    meta = {"machine": _machine(args.device), "started": started, "ended": time.strftime("%Y-%m-%d %H:%M"),
            "minutes": (time.time() - t0) / 60, "load_avg_start": load_start, "load_avg_end": os.getloadavg()[0],
            "quick": args.quick, "decode_threads": args.decode_threads}
    summary.to_csv(out / "summary.csv", index=False)
    workers.to_csv(out / "workers.csv", index=False)
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    table = markdown(summary, workers, meta)
    (out / "results.md").write_text(table)
    print(table)
    return 0


def _machine(device: str) -> str:
    from perfmodel.profile.provenance import cpu_name

    if device == "cuda":
        import torch

        return f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPU cores ({cpu_name()})"
    return f"{cpu_name()}, {os.cpu_count()} cores, {platform.system()}"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
