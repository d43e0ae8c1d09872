#!/usr/bin/env bash
# The GPU campaign (issues 14, 28, 38) in resumable calls, each under 10 minutes. README.md beside this
# file has the order, the time budget (budget.py) and the exact device commands.
#
#   campaign.sh session          OUT   every part below in one call, in the campaign's order (README.md); the
#                                      same command again on the warm machine resumes
#   campaign.sh check            OUT   environment and the GPU tests (-m gpu, at most 60 s); the CPU suite runs elsewhere
#   campaign.sh resnet50         OUT   profiles with the out-of-memory search: eager fp16, then eager tf32
#   campaign.sh efficientnet_b0  OUT   the same for EfficientNet-B0
#   campaign.sh fast             OUT   the fast options (issue 39) of both models at chosen sizes and batches,
#                                      at most FAST_OPTION_S each, and the bare loop beside them; then
#                                      ResNet-50's long options (max-autotune), at most LONG_OPTION_S each
#   campaign.sh calibrate        OUT   the GPU calibration (issue 37): plans from the shipped profile, executed
#   campaign.sh loadtime         OUT   the model's load in fresh processes (experiments/012), where the tree has it
#   campaign.sh fit              OUT   predictors and their error reports from the profiles (CPU is enough)
#   campaign.sh validate         OUT   three plans from the fitted predictors, executed (the first sessions' check)
#   campaign.sh dry-run         [OUT]  the session on the CPU, tiny model, tiny grid (a few minutes)
#
# OUT is one folder for every step, of one GPU type. A step first copies in what earlier calls on this GPU
# type left in SEED (default: experiments/008_gpu_campaign/results/<hw>, e.g. results/h100, where each
# type's files are committed; CAMPAIGN_RESULTS names another root, CAMPAIGN_SEED one folder), so a call
# that was cut off resumes: profiles with --resume, and sub-steps listed in OUT/<hw>-<step>.state are
# skipped. Each call stops itself cleanly before CAMPAIGN_BUDGET_S seconds (default 540) and exits 3 when
# work is left: run the same step again. Exit 2: this machine cannot run the campaign (the message says
# why), e.g. an OUT or SEED that holds another GPU type's files (they would not fit together). With
# CAMPAIGN_BUNDLE=FILE.tgz, OUT is packed into that one file after every part of a session (a device call
# brings back at most 8 files).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
PM=("$PY" -m perfmodel)
BUDGET_S="${CAMPAIGN_BUDGET_S:-540}"
STARTED=$SECONDS

say() { printf '==> [%4d s] %s\n' $((SECONDS - STARTED)) "$*"; }
die() { printf 'campaign: %s\n' "$*" >&2; exit "${2:-2}"; }
usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

STEP="${1:-}"
[[ -n "$STEP" ]] || usage
case "$STEP" in
  session|check|resnet50|efficientnet_b0|fast|calibrate|loadtime|fit|validate) [[ $# -ge 2 ]] || usage; OUT="$2" ;;
  dry-run) OUT="${2:-}" ;;
  *) usage ;;
esac
RESULTS="${CAMPAIGN_RESULTS:-$HERE/results}"  # one folder per GPU type below it: SEED is RESULTS/<hw>
# Relative paths are the caller's: make them absolute before moving to the repository's root.
[[ -n "$OUT" ]] && { mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)" || die "cannot make the folder $OUT."; }
[[ -d "$RESULTS" ]] && RESULTS="$(cd "$RESULTS" && pwd)"
if [[ -n "${CAMPAIGN_SEED:-}" && -d "$CAMPAIGN_SEED" ]]; then CAMPAIGN_SEED="$(cd "$CAMPAIGN_SEED" && pwd)"; fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
cd "$ROOT"

# ---------------------------------------------------------------------------------------------------
# The grid. GPU: the campaign of issue 14. Dry run: the same steps with the tiny model on the CPU.

set_grid() {
  if [[ "$DRY" == 1 ]]; then
    DEVICE=cpu
    # Two input sizes each: from one size and no out-of-memory point, the fitted memory model would let
    # the plan pick batches far past the measured 8.
    MODEL_resnet50=tiny SIZES_resnet50=32,48
    MODEL_efficientnet_b0=tiny SIZES_efficientnet_b0=32,48
    # tf32 needs CUDA: the dry run's second option passes a precision and channels-last instead.
    OPTIONS=("torch-fp32:--precision fp32" "torch-channels-last-bf16:--precision bf16 --channels-last")
    SWEEP=(--batch-sizes auto --max-batch-size 8 --max-time-per-point 0.2 --drift-probe 0)
    FRESH=2 SEARCH_TOL=0.1 WORKER_TIMEOUT=120 CALL_TIMEOUT=60
    # CUDA graphs and compile's GPU modes need CUDA: one option of each kind the CPU can run.
    FAST_OPTIONS=("torch-channels-last-fp32:--precision fp32 --channels-last"
                  "torch-compile-fp32:--precision fp32 --compile --compile-mode default --batch-sizes 2 --warmup in-process --call-timeout 300")
    FAST_OPTION_S="${CAMPAIGN_FAST_OPTION_S:-300}"  # Inductor's C++ compile of the tiny model: 50-90 s on 2 busy cores
    # The long part's code path with a short option (max-autotune's compile is CUDA's): eager bf16.
    LONG_OPTIONS=("torch-bf16:--precision bf16 --warmup in-process")
    LONG_OPTION_S="${CAMPAIGN_LONG_OPTION_S:-120}"
    FAST_SWEEP=(--input-sizes 32 --batch-sizes 1,4 --max-time-per-point 0.2 --max-time-short-calls 0.4 --drift-probe 0)
    FAST_FRESH=1
    CAL_PROFILE=cpu-resnet50-torch-fp32.csv  # the dry run's own tiny profile (OUT, else SEED)
    CAL_GRID=(--device cpu --cpus 2 --sizes 32 --deadlines 3 --modes relaxed --probabilities 0.5)  # one plan
    CAL_FIRST=1
    PLANS=("tiny 32 2000 4s --margin 5%")
  else
    DEVICE=cuda
    MODEL_resnet50=resnet50 SIZES_resnet50=224,320,448
    MODEL_efficientnet_b0=efficientnet_b0 SIZES_efficientnet_b0=224,320,448
    # The sweeps with the out-of-memory search: eager fp16 first (every model's), then eager tf32 (fp32
    # tensors; its warm-up is its first call at each point in the measuring process: no fresh processes).
    OPTIONS=("torch-fp16:--precision fp16"
             "torch-tf32:--precision tf32 --warmup in-process")
    SWEEP=(--batch-sizes auto --max-time-per-point 0.5 --max-time-short-calls 2)
    FRESH=1,256 SEARCH_TOL=0.2 WORKER_TIMEOUT=300 CALL_TIMEOUT=120
    # The fast options (issue 39) where they matter, without the out-of-memory search (the eager sweep's):
    # 224 and 448 px (the calibration's sizes), from launch-bound batch 1 to past the eager peak; a fresh
    # warm-up process at batch 1. torch.compile compiles every batch shape anew (minutes with
    # max-autotune): 224 px only, at batch 1 (launch-bound) and 256, its first call per shape timed in the
    # measuring process (a new process: its compile cache starts empty).
    # Issue 39's options first, in the order that reaches its targets soonest on a session that has none
    # (compile default: the throughput, reduce-overhead: batch 1, on the H200). Last, eager fp16's fixed
    # costs where plans run (not an option: the shipped profile's own): a fresh process at each of the
    # batches the calibration's plans chose (64-2048), whose load is measured as perfmodel run counts it
    # (the shipped profiles' loads counted the import) and whose first call showed the excess growing past
    # batch 256 (2.3-3.0 s at 512-2048 on the H200, 2026-11-28).
    FAST_OPTIONS=("torch-compile-fp16:--precision fp16 --channels-last --compile --compile-mode default $COMPILED"
                  "torch-compile-reduce-overhead-fp16:--precision fp16 --channels-last --compile --compile-mode reduce-overhead $COMPILED"
                  "torch-channels-last-fp16:--precision fp16 --channels-last"
                  "torch-channels-last-cuda-graphs-fp16:--precision fp16 --channels-last --cuda-graphs"
                  "torch-fp16-first-calls:--precision fp16 --input-sizes 224,448 --batch-sizes $FIRST_CALLS --fresh-warmup-at $FIRST_CALLS --drift-probe 0")
    # ResNet-50's long options, late in the session (`step_fast resnet50 long`): max-autotune did not
    # compile batch 256 in 120 s on the H200 (2026-11-28); it starts only in a call with its cap left.
    LONG_OPTIONS=("torch-compile-max-autotune-fp16:--precision fp16 --channels-last --compile --compile-mode max-autotune --input-sizes 224 --batch-sizes 256 --warmup in-process --call-timeout 600 --drift-probe 0")
    FAST_SWEEP=(--input-sizes 224,448 --batch-sizes 1,8,32,256,1024,2048 --max-time-per-point 0.5
                --max-time-short-calls 2)
    FAST_FRESH=1
    CAL_PROFILE=""  # the shipped profile of this GPU type: profiles/<hw>-resnet50-torch-fp16.csv
    CAL_GRID=(--device cuda)
    CAL_FIRST=20
    # model, input size, images, deadline [more perfmodel plan flags]: one GPU each (validate.py plans 80%
    # of the most one GPU can do when it cannot do them all).
    PLANS=("resnet50 224 60000 10s" "efficientnet_b0 224 60000 10s" "resnet50 448 10000 10s --margin 5%")
  fi
}
FIRST_CALLS=64,512,2048  # the fixed costs' batches (below)
# A compile is a long first call; no drift probe: its worker would compile again (a minute or more, ba0bb1e).
COMPILED="--input-sizes 224 --batch-sizes 1,256 --warmup in-process --call-timeout 300 --drift-probe 0"
FAST_OPTION_S="${CAMPAIGN_FAST_OPTION_S:-120}"  # at most this long per fast option and model (issue 39: ~2 min)
LONG_OPTION_S="${CAMPAIGN_LONG_OPTION_S:-300}"  # at most this long per long option, started only with this left
# The bare loop with its torch.compile shapes: each compile's first call 16-22 s on the H200 (the profiler's).
BARE_S="${CAMPAIGN_BARE_S:-130}"
CALIBRATION_S="${CAMPAIGN_CALIBRATION_S:-300}"  # the calibration's first slot (issue 37: >= 20 plans in 5 min)
LOADTIME_S="${CAMPAIGN_LOADTIME_S:-90}"
GPU_TESTS_S="${CAMPAIGN_GPU_TESTS_S:-60}"  # the GPU tests (issue 38: <= 60 s)

# Flags the campaign needs that perfmodel may not have yet (they are being built on other branches).
# On a GPU the absence of one the sweeps need stops the campaign (it would waste the GPU's minutes); a fast
# option whose flag is missing is skipped with a line (the others run); the dry run says what it leaves
# out and goes on without it.
PROFILE_FLAGS=(--fresh-warmup-at --search-tolerance --worker-timeout --call-timeout --max-time-short-calls)
check_features() {
  local flag missing=()
  PROFILE_HELP="$("${PM[@]}" profile --help 2>&1)" || die "perfmodel does not start here: $PROFILE_HELP"
  for flag in "${PROFILE_FLAGS[@]}"; do grep -q -- "$flag" <<<"$PROFILE_HELP" || missing+=("$flag"); done
  grep -q tf32 <<<"$PROFILE_HELP" || missing+=("--precision tf32")
  HAVE_RUN=1
  "${PM[@]}" run --help >/dev/null 2>&1 || HAVE_RUN=0
  MISSING_FLAGS=("${missing[@]+"${missing[@]}"}")
  if [[ "$DRY" == 0 && ${#MISSING_FLAGS[@]} -gt 0 ]]; then
    die "this perfmodel lacks ${MISSING_FLAGS[*]} (perfmodel profile); the campaign needs them."
  fi
  for flag in "${MISSING_FLAGS[@]+"${MISSING_FLAGS[@]}"}"; do
    say "dry run: perfmodel profile has no $flag yet: the sweeps run without it"
  done
}

has_flag() { local f; for f in "${MISSING_FLAGS[@]+"${MISSING_FLAGS[@]}"}"; do [[ "$f" == "$1" ]] && return 1; done; return 0; }

lacking() {  # the --flags of $1 (an option's flags) that this perfmodel profile does not have
  local word out=()
  for word in $1; do
    [[ "$word" == --* ]] && ! grep -q -- "$word\b" <<<"$PROFILE_HELP" && out+=("$word")
  done
  echo "${out[*]+"${out[*]}"}"
}

detect_hardware() {  # the hardware key the files are named by: h100, h200 ...
  if [[ "$DRY" == 1 ]]; then HW=cpu; return; fi
  HW="${CAMPAIGN_HARDWARE:-}"
  [[ -n "$HW" ]] && return
  HW="$("$PY" - <<'EOF'
import torch
from perfmodel.profile.provenance import hardware_key
gpu = torch.cuda.is_available()  # hardware_key is called either way, so that a CPU test catches a wrong call
key = hardware_key(torch.cuda.get_device_name(0) if gpu else "", gpu)
print(key if gpu else "")
EOF
)" || die "cannot ask torch for the GPU's name."
  [[ -n "$HW" ]] && return
  if [[ "$STEP" == fit ]]; then  # fitting needs no GPU: take the hardware of the profiles found
    HW="$(for dir in "$OUT" "${CAMPAIGN_SEED:-}"; do [[ -n "$dir" ]] && compgen -G "$dir/*-*-torch-*.csv" || true; done \
          | xargs -r -n1 basename | cut -d- -f1 | sort -u)"
    [[ -n "$HW" && "$HW" != *$'\n'* ]] && return
    die "fit: name the hardware of the profiles to fit, e.g. CAMPAIGN_HARDWARE=h100 (found: ${HW:-none})."
  fi
  die "torch sees no CUDA GPU here; on a CPU, run: campaign.sh dry-run"
}

hardware_in() {  # the GPU types whose files (<hw>-....csv, .state, .json, .jsonl, .txt) are in folder $1
  local f
  for f in "$1"/*-*.{csv,state,json,jsonl,txt}; do [[ -f "$f" ]] && basename "$f" | cut -d- -f1; done | sort -u
}

one_hardware_per_folder() {  # OUT and SEED hold this GPU type's files only: an H100's and an H200's never mix
  local dir others
  for dir in "$OUT" "$SEED"; do
    [[ -d "$dir" ]] || continue
    others="$(hardware_in "$dir" | grep -vxF "$HW" | tr '\n' ' ')" || true
    [[ -z "$others" ]] && continue
    die "this machine's GPU is a(n) $HW, but $dir holds the files of ${others% }: each GPU type has its own folder (results/<hw>); give this one an OUT of its own (and CAMPAIGN_SEED, if you set it, of the same type)."
  done
}

# ---------------------------------------------------------------------------------------------------
# State: finished sub-steps, seeding from earlier calls, the time budget.

state_file() { echo "$OUT/$HW-$1.state"; }
done_before() { [[ -f "$(state_file "$1")" ]] && grep -qxF "$2" "$(state_file "$1")"; }
mark_done() { echo "$2" >>"$(state_file "$1")"; }

seed() {  # copy files of earlier calls (same hardware) into OUT, never over a newer one there
  local pattern="$1" f
  [[ -d "$SEED" && "$(cd "$SEED" && pwd)" != "$(cd "$OUT" && pwd)" ]] || return 0
  for f in "$SEED"/$pattern; do
    [[ -f "$f" && ! -e "$OUT/$(basename "$f")" ]] && cp "$f" "$OUT/" && say "resuming from $f"
  done
  return 0
}

left_s() { echo $((BUDGET_S - (SECONDS - STARTED))); }

out_of_time() {  # $1 = step: stop this call cleanly, the work left for the next one
  say "$1: stopping before the call's budget of ${BUDGET_S} s runs out; run the same step again to continue."
  exit 3
}

TIMED_OUT=124
bounded() {  # [--at-most S] command: run it within the time left; $TIMED_OUT when it was stopped for time
  local left
  left="$(left_s)"
  if [[ "$1" == --at-most ]]; then ((left > $2)) && left=$2; shift 2; fi
  ((left > 20)) || return $TIMED_OUT
  local rc=0
  timeout --signal=TERM --kill-after=20 "$left" "$@" || rc=$?
  ((rc == 137)) && return $TIMED_OUT  # it ignored SIGTERM and was killed
  return "$rc"
}

# ---------------------------------------------------------------------------------------------------
# Steps

step_check() {
  check_environment
  check_gpu_tests
}

check_environment() {
  local log="$OUT/$HW-check.txt"
  seed "$HW-check.state"
  seed "$HW-check.txt"  # the log goes on across calls
  {
    echo "# perfmodel GPU campaign: environment ($(date -u +%FT%TZ))"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit \
      --format=csv || echo "nvidia-smi: not found"
    "$PY" - <<'EOF'
import importlib.metadata as md, platform, sys
print("python", platform.python_version(), sys.executable)
for name in ("torch", "torchvision", "numpy", "pandas", "scikit-learn", "pyomo", "highspy", "ray", "nvidia-ml-py", "rich"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} MISSING")
import torch
print("cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version(), "available", torch.cuda.is_available())
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print("device", p.name, f"{p.total_memory / 2**20:.0f} MiB", p.multi_processor_count, "SMs")
EOF
  } 2>&1 | tee -a "$log"
}

check_gpu_tests() {  # [$1 = at most this many seconds]
  local log="$OUT/$HW-check.txt"
  seed "$HW-check.state"
  done_before check gpu-tests && { say "check: the GPU tests passed in an earlier call"; return; }
  # Only the GPU tests: the CPU suite (numpy 2 and pandas 3 too: make test-numpy2) runs on CPU machines,
  # and on this one it would spend the GPU's minutes on tests that need none.
  local rc=0 xml=()
  if [[ "$DRY" == 1 ]]; then
    say "check: the GPU tests (-m gpu; they skip themselves without CUDA)"
  else
    say "check: the GPU tests (-m gpu)"
    xml=(--junitxml="$OUT/$HW-check-gpu-tests.xml")
  fi
  # Only the files that hold GPU tests: collecting the others would import what this machine may lack.
  local files
  mapfile -t files < <(grep -rl --include="test_*.py" "mark.gpu" tests)
  # --durations: each test's seconds in the log (the H100 run of 2026-11-27 could only count dots).
  bounded ${1:+--at-most "$1"} "$PY" -m pytest -q -p no:cacheprovider -m gpu --durations=0 --durations-min=1 \
    "${files[@]}" "${xml[@]+"${xml[@]}"}" 2>&1 | tail -n 60 | tee -a "$log" || rc=${PIPESTATUS[0]}
  if ((rc == TIMED_OUT)); then
    (($(left_s) > 20)) && die "check: the GPU tests did not finish in their ${1:-} s; see $log." 1
    out_of_time check
  fi
  ((rc == 0)) || die "check: pytest -m gpu failed (exit $rc); see $log." 1
  mark_done check gpu-tests
}

step_profile() {  # $1 = resnet50 | efficientnet_b0, [$2 = first | rest: the first option, or the others]
  local step="$1" model_var="MODEL_$1" sizes_var="SIZES_$1" which="${2:-}"
  local model="${!model_var}" sizes="${!sizes_var}"
  seed "$HW-$step-*.csv"
  seed "$HW-$step.state"
  local options=("${OPTIONS[@]}")
  [[ "$which" == first ]] && options=("${OPTIONS[@]:0:1}")
  [[ "$which" == rest ]] && options=("${OPTIONS[@]:1}")
  local entry name flags out extra rc
  for entry in "${options[@]}"; do
    name="${entry%%:*}" flags="${entry#*:}"
    out="$OUT/$HW-$step-$name.csv"
    if done_before "$step" "$name"; then say "$step $name: done in an earlier call"; continue; fi
    extra=()
    has_flag --search-tolerance && extra+=(--search-tolerance "$SEARCH_TOL")
    if [[ "$flags" == *"--warmup in-process"* ]]; then
      :  # this option's warm-up is measured in the measuring process (above)
    elif has_flag --fresh-warmup-at; then
      extra+=(--fresh-warmup-at "$FRESH")
    else  # a fresh process for every point would take the dry run past its few minutes
      extra+=(--warmup in-process)
    fi
    has_flag --worker-timeout && extra+=(--worker-timeout "$WORKER_TIMEOUT")
    has_flag --call-timeout && extra+=(--call-timeout "$CALL_TIMEOUT")
    # shellcheck disable=SC2206
    local cmd=("${PM[@]}" profile --model "$model" --device "$DEVICE" --input-sizes "$sizes" $flags "${SWEEP[@]}"
               "${extra[@]+"${extra[@]}"}" --out "$out")
    [[ -f "$out" ]] && cmd+=(--resume)
    say "$step $name: ${cmd[*]:2}"
    rc=0
    bounded "${cmd[@]}" || rc=$?
    ((rc == TIMED_OUT)) && out_of_time "$step"
    ((rc == 0)) || die "$step $name: perfmodel profile failed (exit $rc); its points are kept in $out: run the step again." 1
    mark_done "$step" "$name"
  done
}

step_fast() {  # $1 = resnet50 | efficientnet_b0, [$2 = long]: the fast options at chosen sizes and batches
  # (issue 39), or the long ones (LONG_OPTIONS: started only in a call that has their cap left)
  local step="$1" model_var="MODEL_$1" which="${2:-}"
  local model="${!model_var}"
  seed "$HW-$step-*.csv"
  seed "$HW-$step.state"
  local options=("${FAST_OPTIONS[@]}") cap=$FAST_OPTION_S
  [[ "$which" == long ]] && options=("${LONG_OPTIONS[@]}") cap=$LONG_OPTION_S
  [[ "$step" == resnet50 && "$which" != long ]] && step_bare
  local entry name flags out lacks rc
  for entry in "${options[@]}"; do
    name="${entry%%:*}" flags="${entry#*:}"
    out="$OUT/$HW-$step-$name.csv"
    if done_before "$step" "$name"; then say "$step $name: done in an earlier call"; continue; fi
    lacks="$(lacking "$flags")"
    if [[ -n "$lacks" ]]; then  # not built yet (issue 39's branch): the other options go on
      say "$step $name: skipped: this perfmodel profile has no $lacks yet"
      continue
    fi
    local extra=(--fresh-warmup-at "$FAST_FRESH")
    [[ "$flags" == *"--warmup in-process"* || "$flags" == *"--fresh-warmup-at"* ]] && extra=()
    # shellcheck disable=SC2206
    local cmd=("${PM[@]}" profile --model "$model" --device "$DEVICE" "${FAST_SWEEP[@]}" --worker-timeout "$WORKER_TIMEOUT"
               --call-timeout "$CALL_TIMEOUT" $flags "${extra[@]+"${extra[@]}"}" --out "$out")  # the option's flags last: they win
    [[ -f "$out" ]] && cmd+=(--resume)
    local by_cap=0  # whether the option's own cap, not the call's time, bounds it
    (($(left_s) > cap)) && by_cap=1
    if [[ "$which" == long ]] && ((by_cap == 0)); then  # cut by the call, it would keep nothing (a compile)
      say "$step $name: needs its $cap s, this call has $(left_s) s left: left for a later call; the session goes on"
      continue
    fi
    say "$step $name (at most $cap s): ${cmd[*]:2}"
    rc=0
    bounded --at-most "$cap" "${cmd[@]}" || rc=$?
    if ((rc == TIMED_OUT)); then
      ((by_cap)) || out_of_time "$step"  # the call's end cut it: the next call goes on with it
      say "$step $name: stopped at its $cap s; the points measured are kept (--resume goes on), the next option runs"
      rc=0
    fi
    ((rc == 0)) || say "$step $name: perfmodel profile failed (exit $rc); its points are kept in $out; the next option runs"
    mark_done "$step" "$name"
  done
}

step_bare() {  # ResNet-50 in a bare PyTorch loop, the profiler's rows to be held against it (issue 39)
  done_before fast bare-compile && { say "bare loop: done in an earlier call"; return; }
  if [[ "$DRY" == 1 ]]; then say "dry run: the bare loop needs CUDA: skipped"; return; fi
  # Points start until 100 s; the last compile shape (~20 s) ends before BARE_S; each row is written as it
  # is measured, so a loop stopped at BARE_S keeps what it measured. A type whose bare loop ran before it
  # had torch.compile's loops (`bare` done: the H200) runs those alone, into a file of their own.
  local rc=0 args=(--out "$OUT/$HW-bare.json" --graphs --compile)
  done_before fast bare && args=(--out "$OUT/$HW-bare-compile.json" --compile-only)
  say "bare loop (bare_check.py ${args[*]:2}, at most $BARE_S s)"
  bounded --at-most "$BARE_S" "$PY" "$HERE/bare_check.py" --seconds 100 "${args[@]}" || rc=$?
  ((rc == TIMED_OUT)) && (($(left_s) <= 20)) && out_of_time fast
  ((rc == 0)) || say "bare loop: failed (exit $rc); the options run without it"
  done_before fast bare || mark_done fast bare
  mark_done fast bare-compile
}

step_calibrate() {  # [$1 = first | rest]: plans from the shipped profile, executed (issue 37, experiments/011)
  local which="${1:-rest}" file="$OUT/$HW-calibration.jsonl"
  if [[ "$HAVE_RUN" == 0 ]]; then
    [[ "$DRY" == 1 ]] || die "this perfmodel has no \`run\` command; the calibration needs it."
    say "dry run: calibrate skipped: perfmodel has no \`run\` command yet"
    return
  fi
  # The first slot is done once the file holds CAL_FIRST executed plans. A slot stopped by its own
  # CALIBRATION_S is spent on this machine only (the marker below, which no later session seeds: seed()
  # copies named files, and the bundle leaves it out): the next call here goes on with the session, the
  # next session's first slot goes on towards CAL_FIRST.
  local spent="$OUT/$HW-calibrate-first.spent"
  seed "$HW-calibration.jsonl"
  seed "$HW-calibrate.state"
  done_before calibrate "$which" && { say "calibrate $which: done in an earlier call"; return; }
  done_before calibrate rest && { say "calibrate: every case done in an earlier call"; return; }
  if [[ "$which" == first && -f "$spent" ]]; then
    say "calibrate first: its $CALIBRATION_S s were spent on this machine ($(cat "$spent") of $CAL_FIRST plans executed); the next session's first slot goes on"
    return
  fi
  local profile="$ROOT/profiles/$HW-resnet50-torch-fp16.csv"
  [[ -n "$CAL_PROFILE" ]] && profile="$(found "$CAL_PROFILE")"
  if [[ ! -f "$profile" ]]; then
    say "calibrate: no ResNet-50 profile of $HW to plan from (${profile:-$CAL_PROFILE}); skipped"
    return
  fi
  local limit=() budget=$(($(left_s) - 20)) by_call=1
  if [[ "$which" == first ]]; then  # the first slot: CAL_FIRST plans executed or CALIBRATION_S, what comes first
    ((budget > CALIBRATION_S)) && budget=$CALIBRATION_S by_call=0
    limit=(--until-executed "$CAL_FIRST")
  fi
  ((budget > 30)) || out_of_time calibrate
  say "calibrate $which: at most $budget s, plans from ${profile#"$ROOT"/} into $file"
  local rc=0
  bounded --at-most $((budget + 30)) "$PY" "$ROOT/experiments/011_deadline_calibration/gpu_calibration.py" \
    --hardware "$HW" --profile "$profile" --out "$file" --budget "$budget" "${limit[@]+"${limit[@]}"}" \
    "${CAL_GRID[@]}" || rc=$?
  ((rc == TIMED_OUT)) && out_of_time calibrate
  "$PY" "$ROOT/experiments/011_deadline_calibration/gpu_calibration.py" --table "$file" || true
  local executed
  executed="$(grep -c '"executed": true' "$file" 2>/dev/null)" || executed=0
  case "$rc" in
    0) mark_done calibrate first; mark_done calibrate rest ;;  # every case done
    3)  # cases left: the first slot is done at CAL_FIRST executed, spent here when its own time ran out
      if [[ "$which" == first ]] && ((executed >= CAL_FIRST)); then
        mark_done calibrate first
      elif [[ "$which" == first ]] && ((by_call == 0)); then
        echo "$executed" >"$spent"
        say "calibrate first: $executed of $CAL_FIRST plans executed in its $CALIBRATION_S s; the next session's first slot goes on"
      else
        out_of_time calibrate  # the call's own budget cut it: the next call goes on
      fi ;;
    *) die "calibrate: gpu_calibration.py failed (exit $rc); the plans done so far are in $file." 1 ;;
  esac
}

step_loadtime() {  # the model's load in fresh processes, before and after issue 37's faster load (experiments/012)
  local script="$ROOT/experiments/012_load_time/run.py"
  seed "$HW-loadtime.state"
  done_before loadtime load && { say "loadtime: done in an earlier call"; return; }
  if [[ ! -f "$script" ]]; then say "loadtime: no experiments/012_load_time/run.py in this tree yet: skipped"; return; fi
  local args=(--device "$DEVICE" --arms old,new --repeats 3)
  [[ "$DRY" == 1 ]] && args=(--device cpu --arms new --repeats 1)
  local rc=0 before
  before="$(ls -d "$ROOT"/experiments/012_load_time/results/*/ 2>/dev/null | sort)"
  say "loadtime: experiments/012_load_time/run.py ${args[*]} (at most $LOADTIME_S s)"
  bounded --at-most "$LOADTIME_S" "$PY" "$script" "${args[@]}" || rc=$?
  ((rc == TIMED_OUT)) && (($(left_s) <= 20)) && out_of_time loadtime
  local made
  made="$(comm -13 <(echo "$before") <(ls -d "$ROOT"/experiments/012_load_time/results/*/ 2>/dev/null | sort) | tail -n 1)"
  if [[ -n "$made" ]]; then  # into OUT (it comes back from the device), named by the GPU type
    rm -rf "$OUT/$HW-loadtime" && cp -r "$made" "$OUT/$HW-loadtime"
    [[ "$DRY" == 1 ]] && rm -rf "$made"  # the dry run leaves no results folder in the tree
  fi
  ((rc == 0)) || say "loadtime: run.py stopped (exit $rc); what it wrote is in $OUT/$HW-loadtime"
  mark_done loadtime load
}

# The fit and validate steps read the profiles and predictors where they are (OUT, else SEED) without
# copying them into OUT: a device call brings back at most 8 files, so OUT holds only what a step makes.
found() {  # the files matching $1 in OUT, else in SEED
  local dir
  for dir in "$OUT" "$SEED"; do
    compgen -G "$dir/$1" >/dev/null && { printf '%s\n' "$dir"/$1; return; }
  done
  return 0
}

step_fit() {
  local step profiles
  for step in resnet50 efficientnet_b0; do
    mapfile -t profiles < <(found "$HW-$step-*.csv")
    if ((${#profiles[@]} == 0)); then say "fit: no $step profiles in $OUT or $SEED (run: campaign.sh $step); skipped"; continue; fi
    say "fit: ${profiles[*]##*/}"
    "${PM[@]}" fit "${profiles[@]}" --out "$OUT/$HW-$step.json" --report >"$OUT/$HW-$step-fit.txt"
    cat "$OUT/$HW-$step-fit.txt"
  done
}

step_validate() {
  if [[ "$HAVE_RUN" == 0 ]]; then
    [[ "$DRY" == 1 ]] || die "this perfmodel has no \`run\` command; validate needs it."
    say "dry run: validate skipped: perfmodel has no \`run\` command yet (helper run's branch)"
    return
  fi
  seed "$HW-validate.jsonl"
  seed "$HW-validate.state"
  local have_predictors=1 step
  for step in resnet50 efficientnet_b0; do [[ -n "$(found "$HW-$step.json")" ]] || have_predictors=0; done
  ((have_predictors)) || step_fit
  local plan rc=0
  for plan in "${PLANS[@]}"; do
    # shellcheck disable=SC2086
    set -- $plan
    local model="$1" size="$2" images="$3" deadline="$4" name="$1-$2-$3-$4"
    shift 4
    local more=("$@")
    ((${#more[@]})) && name="$name-$(tr -d -- '-' <<<"${more[*]}" | tr ' %' '-p')"
    if done_before validate "$name"; then say "validate $name: done in an earlier call"; continue; fi
    local step="$model"; [[ "$DRY" == 1 ]] && step=$([[ "$size" == 32 ]] && echo resnet50 || echo efficientnet_b0)
    if [[ -z "$(found "$HW-$step.json")" ]]; then  # its profile comes later in the session: a later call plans it
      say "validate $name: no $step predictor yet (campaign.sh $step first); left for a later call"
      continue
    fi
    say "validate $name"
    rc=0
    bounded "$PY" "$HERE/validate.py" --predictor "$(found "$HW-$step.json")" --model "$model" --hardware "$HW" \
      --input-size "$size" --images "$images" --deadline "$deadline" --device "$DEVICE" --name "$name" \
      --results "$OUT/$HW-validate.jsonl" ${more[@]+--plan-args "${more[@]}"} || rc=$?
    ((rc == TIMED_OUT)) && out_of_time validate
    ((rc == 0)) || die "validate $name failed (exit $rc); the plans done so far are in $OUT/$HW-validate.jsonl." 1
    mark_done validate "$name"
  done
  "$PY" "$HERE/validate.py" --summary "$OUT/$HW-validate.jsonl"
}

run_step() {
  say "step $1 on $HW ($DEVICE), into $OUT; $(left_s) s of this call's budget left"
  case "$1" in
    session) step_session ;;
    check) step_check ;;
    resnet50|efficientnet_b0) step_profile "$1" ;;
    fast) step_fast resnet50 && step_fast efficientnet_b0 && step_fast resnet50 long ;;
    calibrate) step_calibrate first && step_calibrate rest ;;
    loadtime) step_loadtime ;;
    fit) step_fit ;;
    validate) step_validate ;;
  esac
  say "step $1: finished"
}

# The session: every step in one call. First ResNet-50's eager fp16 sweep (done on both types), the fast
# options (issue 39) with the bare loop in one call (its acceptance), then what the GPU plans' promise
# rests on (issue 37): the GPU calibration's first slot (until 20 plans executed, at most 5 minutes a
# session); the GPU tests (at most 60 s), a small slot for the load's measurement (experiments/012); then what neither type has
# (EfficientNet-B0's sweeps at three sizes with the out-of-memory search: ~15 minutes, a session by
# itself), max-autotune (minutes of compiling), the calibration's other cases and the tf32 sweeps. A part
# that fails is reported and the next one runs; a part out of the call's time ends the call (exit 3), and
# the same command again resumes.
SESSION=("check_environment"
         "step_profile resnet50 first"
         "step_fast resnet50"
         "step_calibrate first"
         "check_gpu_tests $GPU_TESTS_S"
         "step_loadtime"
         "step_profile efficientnet_b0 first"
         "step_fast efficientnet_b0"
         "step_fast resnet50 long"
         "step_calibrate rest"
         "step_profile resnet50 rest"
         "step_profile efficientnet_b0 rest")

bundle() {  # pack OUT into CAMPAIGN_BUNDLE (one file back from the device), atomically
  [[ -n "${CAMPAIGN_BUNDLE:-}" ]] || return 0
  tar czf "$CAMPAIGN_BUNDLE.part" --exclude='*.spent' -C "$OUT" . && mv "$CAMPAIGN_BUNDLE.part" "$CAMPAIGN_BUNDLE"
}

step_session() {
  local part rc failed=()
  local parts=("${SESSION[@]}")
  [[ "$DRY" == 1 ]] && parts+=("step_fit")  # the predictors of every option (on a GPU: fitted on a CPU after)
  for part in "${parts[@]}"; do
    say "session: $part"
    set +e
    # shellcheck disable=SC2086
    (set -e; $part)
    rc=$?
    set -e
    bundle
    ((rc == 3)) && exit 3  # out of this call's time: the same command again resumes
    ((rc == 0)) || failed+=("$part (exit $rc)")
  done
  ((${#failed[@]} == 0)) || die "session: finished, but these parts failed: ${failed[*]}; the log above says why." 1
}

DRY=0
[[ "$STEP" == dry-run ]] && DRY=1
if [[ "$DRY" == 1 ]]; then
  BUDGET_S="${CAMPAIGN_BUDGET_S:-900}"
  if [[ -z "$OUT" ]]; then
    OUT="$(mktemp -d "${TMPDIR:-/tmp}/perfmodel-campaign-XXXXXX")"
    trap 'rm -rf "$OUT"' EXIT
  fi
  [[ -n "${CAMPAIGN_RESULTS:-}" ]] || RESULTS=/nonexistent  # a dry run never resumes from the committed GPU results
fi
set_grid
check_features
detect_hardware
SEED="${CAMPAIGN_SEED:-$RESULTS/$HW}"
one_hardware_per_folder
if [[ "$DRY" == 1 ]]; then
  run_step session
  say "dry run: finished (what it left out, and why, is said above)"
else
  run_step "$STEP"
fi
