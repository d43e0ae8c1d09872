"""How long the campaign takes on one H100, and what one device session of 15 minutes covers.

Nothing here was measured on a GPU: the speeds below are assumptions (written next to each), to be
replaced by what the first real call shows (every line campaign.sh prints carries its elapsed seconds,
and `perfmodel profile --estimate` prints the profiler's own bound before each sweep). The point counts
follow the profiler's rules: `auto` doubles from 1 to the first batch that fails, then bisects until the
gap is within --search-tolerance; each point that runs costs its first call (cuDNN autotuning: taken as
3 calls), 2 untimed calls and its samples (at least 5; 20 when the median settles within --max-time-per-
point); warm-up in a fresh process costs the process's start (Python, torch, CUDA context, the model) and
its first call.

Device time counts from the asking for a machine until it goes back, idle or busy: 15 minutes a session,
one command at most 10. So the session is one call of `campaign.sh session` (the machine's start, the
wheels installed, CALL_BUDGET_S of work, the parts most important first) and, on the machine still warm
(30 s), a second, shorter call of the same command with what time is left, which resumes where the
first stopped. What does not fit is left for a later session (the same command resumes from the
committed results).

    python3 experiments/008_gpu_campaign/budget.py          # the table for README.md
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_TIME_PER_POINT_S = 0.5  # campaign.sh: --max-time-per-point 0.5
SEARCH_TOLERANCE = 0.2  # --search-tolerance 0.2
FRESH_AT = (1, 256)  # --fresh-warmup-at 1,256
POINT_OVERHEAD_S = 0.3  # writing the CSV, the monitor's summary, freeing memory
OOM_POINT_S = 1.5  # a batch that does not fit fails at its first call, then memory is freed
FRESH_PROCESS_S = 8.0  # python + imports + CUDA context + the model (its load_ms: 3.9-5.3 s on the H200)
STEP_START_S = 10.0  # per perfmodel profile command: imports, CUDA context, the long-lived worker
ENVIRONMENT_S = 10.0  # nvidia-smi and the package versions
GPU_TESTS_S = 120.0  # campaign.sh's GPU_TESTS_S: the GPU tests get at most this (13 tests; assumed enough)
VALIDATE_PLAN_S = 35.0  # a local Ray start (~5 s), loading the model (~8 s), a 10 s deadline, Ray's stop
VALIDATE_FIT_S = 20.0  # validate fits the fp16 predictors on the GPU machine first
PLANS = 3  # campaign.sh's PLANS

DEVICE_S = 15 * 60  # a session's device time, machine start and idle included
MACHINE_START_S = 120.0  # the first call: a bare machine (1-2 minutes; the upper end)
INSTALL_S = 20.0  # the wheels into /tmp/site, once: the second call finds them on the warm machine
TRANSFER_S = 15.0  # per call: the working tree and 55 MiB of wheels there, the results back
GAP_S = 20.0  # between calls: the machine held idle while the reply is read (must stay under WARM_S)
WARM_S = 30.0  # how long a machine waits for the next call before it goes back
CALL_BUDGET_S = 540.0  # campaign.sh's CAMPAIGN_BUDGET_S: the first call stops itself by then
MARGIN_S = 30.0  # kept back: a late start or a slow transfer must not end the session mid-call
MAX_CALLS = 2


@dataclass(frozen=True)
class Option:
    name: str
    images_per_s: float  # at 224 px, large batches (assumed; scales with 1 / area)
    batch1_ms: float  # at 224 px, batch 1: launch-bound (assumed)
    max_batch_224: int  # the largest batch that fits at 224 px (assumed; scales with 1 / area)
    first_s: float  # a new shape's first call beyond a steady one: cuDNN autotuning, lazy module loading
    cap: int | None = None  # --max-batch-size
    fresh: bool = True  # warm-up measured in fresh processes at FRESH_AT

    def call_s(self, batch: int, size: int) -> float:
        area = (size / 224) ** 2
        return max(self.batch1_ms / 1000 * math.sqrt(area), batch * area / self.images_per_s)

    def largest(self, size: int) -> int:
        fits = int(self.max_batch_224 * (224 / size) ** 2)
        return min(fits, self.cap) if self.cap else fits


# Speeds measured on the H200 of the first session (results/, 2026-11-26) where a comment says so, the
# rest assumed from them. ResNet-50 fp16: large batches ran 6,900-8,200 images/s (batches past 2^31
# activation elements run slower than the 12,310/s at 2048), batch 1 in 4.2 ms, 20,500 images fit at
# 224 px (10,240 at 320, 5,120 at 448, scaled by area), a fresh process's first call 1.2-1.7 s longer
# than a steady one. EfficientNet-B0 fp16: 16,900 images/s at 4096, batch 1 in 4.7 ms, 5.3 MiB an image
# (so about 26,000 fit), first call about 4 s longer (many distinct depthwise shapes to autotune). tf32:
# as the old assumptions had it, 0.44x (ResNet-50) and 0.58x (EfficientNet-B0) of fp16's speed and
# half its images; CUDA graphs at the eager peak, batch 1 launch-free. An H100 (80 GB) holds about
# 55% of these largest batches: its sweeps take less.
OPTIONS = {
    "resnet50": [
        Option("torch-fp16", images_per_s=7000, batch1_ms=4.2, max_batch_224=20500, first_s=1.5),  # measured
        Option("torch-tf32", images_per_s=3100, batch1_ms=4.2, max_batch_224=10250, first_s=1.5, fresh=False),
        Option(
            "torch-channels-last-cuda-graphs-fp16",
            images_per_s=12000,
            batch1_ms=1.0,
            max_batch_224=20500,
            first_s=1.5,
            cap=2048,
        ),
    ],
    "efficientnet_b0": [
        Option("torch-fp16", images_per_s=16900, batch1_ms=4.7, max_batch_224=26000, first_s=4.0),  # measured
        Option("torch-tf32", images_per_s=9800, batch1_ms=4.7, max_batch_224=13000, first_s=4.0, fresh=False),
        Option(
            "torch-channels-last-cuda-graphs-fp16",
            images_per_s=20000,
            batch1_ms=1.0,
            max_batch_224=26000,
            first_s=4.0,
            cap=2048,
        ),
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
    """The first call (its autotuning and one call), 2 untimed calls, the samples, the bookkeeping."""
    call = option.call_s(batch, size)
    samples = max(5 * call, min(MAX_TIME_PER_POINT_S, 20 * call))
    return option.first_s + 3 * call + samples + POINT_OVERHEAD_S


def option_s(option: Option, sizes) -> tuple[int, float]:
    points, seconds = 0, STEP_START_S
    for size in sizes:
        ok, failed = search_points(option.largest(size), option.cap)
        points += len(ok) + failed
        seconds += sum(point_s(option, b, size) for b in ok) + failed * OOM_POINT_S
        if option.fresh:
            fresh = [b for b in FRESH_AT if b <= option.largest(size)]
            seconds += sum(FRESH_PROCESS_S + option.first_s + option.call_s(b, size) for b in fresh)
            points += 0  # the fresh warm-ups fill in points the steady sweep also measures
    return points, seconds


@dataclass(frozen=True)
class Part:
    name: str  # as campaign.sh's SESSION names it
    seconds: float
    points: int = 0


def parts() -> list[Part]:
    """The session's parts in campaign.sh's order, the most important first (ResNet-50's fp16 profile,
    then plans run on it, then the GPU tests, then the rest)."""

    def profile(model: str, which: str) -> Part:
        options = OPTIONS[model][:1] if which == "first" else OPTIONS[model][1:]
        counted = [option_s(o, SIZES[model]) for o in options]
        return Part(f"step_profile {model} {which}", sum(s for _, s in counted), sum(p for p, _ in counted))

    return [
        Part("check_environment", ENVIRONMENT_S),
        profile("resnet50", "first"),
        Part("step_validate", VALIDATE_FIT_S + PLANS * VALIDATE_PLAN_S),
        Part("check_gpu_tests", GPU_TESTS_S),
        profile("efficientnet_b0", "first"),
        profile("resnet50", "rest"),
        profile("efficientnet_b0", "rest"),
    ]


def second_call_s() -> float:
    """The work the second call has time for: the session's device time less the first call and the
    overheads of both."""
    first = MACHINE_START_S + INSTALL_S + TRANSFER_S + CALL_BUDGET_S
    return DEVICE_S - first - GAP_S - TRANSFER_S - MARGIN_S


def schedule() -> list[tuple[Part, str]]:
    """Each part with the call it runs in ("1", "2", "1-2" when cut and resumed, "later" when the session
    has no time left for it), the work running back to back across the two calls."""
    out, t = [], 0.0
    ends = (CALL_BUDGET_S, CALL_BUDGET_S + second_call_s())
    for part in parts():
        begin, t = t, t + part.seconds
        first = "1" if begin < ends[0] else "2" if begin < ends[1] else "later"
        last = "1" if t <= ends[0] else "2" if t <= ends[1] else "later"
        out.append((part, first if first == last else f"{first}-{last}"))
    return out


def device_s() -> float:
    """The session's device time if both calls run to their budgets."""
    return MACHINE_START_S + INSTALL_S + TRANSFER_S + CALL_BUDGET_S + GAP_S + TRANSFER_S + second_call_s()


def main() -> None:
    print("| part (most important first) | points | estimated minutes | call |\n|---|---|---|---|")
    start = MACHINE_START_S + INSTALL_S + TRANSFER_S
    print(f"| machine start, wheels installed, transfers | | {start / 60:.1f} | 1 |")
    for part, call in schedule():
        print(f"| `{part.name}` | {part.points or ''} | {part.seconds / 60:.1f} | {call} |")
    work = sum(p.seconds for p in parts())
    print(f"| **all the work** | | **{work / 60:.1f}** | |")
    print(
        f"| **the session**: call 1 {CALL_BUDGET_S / 60:.1f} + call 2 {second_call_s() / 60:.1f} of work, "
        f"{(DEVICE_S - MARGIN_S - CALL_BUDGET_S - second_call_s()) / 60:.1f} of overheads | | "
        f"**{device_s() / 60:.1f}** of {DEVICE_S / 60:.0f} | |"
    )


if __name__ == "__main__":
    main()
