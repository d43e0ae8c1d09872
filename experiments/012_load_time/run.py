"""012 — Where a fresh process's load of ResNet-50 goes, before and after perfmodel/loading.py.

Each sample is a new Python process (`run.py --child ARM`) that loads the model and times its first call,
as the profiler's fresh worker does; the arms alternate, so that the machine's load hits them alike:

- old: the load of commit 74e9855, step for step (torchvision imported inside the timed load, the model
  built with its random initialisation on the CPU, then moved and converted; a weights file read to the
  CPU and copied into the random weights);
- new: perfmodel's own code, the profiler worker's `load` and `first_call` requests (TorchRunner.start
  and .load: the imports and the device's context before the load, the model built on the device, or on
  the meta device with a weights file read to the device and assigned);
- old-file, new-file: the same with a weights file (`perfmodel run --weights`), written once per run.

    python experiments/012_load_time/run.py                          # CPU, 5 processes per arm, ~4 min on 2 cores
    python experiments/012_load_time/run.py --device cuda            # a GPU: fp16, old and new arms
    python experiments/012_load_time/run.py --arms old,new --repeats 3

Writes processes.csv (every process's parts, ms) and results.md (medians per arm) in a new
results/<date>-<machine>-<commit>/.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

ARMS = ("old", "new", "old-file", "new-file")
# The columns of processes.csv and results.md, in the order a fresh process pays them.
PARTS = (
    ("python_ms", "Python and perfmodel's own imports"),
    ("import_ms", "torch (and, new, torchvision) imported before the load"),
    ("device_ms", "device context (new: before the load; old: in the load's first move)"),
    ("load_import_ms", "torchvision imported inside the load (old)"),
    ("build_ms", "model built"),
    ("weights_ms", "weights to the device, converted"),
    ("load_ms", "load, as the profile's load_ms and a plan count it"),
    ("first_call_ms", "first call"),
    ("cold_start_ms", "the whole: start to first call returned"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--model", default="resnet50", choices=("resnet50", "efficientnet_b0", "tiny"))
    parser.add_argument("--precision", choices=("fp32", "fp16", "bf16"), help="default: fp32 on cpu, fp16 on cuda")
    parser.add_argument("--arms", default=None, help=f"of {','.join(ARMS)} (default: all on cpu, old,new on cuda)")
    parser.add_argument("--repeats", type=_count, default=5, help="fresh processes per arm (default 5)")
    parser.add_argument("--batch-size", type=_count, default=1, help="of the first call (default 1)")
    parser.add_argument("--input-size", type=_count, default=224)
    parser.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.precision = args.precision or ("fp16" if args.device == "cuda" else "fp32")
    if args.child:
        print(json.dumps(child(args)), flush=True)
        return 0
    # SIGTERM (the campaign's time limit) as Ctrl-C: the scratch folder and the child go with the exception
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    arms = (args.arms or ("old,new" if args.device == "cuda" else ",".join(ARMS))).split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        parser.error(f"--arms: {', '.join(unknown)} is not one of {', '.join(ARMS)}")
    return measure(args, arms)


def _count(text: str) -> int:
    from experiments.lab import at_least_one

    return at_least_one(text)


def measure(args, arms: list[str]) -> int:
    import pandas as pd

    from experiments.lab import finish_results, load_average, log, new_results

    out = new_results(HERE, device=args.device)
    rows = []
    with tempfile.TemporaryDirectory(prefix="perfmodel-012-") as scratch:
        weights = None
        if any(a.endswith("-file") for a in arms):
            weights = str(Path(scratch) / "weights.pt")
            write_weights(args.model, weights)
        for repeat in range(args.repeats):
            order = arms if repeat % 2 == 0 else arms[::-1]
            for arm in order:
                row = {"arm": arm, "repeat": repeat, "load_avg_1m": load_average(), **fresh_process(args, arm, weights)}
                log(f"{arm} #{repeat}: load {row['load_ms']:.0f} ms, cold start {row['cold_start_ms']:.0f} ms")
                rows.append(row)
    frame = pd.DataFrame(rows)
    frame.to_csv(out / "processes.csv", index=False)
    write_tables(out, frame, args)
    finish_results(out)
    print(out)
    return 0


def write_weights(model: str, path: str) -> None:
    import torch

    from perfmodel.models import ModelSpec, build_model

    torch.save(build_model(ModelSpec(model), seed=7).state_dict(), path)


def fresh_process(args, arm: str, weights: str | None) -> dict:
    """One child process of `arm`: its parts, with the Python start and the whole from here."""
    command = [sys.executable, __file__, "--child", arm, "--device", args.device, "--model", args.model]
    command += ["--precision", args.precision, "--batch-size", str(args.batch_size)]
    command += ["--input-size", str(args.input_size)] + (["--weights", weights] if arm.endswith("-file") else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    started = time.monotonic()  # the same clock in every process of the machine
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {arm} process failed: {done.stderr.strip()[-2000:]}")
    parts = json.loads(done.stdout.strip().splitlines()[-1])
    began, ended = parts.pop("began_at"), parts.pop("ended_at")
    return {"python_ms": (began - started) * 1e3, **parts, "cold_start_ms": (ended - started) * 1e3}


# -- the child ---------------------------------------------------------------------------------


def child(args) -> dict:
    # perfmodel's own modules first, in both arms: part of the Python start, as in the profiler's worker.
    import perfmodel._torchvision  # noqa: F401
    import perfmodel.profile.provenance  # noqa: F401
    import perfmodel.profile.worker  # noqa: F401

    began_at = time.monotonic()
    parts = (old_load if args.child.startswith("old") else new_load)(args)
    return {"began_at": began_at, **parts, "ended_at": time.monotonic()}


def new_load(args) -> dict:
    """perfmodel's fresh worker, in this process: its `load` and `first_call` requests, as the profiler sends
    them (the weights, which only `perfmodel run` has, through the same TorchRunner.load)."""
    from perfmodel.profile.worker import Worker
    from perfmodel.torch_runner import TorchRunner

    if args.weights:
        load = TorchRunner.load
        TorchRunner.load = lambda self, weights=None: load(self, args.weights)
    worker = Worker(lambda message: None)
    device = "cuda:0" if args.device == "cuda" else "cpu"
    threads = None if args.device == "cuda" else 1  # the profiler's default
    loaded = worker.handle(
        {
            "op": "load",
            "model": {"name": args.model, "path": None},
            "options": {"device": device, "precision": args.precision, "threads": threads},
            "seed": 0,
            "call_timeout_s": 600,
        }
    )
    first = worker.handle({"op": "first_call", "batch_size": args.batch_size, "input_size": args.input_size})
    if loaded["status"] != "ok" or first["status"] != "ok":
        raise SystemExit(f"{loaded} {first}")
    p = loaded["parts"]
    return {
        "import_ms": p["start_import_ms"],
        "device_ms": p["start_device_ms"],
        "load_import_ms": 0.0,
        "build_ms": p["load_build_ms"],
        "weights_ms": p["load_weights_ms"],
        "load_ms": loaded["load_ms"],
        "first_call_ms": first["warmup_ms"],
    }


def old_load(args) -> dict:
    """The load of commit 74e9855 (TorchRunner.__init__ and .load, build_model, RunWorker._load_weights),
    step for step, with a clock between the steps; the first call as its worker timed it."""
    t0 = time.perf_counter()
    import torch

    imported = time.perf_counter()
    device = torch.device("cuda", 0) if args.device == "cuda" else torch.device("cpu")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[args.precision]
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    else:
        torch.set_num_threads(1)
    torch.set_flush_denormal(device.type == "cpu")
    # TorchRunner.load: build_model(spec, seed).to(device, dtype), then a sync
    t1 = time.perf_counter()
    torch.manual_seed(0)
    if args.model == "tiny":
        from perfmodel.models import TinyCNN as build
    else:
        from perfmodel._torchvision import import_torchvision

        build = getattr(import_torchvision().models, args.model)
    t2 = time.perf_counter()
    model = (build() if args.model == "tiny" else build(weights=None)).eval()
    t3 = time.perf_counter()
    model = model.to(device, dtype)
    if args.weights:  # RunWorker._load_weights, after the load
        model.load_state_dict(torch.load(args.weights, map_location="cpu", weights_only=True))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t4 = time.perf_counter()
    x = torch.empty((args.batch_size, 3, args.input_size, args.input_size), device=device, dtype=dtype).normal_()
    with torch.inference_mode():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t5 = time.perf_counter()
        model(x)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t6 = time.perf_counter()
    ms = 1e3
    return {
        "import_ms": (imported - t0) * ms,
        "device_ms": 0.0,  # inside the load: the first tensor moved opens the context
        "load_import_ms": (t2 - t1) * ms,
        "build_ms": (t3 - t2) * ms,
        "weights_ms": (t4 - t3) * ms,
        "load_ms": (t4 - t1) * ms,
        "first_call_ms": (t6 - t5) * ms,
    }


# -- the tables --------------------------------------------------------------------------------


def write_tables(out: Path, frame, args) -> None:
    from experiments.lab import machine

    medians = frame.groupby("arm", sort=False)[[p for p, _ in PARTS]].median()
    arms = list(medians.index)
    lines = [
        f"# 012 — {args.model}'s load in a fresh process, {args.device} {args.precision}, before (old) and after (new)",
        "",
        f"{machine(args.device)}; load average {frame['load_avg_1m'].min():.2f}-{frame['load_avg_1m'].max():.2f}; "
        f"median of {args.repeats} fresh processes per arm, ms; first call at batch {args.batch_size}, "
        f"{args.input_size} px.",
        "",
        "| part | " + " | ".join(arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    for part, words in PARTS:
        lines.append(f"| {words} | " + " | ".join(f"{medians.loc[a, part]:.0f}" for a in arms) + " |")
    lines.append("")
    for before, after in (("old", "new"), ("old-file", "new-file")):
        if before in arms and after in arms:
            b, a = medians.loc[before], medians.loc[after]
            lines.append(
                f"- {after} against {before}: load {b['load_ms']:.0f} -> {a['load_ms']:.0f} ms "
                f"({a['load_ms'] / b['load_ms']:.2f}x), the whole cold start {b['cold_start_ms']:.0f} -> "
                f"{a['cold_start_ms']:.0f} ms ({a['cold_start_ms'] / b['cold_start_ms']:.2f}x)."
            )
    lines.append("")
    (out / "results.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except KeyboardInterrupt:
        print("012: interrupted; nothing kept of this run", file=sys.stderr)
        raise SystemExit(130) from None
