#!/usr/bin/env bash
# The GPU campaign (issues 14, 28) in resumable calls, each under 10 minutes. README.md beside this file
# has the time budget and the exact device commands.
#
#   campaign.sh session          OUT   everything below in one call, the most important first (a device
#                                      session of 15 minutes: see README.md); again on the warm machine resumes
#   campaign.sh check            OUT   environment and the GPU tests (-m gpu); the CPU suite runs elsewhere
#   campaign.sh resnet50         OUT   profiles: eager fp16, channels-last + CUDA graphs fp16, eager tf32
#   campaign.sh efficientnet_b0  OUT   the same for EfficientNet-B0
#   campaign.sh fit              OUT   predictors and their error reports from the profiles (CPU is enough)
#   campaign.sh validate         OUT   plans for one GPU executed with `perfmodel run --synthetic`
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
usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

STEP="${1:-}"
[[ -n "$STEP" ]] || usage
case "$STEP" in
  session|check|resnet50|efficientnet_b0|fit|validate) [[ $# -ge 2 ]] || usage; OUT="$2" ;;
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
    # tf32 and CUDA graphs need CUDA: the dry run's two options pass a precision and channels-last instead.
    OPTIONS=("torch-fp32:--precision fp32" "torch-channels-last-bf16:--precision bf16 --channels-last")
    SWEEP=(--batch-sizes auto --max-batch-size 8 --max-time-per-point 0.2)
    FRESH=2 SEARCH_TOL=0.1 WORKER_TIMEOUT=120 CALL_TIMEOUT=60
    PLANS=("tiny 32 2000 4s --margin 5%")
  else
    DEVICE=cuda
    MODEL_resnet50=resnet50 SIZES_resnet50=224,320,448
    MODEL_efficientnet_b0=efficientnet_b0 SIZES_efficientnet_b0=224,320,448
    # Most important first: a call cut off loses the least (fp16, then the fp32 of tf32, then CUDA graphs).
    # tf32's warm-up is its first call at each point in the measuring process (cuDNN's autotuning for
    # the shape, not a process's start): no fresh processes, which would cost ~1 minute a model.
    # CUDA graphs pay off at small batches, where launches dominate; above 2048 images a batch they run
    # as eager does, so their sweep stops there.
    OPTIONS=("torch-fp16:--precision fp16"
             "torch-tf32:--precision tf32 --warmup in-process"
             "torch-channels-last-cuda-graphs-fp16:--precision fp16 --channels-last --cuda-graphs --max-batch-size 2048")
    SWEEP=(--batch-sizes auto --max-time-per-point 0.5)
    FRESH=1,256 SEARCH_TOL=0.2 WORKER_TIMEOUT=300 CALL_TIMEOUT=120
    # model, input size, images, deadline [more perfmodel plan flags]: one GPU each (validate.py plans 80%
    # of the most one GPU can do when it cannot do them all).
    PLANS=("resnet50 224 60000 10s" "efficientnet_b0 224 60000 10s" "resnet50 448 10000 10s --margin 5%")
  fi
}

# Flags the campaign needs that perfmodel may not have yet (they are being built on other branches).
# On a GPU their absence stops the campaign (it would waste the GPU's minutes); the dry run says what it
# leaves out and goes on without them.
PROFILE_FLAGS=(--fresh-warmup-at --search-tolerance --worker-timeout --call-timeout)
check_features() {
  local help missing=()
  help="$("${PM[@]}" profile --help 2>&1)" || die "perfmodel does not start here: $help"
  for flag in "${PROFILE_FLAGS[@]}"; do grep -q -- "$flag" <<<"$help" || missing+=("$flag"); done
  grep -q tf32 <<<"$help" || missing+=("--precision tf32")
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
  mapfile -t files < <(grep -l "mark.gpu" tests/test_*.py)
  bounded ${1:+--at-most "$1"} "$PY" -m pytest -q -p no:cacheprovider -m gpu "${files[@]}" "${xml[@]+"${xml[@]}"}" 2>&1 | tail -n 40 | tee -a "$log" \
    || rc=${PIPESTATUS[0]}
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
    fit) step_fit ;;
    validate) step_validate ;;
  esac
  say "step $1: finished"
}

# The session: every step in one call, the most important part first, so that a device session of 15
# minutes (one machine start, one call, perhaps a short second one on the warm machine) measures what
# matters most: one model's profile, then plans executed on it (the first H200 session spent its call
# on two profiles and had no time left for a plan), the GPU tests, then the rest. A part that fails is
# reported and the next one runs; a part out of time ends the call (exit 3), and the same command again
# resumes. The GPU tests get at most GPU_TESTS_S seconds.
GPU_TESTS_S="${CAMPAIGN_GPU_TESTS_S:-120}"
SESSION=("check_environment" "step_profile resnet50 first" "step_validate" "check_gpu_tests $GPU_TESTS_S"
         "step_profile efficientnet_b0 first" "step_profile resnet50 rest" "step_profile efficientnet_b0 rest")

bundle() {  # pack OUT into CAMPAIGN_BUNDLE (one file back from the device), atomically
  [[ -n "${CAMPAIGN_BUNDLE:-}" ]] || return 0
  tar czf "$CAMPAIGN_BUNDLE.part" -C "$OUT" . && mv "$CAMPAIGN_BUNDLE.part" "$CAMPAIGN_BUNDLE"
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
