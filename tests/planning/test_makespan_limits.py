"""The makespan model at the edges of what a profile may hold (fuzzing round 3, ../shared/reliability/
fuzz3-findings.md Part B: D2 wide spreads, D3 an impossible mean, T1 a drift without correlation, U11 half a
drift). The profiles are built here from the findings' descriptions."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import refused, run_cli
from test_plan import profile_rows

from perfmodel.errors import ProfileFormatError
from perfmodel.planning.drift import CPU_DEFAULT, Drift
from perfmodel.planning.makespan import Makespan, Shared, Workers
from perfmodel.schema import validate_profile


def _one_worker(sd: float) -> Makespan:
    """One worker of 100 s (100 batches of 1 s, no load), its whole compute under one shared normal error."""
    g = Workers(count=1, load_s=0.0, warmup_s=1.0, batches=99, batch_mean_s=1.0, shared=(("e", sd),))
    return Makespan((g,), {"e": Shared("profile")})


def _profile(tmp_path, name: str, hardware: str = "cpu", **columns) -> str:
    rows = [{**r, **columns} for r in profile_rows(hardware=hardware, sizes=(64,))]
    path = tmp_path / f"{name}.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def _plan(capsys, path: str, *extra) -> dict:
    code, out, err = run_cli(
        capsys,
        "plan",
        "--images",
        "5000",
        "--deadline",
        "60s",
        "--profile",
        path,
        "--input-size",
        "64",
        "--json",
        *extra,
    )
    assert code == 0, err
    return json.loads(out)


# --- D2: a wide shared error ------------------------------------------------------------------------------


def test_a_wide_shared_error_never_finishes_in_no_time_and_its_quantiles_go_below_half_the_work():
    """sd 0.51 (a median known within +-100%): the factor 1 + sd e was clamped at 1e-9 where negative, so
    P(100 s of work done in 1 s) was 0.026, and p5 never went below load + compute / 2 = 50 s."""
    wide = _one_worker(0.51)
    assert wide.probability(1.0) < 1e-9
    q = wide.quantiles()
    lognormal_p5 = 100 * math.exp(-1.6449 * math.sqrt(math.log1p(0.51**2)))  # 45 s
    assert q[0.05] < 50 and q[0.05] == pytest.approx(lognormal_p5, rel=0.15)
    assert q[0.05] < q[0.5] < q[0.95]


def test_a_worker_with_no_spread_of_its_own_has_its_median_at_the_plans_finish():
    """sd 0.1: the median was 96.8 s, one Gauss-Hermite node off (24 nodes, none at 0)."""
    assert _one_worker(0.1).quantiles()[0.5] == pytest.approx(100.0, rel=1e-6)


def test_the_widest_spreads_a_profile_may_hold_give_ordered_finite_quantiles_that_drawing_agrees_with():
    """The schema's limits (latency_ci_rel 10^6, drift_rel_sd 10) are within what the lognormal factors carry:
    no factor at or below 0, no overflow (the two ways agree where spreads are usual: the hypothesis test of
    test_deadline_probability.py)."""
    g = Workers(
        count=2, load_s=1.0, warmup_s=1.0, batches=20, batch_mean_s=0.5, batch_sd_s=0.1, drift=Drift(10.0, 1.0, "t")
    )
    m = Makespan((g,), {})
    widest = _one_worker(1e6 / 1.96)
    for model in (m, widest):
        q = list(model.quantiles().values())
        assert all(math.isfinite(x) and x >= 0 for x in q) and q == sorted(q)
        assert 0 <= model.probability(q[2]) <= 1 and model.simulate(q[2], draws=500)["probability"] > 0


@pytest.mark.parametrize(
    ("name", "columns"),
    [
        ("gpu-ci-5", dict(hardware="a100", latency_ci_rel=5.0)),
        ("ci-2", dict(latency_ci_rel=2.0)),
        ("latency_std_ms-huge", dict(latency_mean_ms=None, latency_std_ms=None)),
    ],
)
def test_plans_on_wide_spreads_state_spread_quantiles(tmp_path, capsys, name, columns):
    """The findings' profiles: p5 = p50 = 7.26 s with the solver's own finish at 12.5 s (gpu-ci-5); p5 at the
    clamp (ci-2); p5 = p50 = p90 = p95 (latency_std_ms-huge)."""
    hardware = columns.pop("hardware", "cpu")
    rows = profile_rows(hardware=hardware, sizes=(64,))
    for r in rows:
        r.update(columns)
        if name == "latency_std_ms-huge":  # a consistent mean (the median) with a sd 100x the median
            r["latency_mean_ms"], r["latency_std_ms"] = r["latency_ms"], 100 * r["latency_ms"]
    path = tmp_path / f"{name}.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    plan = _plan(capsys, str(path), "--confidence", "none")
    q = plan["makespan_quantiles_s"]
    assert q["p5"] < q["p50"] < q["p90"] < q["p95"] < q["p99"]
    if name != "latency_std_ms-huge":  # a shared error of median 1: the plan's median is the solver's finish,
        assert q["p50"] == pytest.approx(plan["makespan_s"], rel=0.25)
        assert q["p5"] < 0.5 * q["p50"]  # and its 5% point a lognormal's (sd 1 of the log or more), not a floor


# --- D3: an impossible mean -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "words"),
    [(1 / 1000, "below the fastest call"), (100, "further from the median"), (0.4, "below half the median")],
)
def test_a_mean_no_set_of_calls_could_have_is_refused_in_one_sentence(tmp_path, capsys, scale, words):
    """mean-tiny (median / 1000, below latency_min_ms) planned a median of 2.10 s for a 38.9 s finish at
    probability 1.0; mean-100x was refused as infeasible though its medians finish in 27 s."""
    rows = profile_rows(sizes=(64,))
    for r in rows:
        r.update(latency_mean_ms=scale * r["latency_ms"], latency_std_ms=0.1 * r["latency_ms"])
        if scale < 0.01:
            r["latency_min_ms"] = 0.9 * r["latency_ms"]
    path = tmp_path / "mean.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    message = refused(capsys, "plan", "--images", "5000", "--deadline", "60s", "--profile", path, "--input-size", "64")
    assert "latency_mean_ms" in message and words in message and "row 1" in message


def test_a_mean_any_set_of_calls_could_have_is_accepted():
    rows = pd.DataFrame(profile_rows(sizes=(64,))).astype({"latency_ms": float})
    rows["latency_min_ms"] = 0.8 * rows["latency_ms"]
    rows["latency_std_ms"] = 0.5 * rows["latency_ms"]
    for mean in (0.8, 1.0, 1.5):  # the fastest call itself, the median, half a sd above it
        validate_profile(rows.assign(latency_mean_ms=mean * rows["latency_ms"]), "p")
    with pytest.raises(ProfileFormatError, match="latency_mean_ms"):
        validate_profile(rows.assign(latency_mean_ms=1.6 * rows["latency_ms"]), "p")


# --- T1, U11: the drift columns ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "hardware", "rel_sd"),
    [("drift-corr0", "cpu", 0.1), ("drift-zero", "cpu", 0.0), ("gpu-drift-corr0", "a100", 0.1)],
)
def test_a_drift_without_correlation_averages_out_and_plans(tmp_path, capsys, name, hardware, rel_sd):
    """drift_corr_s = 0 divided by zero (ZeroDivisionError, exit 1): no correlation at all is the limit in
    which the speed's moves average out over any run."""
    path = _profile(tmp_path, name, hardware, drift_rel_sd=rel_sd, drift_corr_s=0.0)
    plan = _plan(capsys, path)
    assert 0 < plan["deadline_probability"] <= 1
    assert Drift(0.1, 0.0, "t").run_rel_sd(10.0) == 0.0
    g = Workers(count=1, load_s=0.0, warmup_s=0.1, batches=10, batch_mean_s=0.1, drift=Drift(0.1, 0.0, "t"))
    assert Makespan((g,), {}).simulate(2.0, draws=200)["probability"] == 1.0


def test_a_drift_spread_without_its_correlation_time_is_used_and_said(tmp_path, capsys):
    """drift_rel_sd without drift_corr_s planned exactly as with neither (the default), without a word."""
    both = _plan(capsys, _profile(tmp_path, "none"))
    only = _plan(capsys, _profile(tmp_path, "only-rel", drift_rel_sd=0.4))
    code, _, said = run_cli(
        capsys,
        "plan",
        "--images",
        "5000",
        "--deadline",
        "60s",
        "--profile",
        str(tmp_path / "only-rel.csv"),
        "--input-size",
        "64",
    )  # the text says it too
    assert code == 0
    assert "drift cpu: drift_rel_sd from the profile; drift_corr_s (not in it) from the default" in said
    drift = only["makespan_model"]["drift"]["drift cpu"]
    assert drift["rel_sd"] == 0.4 and drift["corr_s"] == CPU_DEFAULT.corr_s
    assert "drift_rel_sd from the profile" in drift["source"] and "drift_corr_s" in drift["source"]
    assert only["makespan_quantiles_s"]["p95"] > both["makespan_quantiles_s"]["p95"]
    assert np.isclose(both["makespan_model"]["drift"]["drift cpu"]["rel_sd"], CPU_DEFAULT.rel_sd)
