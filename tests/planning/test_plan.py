"""perfmodel.planning.batch and `perfmodel plan`: profiles and predictors in, plans and clear errors out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from perfmodel.cli import main
from perfmodel.errors import InfeasibleError, InputError
from perfmodel.fixed_costs import default_samples
from perfmodel.planning.batch import NoPlanError, make_plan
from perfmodel.planning.batch_text import summary

BATCHES = (1, 2, 4, 8)


def profile_rows(hardware="cpu", model="tiny", speed=1.0, sizes=(64, 224), load_ms=50.0):
    """Synthetic points: latency = (2 ms + 1 ms x b x (s/64)^2) / speed; p99 = 1.5 x median."""
    rows = []
    for s in sizes:
        for b in BATCHES:
            latency = (2.0 + 1.0 * b * (s / 64) ** 2) / speed
            rows.append(
                dict(
                    hardware=hardware,
                    model=model,
                    backend="torch",
                    precision="fp32",
                    input_size=s,
                    batch_size=b,
                    latency_ms=latency,
                    latency_p99_ms=1.5 * latency,
                    warmup_ms=3 * latency + 20,
                    memory_mb=100.0 * b,
                    status="ok",
                    load_ms=load_ms,
                )
            )
        rows.append(
            dict(
                hardware=hardware,
                model=model,
                backend="torch",
                precision="fp32",
                input_size=s,
                batch_size=16,
                latency_ms=np.nan,
                latency_p99_ms=np.nan,
                warmup_ms=np.nan,
                memory_mb=np.nan,
                status="oom",
                load_ms=load_ms,
            )
        )
    return rows


@pytest.fixture
def profile(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame(profile_rows() + profile_rows("fast", speed=4.0, load_ms=500.0)).to_csv(path, index=False)
    return str(path)


def test_plan_from_a_profile_uses_measured_batches_and_load_time(profile):
    plan = make_plan(10_000, "60s", profiles=[profile], input_size=64, pool={"cpu": 100})
    assert plan.status == "optimal" and plan.total_images == 10_000
    (a,) = plan.assignments
    assert a.batch_size in BATCHES and a.label == "torch fp32"
    assert a.load_s == pytest.approx(0.05)  # the profile's load_ms
    assert plan.makespan_s <= 60


def test_p99_plans_on_the_slower_latency(profile):
    p50 = make_plan(200_000, 60, profiles=[profile], input_size=224, pool={"cpu": 1000}, confidence="none")
    p99 = make_plan(200_000, 60, profiles=[profile], input_size=224, pool={"cpu": 1000}, use="p99")
    assert p99.total_gpus >= p50.total_gpus
    b = p99.assignments[0].batch_size
    assert p99.assignments[0].latency_s == pytest.approx(1.5 * (2.0 + b * (224 / 64) ** 2) / 1000)


def test_without_a_pool_every_type_is_available_and_the_fewest_win(profile):
    plan = make_plan(500_000, 60, profiles=[profile], input_size=64)
    assert set(plan.gpus_by_type) == {"fast"}  # 4x faster, so fewer GPUs


def test_mix_of_sizes_and_margin(profile):
    plan = make_plan(None, "2m", profiles=[profile], mix={64: 30_000, 224: 10_000}, pool={"cpu": 50}, margin="10%")
    assert plan.images_planned == {64: 30_000, 224: 10_000}
    assert plan.makespan_s <= 120 * 0.9
    assert "(margin 10%)" in summary(plan)


def test_cost_objective_needs_prices_and_bills_the_window(profile):
    with pytest.raises(InputError, match="price"):
        make_plan(10_000, 60, profiles=[profile], objective="cost")
    plan = make_plan(
        300_000, 60, profiles=[profile], input_size=64, objective="cost", prices={"cpu": 1.0, "fast": 10.0}
    )
    assert plan.cost == pytest.approx(
        sum(n * {"cpu": 1.0, "fast": 10.0}[k] for k, n in plan.gpus_by_type.items()) * 60 / 3600
    )


def test_infeasible_says_why_and_what_would_help(profile):
    with pytest.raises(NoPlanError) as raised:
        make_plan(1_000_000, 10, profiles=[profile], input_size=224, pool={"cpu": 2})
    error = raised.value
    assert isinstance(error, InfeasibleError) and error.exit_code == 3
    message = str(error)
    assert "no more than" in message and "more cpu" in message and "allow a deadline of" in message
    assert error.diagnosis.extra_gpus["cpu"] > 0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(pool={"h100": 4}), "no profile or predictor for h100"),
        (dict(input_size=512), "nothing measured at input size 512"),
        (dict(model="resnet50"), "no resnet50"),
        (dict(images=None), "soft mode needs `images`"),
        (dict(mode="relaxed", images=None), "give `pool`"),
        (dict(mix={64: 5, 224: 5}, input_size=64), "either `input_size` or `mix`"),
        (dict(deadline="soon"), "not a duration"),
        (dict(prices={"h100": 1.0}), "`prices` names h100"),
    ],
)
def test_bad_requests_are_one_clear_input_error(profile, kwargs, match):
    args = dict(images=1000, deadline=60, profiles=[profile])
    args.update(kwargs)
    with pytest.raises(InputError, match=match):
        make_plan(**args)


def test_several_models_need_a_choice(tmp_path):
    path = tmp_path / "two.csv"
    pd.DataFrame(profile_rows(model="a") + profile_rows(model="b")).to_csv(path, index=False)
    with pytest.raises(InputError, match="several models"):
        make_plan(100, 60, profiles=[str(path)], input_size=64)
    assert make_plan(100, 60, profiles=[str(path)], input_size=64, model="b").total_images == 100


class FakeGroup:
    """The agreed GroupPredictor interface, with the synthetic curve of profile_rows (speed 1)."""

    hardware, model, backend, precision = "gpu", "tiny", "torch", "fp16"
    input_sizes = (64, 224)
    batch_range = (1, 64)
    report: dict = {}

    def latency_ms(self, b, s):
        return 2.0 + 1.0 * np.asarray(b) * (np.asarray(s) / 64) ** 2

    def latency_p99_ms(self, b, s):
        return 1.5 * self.latency_ms(b, s)

    def warmup_ms(self, b, s):
        return 3 * self.latency_ms(b, s) + 20

    def memory_mb(self, b, s):
        return 100.0 * np.asarray(b)

    def throughput_ips(self, b, s):
        return np.asarray(b) / self.latency_ms(b, s) * 1000

    def max_batch(self, s, memory_budget_mb=None):
        return np.asarray(64 * 64 * 64 // (np.asarray(s) ** 2) * 16)


class FakePredictor:
    groups = (FakeGroup(),)

    def select(self, hardware=None, model=None, backend=None, precision=None):
        return tuple(
            g
            for g in self.groups
            if model in (None, g.model)
            and backend in (None, g.backend)
            and precision in (None, g.precision)
            and hardware in (None, g.hardware)
        )


def test_plan_from_a_predictor_uses_every_batch_size_up_to_max_batch():
    plan = make_plan(1_000_000, 60, predictors=[FakePredictor()], input_size=64, pool={"gpu": 100})
    (a,) = plan.assignments[:1]
    assert a.label == "torch fp16 (predicted)"
    assert 1 <= a.batch_size <= 1024 and a.batch_size not in BATCHES  # not only the powers of two
    assert plan.total_images == 1_000_000


def test_predictor_extrapolation_is_warned_about():
    with pytest.warns(Warning, match="extrapolates"):
        make_plan(1000, 60, predictors=[FakePredictor()], input_size=512)


# ---- the command line -------------------------------------------------------------------------


def test_cli_json_has_the_documented_keys(capsys, profile):
    code, out, _ = run_cli(
        capsys,
        "plan",
        "--images",
        "100k",
        "--deadline",
        "1.5m",
        "--profile",
        profile,
        "--input-size",
        "64",
        "--pool",
        "cpu=64",
        "--json",
    )
    assert code == 0
    d = json.loads(out)
    for key in (
        "status",
        "mode",
        "images",
        "deadline_s",
        "total_gpus",
        "images_planned",
        "makespan_s",
        "solve_time_s",
        "assignments",
    ):
        assert key in d
    assert d["images"] == 100_000 and d["deadline_s"] == 90
    for key in ("hardware", "input_size", "batch_size", "batches", "images", "finish_s", "count"):
        assert key in d["assignments"][0]


def test_cli_readable_output_starts_with_a_summary(capsys, profile):
    code, out, err = run_cli(
        capsys,
        "plan",
        "--mode",
        "relaxed",
        "--deadline",
        "60s",
        "--pool",
        "cpu=8",
        "--profile",
        profile,
        "--input-size",
        "64",
    )
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("8 x cpu, ") and "images (as many as fit)" in first and "optimal" in first
    assert "batch" in out and "finish s" in out
    assert "HiGHS" in err


def test_cli_infeasible_exits_3_and_explains(capsys, profile):
    code, out, err = run_cli(
        capsys, "plan", "--images", "10M", "--deadline", "10s", "--profile", profile, "--pool", "cpu=1"
    )
    assert code == 3
    assert err.startswith("error: no plan meets the deadline") and "To make it feasible" in err
    code, out, err = run_cli(
        capsys, "plan", "--images", "10M", "--deadline", "10s", "--profile", profile, "--pool", "cpu=1", "--json"
    )
    assert code == 3 and json.loads(out)["status"] == "infeasible"


@pytest.mark.parametrize(
    "args, match",
    [
        (["--images", "1.5m", "--deadline", "60s"], "use M for millions"),
        (["--images", "100", "--deadline", "5x"], "not a duration"),
        (["--images", "100", "--deadline", "60s", "--margin", "5"], "ambiguous"),
        (["--images", "100", "--deadline", "60s", "--pool", "cpu"], "KEY=VALUE"),
        (["--images", "100", "--deadline", "60s", "--max-batches", "0"], "max-batches"),
    ],
)
def test_cli_malformed_values_give_one_line_and_exit_2(capsys, profile, args, match):
    code, out, err = run_cli(capsys, "plan", *args, "--profile", profile)
    assert code == 2 and match in err and len(err.strip().splitlines()) == 1 and not out


def test_cli_help_documents_exit_codes(capsys):
    assert main(["plan", "--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes" in out and "3    no plan meets the deadline" in out


def test_cli_uses_the_shipped_profiles_by_default(capsys, tmp_path, monkeypatch):
    (tmp_path / "profiles").mkdir()
    pd.DataFrame(profile_rows(model="resnet50")).to_csv(tmp_path / "profiles" / "cpu-resnet50-torch.csv", index=False)
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "plan", "--images", "100000", "--deadline", "60s")
    assert code == 0 and "x cpu, 100,000 images by" in out


def test_plan_json_is_what_perfmodel_report_reads(capsys, profile, tmp_path):
    from perfmodel.report.inputs import read_plan

    for images, pool, status in (("1000", "cpu=4", "optimal"), ("10M", "cpu=1", "infeasible")):
        _, out, _ = run_cli(
            capsys, "plan", "--images", images, "--pool", pool, "--deadline", "10s", "--profile", profile, "--json"
        )
        path = tmp_path / f"{status}.json"
        path.write_text(out)
        assert read_plan(path)["status"] == status


# ---- where the numbers come from, how far predictors go, and their error as a margin (issue 15) ---------


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A predictor fitted on the synthetic profile (load_ms 50) and the profile's path."""
    from perfmodel.fitting import fit

    folder = tmp_path_factory.mktemp("fitted")
    path = folder / "p.csv"
    pd.DataFrame(profile_rows()).to_csv(path, index=False)
    predictor = fit(str(path), families=("roofline",))
    predictor.save(folder / "p.json")
    return str(path), str(folder / "p.json")


def test_a_plan_from_a_predictor_uses_its_load_time_and_agrees_with_the_profile(fitted):
    profile, predictor = fitted
    from_profile = make_plan(100_000, 60, profiles=[profile], input_size=64)
    from_predictor = make_plan(100_000, 60, predictors=[predictor], input_size=64)
    assert from_predictor.assignments[0].load_s == pytest.approx(from_profile.assignments[0].load_s) == 0.05
    assert abs(from_predictor.total_gpus - from_profile.total_gpus) <= 1


def test_predictors_stay_within_twice_the_measured_batch_unless_told():
    plan = make_plan(1_000_000, 60, predictors=[FakePredictor()], input_size=64, pool={"gpu": 100})
    assert max(a.batch_size for a in plan.assignments) <= 2 * FakeGroup.batch_range[1]
    assert plan.annotations.basis["extrapolation"]["allowed"] is False
    far = make_plan(1_000_000, 60, predictors=[FakePredictor()], input_size=64, pool={"gpu": 100}, extrapolate=True)
    assert max(a.batch_size for a in far.assignments) > 2 * FakeGroup.batch_range[1]
    d = far.to_dict()
    assert d["extrapolation"]["allowed"] is True and d["data_by_type"]["gpu"]["beyond_measured"]
    from perfmodel.planning.batch_text import notes

    assert any("`extrapolate`" in line for line in notes(d)) and any("beyond the largest" in line for line in notes(d))


def test_a_profile_without_warm_up_is_planned_and_says_so(tmp_path, capsys):
    path = tmp_path / "published.csv"
    rows = [{**r, "warmup_ms": np.nan, "source": "a published table, v1"} for r in profile_rows(hardware="x100")]
    pd.DataFrame(rows).to_csv(path, index=False)
    with pytest.warns(Warning, match="no warm-up"):
        plan = make_plan(10_000, 60, profiles=[str(path)], input_size=64)
    a = plan.assignments[0]
    # a GPU's first batch: a steady one plus the first call and the load this project measured on GPUs, said
    guess = default_samples("x100", "first call")
    assert a.warmup_s == pytest.approx(a.latency_s + guess.median_s)
    d = plan.to_dict()
    assert d["warmup_measured"] is False
    assert d["data_by_type"]["x100"]["numbers_from"] == {"torch fp32": ["a published table, v1"]}
    fixed = d["data_by_type"]["x100"]["fixed_costs"]
    assert fixed["first_call_excess"]["torch fp32"]["default"]["for"] == "the value and its spread"
    assert fixed["load"]["samples"] == 1 and fixed["load"]["default"]["for"] == "the spread"  # one load_ms
    code, out, err = run_cli(
        capsys, "plan", "--images", "10000", "--deadline", "60s", "--profile", str(path), "--input-size", "64"
    )
    assert code == 0 and "no warm-up measured: the first batch is timed as a steady one plus a first call" in err
    assert (
        "load per x100 (profile load_ms): 0.05 s (1 process; sd 0.015 s, a guess: the spread on this project's GPUs"
        in out
    )
    assert f"first call: {guess.median_s:.3g} s beyond a steady batch, sd" in out and "a guess, none measured" in out
    assert "x100 torch fp32: published numbers from a published table, v1" in err


def test_warm_up_measured_at_a_few_batch_sizes_is_interpolated_for_the_others(tmp_path):
    """A profile with --fresh-warmup-at measures warm-up at a few batch sizes only: the others get their
    latency plus the excess interpolated in batch size, not their bare latency (which would plan the
    first batch as a steady one and finish early on paper)."""
    rows = profile_rows(sizes=(64,))
    for r in rows:
        if r["batch_size"] not in (BATCHES[0], BATCHES[-1]):
            r["warmup_ms"] = np.nan
    path = tmp_path / "partial.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    with pytest.warns(Warning, match="interpolated"):
        plan = make_plan(10_000, 60, profiles=[str(path)], input_size=64)
    a = plan.assignments[0]
    latency_ms = 2.0 + 1.0 * a.batch_size
    excess_ms = np.interp(
        a.batch_size, [BATCHES[0], BATCHES[-1]], [2 * (2.0 + BATCHES[0]) + 20, 2 * (2.0 + BATCHES[-1]) + 20]
    )
    assert a.warmup_s * 1000 == pytest.approx(latency_ms + excess_ms)
    assert plan.to_dict()["warmup_measured"] is True


def test_warm_up_warnings_speak_only_of_the_options_a_plan_uses(tmp_path, recwarn):
    """Published GPU rows without warm-up said "N profile point(s) have no warm-up time" under every plan,
    --pool cpu=2 too (and the H200 profile's rows under a plan on an A100)."""
    gpu = [{**r, "warmup_ms": np.nan} for r in profile_rows(hardware="x100")]
    path = tmp_path / "both.csv"
    pd.DataFrame(profile_rows() + gpu).to_csv(path, index=False)
    make_plan(1_000, 60, profiles=[str(path)], input_size=64, pool={"cpu": 1})
    assert not [w for w in recwarn if "warm-up" in str(w.message)]
    with pytest.warns(Warning, match=r"^\d+ profile point\(s\) have no warm-up time; planning with their latency"):
        make_plan(1_000, 60, profiles=[str(path)], input_size=64, pool={"x100": 1})


def test_a_predictor_without_a_warm_up_model_is_named_only_under_a_plan_that_uses_it(tmp_path, recwarn):
    from perfmodel.fitting import fit

    gpu = tmp_path / "gpu.csv"
    pd.DataFrame([{**r, "warmup_ms": np.nan} for r in profile_rows(hardware="x100")]).to_csv(gpu, index=False)
    fit(str(gpu), families=("roofline",)).save(tmp_path / "gpu.json")
    cpu = tmp_path / "cpu.csv"
    pd.DataFrame(profile_rows()).to_csv(cpu, index=False)
    fit(str(cpu), families=("roofline",)).save(tmp_path / "cpu.json")
    predictors = [str(tmp_path / "gpu.json"), str(tmp_path / "cpu.json")]
    make_plan(1_000, 60, predictors=predictors, input_size=64, pool={"cpu": 1})
    assert not [w for w in recwarn if "warm-up model" in str(w.message)]
    with pytest.warns(Warning, match=r"1 predictor group\(s\) have no warm-up model \(x100 torch fp32\)"):
        make_plan(1_000, 60, predictors=predictors, input_size=64, pool={"x100": 1})


def test_the_shipped_data_plans_on_published_gpus(capsys):
    from perfmodel import shipped

    profiles, predictors = shipped.sources()
    assert not predictors and any("reference" in str(p) for p in profiles) and any("cpu-" in str(p) for p in profiles)
    code, out, err = run_cli(capsys, "plan", "--images", "100000", "--deadline", "60s", "--pool", "a100=8", "--json")
    assert code == 0
    d = json.loads(out)
    assert set(d["gpus_by_type"]) == {"a100"} and d["warmup_measured"] is False
    sources = [s for option in d["data_by_type"]["a100"]["numbers_from"].values() for s in option]
    assert all("github.com/NVIDIA/DeepLearningExamples/blob/" in s for s in sources)
    code, out, err = run_cli(
        capsys, "plan", "--images", "100", "--deadline", "60s", "--pool", "cpu=2", "--input-size", "64"
    )
    assert code == 0 and "x cpu" in out and "measured numbers from profile" in err


@pytest.mark.parametrize("alongside, warned", [(None, True), (0, True), (1, False), (3, False)])
def test_a_plan_of_cpu_workers_says_when_they_were_measured_with_fewer_running(tmp_path, capsys, alongside, warned):
    path = tmp_path / "p.csv"
    rows = profile_rows() + profile_rows("x100", speed=4.0)
    if alongside is not None:
        rows = [{**r, "alongside": alongside if r["hardware"] == "cpu" else 0} for r in rows]
    pd.DataFrame(rows).to_csv(path, index=False)
    d = make_plan(80_000, "60s", profiles=[str(path)], input_size=64, pool={"cpu": 2}, confidence="none").to_dict()
    assert d["total_gpus"] == 2
    expected = {"planned": 2, "measured_with": 1} if warned else None
    assert d["data_by_type"]["cpu"].get("workers_when_measured") == expected
    code, _, err = run_cli(
        capsys,
        "plan",
        "--images",
        "80000",
        "--deadline",
        "60s",
        "--profile",
        str(path),
        "--input-size",
        "64",
        "--pool",
        "cpu=2",
        "--confidence",
        "none",
    )
    assert code == 0 and ("`perfmodel profile --alongside 1`" in err) == warned
    # GPU workers each have a GPU of their own: never said of them, however many are planned.
    d = make_plan(500_000, "60s", profiles=[str(path)], input_size=64, pool={"x100": 8}).to_dict()
    assert d["total_gpus"] > 1 and "workers_when_measured" not in d["data_by_type"]["x100"]


@pytest.mark.parametrize(
    "ci, margin, noted",
    [(None, None, False), (0.04, None, False), (0.20, None, True), (0.20, "25%", False), (float("nan"), None, False)],
)
def test_a_plan_says_when_a_planned_batch_time_was_measured_loosely(tmp_path, capsys, ci, margin, noted):
    path = tmp_path / "p.csv"
    rows = profile_rows(sizes=(64,))
    if ci is not None:
        rows = [{**r, "latency_ci_rel": ci} for r in rows]
    pd.DataFrame(rows).to_csv(path, index=False)
    d = make_plan(2_000, "60s", profiles=[str(path)], input_size=64, margin=margin).to_dict()
    loose = d["data_by_type"]["cpu"]["loosely_measured"]
    a = d["assignments"][0]
    assert loose == (
        [
            {
                "option": a["option"],
                "input_size": 64,
                "batch_size": a["batch_size"],
                "median_ci_rel": ci,
                "margin": d["margin"],
                "counted": margin is None,  # the default plans for a probability, which counts the interval
            }
        ]
        if noted
        else []
    )
    code, _, err = run_cli(
        capsys,
        "plan",
        "--images",
        "2000",
        "--deadline",
        "60s",
        "--profile",
        str(path),
        "--input-size",
        "64",
        *(["--margin", margin] if margin else []),
    )
    assert code == 0 and ("within +-20% only" in err) == noted
    assert ("the deadline probability counts it" in err) == (noted and margin is None)


@pytest.mark.integration  # a fresh interpreter: what a plan imports
def test_a_plan_does_not_import_scipy_stats(tmp_path):
    """Pyomo imported after scipy imports scipy.stats too (a second of every plan's wall time): the plan's
    distribution imports scipy.special only after the solver has loaded Pyomo."""
    import subprocess
    import sys

    code = (
        "import sys; from perfmodel.cli import main\n"
        "code = main(['plan', '--images', '1000', '--deadline', '60s', '--json'])\n"
        "print(code, 'scipy.stats' in sys.modules, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.stderr.strip().splitlines()[-1] == "0 False", done.stderr[-2000:]
