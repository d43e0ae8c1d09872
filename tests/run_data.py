"""Plans, images and a shared local Ray for the tests of `perfmodel run`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from perfmodel.planning.batch import make_plan

BATCHES = (1, 2, 4, 8)


def tiny_profile(path: Path, size: int = 32, hardware: str = "cpu", load_ms: float = 100.0) -> Path:
    """A made-up profile of the tiny CNN: 4 ms + 2 ms per image a batch, warm-up 5 ms more, load load_ms."""
    rows = [
        dict(
            hardware=hardware,
            model="tiny",
            backend="torch",
            precision="fp32",
            input_size=size,
            batch_size=b,
            latency_ms=4.0 + 2.0 * b,
            latency_p99_ms=6.0 + 3.0 * b,
            warmup_ms=9.0 + 2.0 * b,
            memory_mb=10.0,
            status="ok",
            load_ms=load_ms,
        )
        for b in BATCHES
    ]
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def write_plan(
    folder: Path,
    images: int,
    deadline_s: float,
    *,
    size: int = 32,
    hardware: str = "cpu",
    name: str = "plan.json",
    **kw,
) -> Path:
    """A real plan of `perfmodel plan` for the tiny CNN, as JSON."""
    profile = tiny_profile(folder / f"profile-{hardware}-{size}.csv", size=size, hardware=hardware)
    kw.setdefault("confidence", "none")  # the plan as the tests lay it out, not widened for a probability
    job = make_plan(images, deadline_s, profiles=[profile], input_size=size, **kw)
    path = folder / name
    path.write_text(json.dumps(job.to_dict()))
    return path


def make_images(folder: Path, count: int, sizes=(24, 40, 64)) -> list[Path]:
    """`count` small JPEG and PNG files (random pixels) in folder and a subfolder."""
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        side = sizes[i % len(sizes)]
        sub = folder / ("sub" if i % 2 else "")
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"im{i:03d}.{'png' if i % 5 == 0 else 'jpg'}"
        Image.fromarray(rng.integers(0, 256, (side, side + 3, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def ray_processes_of(pid: int) -> list:
    """Every process under `pid` (the keeper, Ray's servers, the workers), as psutil processes."""
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes) -> list:
    return [p for p in processes if p.is_running() and p.status() != "zombie"]


def stray_folders(owner_pids) -> list[str]:
    """perfmodel-ray-* folders whose keeper is one of `owner_pids` (they must be gone after a run)."""
    import tempfile

    left = []
    for folder in Path(tempfile.gettempdir()).glob("perfmodel-ray-*"):
        try:
            if int((folder / "owner.pid").read_text()) in owner_pids:
                left.append(str(folder))
        except (OSError, ValueError):
            continue
    return left


def fake_run(plan_path) -> dict:
    """The JSON of a run of `plan_path`, as `perfmodel run --json` writes it, with made-up times."""
    from perfmodel.run.planfile import read_run_plan
    from perfmodel.run.state import RunState, WorkerRun

    plan = read_run_plan(plan_path)
    workers = []
    for w in plan.workers:
        run = WorkerRun(w, [8, 8, 4], host="h", pid=1, load=(0.0, 0.1), status="done")
        t = 0.12
        for i, n in enumerate((8, 8, 4)):
            run.batches.append(
                {
                    "seq": i,
                    "owner": w.index,
                    "batch": i,
                    "start": t,
                    "end": t + 0.02,
                    "model_s": 0.02,
                    "wait_s": 0.0,
                    "decode_s": 0.0,
                    "images": n,
                    "paths": None,
                    "classes": [],
                    "scores": [],
                    "failed": [],
                }
            )
            t += 0.02
        workers.append(run)
    result = RunState(plan, workers, "complete", "synthetic", "local", "cpu", "now", False, load_avg=(1.0, 1.0))
    return result.result().to_dict()
