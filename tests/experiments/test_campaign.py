"""experiments/008_gpu_campaign/campaign.sh: its CPU dry run, so that the GPU campaign script cannot rot."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from perfmodel.fitting import Predictor
from perfmodel.schema import load_profile

pytestmark = pytest.mark.integration  # each test runs the campaign script or validate.py
ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "experiments" / "008_gpu_campaign"
SCRIPT = HERE / "campaign.sh"
CALIBRATION_DIR = ROOT / "experiments" / "011_deadline_calibration"


def load(name: str):
    """One of the campaign's Python files as a module (the folder is not a package)."""
    spec = importlib.util.spec_from_file_location(f"campaign_{name}", HERE / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(module)
    return module


def campaign(
    *args: str, budget_s: int | None = None, seed: Path | None = None, timeout: float = 900, **more_env: str
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONUNBUFFERED": "1", **more_env}
    if budget_s is not None:
        env["CAMPAIGN_BUDGET_S"] = str(budget_s)
    if seed is not None:
        env["CAMPAIGN_SEED"] = str(seed)
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
    )


@pytest.mark.slow
def test_dry_run_runs_every_step_and_the_next_call_resumes_from_its_files(tmp_path):
    out = tmp_path / "out"
    done = campaign("dry-run", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = [re.sub(r" \d+$", "", n) for n in re.findall(r"\] session: (.+)$", done.stdout, re.M)]
    assert ran == [*session(), "step_fit"]  # campaign.sh's order, every part run
    compiled = "no --compile-mode yet" not in done.stdout  # issue 39's modes (an older perfmodel skips them)
    for step in ("resnet50", "efficientnet_b0"):
        long = ["bf16"] if step == "resnet50" else []  # the long part's option: ResNet-50's only
        options = [*long, "channels-last-bf16", "channels-last-fp32", *(["compile-fp32"] if compiled else []), "fp32"]
        profiles = sorted(out.glob(f"cpu-{step}-*.csv"))
        assert [p.name for p in profiles] == [f"cpu-{step}-torch-{o}.csv" for o in options]
        for path in profiles:
            df = load_profile(path)
            assert set(df["status"]) == {"ok"} and df["batch_size"].max() in (2, 4, 8)
        predictor = Predictor.load(out / f"cpu-{step}.json")
        # compile's one batch size is left out of the fit
        assert len(predictor.select(hardware="cpu")) == 3 + len(long)
        assert "CV MAPE" in (out / f"cpu-{step}-fit.txt").read_text()
    assert "torch" in (out / "cpu-check.txt").read_text()
    assert "dry run: the bare loop needs CUDA: skipped" in done.stdout
    (line,) = [json.loads(x) for x in (out / "cpu-calibration.jsonl").read_text().splitlines()]
    assert line["row"]["executed"] and line["run"]["images_done"] > 0 and line["row"]["wall_s"] > 0
    assert (out / "cpu-calibrate.state").read_text().split() == ["first", "rest"]

    # The next device call starts with an empty folder and the files of this one, committed in the folder of
    # its hardware type (results/cpu/ here), as its seed; another type's folder beside it is not read.
    results = tmp_path / "results"
    shutil.copytree(out, results / "cpu")
    (results / "h100").mkdir()
    (results / "h100" / "h100-resnet50.state").write_text("torch-fp16\n")
    second = tmp_path / "second"
    again = campaign("dry-run", str(second), CAMPAIGN_RESULTS=str(results))
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from {results / 'cpu'}" in again.stdout and str(results / "h100") not in again.stdout
    assert again.stdout.count("done in an earlier call") >= 8
    assert "perfmodel profile --model" not in again.stdout  # nothing measured twice
    assert "check: the GPU tests (-m gpu" not in again.stdout and "passed in an earlier call" in again.stdout
    assert "calibrate first: done in an earlier call" in again.stdout and "starting Ray" not in again.stderr
    assert (second / "cpu-resnet50.json").exists()  # fitted again from the seeded profiles


def session() -> list[str]:
    """campaign.sh's SESSION, its parts' names (without their arguments' variables)."""
    script = SCRIPT.read_text()
    listed = re.search(r"SESSION=\((.*?)\)\n", script, re.S).group(1)
    return [re.sub(r" \$\w+$", "", n) for n in re.findall(r'"([^"]+)"', listed)]


def test_a_call_stops_cleanly_before_its_budget(tmp_path):
    done = campaign("dry-run", str(tmp_path / "out"), budget_s=1, timeout=120)
    assert done.returncode == 3
    assert "run the same step again to continue" in done.stdout


def test_gpu_steps_refuse_a_machine_without_what_they_need(tmp_path):
    # CUDA hidden: on a GPU machine this would otherwise start a real sweep (and the short budget stops
    # one, should hiding ever fail).
    done = campaign("resnet50", str(tmp_path / "out"), budget_s=30, timeout=120, CUDA_VISIBLE_DEVICES="")
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("campaign: ") and ("no CUDA GPU" in line or "lacks" in line)
    assert not list((tmp_path / "out").glob("*.csv"))


def test_a_gpu_of_another_type_than_the_earlier_calls_is_refused(tmp_path):
    seed = tmp_path / "results"
    seed.mkdir()
    (seed / "h100-resnet50.state").write_text("torch-fp16\n")
    done = campaign("efficientnet_b0", str(tmp_path / "out"), seed=seed, timeout=120, CAMPAIGN_HARDWARE="h200")
    assert done.returncode == 2, done.stderr
    assert f"but {seed} holds the files of h100: each GPU type has its own folder" in done.stderr
    assert not list((tmp_path / "out").iterdir())
    # The same for an OUT that another GPU type's call left on the machine.
    done = campaign("efficientnet_b0", str(seed), timeout=120, CAMPAIGN_HARDWARE="h200")
    assert done.returncode == 2 and "holds the files of h100" in done.stderr


def test_each_gpu_type_resumes_from_its_own_results_folder(tmp_path):
    """No CAMPAIGN_SEED: an H100's call reads results/h100 only (the H200's files stay out of it)."""
    results = tmp_path / "results"
    for hw in ("h100", "h200"):
        (results / hw).mkdir(parents=True)
        source = HERE / "results" / hw / f"{hw}-resnet50-torch-fp16.csv"
        (results / hw / source.name).write_bytes(source.read_bytes())
    out = tmp_path / "out"
    done = campaign("fit", str(out), timeout=300, CAMPAIGN_HARDWARE="h100", CAMPAIGN_RESULTS=str(results))
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["h100-resnet50-fit.txt", "h100-resnet50.json"]
    assert {g.key["hardware"] for g in Predictor.load(out / "h100-resnet50.json").groups} == {"h100"}


def test_usage_is_shown_for_a_wrong_step():
    done = campaign("resnet", "x", timeout=60)
    assert done.returncode == 2 and "campaign.sh check" in done.stderr


def test_validate_summary_table(tmp_path):
    results = tmp_path / "h100-validate.jsonl"
    line = {
        "name": "resnet50-224-60000-20s",
        "images": 60000,
        "batch_size": [512],
        "predicted_makespan_s": 18.5,
        "measured_makespan_s": 19.0,
        "error_rel": 0.027,
        "met_deadline": True,
    }
    results.write_text(json.dumps(line) + "\n")
    done = subprocess.run(
        [sys.executable, str(HERE / "validate.py"), "--summary", str(results)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert "resnet50-224-60000-20s" in done.stdout and "+2.7%" in done.stdout and "met" in done.stdout


def test_extrapolation_is_judged_per_input_size(tmp_path):
    """Batch 600 at 448 px lies past the 500 measured there, though 224 px was measured up to 2000."""
    extrapolated = load("validate").extrapolated
    key = {"hardware": "h100", "model": "resnet50", "backend": "torch", "precision": "fp16"}
    predictor = tmp_path / "p.json"
    predictor.write_text(json.dumps({"groups": [{"key": key, "ok_batches": [[224, 2000], [448, 500]]}]}))

    def plan(batch, size):
        return {
            "assignments": [
                {"hardware": "h100", "backend": "torch", "precision": "fp16", "input_size": size, "batch_size": batch}
            ]
        }

    assert not extrapolated(plan(1500, 224), predictor) and not extrapolated(plan(500, 448), predictor)
    assert extrapolated(plan(600, 448), predictor)
    assert extrapolated(plan(100, 320), predictor)  # a size never measured


def test_the_first_device_call_stays_under_its_64_mib():
    """The first call carries the working tree and the wheels (48 MiB): the tree must leave room for them."""
    wheels = load("wheels")
    try:
        tree = wheels.tree_bytes() / 2**20
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("no git here to list the tree that would travel")
    room = wheels.LIMIT_MIB - wheels.MARGIN_MIB - wheels.WHEELS_MIB
    assert tree <= room, (
        f"the tree is {tree:.1f} MiB: with the wheels' {wheels.WHEELS_MIB} MiB, the first device call would be over "
        f"{wheels.LIMIT_MIB - wheels.MARGIN_MIB} MiB (see experiments/008_gpu_campaign/README.md: move results "
        "out of the tree or slim the wheels)"
    )


def test_a_device_call_on_a_fresh_machine_without_wheels_is_refused(tmp_path):
    """device_call.sh: the next calls carry no wheels; on a fresh machine (none installed) it says so."""
    if list((ROOT / ".whl").glob("*.whl")):
        pytest.skip("this checkout carries wheels (.whl/): the call would install them")
    done = subprocess.run(
        ["bash", str(HERE / "device_call.sh"), "120"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=dict(os.environ, OUT=str(tmp_path), CAMPAIGN_SITE=str(tmp_path / "site")),
    )
    assert done.returncode == 2 and "a fresh machine; send the session's first call again" in done.stderr
    assert not (tmp_path / "session.log").exists()


def test_the_budget_fits_the_device_limits():
    """By the budget's own model: one session of 15 device-minutes, one machine start, two calls back to
    back, each under the device's 10 minutes a command, the second on the machine still warm."""
    budget = load("budget")
    assert budget.device_s() <= budget.DEVICE_S - budget.MARGIN_S
    assert budget.GAP_S < budget.WARM_S  # else the machine goes back between the calls and the second pays a start
    assert 0 < budget.second_call_s() < budget.CALL_BUDGET_S < budget.CALL_TIMEOUT_S - 30
    for hw in budget.GPU_TYPES:
        calls = [call for _, call in budget.schedule(hw)]
        assert set(calls) <= {"-", "1", "1-2", "2", "2-later", "1-later", "later"}
        assert calls[0] == "1"
        n, seconds = budget.calibration_first(hw)
        assert 0 < n <= budget.CAL_FIRST and seconds <= budget.CALIBRATION_S


def test_the_budget_is_fitted_on_both_gpu_types_measured_points():
    """Each point's time from the committed profiles: within a few seconds, and the sweeps' sums close."""
    budget = load("budget")
    for hw in budget.GPU_TYPES:
        df = budget.timed_points(hw, "resnet50")
        cost = budget.point_cost(hw, "resnet50")
        ok = df[(df["status"] == "ok") & df["warmup_ms"].isna()].dropna(subset=["took"])
        predicted = cost.a + (3 + ok["samples"] + cost.b) * ok["call_s"]
        assert abs(predicted.sum() - ok["took"].sum()) < 5 and (predicted - ok["took"]).abs().max() < 3
        assert 0.5 < cost.a < 3 and 2 < cost.b < 6 and 5 < cost.fresh_s < 30


def test_the_budget_counts_what_campaign_sh_runs():
    """The grids, the slots and the order: the same in both files (and in gpu_calibration.py)."""
    budget, script = load("budget"), SCRIPT.read_text()
    gpu = script[script.index("    DEVICE=cuda") : script.index("  fi\n}")]
    for model in ("resnet50", "efficientnet_b0"):
        assert f"SIZES_{model}={','.join(map(str, budget.SIZES))}" in gpu
    assert f"FRESH={','.join(map(str, budget.FRESH_AT))}" in gpu
    assert f"--max-time-per-point {budget.MAX_TIME_PER_POINT_S:g}" in gpu
    assert f"--max-time-short-calls {budget.SHORT_CALLS_TIME_S:g}" in gpu
    assert f"SEARCH_TOL={budget.SEARCH_TOLERANCE:g}" in gpu
    fast = re.search(r"FAST_SWEEP=\((.*?)\)\n", gpu, re.S).group(1)
    assert f"--input-sizes {','.join(map(str, budget.FAST_SIZES))}" in fast
    assert f"--batch-sizes {','.join(map(str, budget.FAST_BATCHES))}" in fast
    assert f'COMPILED="--input-sizes 224 --batch-sizes {",".join(map(str, budget.COMPILED_BATCHES))}' in script
    assert f"FIRST_CALLS={','.join(map(str, budget.FIRST_CALL_BATCHES))}" in script
    for listed, counted_options in (("FAST_OPTIONS", budget.FAST), ("LONG_OPTIONS", budget.LONG)):
        found = re.search(rf"{listed}=\((.*?)\)\n", gpu, re.S).group(1)
        options = re.findall(r'"(torch-[\w-]+):([^"]*)"', found)
        assert [name for name, _ in options] == [budget.fast_name(o) for o in counted_options]
        for (name, flags), counted in zip(options, counted_options):
            mode = counted.partition(":")[2]
            assert (f"--compile --compile-mode {mode}" in flags) if mode else ("--compile" not in flags), name
            assert ("--cuda-graphs" in flags) == ("cuda-graphs" in counted), name
            assert ("--fresh-warmup-at $FIRST_CALLS" in flags) == (counted == "first-calls"), name
    for name, value in (
        ("FAST_OPTION_S", budget.FAST_OPTION_S),
        ("LONG_OPTION_S", budget.LONG_OPTION_S),
        ("BARE_S", budget.BARE_S),
        ("CALIBRATION_S", budget.CALIBRATION_S),
        ("LOADTIME_S", budget.LOADTIME_S),
        ("GPU_TESTS_S", budget.GPU_TESTS_S),
    ):
        assert f'{name}="${{CAMPAIGN_{name}:-{value:.0f}}}"' in script, name
    assert f"CAL_FIRST={budget.CAL_FIRST}" in gpu
    assert f'BUDGET_S="${{CAMPAIGN_BUDGET_S:-{budget.CALL_BUDGET_S:.0f}}}"' in script
    assert session() == [p.name for p in budget.parts("h100")]
    calibration = load_011("gpu_calibration")
    assert calibration.DEADLINES == budget.DEADLINES and calibration.RUN_OVERHEAD_S == budget.RUN_OVERHEAD_S
    per_deadline = len(calibration.SIZES) * len(calibration.MODES) * len(calibration.PROBABILITIES)
    assert per_deadline == budget.CASES_PER_DEADLINE


FAKE = """
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
faked = args[:1] and args[0].endswith(("gpu_calibration.py", "bare_check.py"))
faked = faked or (args[:3] == ["-m", "perfmodel", "profile"] and "--help" not in args)
if not faked:  # everything else is the real Python's
    os.execv(sys.executable, [sys.executable, *args])
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(" ".join(args) + "\\n")
if args[0].endswith("gpu_calibration.py") and "--table" not in args:
    out = Path(args[args.index("--out") + 1])
    executed = out.read_text().count('"executed": true') if out.exists() else 0
    if "--until-executed" in args:  # the first slot: FAKE_ROWS plans executed, then its time ran out
        more = min(int(os.environ["FAKE_ROWS"]), int(args[args.index("--until-executed") + 1]) - executed)
        with out.open("a") as f:
            f.writelines(json.dumps({"row": {"executed": True}}) + "\\n" for _ in range(more))
    sys.exit(3)  # cases left (the rest: as if the call's time ran out before a plan)
"""


def faked_gpu(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """campaign.sh on an H100 whose measuring commands (profiles, the bare loop, the calibration) are faked:
    each is logged, and the calibration writes FAKE_ROWS executed plans in a first slot. The environment
    and the log."""
    fake, log = tmp_path / "fake.py", tmp_path / "commands.log"
    fake.write_text(FAKE)
    python = tmp_path / "python"
    python.write_text(f'#!/usr/bin/env bash\nexec "{sys.executable}" "{fake}" "$@"\n')
    python.chmod(0o755)
    results = tmp_path / "results"
    (results / "h100").mkdir(parents=True)
    env = dict(PYTHON=str(python), FAKE_LOG=str(log), CAMPAIGN_HARDWARE="h100", CAMPAIGN_RESULTS=str(results))
    return env, log


def ran(log: Path) -> list[str]:
    """The faked commands run since the last look, and the log emptied."""
    lines = log.read_text().splitlines() if log.exists() else []
    log.unlink(missing_ok=True)
    return lines


def test_the_calibrations_first_slot_is_done_at_20_plans_and_spent_per_machine(tmp_path):
    """A first slot stopped by its 300 s with 15 of 20 plans executed leaves no state: this machine's next
    call goes on with the session (the marker), the next session's slot (a new machine, seeded from the
    files, never from the marker) goes on until 20 and then marks it done."""
    env, log = faked_gpu(tmp_path)
    machine = tmp_path / "camp"
    done = campaign("calibrate", str(machine), timeout=120, FAKE_ROWS="15", **env)
    assert done.returncode == 3, done.stderr[-2000:]  # the rest's cases left for the next call
    first, rest = [c for c in ran(log) if "--table" not in c]
    assert "--budget 300 --until-executed 20" in first and "--until-executed" not in rest
    assert not (machine / "h100-calibrate.state").exists()  # 15 of 20: not done
    assert "15 of 20 plans executed in its 300 s; the next session's first slot goes on" in done.stdout

    again = campaign("calibrate", str(machine), timeout=120, FAKE_ROWS="15", **env)  # the session's next call
    assert again.returncode == 3
    (call,) = [c for c in ran(log) if "--table" not in c]
    assert "--until-executed" not in call  # the rest only: the first slot is not run again here
    assert "its 300 s were spent on this machine (15 of 20 plans executed)" in again.stdout

    later = tmp_path / "later"  # the next session: a new machine, the committed files as its seed
    done = campaign("calibrate", str(later), seed=machine, timeout=120, FAKE_ROWS="15", **env)
    assert done.returncode == 3
    assert not list(later.glob("*.spent")) and "--until-executed 20" in ran(log)[0]
    assert (later / "h100-calibration.jsonl").read_text().count('"executed": true') == 20
    assert (later / "h100-calibrate.state").read_text().split() == ["first"]


def test_the_fast_options_run_in_their_order_and_a_long_one_waits_for_a_call_with_its_cap(tmp_path):
    """On a GPU: the bare loop with its compile loops, issue 39's options in campaign.sh's order, and
    max-autotune only in a call that has its 300 s left (else the next part runs)."""
    env, log = faked_gpu(tmp_path)
    machine = tmp_path / "camp"
    done = campaign("fast", str(machine), budget_s=200, timeout=180, **env)
    assert done.returncode == 0, done.stderr[-2000:]
    commands = ran(log)
    assert commands[0].endswith("--graphs --compile") and "bare_check.py --seconds 100" in commands[0]
    outs = [re.search(r"--out \S+/h100-(\S+)\.csv", c).group(1) for c in commands[1:]]
    budget = load("budget")
    names = [budget.fast_name(o) for o in budget.FAST]
    assert outs == [f"resnet50-{n}" for n in names] + [f"efficientnet_b0-{n}" for n in names]
    assert "torch-compile-max-autotune-fp16: needs its 300 s, this call has" in done.stdout
    assert (machine / "h100-fast.state").read_text().split() == ["bare", "bare-compile"]

    again = campaign("fast", str(machine), budget_s=540, timeout=180, **env)  # a call with the time
    assert again.returncode == 0, again.stderr[-2000:]
    (command,) = ran(log)
    assert "--compile-mode max-autotune" in command and "(at most 300 s)" in again.stdout
    assert "torch-compile-max-autotune-fp16" in (machine / "h100-resnet50.state").read_text()


@pytest.mark.slow
def test_the_bare_loops_compile_rows_meet_the_profiles_in_options_vs_bare(tmp_path):
    """bare_check.py's code path on the CPU (ResNet-18, Dynamo's eager backend: no timing meaning), then its
    compiled rows held against a constructed profile's by options_vs_bare.py: medians and first calls."""
    bare = tmp_path / "cpu-bare.json"
    args = [sys.executable, str(HERE / "bare_check.py"), "--out", str(bare), "--device", "cpu", "--graphs", "--compile"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(bare.read_text())["rows"]
    assert [(r["label"], r["batch"]) for r in rows] == [
        ("eager-fp32", 1),
        ("eager-fp32", 2),
        ("channels-last-fp32", 1),
        ("channels-last-fp32", 2),
        ("channels-last-compile-fp32", 2),
        ("channels-last-compile-reduce-overhead-fp32", 1),
    ]  # no CUDA graphs without CUDA
    assert all(r["median_ms"] > 0 and r["first_ms"] > 0 for r in rows)
    assert [r.get("mode") for r in rows[4:]] == ["default", "reduce-overhead"]
    compiled = {r["label"]: r for r in rows[4:]}
    profile = pd.DataFrame(
        [
            dict(
                backend=f"torch-{label.removesuffix('-fp32')}",
                precision="fp32",
                input_size=32,
                batch_size=r["batch"],
                latency_ms=2 * r["median_ms"],
                throughput_ips=r["batch"] / (2 * r["median_ms"]) * 1e3,
                warmup_ms=3 * r["first_ms"],
                status="ok",
            )
            for label, r in compiled.items()
        ]
    )
    profile.to_csv(tmp_path / "cpu-compile.csv", index=False)
    compare = [sys.executable, str(HERE / "options_vs_bare.py"), "compare", "--bare", str(bare)]
    compare += ["--profile", str(tmp_path / "cpu-compile.csv"), "--out", str(tmp_path / "options.json")]
    done = subprocess.run(compare, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    options = json.loads((tmp_path / "options.json").read_text())["options"]
    for label, r in compiled.items():
        (pair,) = options[f"torch-{label.removesuffix('-fp32')} fp32"]["against_bare"]
        assert pair["ratio"] == pytest.approx(2.0) and pair["bare_first_ms"] == r["first_ms"]
        assert pair["profile_first_ms"] == pytest.approx(3 * r["first_ms"])
    assert done.stdout.count("first call profile") == 2


def load_011(name: str):
    spec = importlib.util.spec_from_file_location(f"calibration_{name}", CALIBRATION_DIR / f"{name}.py")
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tiny_cpu_profile(path: Path) -> None:
    """A made-up profile of the tiny model on this CPU (a few ms a batch): plans of a few seconds."""
    rows = [
        dict(
            hardware="cpu",
            model="tiny",
            backend="torch",
            precision="fp32",
            input_size=32,
            batch_size=b,
            latency_ms=1.0 + 0.5 * b,
            latency_p99_ms=1.5 + 0.6 * b,
            warmup_ms=50.0 + b,
            memory_mb=100.0 + b,
            status="ok",
            load_ms=300.0,
        )
        for b in (1, 2, 4, 8, 16)
    ]
    pd.DataFrame(rows).to_csv(path, index=False)


@pytest.mark.slow
def test_the_gpu_calibration_runs_end_to_end_on_the_cpu(tmp_path):
    """experiments/011's gpu_calibration.py with the tiny model: plans made, executed on one local Ray,
    appended; a first slot stops at its count (exit 3) and the next call does the rest, nothing twice."""
    profile, out = tmp_path / "cpu-tiny.csv", tmp_path / "cpu-calibration.jsonl"
    tiny_cpu_profile(profile)
    script = CALIBRATION_DIR / "gpu_calibration.py"
    args = [sys.executable, str(script), "--hardware", "cpu", "--device", "cpu", "--cpus", "2", "--profile"]
    args += [str(profile), "--out", str(out), "--sizes", "32", "--deadlines", "3", "--probabilities", "0.5"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    first = subprocess.run([*args, "--until-executed", "1"], capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 3, first.stderr[-3000:]
    rows = [json.loads(x)["row"] for x in out.read_text().splitlines()]
    assert len(rows) == 1 and rows[0]["executed"] and rows[0]["measured_s"] > 0
    rest = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600)
    assert rest.returncode == 0, rest.stderr[-3000:]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(x["row"]["mode"] for x in lines) == ["relaxed", "soft"]
    assert all(x["row"]["executed"] and x["run"]["workers"][0]["timeline"]["batches_timed"] > 0 for x in lines)
    assert "batches" not in lines[0]["run"]["workers"][0]["timeline"]  # the per-batch times stay out of the file
    soft = next(x["row"] for x in lines if x["row"]["mode"] == "soft")
    assert soft["images"] == int(0.9 * soft["c1"])
    table = subprocess.run([sys.executable, str(script), "--table", str(out)], capture_output=True, text=True)
    assert "2 plans executed, 0 refused" in table.stdout and "| 0.5 | all | 2 |" in table.stdout
