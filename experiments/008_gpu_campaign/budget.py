"""How long the campaign's parts take on one lent GPU, re-fitted to the measured runs, and what one lent
machine does: 15 device-minutes, one machine start, two calls back to back (each at most 10 minutes).

    python3 experiments/008_gpu_campaign/budget.py            # the plan for an H100 and for an H200
    python3 experiments/008_gpu_campaign/budget.py h100       # one GPU type

Measured, read from results/<hw>/ at every run (a new run's files re-fit it):
- a profile point, from its `created_at` to the next point's (1 s resolution): a + (3 + samples + b) x call,
  fitted by least squares per GPU type and model on the ok points without a fresh process: `a` is the
  point's own cost (its inputs, freeing memory, the row), `b` the first call's cuDNN autotuning counted in
  calls (then 2 untimed calls and the samples);
- a fresh warm-up process: what such a point took beyond that (Python, torch, CUDA, the load, the first call);
- a batch that does not fit: its point's time; a sweep's start: the worker start its log reports and the
  drift probe (5 s on CUDA);
- the GPU type's speed: its ResNet-50 fp16 curve; memory per image (the same, 5.26 MiB, for both models).
Assumed, each where it is set (the H200 of 2026-11-28 measured some once, said there): the machine's start
and transfers, the fast options' speeds and compile times, the calibration's time around each plan, tf32's speed.
What each GPU type has done already (its `*.state` files, its calibration rows) costs nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
GPU_TYPES = ("h100", "h200")
DEVICE_MIB = {"h100": 81_559, "h200": 143_771}  # nvidia-smi, results/<hw>/<hw>-check.txt

# campaign.sh's settings (tests/experiments/test_campaign.py holds them equal)
MAX_TIME_PER_POINT_S = 0.5
SHORT_CALLS_TIME_S = 2.0
MIN_SAMPLES, FLOOR_SAMPLES = 20, 6  # perfmodel/profile/timing.py's StabilityRule
SEARCH_TOLERANCE = 0.2
FRESH_AT = (1, 256)
SIZES = (224, 320, 448)
CAP = 16384  # the profiler's --max-batch-size on CUDA
FAST_SIZES = (224, 448)
FAST_BATCHES = (1, 8, 32, 256, 1024, 2048)
COMPILED_BATCHES = (1, 256)
FIRST_CALL_BATCHES = (64, 512, 2048)  # campaign.sh's FIRST_CALLS: eager fp16, a fresh process each, at FAST_SIZES
FAST_OPTION_S = 120.0  # campaign.sh's FAST_OPTION_S: at most this per option and model
LONG_OPTION_S = 300.0  # campaign.sh's LONG_OPTION_S: a long option's cap, started only in a call with it left
BARE_S = 130.0  # the bare loop's bound (with its torch.compile shapes)
BARE_COMPILED = ("default", "reduce-overhead", "reduce-overhead")  # bare_check.py's compiled shapes' modes
CALIBRATION_S = 300.0  # the calibration's first slot: at most this a session ...
CAL_FIRST = 20  # ... until the file holds this many executed plans
LOADTIME_S = 90.0
GPU_TESTS_S = 60.0
PROBE_S = 5.0  # the drift probe on CUDA, per profile command

# Assumed, or measured once (the H200 of 2026-11-28, results/h200/session-2026-11-28-call*.log).
# Per new batch shape: the first call of a fresh process with an empty cache took 19.5 and 22.2 s (default),
# 18.8 and 16.4 s (reduce-overhead); max-autotune did not finish batch 256 in 120 s: counted at its cap.
COMPILE_S = {"default": 22.0, "reduce-overhead": 19.0, "max-autotune": LONG_OPTION_S}
# channels-last's time over eager's at batch >= 32 (bare loops at 256: H100 18.6/27.1 ms; H200 0.64, 0.70 at 2048)
CHANNELS_LAST = 0.69
TF32 = 2.3  # tf32's time over fp16's, with half the largest batch
# gpu_calibration.py's RUN_OVERHEAD_S: a plan's device time beyond its makespan (H200: 7.4-12.7 s, median 7.8)
RUN_OVERHEAD_S = 8.0
RAY_START_S = 15.0  # the calibration's one local Ray
PLAN_S = 1.5  # making a case's plan (and its share of the soft cases' median plans): 0.4-1.2 s a plan on the
# 2-core VM at load 6 for the H100 profile, 5.5 s the first (the imports)
DEADLINES = (10, 15, 20, 30, 60)  # gpu_calibration.py's, 8 cases each (2 sizes x 2 modes x 2 P)
CASES_PER_DEADLINE = 8
MAKESPAN_SHARE = 0.95  # of its deadline, a plan's makespan (relaxed P = 0.5 about 1, the others less)
# Cases with no plan (they cost their planning only): since plans count the measured loads' spread (843647f),
# the H100 profile's six loads (6.3-8.9 s) leave no 10 s plan at P = 0.95 (checked at 36eab8f); the H200's plan.
REFUSED = {"h100": {(10, 0.95)}, "h200": set()}

# The lent machine (README.md of the device tool: 15 minutes, at most 10 a command, warm 30 s).
DEVICE_S = 15 * 60
MACHINE_START_S = 120.0  # a bare machine's start (1-2 minutes, the upper end; the H200 of 2026-11-28: ~30 s)
INSTALL_S = 20.0  # the wheels into /tmp/site: the first call only, the second finds them on the warm machine
TRANSFER_S = 15.0  # per call: the working tree (and, in the first call, the wheels) there, the results back
GAP_S = 20.0  # between the calls: the reply read and the second sent (under WARM_S)
WARM_S = 30.0
CALL_TIMEOUT_S = 600.0  # a command's limit
CALL_BUDGET_S = 540.0  # campaign.sh's CAMPAIGN_BUDGET_S in the first call: it stops itself by then
MARGIN_S = 30.0  # kept back: a late start or a slow transfer must not end the session mid-call


@dataclass(frozen=True)
class PointCost:
    """A profile point's seconds on one GPU type and model: a + (3 + samples + b) x call."""

    a: float
    b: float
    fresh_s: float  # a fresh warm-up process, beyond the point
    oom_s: float
    start_s: float  # a profile command's start: its worker, its drift probe
    short_noisy: float  # the share of short-call points (call < 25 ms) whose median stayed loose

    def sampling_s(self, call_s: float) -> float:
        if call_s * MIN_SAMPLES <= MAX_TIME_PER_POINT_S:  # short calls: more time for the loose ones
            return self.short_noisy * SHORT_CALLS_TIME_S + (1 - self.short_noisy) * MAX_TIME_PER_POINT_S
        return max(FLOOR_SAMPLES * call_s, MAX_TIME_PER_POINT_S)

    def point_s(self, call_s: float) -> float:
        return self.a + (3 + self.b) * call_s + self.sampling_s(call_s)


def profile_file(hw: str, model: str, option: str = "fp16") -> Path:
    return RESULTS / hw / f"{hw}-{model}-torch-{option}.csv"


@cache
def timed_points(hw: str, model: str) -> pd.DataFrame | None:
    """The profile's rows with `took`: each point's seconds (created_at to the next one's)."""
    path = profile_file(hw, model)
    if not path.is_file():
        return None
    df = pd.read_csv(path)
    df["took"] = pd.to_datetime(df["created_at"]).diff().shift(-1).dt.total_seconds()
    df["call_s"] = df["latency_ms"] / 1e3
    return df


@cache
def worker_start_s(hw: str) -> float:
    """The profile commands' worker start, as their logs report it ("a worker process takes N s")."""
    found = [
        float(s)
        for log in sorted((RESULTS / hw).glob("session-call*.log"))
        for s in re.findall(r"a worker process takes (\d+) s to start here", log.read_text())
    ]
    return float(np.median(found)) if found else 12.0


@cache
def point_cost(hw: str, model: str) -> PointCost:
    """Fitted on this GPU type's profile of the model; where there is none, on the other type's (a, b: the
    model's own costs) with this type's fresh process, oom and start."""
    df = timed_points(hw, model)
    if df is None:
        other = next(h for h in GPU_TYPES if h != hw and timed_points(h, model) is not None)
        own, theirs = point_cost(hw, "resnet50"), point_cost(other, model)
        return PointCost(
            theirs.a, theirs.b, own.fresh_s + theirs.fresh_s - point_cost(other, "resnet50").fresh_s, own.oom_s,
            own.start_s, own.short_noisy,
        )  # fmt: skip
    ok = df[(df["status"] == "ok") & df["warmup_ms"].isna()].dropna(subset=["took"])
    rest = ok["took"] - (3 + ok["samples"]) * ok["call_s"]
    (a, b), *_ = np.linalg.lstsq(np.vstack([np.ones(len(ok)), ok["call_s"]]).T, rest, rcond=None)
    if model == "efficientnet_b0":
        # Fitted on batch <= 2048 (calls <= 0.12 s): b = 38. The H200's batch 8192 at 224 px (a 0.48 s call)
        # ran ~49 s of its second call without finishing (session-call2.log: 65 s, less the worker's 8 s start,
        # the 5 s probe and the command's own ~3 s): (3 + 6 + b) x 0.48 + a > 49 needs b >= 82.
        b = max(b, 82.0)
    fresh = df[df["warmup_ms"].notna()].dropna(subset=["took"])
    fresh_s = float(np.median(fresh["took"] - (a + (3 + fresh["samples"] + b) * fresh["call_s"])))
    oom = df[df["status"] == "oom"]["took"].dropna()
    short = df[(df["status"] == "ok") & (df["call_s"] * MIN_SAMPLES <= MAX_TIME_PER_POINT_S)]
    noisy = float((short["stable"].astype(str).str.lower() != "true").mean()) if len(short) else 1.0
    oom_s = float(oom.median()) if len(oom) else 8.0
    return PointCost(float(a), float(b), fresh_s, oom_s, worker_start_s(hw) + PROBE_S, noisy)


@cache
def largest(hw: str, size: int) -> int:
    """The largest batch that fits: ResNet-50 fp16's on this GPU type (EfficientNet-B0 takes the same
    5.26 MiB an image on the H200), else from the memory per image."""
    df = timed_points(hw, "resnet50")
    ok = df[(df["status"] == "ok") & (df["input_size"] == size)]
    return int(ok["batch_size"].max())


def search(limit: int, cap: int = CAP) -> tuple[list[int], int]:
    """The batches `auto` runs and how many do not fit (doubling, then bisection to SEARCH_TOLERANCE)."""
    ok, b = [], 1
    while b <= min(limit, cap):
        ok.append(b)
        b *= 2
    if limit >= cap:
        return ok, 0
    failed, lo, hi = 1, ok[-1], b
    while (hi - lo) / lo > SEARCH_TOLERANCE:
        mid = (lo + hi) // 2
        if mid <= limit:
            ok.append(mid)
            lo = mid
        else:
            failed += 1
            hi = mid
    return ok, failed


@cache
def speed_ratio(hw: str) -> tuple[float, float]:
    """This GPU type's ResNet-50 call time over the other's: (launch-bound batches <= 8, batches >= 64)."""
    other = next(h for h in GPU_TYPES if h != hw)
    a, b = (timed_points(h, "resnet50") for h in (hw, other))
    key = ["input_size", "batch_size"]
    both = a[a["status"] == "ok"].merge(b[b["status"] == "ok"], on=key, suffixes=("", "_o"))
    ratio = both["latency_ms"] / both["latency_ms_o"]
    return float(ratio[both["batch_size"] <= 8].median()), float(ratio[both["batch_size"] >= 64].median())


def call_s(hw: str, model: str, batch: int, size: int) -> float:
    """A call's seconds: measured on this GPU type where it was, else the model's measured curve (224 px,
    the nearest batch, per image beyond it; another GPU type's scaled by the ResNet-50 ratio), by area."""
    source, scale = hw, 1.0
    if timed_points(hw, model) is None:
        source = next(h for h in GPU_TYPES if timed_points(h, model) is not None)
        small, large = speed_ratio(hw)
        scale = small if batch <= 8 else large
    df = timed_points(source, model)
    ok = df[df["status"] == "ok"]
    at = ok[(ok["input_size"] == size) & (ok["batch_size"] == batch)]
    if len(at):
        return float(at["call_s"].iloc[0]) * scale
    base = ok[ok["input_size"] == 224].sort_values("batch_size")
    floor = float(base[base["batch_size"] <= 8]["call_s"].median())
    top = base.iloc[-1]
    per_image = float(top["call_s"]) / float(top["batch_size"])
    nearest = base.iloc[(base["batch_size"] - batch).abs().argmin()]
    work = float(nearest["call_s"]) / float(nearest["batch_size"]) if nearest["batch_size"] >= 64 else per_image
    return max(floor, batch * (size / 224) ** 2 * work) * scale


def sweep_s(hw: str, model: str, factor: float = 1.0, fresh: bool = True) -> tuple[int, float]:
    """The out-of-memory sweep of one model and option on this GPU type: (points, seconds). `factor`
    scales its calls (tf32: slower, half the largest batch)."""
    cost = point_cost(hw, model)
    points, seconds = 0, cost.start_s
    done = timed_points(hw, model)
    measured = set() if done is None or factor != 1.0 else set(zip(done["input_size"], done["batch_size"]))
    for size in SIZES:
        limit = largest(hw, size) if factor == 1.0 else largest(hw, size) // 2
        ok, failed = search(limit)
        for b in ok:
            if (size, b) in measured:
                continue  # resumed: already in the committed profile
            points += 1
            seconds += cost.point_s(factor * call_s(hw, model, b, size))
            if fresh and b in FRESH_AT:
                seconds += cost.fresh_s
        points += failed
        seconds += failed * cost.oom_s  # it fails at its first call, within seconds
    return points, seconds


def fast_option_s(hw: str, model: str, option: str) -> tuple[int, float]:
    """One fast option (issue 39) of one model: (points, seconds, capped at FAST_OPTION_S, or LONG_OPTION_S
    for a long one)."""
    cost = point_cost(hw, model)
    seconds = cost.start_s
    if option == "first-calls":
        points = 0
        for size in FAST_SIZES:
            for b in FIRST_CALL_BATCHES:
                points += 1
                fits = b <= largest(hw, size)
                seconds += cost.point_s(call_s(hw, model, b, size)) + cost.fresh_s if fits else cost.oom_s
        return points, min(FAST_OPTION_S, seconds)
    if option.startswith("compile"):
        mode = option.split(":")[1]
        batches = (256,) if option in LONG else COMPILED_BATCHES
        for b in batches:
            seconds += COMPILE_S[mode] + cost.point_s(CHANNELS_LAST * call_s(hw, model, b, 224))
        return len(batches), min(LONG_OPTION_S if option in LONG else FAST_OPTION_S, seconds)
    points = 0
    for size in FAST_SIZES:
        for b in FAST_BATCHES:
            points += 1
            if b > largest(hw, size):
                seconds += cost.oom_s
                continue
            t = call_s(hw, model, b, size)
            seconds += cost.point_s(CHANNELS_LAST * t if b >= 32 else t) + (cost.fresh_s if b == 1 else 0.0)
    return points, min(FAST_OPTION_S, seconds)


FAST = (  # campaign.sh's FAST_OPTIONS, in its order
    "compile:default",
    "compile:reduce-overhead",
    "channels-last",
    "channels-last-cuda-graphs",
    "first-calls",
)
LONG = ("compile:max-autotune",)  # campaign.sh's LONG_OPTIONS (ResNet-50's, late in the session)


def calibration_s(hw: str) -> tuple[list[tuple[float, bool]], float]:
    """Each case's device seconds and whether it runs, in gpu_calibration.py's order; the one Ray start."""
    cases = []
    for d in DEADLINES:
        for i in range(CASES_PER_DEADLINE):
            p = 0.5 if i % 2 == 0 else 0.95
            runs = (d, p) not in REFUSED[hw]
            cases.append((MAKESPAN_SHARE * d + RUN_OVERHEAD_S + PLAN_S if runs else PLAN_S, runs))
    return cases, RAY_START_S


def calibration_first(hw: str) -> tuple[int, float]:
    """The first slot of this GPU type's next session: plans executed and seconds. It goes on from the
    committed rows until the file holds CAL_FIRST executed plans, for at most CALIBRATION_S."""
    cases, start = calibration_s(hw)
    ran, executed = calibration_done(hw)
    spent, n = start, 0
    for s, runs in cases[ran:]:
        if executed + n >= CAL_FIRST or spent + s > CALIBRATION_S:
            break
        spent, n = spent + s, n + runs
    return n, spent


def calibration_for(hw: str, executed: int) -> float:
    """The seconds until `executed` more plans have run after the committed rows (with the refused cases
    before them)."""
    cases, spent = calibration_s(hw)
    for s, runs in cases[calibration_done(hw)[0] :]:
        if executed <= 0:
            break
        spent, executed = spent + s, executed - runs
    return spent


@dataclass(frozen=True)
class Part:
    name: str  # as campaign.sh's SESSION names it
    seconds: float
    points: int = 0
    note: str = ""
    whole: bool = False  # started only in a call with `seconds` left (a long option), else left for later
    pieces: tuple[tuple[str, float, int], ...] = ()  # (name, seconds, points) in the part's order


def states(hw: str) -> dict[str, set[str]]:
    out = {}
    for path in (RESULTS / hw).glob(f"{hw}-*.state"):
        out[path.stem.split("-", 1)[1]] = set(path.read_text().split())
    return out


def fast_name(option: str) -> str:
    """campaign.sh's name of a FAST option, as its .state file records it done."""
    if option == "first-calls":
        return "torch-fp16-first-calls"
    if option.startswith("compile"):
        mode = option.split(":")[1]
        return "torch-compile-fp16" if mode == "default" else f"torch-compile-{mode}-fp16"
    return f"torch-{option}-fp16"


def calibration_done(hw: str) -> tuple[int, int]:
    """The calibration's cases this GPU type has a row for (executed or refused), and the plans executed."""
    path = RESULTS / hw / f"{hw}-calibration.jsonl"
    lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return len(lines), sum(bool(json.loads(line)["row"]["executed"]) for line in lines)


def parts(hw: str) -> list[Part]:
    """The session's parts in campaign.sh's order, less what this GPU type has done."""
    done = states(hw)

    def profile(model: str, which: str) -> Part:
        name = f"step_profile {model} {which}"
        option = "torch-fp16" if which == "first" else "torch-tf32"
        if option in done.get(model, set()):
            return Part(name, 0.0, note="done")
        points, seconds = sweep_s(hw, model) if which == "first" else sweep_s(hw, model, TF32, fresh=False)
        measured = timed_points(hw, model)
        note = "resumes the committed points" if which == "first" and measured is not None else ""
        return Part(name, seconds, points, note)

    def fast(model: str, options: tuple[str, ...] = FAST) -> Part:
        left = [o for o in options if fast_name(o) not in done.get(model, set())]
        pieces = [(fast_name(o), *reversed(fast_option_s(hw, model, o))) for o in left]
        bare = done.get("fast", set())
        if model == "resnet50" and options == FAST and "bare-compile" not in bare:
            if "bare" in bare:  # its loops without compile ran before: the compile loops alone, each shape's compile
                compiled = worker_start_s(hw) + sum(COMPILE_S[mode] + 1.0 for mode in BARE_COMPILED)
                pieces.insert(0, ("bare loop (bare_check.py --compile-only)", min(BARE_S, compiled), 0))
            else:
                pieces.insert(0, ("bare loop (bare_check.py --graphs --compile)", BARE_S, 0))
        seconds, points = sum(s for _, s, _ in pieces), sum(p for _, _, p in pieces)
        note = f"{len(left)} of {len(options)} options left" if left else "done"
        name = f"step_fast {model}" + (" long" if options == LONG else "")
        return Part(name, seconds, points, note, whole=options == LONG, pieces=tuple(pieces))

    cases, _ = calibration_s(hw)
    ran, executed = calibration_done(hw)  # cases an earlier session ran (or found no plan for), in the same order
    if "first" in done.get("calibrate", set()):
        first = Part("step_calibrate first", 0.0, note=f"done ({executed} of {ran} cases executed)")
        n, first_cases_s = 0, 0.0
    else:
        n, first_s = calibration_first(hw)
        before = f"{executed} executed before; " if ran else ""
        reached = "reached" if executed + n >= CAL_FIRST else "not reached: the next session's slot goes on"
        note = f"{n} plans executed ({before}{CAL_FIRST} {reached})"
        first = Part("step_calibrate first", first_s, note=note)
        first_cases_s = first_s - RAY_START_S
    rest_s = RAY_START_S + sum(s for s, _ in cases[ran:]) - first_cases_s  # its own Ray, the cases left
    left = sum(runs for _, runs in cases[ran:]) - n
    env = [Part("check_environment", 6.0)]  # 5-6 s in the logs
    return env + [
        profile("resnet50", "first"),
        fast("resnet50"),
        first,
        Part("check_gpu_tests", GPU_TESTS_S),
        Part("step_loadtime", LOADTIME_S),
        profile("efficientnet_b0", "first"),
        fast("efficientnet_b0"),
        fast("resnet50", LONG),
        Part("step_calibrate rest", rest_s, note=f"{left} plans"),
        profile("resnet50", "rest"),
        profile("efficientnet_b0", "rest"),
    ]


def second_call_s() -> float:
    """The work the second call has time for: the session's device time less the first call and the
    overheads of both."""
    first = MACHINE_START_S + INSTALL_S + TRANSFER_S + CALL_BUDGET_S
    return DEVICE_S - first - GAP_S - TRANSFER_S - MARGIN_S


def device_s() -> float:
    """The session's device time if both calls run to their budgets."""
    return MACHINE_START_S + INSTALL_S + TRANSFER_S + CALL_BUDGET_S + GAP_S + TRANSFER_S + second_call_s()


def calls(begin: float, seconds: float) -> str:
    """The calls a piece of work from `begin` (seconds of work into the session) runs in: "1", "2", "1-2"
    when cut and resumed, "later" when this session has no time left for it, "-" for none."""
    ends = (CALL_BUDGET_S, CALL_BUDGET_S + second_call_s())
    end = begin + seconds
    first = "1" if begin < ends[0] else "2" if begin < ends[1] else "later"
    last = "1" if end <= ends[0] else "2" if end <= ends[1] else "later"
    return "-" if not seconds else first if first == last else f"{first}-{last}"


def timeline(hw: str) -> list[tuple[Part, str, float]]:
    """Each part, its calls and where its work begins, back to back across the two calls. A `whole` part
    that the call where it is reached has no room for is left for a later session (the second call,
    shorter than its cap, has none) and takes none of this one's time."""
    out, t = [], 0.0
    ends = (CALL_BUDGET_S, CALL_BUDGET_S + second_call_s())
    for part in parts(hw):
        call_end = next((end for end in ends if t < end), None)
        if part.whole and part.seconds and (call_end is None or call_end - t < part.seconds):
            out.append((part, "later", t))
            continue
        out.append((part, calls(t, part.seconds), t))
        t += part.seconds
    return out


def schedule(hw: str) -> list[tuple[Part, str]]:
    """Each part with the calls it runs in (timeline)."""
    return [(part, call) for part, call, _ in timeline(hw)]


def sessions_needed(hw: str) -> int:
    work = sum(p.seconds for p in parts(hw))
    return math.ceil(work / (CALL_BUDGET_S + second_call_s()))


def report(hw: str) -> str:
    cost = point_cost(hw, "resnet50")
    lines = [
        f"## {hw}: one lent machine, 15 device-minutes",
        "",
        f"A point here: {cost.a:.2f} s + (3 + samples + {cost.b:.1f}) x its call; a fresh warm-up process "
        f"{cost.fresh_s:.0f} s more; a batch that does not fit {cost.oom_s:.0f} s; a profile command's start "
        f"{cost.start_s:.0f} s; {cost.short_noisy:.0%} of the launch-bound points loose at 0.5 s (fitted on "
        f"results/{hw}/).",
        "",
        "| part (in campaign.sh's order) | points | estimated minutes | call | note |",
        "|---|---|---|---|---|",
        f"| machine start, wheels installed, transfers | | {(MACHINE_START_S + INSTALL_S + TRANSFER_S) / 60:.1f} "
        "| 1 | |",
    ]
    for part, call, begin in timeline(hw):
        lines.append(f"| `{part.name}` | {part.points or ''} | {part.seconds / 60:.1f} | {call} | {part.note} |")
        if call in ("-", "later"):
            continue
        for name, seconds, points in part.pieces:  # where this session's model puts each option
            lines.append(f"| - {name} | {points or ''} | {seconds / 60:.1f} | {calls(begin, seconds)} | |")
            begin += seconds
    work = sum(p.seconds for p in parts(hw))
    lines += [
        f"| **all the work left** | | **{work / 60:.1f}** | | about {sessions_needed(hw)} sessions |",
        f"| **the session**: call 1 {CALL_BUDGET_S / 60:.1f} + call 2 {second_call_s() / 60:.1f} of work, "
        f"{(DEVICE_S - MARGIN_S - CALL_BUDGET_S - second_call_s()) / 60:.1f} of overheads | | "
        f"**{device_s() / 60:.1f}** of {DEVICE_S / 60:.0f} | | |",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("hardware", nargs="*", help=f"GPU types: {', '.join(GPU_TYPES)} (default: both)")
    args = parser.parse_args()
    for hw in args.hardware:
        if hw not in GPU_TYPES:
            parser.error(f"no results of {hw!r}: choose from {', '.join(GPU_TYPES)}")
    for hw in args.hardware or GPU_TYPES:
        n, seconds = calibration_first(hw)
        ran, executed = calibration_done(hw)
        before = f"{executed} executed in {ran} cases committed, " if ran else ""
        short = max(CAL_FIRST - executed, 0)
        print(
            f"{hw}: the calibration's first slot ({before}until {CAL_FIRST}, at most {CALIBRATION_S:.0f} s) runs "
            f"{n} plans in {seconds:.0f} s ({RUN_OVERHEAD_S:g} s around each, assumed); the {short} left to "
            f"{CAL_FIRST} would take {calibration_for(hw, short):.0f} s.\n"
        )
        print(report(hw) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
