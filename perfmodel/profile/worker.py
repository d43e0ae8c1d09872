"""The fresh-process warm-up measurement (DESIGN.md section 3).

Warm-up is the first call at a batch size on a freshly loaded model: cuDNN/cuBLAS autotuning, lazy
module loading, allocator growth, compilation. Only a new process measures it truly, so the
profiler runs this module once per point (`python -m perfmodel.profile.worker`), sends the request
as JSON on stdin and reads one JSON line back from stdout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from perfmodel.profile.backends.torch_backend import TorchOptions
from perfmodel.profile.models import ModelSpec


def measure_first_call(spec: ModelSpec, options: TorchOptions, batch_size: int, input_size: int,
                       memory_limit_mb: float | None, seed: int = 0) -> dict:
    """Load the model in this process and time its first call; report ok, oom or error.

    Two more calls follow the timed one, so that `memory_mb` (the process's peak since before the
    model was loaded: RSS growth on a CPU, the allocator's peak on CUDA) covers serving, not only
    the first call.
    """
    from perfmodel.profile import memory
    from perfmodel.profile.backends.torch_backend import TorchRunner, is_oom

    runner = TorchRunner(spec, options, seed)
    load_ms = runner.load()
    extra = None if runner.is_cuda or memory_limit_mb is None else memory_limit_mb - runner.used_memory_mb()
    try:
        with memory.data_limit(extra), runner.inference():
            call = runner.bind(runner.inputs(batch_size, input_size))
            t0 = time.perf_counter()
            call(0)
            warmup_ms = (time.perf_counter() - t0) * 1e3
            call(1)
            call(2)
        return {"status": "ok", "warmup_ms": warmup_ms, "load_ms": load_ms, "memory_mb": runner.peak_memory_mb()}
    except Exception as exc:
        if is_oom(exc):
            return {"status": "oom", "load_ms": load_ms, "error": _one_line(exc)}
        return {"status": "error", "load_ms": load_ms, "error": _one_line(exc)}


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def run_in_fresh_process(spec: ModelSpec, options: TorchOptions, batch_size: int, input_size: int,
                         memory_limit_mb: float | None, timeout_s: float, seed: int = 0) -> dict:
    """Run `measure_first_call` in a new Python process and return its answer."""
    request = {
        "model": asdict(spec),
        "options": asdict(options),
        "batch_size": batch_size,
        "input_size": input_size,
        "memory_limit_mb": memory_limit_mb,
        "seed": seed,
    }
    env = dict(os.environ)
    package_root = str(Path(__file__).resolve().parents[2])  # so the worker imports this same perfmodel
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "perfmodel.profile.worker"],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"the warm-up worker did not finish within {timeout_s:g} s"}
    lines = done.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        if done.returncode < 0:
            reason = f"was killed by signal {-done.returncode}" + (" (out of host memory?)" if done.returncode == -9 else "")
        else:
            tail = done.stderr.strip().splitlines()
            reason = f"failed: {tail[-1] if tail else 'exit code ' + str(done.returncode)}"
        return {"status": "error", "error": f"the warm-up worker {reason}"[:300]}


def main() -> None:
    request = json.loads(sys.stdin.read())
    result = measure_first_call(
        ModelSpec(**request["model"]),
        TorchOptions(**request["options"]),
        request["batch_size"],
        request["input_size"],
        request["memory_limit_mb"],
        request["seed"],
    )
    sys.stdout.write("\n" + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
