"""How long the campaign takes on one H100: the device calls, back to back, and what each pays.

Nothing here was measured on a GPU: the speeds below are assumptions (written next to each), to be
replaced by what the first real calls show (every line campaign.sh prints carries its elapsed seconds,
and `perfmodel profile --estimate` prints the profiler's own bound before each sweep). The point counts
follow the profiler's rules: `auto` doubles from 1 to the first batch that fails, then bisects until the
gap is within --search-tolerance; each point that runs costs its first call (cuDNN autotuning: taken as
3 calls), 2 untimed calls and its samples (at least 5; 20 when the median settles within --max-time-per-
point); warm-up in a fresh process costs the process's start (Python, torch, CUDA context, the model) and
its first call.

Device time counts from the asking for a machine until it goes back, idle or busy. The first call
starts a machine (1-2 minutes) and installs the wheels into /tmp/site; a machine stays warm 30 s after a
call, so the calls go back to back (nothing done on this machine between them but copying what came
back) and the later ones find the machine and /tmp/site as the first left them. Every call carries the
working tree and the wheels. `validate` fits the predictors itself (on the GPU machine: 30 s, against a
new machine's start if the fit ran here between the calls); the CPU fit for the committed predictors
runs after the last call.

    python3 experiments/008_gpu_campaign/budget.py          # the table for README.md
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_TIME_PER_POINT_S = 1.0  # campaign.sh: --max-time-per-point 1
SEARCH_TOLERANCE = 0.1  # --search-tolerance 0.1
FRESH_AT = (1, 256)  # --fresh-warmup-at 1,256
POINT_OVERHEAD_S = 0.3  # writing the CSV, the monitor's summary, freeing memory
OOM_POINT_S = 1.5  # a batch that does not fit fails at its first call, then memory is freed
FRESH_PROCESS_S = 8.0  # python + import torch/torchvision + CUDA context + building the model (assumed)
STEP_START_S = 10.0  # per perfmodel profile command: imports, CUDA context, the long-lived worker
CHECK_S = 180.0  # check: the environment and the GPU tests only (13 tests, each well under a minute; assumed)
VALIDATE_PLAN_S = 35.0  # a local Ray start (~5 s), loading the model (~8 s), a 10-15 s deadline, Ray's stop
VALIDATE_FIT_S = 30.0  # validate fits both predictors on the GPU machine (the CPU would make the machine wait)
PLANS = 5  # campaign.sh's PLANS

MACHINE_START_S = 120.0  # the first call: a bare machine (1-2 minutes; the upper end)
INSTALL_S = 20.0  # the wheels into /tmp/site, once: later calls find them on the warm machine
TRANSFER_S = 10.0  # per call: the working tree and 55 MiB of wheels there, the results back
GAP_S = 20.0  # between calls: the machine held idle while what came back is copied (must stay under WARM_S)
WARM_S = 30.0  # how long a machine waits for the next call before it goes back
CALL_BUDGET_S = 540.0  # campaign.sh's CAMPAIGN_BUDGET_S: each call stops itself by then
MAX_CALLS = 4
MAX_MINUTES = 25.0


@dataclass(frozen=True)
class Option:
    name: str
    images_per_s: float  # at 224 px, large batches (assumed; scales with 1 / area)
    batch1_ms: float  # at 224 px, batch 1: launch-bound (assumed)
    max_batch_224: int  # the largest batch that fits at 224 px (assumed; scales with 1 / area)
    cap: int | None = None  # --max-batch-size
    fresh: bool = True  # warm-up measured in fresh processes at FRESH_AT

    def call_s(self, batch: int, size: int) -> float:
        area = (size / 224) ** 2
        return max(self.batch1_ms / 1000 * math.sqrt(area), batch * area / self.images_per_s)

    def largest(self, size: int) -> int:
        fits = int(self.max_batch_224 * (224 / size) ** 2)
        return min(fits, self.cap) if self.cap else fits


# Assumptions for an H100 SXM (80 GB), PyTorch eager. ResNet-50 fp16's largest batch at 224 px is the
# issue's figure (about 13,000); tf32 holds fp32 activations (half as many images); EfficientNet-B0 keeps
# more activation memory per FLOP (depthwise blocks, 6x expansion).
OPTIONS = {
    "resnet50": [
        Option("torch-fp16", images_per_s=9000, batch1_ms=3.0, max_batch_224=13000),
        Option(
            "torch-channels-last-cuda-graphs-fp16", images_per_s=14000, batch1_ms=1.0, max_batch_224=13000, cap=2048
        ),
        Option("torch-tf32", images_per_s=4000, batch1_ms=3.0, max_batch_224=6500, fresh=False),
    ],
    "efficientnet_b0": [
        Option("torch-fp16", images_per_s=12000, batch1_ms=5.0, max_batch_224=10000),
        Option(
            "torch-channels-last-cuda-graphs-fp16", images_per_s=16000, batch1_ms=1.0, max_batch_224=10000, cap=2048
        ),
        Option("torch-tf32", images_per_s=7000, batch1_ms=5.0, max_batch_224=5000, fresh=False),
    ],
}
SIZES = {"resnet50": (224, 320, 448), "efficientnet_b0": (224, 320, 448)}


def search_points(largest: int, cap: int | None) -> tuple[list[int], int]:
    """The batches `auto` runs (ok) and how many do not fit, with the bisection tolerance."""
    ok, failed, b = [], 0, 1
    while b <= largest:
        ok.append(b)
        b *= 2
    if cap and largest >= cap:
        return ok, 0  # stopped by --max-batch-size, no failing point
    failed += 1
    lo, hi = ok[-1], b
    while (hi - lo) / lo > SEARCH_TOLERANCE:
        mid = (lo + hi) // 2
        if mid <= largest:
            ok.append(mid)
            lo = mid
        else:
            failed += 1
            hi = mid
    return ok, failed


def point_s(option: Option, batch: int, size: int) -> float:
    call = option.call_s(batch, size)
    samples = max(5 * call, min(MAX_TIME_PER_POINT_S, 20 * call))
    return 5 * call + samples + POINT_OVERHEAD_S


def option_s(option: Option, sizes) -> tuple[int, float]:
    points, seconds = 0, STEP_START_S
    for size in sizes:
        ok, failed = search_points(option.largest(size), option.cap)
        points += len(ok) + failed
        seconds += sum(point_s(option, b, size) for b in ok) + failed * OOM_POINT_S
        if option.fresh:
            fresh = [b for b in FRESH_AT if b <= option.largest(size)]
            seconds += sum(FRESH_PROCESS_S + 3 * option.call_s(b, size) for b in fresh)
            points += 0  # the fresh warm-ups fill in points the steady sweep also measures
    return points, seconds


@dataclass(frozen=True)
class Call:
    step: str
    work_s: float  # what campaign.sh does (CALL_BUDGET_S bounds it)
    overhead_s: float  # the machine's start, the install, the transfers, the idle gap before it
    parts: tuple[tuple[str, int, float], ...] = ()  # (option, points, seconds) of a profile call


def calls() -> list[Call]:
    """The device calls in campaign order, back to back on one warm machine."""
    work: list[tuple[str, float, tuple]] = [("check", CHECK_S, ())]
    for model, options in OPTIONS.items():
        parts = tuple((o.name, *option_s(o, SIZES[model])) for o in options)
        work.append((model, sum(seconds for _, _, seconds in parts), parts))
    work.append(("validate", VALIDATE_FIT_S + PLANS * VALIDATE_PLAN_S, ()))
    out = []
    for i, (step, seconds, parts) in enumerate(work):
        overhead = TRANSFER_S + (MACHINE_START_S + INSTALL_S if i == 0 else GAP_S)
        out.append(Call(step, seconds, overhead, parts))
    return out


def total_s(plan: list[Call]) -> float:
    return sum(c.work_s + c.overhead_s for c in plan)


def main() -> None:
    plan = calls()
    print("| call | what | points | estimated minutes |\n|---|---|---|---|")
    for n, c in enumerate(plan, 1):
        if n == 1:
            print(f"| {n}. {c.step} | machine start, wheels installed, transfers |  | {c.overhead_s / 60:.1f} |")
        else:
            print(f"| {n}. {c.step} | idle gap before it (machine kept warm), transfers |  | {c.overhead_s / 60:.1f} |")
        for name, points, seconds in c.parts:
            print(f"| {n}. {c.step} | {name} | {points} | {seconds / 60:.1f} |")
        what = {
            "check": "environment, pytest -m gpu",
            "validate": f"fit both predictors, {PLANS} plans run on the GPU",
        }.get(c.step, "**the sweeps**")
        print(f"| {n}. {c.step} | {what} |  | {c.work_s / 60:.1f} |")
    print(f"| **all {len(plan)} calls** | | | **{total_s(plan) / 60:.1f}** |")


if __name__ == "__main__":
    main()
