"""perfmodel profile: measure a model over batch sizes and input sizes into one profile CSV.

This module is the parser; profile_sweep.py runs the command (profile_config.py reads the flags into a
ProfileConfig, profile_text.py words what it says)."""

from __future__ import annotations

import argparse

from perfmodel import exit_codes
from perfmodel.commands import profile_sweep
from perfmodel.commands.common import formatter, positive
from perfmodel.errors import InputError

# The library parameters (ProfileConfig's, TritonOptions') whose flag has another name (console.for_the_command_line:
# errors and progress text name parameters).
PARAMETER_FLAGS = {
    "worker_timeout_s": "--worker-timeout",
    "call_timeout_s": "--call-timeout",
    "drift_probe_s": "--drift-probe",
    "protocols": "--protocol",
    "modes": "--mode",
    "concurrencies": "--concurrency",
    "request_timeout_s": "--request-timeout",
    "server_timeout_s": "--server-timeout",
    "rates": "--rate",
    "duration_s": "--duration",
}

PROFILE_EXAMPLES = """examples:
  perfmodel profile --model resnet50 --device cpu --batch-sizes 1,2,4 --input-sizes 64,96 --out /tmp/p.csv
  perfmodel profile --model efficientnet_b0 --device cuda --precision fp16 --batch-sizes auto \\
                    --input-sizes 224,320 --out /tmp/h100-efficientnet_b0-torch-fp16.csv
  perfmodel profile --model my_model.pt --device cuda --batch-sizes 1,8,64 --out /tmp/mine.csv --resume
  perfmodel profile --model resnet50 --backend triton --protocol grpc --mode async --concurrency 1,4 \\
                    --batch-sizes 1,2 --input-sizes 64 --device cpu --out /tmp/t.csv
  perfmodel profile --model resnet50 --backend triton --url 10.0.0.2:8001 --protocol grpc --out /tmp/remote.csv
  perfmodel profile --model resnet50 --batch-sizes 1,8,32 --input-sizes 64 --alongside 1 --out /tmp/two-workers.csv
  perfmodel profile --model resnet50 --batch-sizes 1,8,32 --input-sizes 64 --processes 3 --out /tmp/three.csv
  perfmodel profile --model resnet50 --device cuda --precision fp16 --batch-sizes auto --search-tolerance 10% \\
                    --fresh-warmup-at 1,16,256 --input-sizes 224,320,448 --out /tmp/h100-resnet50-fp16.csv --estimate
  perfmodel profile --model tiny --backend triton --rate 50,100,200/s --max-batch-size 16 \\
                    --max-queue-delay 1ms --input-sizes 64 --out /tmp/rates.csv
  perfmodel profile --model resnet50 --backend triton --rate 400/s --triton-config model_repository/resnet50/ \\
                    --input-sizes 64 --out /tmp/planned.csv

Each point is written as soon as it is measured; after an interruption (Ctrl-C, SIGTERM), run the same
command with --resume to measure only what is missing.
"""


def _fraction(text: str) -> float:
    from perfmodel.units import parse_fraction

    try:
        return parse_fraction(text, "the tolerance")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def _batch_list(text: str) -> tuple[int, ...]:
    from perfmodel.profile.grid import parse_positive_ints

    try:
        return parse_positive_ints(text, "the list", "1,16,256")
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).rstrip(".")) from None


def add_parser(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="measure latency, warm-up and memory over batch size and input size",
        description="Measure a model's latency distribution, warm-up and memory for each batch size and input "
        "size, and write them as one profile CSV.",
        epilog=PROFILE_EXAMPLES + "\n" + exit_codes.help_text("profile"),
        formatter_class=formatter,
    )
    p.add_argument("--model", required=True, help="resnet50, efficientnet_b0, tiny, or a TorchScript file (.pt)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the profile CSV to write")
    p.add_argument(
        "--backend",
        default="torch",
        choices=["torch", "triton"],
        help="torch: called in-process; triton: through a Triton Inference Server (default: torch)",
    )
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument(
        "--batch-sizes",
        default=None,
        metavar="LIST",
        help="e.g. 1,2,4,8, or 'auto': double from 1 until a batch does not fit (out of memory), then "
        "bisect to the largest batch that does (default: 1,2,4,8); with --rate: images per request "
        "(default: 1)",
    )
    p.add_argument(
        "--input-sizes", default="224", metavar="LIST", help="square image sides in pixels, e.g. 224,320 (default: 224)"
    )
    p.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "tf32", "fp16", "bf16"],
        help="fp32 is true fp32 (TF32 off); tf32: fp32 tensors, TF32 tensor-core math (CUDA) (default: fp32)",
    )
    p.add_argument("--channels-last", action="store_true", help="run in channels-last memory format")
    p.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model: one static graph per batch size, compiled by the first call (the "
        "warm-up) into a fresh cache",
    )
    p.add_argument(
        "--compile-mode",
        default=None,
        choices=["default", "reduce-overhead", "max-autotune"],
        help="torch.compile's mode, with --compile: reduce-overhead and max-autotune capture CUDA graphs of "
        "their own (reduce-overhead: CUDA only) (default: default)",
    )
    p.add_argument("--cuda-graphs", action="store_true", help="replay a captured CUDA graph per batch size (CUDA only)")
    p.add_argument(
        "--warmup",
        default="fresh-process",
        choices=["fresh-process", "in-process"],
        help="measure the first call in a fresh worker process per point (default), or in the process "
        "that measures the steady state",
    )
    p.add_argument(
        "--fresh-warmup-at",
        type=_batch_list,
        default=None,
        metavar="LIST",
        help="measure the warm-up in fresh processes only at these batch sizes, e.g. 1,16,256 (other "
        "points: steady state only, warmup_ms empty); the way to fit a GPU sweep into minutes",
    )
    p.add_argument(
        "--threads",
        type=positive("", whole=True),
        default=None,
        metavar="N",
        help="torch threads (default: 1 on CPU, torch's default on CUDA)",
    )
    p.add_argument(
        "--alongside",
        type=positive("", whole=True, allow_zero=True),
        default=0,
        metavar="N",
        help="CPU: time every point while N more workers run the same model and batch on this machine, as "
        "when a plan puts N + 1 workers on it (they share its cores and memory bandwidth) (default: 0)",
    )
    p.add_argument(
        "--processes",
        type=positive("", whole=True),
        default=1,
        metavar="K",
        help="measure every point's steady state in K processes (the measuring worker and K - 1 fresh ones, "
        "each loading the model) and write the mean of their figures: on a CPU a process's speed is one "
        "draw; `process_rel_sd` says how far the K disagreed; the "
        "steady-state part takes K times as long (default: 1; torch backend only)",
    )
    p.add_argument(
        "--drift-probe",
        default=None,
        metavar="T",
        help="before the sweep, time one small batch back to back for T to measure how much this machine's "
        "speed drifts (drift_rel_sd, drift_corr_s: plans use it for their deadline probability); 0 for none "
        "(default: 20s on a CPU, 5s on CUDA; torch backend only)",
    )
    p.add_argument(
        "--hardware",
        default=None,
        metavar="KEY",
        help="pool key for this device (default: from its name: h100, a100, cpu ...)",
    )
    p.add_argument(
        "--max-batch-size",
        type=positive("", whole=True),
        default=None,
        metavar="N",
        help="auto: largest batch to try (default: 1024 on CPU, 16384 on CUDA); with --rate: the "
        "server's dynamic batcher's largest batch (default: 64)",
    )
    p.add_argument(
        "--max-call-ms",
        type=positive("milliseconds"),
        default=None,
        metavar="MS",
        help="auto: stop growing after a call this slow (default: 2000 on CPU, no limit on CUDA)",
    )
    p.add_argument(
        "--search-tolerance",
        type=_fraction,
        default=0.0,
        metavar="FRACTION",
        help="auto: stop bisecting once the largest batch that runs is known within this fraction, "
        "e.g. 10%% (default: 0, exact)",
    )
    p.add_argument(
        "--memory-limit-mb",
        type=positive("MiB"),
        default=None,
        metavar="MB",
        help="the memory budget, over which a batch counts as out-of-memory: on a CPU the process's "
        "data (default: half the free memory); on CUDA the device memory each worker may use, "
        "to profile a smaller GPU (default: all of it)",
    )
    p.add_argument(
        "--max-time-per-point",
        type=positive("seconds"),
        default=10.0,
        metavar="S",
        help="stop sampling a point after this many seconds (default: 10)",
    )
    p.add_argument(
        "--max-time-short-calls",
        type=positive("seconds"),
        default=None,
        metavar="S",
        help="a point whose calls are short (20 or more fit in --max-time-per-point) and whose median is not "
        "known to +-1%% by then may sample up to this long: launch-bound batches on a GPU are noisy, large "
        "ones steady (default: --max-time-per-point)",
    )
    p.add_argument(
        "--call-timeout",
        type=positive("seconds"),
        default=300.0,
        metavar="S",
        help="a model call (or a point's set-up) that has not returned after this long fails its point, "
        "and the sweep goes on (default: 300)",
    )
    p.add_argument(
        "--worker-timeout",
        type=positive("seconds"),
        default=900.0,
        metavar="S",
        help="longest a fresh warm-up process may take, from its start to its answer (default: 900)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep already in --out, measuring only the points of this sweep not yet in it "
        "(other rows of the file, e.g. another model's, are kept)",
    )
    p.add_argument(
        "--estimate",
        action="store_true",
        help="print how many points the sweep has and how long it may take, then exit without measuring",
    )
    t = p.add_argument_group(
        "--backend triton",
        "Without --url, perfmodel starts a Triton server on 127.0.0.1 and stops it "
        "afterwards; --warmup fresh-process starts a fresh one per input size and batch size.",
    )
    t.add_argument("--protocol", default=None, metavar="LIST", help="http, grpc or http,grpc (default: grpc)")
    t.add_argument("--mode", default=None, metavar="LIST", help="sync, async or sync,async (default: sync)")
    t.add_argument("--concurrency", default=None, metavar="LIST", help="requests in flight, e.g. 1,4,16 (default: 1)")
    t.add_argument("--url", default=None, metavar="HOST:PORT", help="measure a running server instead of starting one")
    t.add_argument(
        "--architecture",
        default=None,
        choices=["local-server", "remote-server"],
        help="the profile's architecture (default: remote-server for a --url host off this machine)",
    )
    t.add_argument(
        "--server-model", default=None, metavar="NAME", help="the model's name on the server (default: --model's)"
    )
    t.add_argument(
        "--request-timeout",
        type=positive("seconds"),
        default=None,
        metavar="S",
        help="longest wait for one request (default: 60)",
    )
    t.add_argument(
        "--server-timeout",
        type=positive("seconds"),
        default=None,
        metavar="S",
        help="longest wait for a local server to be ready (default: 180)",
    )
    t.add_argument(
        "--rate",
        default=None,
        metavar="LIST",
        help="open-loop load instead of a concurrency: requests/s, e.g. 50,100,200/s; "
        "the local server batches dynamically",
    )
    t.add_argument(
        "--duration",
        default=None,
        metavar="T",
        help="with --rate: time counted per rate, after a warm-up (default: 20s)",
    )
    t.add_argument(
        "--max-queue-delay",
        default=None,
        metavar="T",
        help="with --rate: the dynamic batcher's delay, e.g. 1ms (default: 0)",
    )
    t.add_argument(
        "--triton-config",
        default=None,
        metavar="DIR",
        help="with --rate: the batcher settings of DIR/config.pbtxt (e.g. written by perfmodel plan --mode online)",
    )
    t.add_argument(
        "--server-cpus",
        default=None,
        metavar="LIST",
        help="run the local server on these CPU cores, e.g. 1 or 2-3, and the load generator on the others, "
        "so that the generator cannot slow the server (Linux; default: both anywhere)",
    )
    p.add_argument("--json", action="store_true", help="print the profile as JSON on stdout")
    p.set_defaults(run=profile_sweep.run)
