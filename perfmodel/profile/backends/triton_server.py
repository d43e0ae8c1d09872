"""The Triton server program: one torch model served by the Triton Inference Server bundled in pytriton.

    python -m perfmodel.profile.backends.triton_server --model tiny --workspace /tmp/pm-xyz/triton

The profiler starts it as a subprocess (triton_process.py), but it also runs on its own, e.g. for
an experiment that reaches it from another network namespace. The model is built and run by the
same TorchRunner as the in-process profiler, so both measure the same computation. When Triton and
the model are ready it writes --ready-file (JSON: ports, load time, provenance) and serves until
SIGTERM or SIGINT (or, with --exit-with-parent, until its parent dies), then stops Triton and exits.

The model has one input `images` (N x 3 x H x W, FP32, or FP16 for --precision fp16) and one
output `logits`. Dynamic batching is off unless --dynamic-batching is given: then each request is one
model call of the batch the client sent, so a server row measures the same `batch_size` as an
in-process row. With --dynamic-batching (the profiler's open-loop --rate mode) Triton's batcher
joins requests up to --max-batch-size, waiting at most --max-queue-delay-us for more.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import socket
import sys
import sysconfig
import threading
import time
from pathlib import Path

INPUT_NAME = "images"
OUTPUT_NAME = "logits"
TOKEN_ENV = "PERFMODEL_TRITON_ACCESS_TOKEN"  # the statistics endpoint is restricted to this token


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m perfmodel.profile.backends.triton_server",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="resnet50, efficientnet_b0, tiny, or a TorchScript file")
    p.add_argument("--workspace", required=True, help="a directory that must not exist yet; removed on exit")
    p.add_argument("--ready-file", default=None, help="write ports, load time and provenance here (JSON) once ready")
    p.add_argument("--model-name", default=None, help="the name clients use (default: the model's name)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16", "bf16"])
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: 1 on CPU)")
    p.add_argument("--max-batch-size", type=int, default=64)
    p.add_argument("--dynamic-batching", action="store_true", help="let Triton's batcher join requests")
    p.add_argument("--max-queue-delay-us", type=int, default=0, help="with --dynamic-batching: the batcher's delay")
    p.add_argument("--preferred-batch-sizes", default="", help="with --dynamic-batching: e.g. 8,16 (default: none)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--http-port", type=int, default=0, help="0: a free port")
    p.add_argument("--grpc-port", type=int, default=0, help="0: a free port")
    p.add_argument("--metrics-port", type=int, default=0, help="0: a free port")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--exit-with-parent", action="store_true", help="stop when the process that started this one ends")
    p.add_argument("--cpus", default=None, help="run on these CPU cores only, e.g. 1 or 2-3 (with every child)")
    p.add_argument(
        "--owned-dir",
        default=None,
        help="with --exit-with-parent: the parent's private folder (workspace, log), removed when the parent "
        "dies before it could remove it itself",
    )
    return p.parse_args(argv)


def _with_python_libdir() -> None:
    """The Python backend stub links against this Python's libpython; Triton's children inherit this."""
    libdir = sysconfig.get_config_var("LIBDIR")
    paths = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if libdir and libdir not in paths:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([libdir, *paths])


def _stop_on_signals(stop: threading.Event) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())


def _watch_parent(stop: threading.Event, orphaned: threading.Event) -> None:
    """Stop when the parent dies (a profiler killed with SIGKILL must not leave a server behind)."""
    from perfmodel.profile.lifetime import PARENT_ENV

    parent = int(os.environ.pop(PARENT_ENV, os.getppid()))  # named by the parent: it may be gone already

    def watch() -> None:
        while not stop.wait(0.5):
            if os.getppid() != parent:
                orphaned.set()
                stop.set()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _infer_function(runner):
    import numpy as np
    from pytriton.decorators import batch

    torch = runner.torch

    @batch
    def infer(images: np.ndarray) -> dict:
        x = torch.from_numpy(images).to(runner.device, runner.dtype)
        if runner.options.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        with runner.inference():
            y = runner.model(x)
        return {OUTPUT_NAME: y.float().cpu().numpy()}

    return infer


def _placement(args: argparse.Namespace) -> dict:
    """The cores the server was pinned to, for the profile rows (a measurement on one core is another one)."""
    from perfmodel.profile.affinity import shown_cpus

    return {"server_cpus": shown_cpus(os.sched_getaffinity(0))} if args.cpus else {}


def serve(args: argparse.Namespace) -> int:
    _with_python_libdir()
    if args.cpus:  # before any thread or child starts: they all inherit it (the profiler checked the cores)
        from perfmodel.profile.affinity import cores_of, pin_process

        pin_process(cores_of(args.cpus, "--cpus"))
    stop, orphaned = threading.Event(), threading.Event()
    _stop_on_signals(stop)
    if args.exit_with_parent:
        _watch_parent(stop, orphaned)
    try:
        return _serve(args, stop)
    finally:
        if orphaned.is_set() and args.owned_dir:  # nobody else is left to remove it
            shutil.rmtree(args.owned_dir, ignore_errors=True)


def _serve(args: argparse.Namespace, stop: threading.Event) -> int:

    import numpy as np
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

    from perfmodel.models import resolve_model
    from perfmodel.profile.provenance import torch_provenance
    from perfmodel.torch_runner import TorchOptions, TorchRunner, check_device

    t0 = time.perf_counter()
    spec = resolve_model(args.model)
    device = check_device(args.device)
    threads = args.threads if args.threads is not None else (None if device.startswith("cuda") else 1)
    options = TorchOptions(device, args.precision, args.channels_last, args.compile, False, threads)
    runner = TorchRunner(spec, options, args.seed)
    model_load_ms = runner.load()

    workspace = Path(args.workspace)
    ports = {name: getattr(args, f"{name}_port") or free_port(args.host) for name in ("http", "grpc", "metrics")}
    config = TritonConfig(
        http_address=args.host,
        grpc_address=args.host,
        metrics_address=args.host,
        http_port=ports["http"],
        grpc_port=ports["grpc"],
        metrics_port=ports["metrics"],
        allow_metrics=True,
        exit_timeout_secs=5,
    )
    token = os.environ.get(TOKEN_ENV)  # None: pytriton makes a random one, so statistics stay private
    wire = np.float16 if args.precision == "fp16" else np.float32
    model_name = args.model_name or spec.name
    triton = Triton(config=config, workspace=workspace, security_config=TritonSecurityConfig(access_token=token))
    try:
        triton.bind(
            model_name=model_name,
            infer_func=_infer_function(runner),
            inputs=[Tensor(name=INPUT_NAME, dtype=wire, shape=(3, -1, -1))],
            outputs=[Tensor(name=OUTPUT_NAME, dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=args.max_batch_size, batcher=_batcher(args, DynamicBatcher)),
        )
        triton.run()  # starts tritonserver and returns when the model is loaded and ready
        if args.ready_file:
            _write_ready(
                Path(args.ready_file),
                {
                    "pid": os.getpid(),
                    "host": args.host,
                    "http_port": ports["http"],
                    "grpc_port": ports["grpc"],
                    "metrics_port": ports["metrics"],
                    "model_name": model_name,
                    "model_load_ms": model_load_ms,
                    "ready_ms": (time.perf_counter() - t0) * 1e3,
                    "threads": threads if threads else runner.torch.get_num_threads(),
                    "provenance": {**torch_provenance(device), **_placement(args)},
                },
            )
        while not stop.wait(0.5):
            if not triton.is_alive():
                logging.getLogger(__name__).error("Triton stopped on its own")
                return 1
        return 0
    finally:
        triton.stop()


def _batcher(args: argparse.Namespace, dynamic_batcher):
    """Triton's dynamic batcher as asked, or None (each request is one model call)."""
    if not args.dynamic_batching:
        return None
    preferred = [int(b) for b in args.preferred_batch_sizes.split(",") if b.strip()] or None
    return dynamic_batcher(max_queue_delay_microseconds=args.max_queue_delay_us, preferred_batch_size=preferred)


def _write_ready(path: Path, ready: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(ready))
    os.replace(tmp, path)  # the profiler never reads half a file


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return serve(args)
    except Exception as exc:  # say why in one line, in the ready file the profiler waits for
        from perfmodel.errors import PerfmodelError
        from perfmodel.profile.failures import describe

        logging.getLogger(__name__).exception("the server did not start")
        code = exc.exit_code if isinstance(exc, PerfmodelError) else 1
        if args.ready_file:
            _write_ready(Path(args.ready_file), {"error": str(exc) if code == 2 else describe(exc), "exit_code": code})
        return code


if __name__ == "__main__":
    sys.exit(main())
