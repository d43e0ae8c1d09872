"""`perfmodel fit` on the command line: the report, JSON output, and one clear error per bad input."""

import json

import pytest

from perfmodel.cli import main
from perfmodel.fitting import Predictor
from perfmodel.fitting.synthetic import GpuLikeCurve, gpu_like_profile
from perfmodel.schema import write_profile


@pytest.fixture(scope="module")
def profile_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("profiles") / "synthetic.csv"
    curve = GpuLikeCurve(capacity_mb=4000.0)
    write_profile(
        gpu_like_profile(curve, batch_sizes=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), input_sizes=(160, 224)), path
    )
    return path


def test_fit_writes_a_predictor_and_prints_the_report(profile_csv, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["fit", str(profile_csv), "--out", str(out), "--report"]) == 0
    printed = capsys.readouterr()
    assert "CV MAPE %" in printed.out and "latency_ms" in printed.out and "max_batch" in printed.out
    assert "wrote 1 group(s)" in printed.err
    assert "latency medians are known to +-1.0%" in printed.err
    predictor = Predictor.load(out)
    assert predictor.latency_ms(8, 224) > 0
    assert set(predictor.provenance["families"]) == {"roofline", "linear", "piecewise", "tree"}


def test_fit_progress_counts_to_a_known_total(profile_csv, tmp_path, capsys):
    assert main(["fit", str(profile_csv), "--out", str(tmp_path / "p.json"), "--families", "linear"]) == 0
    steps = [line.split()[0] for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert steps == ["[1/4]", "[2/4]", "[3/4]", "[4/4]"]  # one group, four quantities (was [1/?])


def test_fit_json_prints_the_report_as_json(profile_csv, tmp_path, capsys):
    out = tmp_path / "p.json"
    assert main(["fit", str(profile_csv), "--out", str(out), "--report", "--json", "--families", "linear"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["out"] == str(out)
    report = result["groups"][0]["report"]
    assert report["latency_ms"]["family"] == "linear"
    assert {"cv_mape", "cv_max_error", "extrapolation"} <= set(report["memory_mb"])
    assert json.loads(out.read_text())["groups"][0]["quantities"]["latency_ms"]["report"] == report["latency_ms"]


def _rows(profile_csv, edit):
    lines = profile_csv.read_text().splitlines()
    return "\n".join(edit(lines)) + "\n"


BAD_PROFILES = {
    "empty": lambda lines: [],
    "header only": lambda lines: lines[:1],
    "single point": lambda lines: lines[:2],
    "only oom": lambda lines: [lines[0]] + [line.replace(",ok,", ",oom,") for line in lines[1:]],
    "nan": lambda lines: lines[:1] + [lines[1].replace(lines[1].split(",")[6], "NaN", 1)] + lines[2:],
    "negative": lambda lines: lines[:1] + [lines[1].replace(lines[1].split(",")[9], "-5", 1)] + lines[2:],
}


@pytest.mark.parametrize("case", sorted(BAD_PROFILES))
def test_bad_profiles_exit_2_with_one_line_and_no_file(profile_csv, tmp_path, capsys, case):
    bad = tmp_path / "bad.csv"
    bad.write_text(_rows(profile_csv, BAD_PROFILES[case]) if case != "empty" else "")
    out = tmp_path / "p.json"
    assert main(["fit", str(bad), "--out", str(out), "--families", "linear"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "Traceback" not in err[0]
    assert not out.exists()


def test_unknown_family_and_unwritable_out_exit_2(profile_csv, tmp_path, capsys):
    assert main(["fit", str(profile_csv), "--out", str(tmp_path / "p.json"), "--families", "neural"]) == 2
    assert main(["fit", str(profile_csv), "--out", str(tmp_path / "missing" / "p.json")]) == 2
    assert capsys.readouterr().err.count("error: ") == 2


@pytest.mark.parametrize(
    "edit, says",
    [
        ({"memory_capacity_mb": 1e300}, "memory_capacity_mb is 1e+300"),
        ({"load_ms": float("nan")}, "not finite"),
        ({"batch_sizes": (0, 1, 2)}, "batch_sizes holds 0"),
    ],
)
def test_fit_refuses_to_write_a_predictor_plan_would_refuse(profile_csv, tmp_path, capsys, monkeypatch, edit, says):
    """What fit writes, plan reads: a fitted group carrying a figure Predictor.load refuses (here patched in;
    absurd --gpu-specs once did it for real) is refused before anything is written."""
    import dataclasses

    import perfmodel.fitting.train as train

    real_fit = train.fit

    def damaged_fit(*args, **kwargs):
        predictor = real_fit(*args, **kwargs)
        return Predictor(tuple(dataclasses.replace(g, **edit) for g in predictor.groups), predictor.provenance)

    monkeypatch.setattr(train, "fit", damaged_fit)
    out = tmp_path / "p.json"
    code = main(["fit", str(profile_csv), "--out", str(out), "--families", "linear"])
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("[")]  # not progress
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    assert "was not written to" in err[0] and "Traceback" not in err[0]
    assert not out.exists() and not list(tmp_path.iterdir())
    monkeypatch.setattr(train, "fit", real_fit)
    assert main(["fit", str(profile_csv), "--out", str(out), "--families", "linear"]) == 0 and Predictor.load(out)


def _with_single_point_groups(profile_csv, path, *models) -> None:
    """The profile, plus one group per model measured at a single point (one batch size), in one file."""
    import pandas as pd

    frame = pd.read_csv(profile_csv)
    single = [frame.iloc[[0]].assign(model=model) for model in models]
    write_profile(pd.concat([frame, *single], ignore_index=True), path)


def test_a_group_that_cannot_be_fitted_is_named_and_the_others_are_fitted(profile_csv, tmp_path, capsys):
    mixed, out = tmp_path / "mixed.csv", tmp_path / "p.json"
    _with_single_point_groups(profile_csv, mixed, "tiny")
    assert main(["fit", str(mixed), "--out", str(out), "--families", "linear"]) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warning) == 1 and "1 group(s) not fitted" in warning[0], err
    assert "synthetic-gpu/tiny/torch/fp16 has a single measured point" in warning[0]
    assert "wrote 1 group(s)" in err and "Traceback" not in err
    predictor = Predictor.load(out)
    assert [g.key["model"] for g in predictor.groups] == ["synthetic"]
    (skipped,) = predictor.provenance["skipped_groups"]
    assert skipped["group"]["model"] == "tiny" and "a fit needs at least two batch sizes" in skipped["reason"]


def test_a_plan_for_a_model_the_fit_left_out_says_why(profile_csv, tmp_path, capsys):
    mixed, out = tmp_path / "mixed.csv", tmp_path / "p.json"
    _with_single_point_groups(profile_csv, mixed, "tiny")
    assert main(["fit", str(mixed), "--out", str(out), "--families", "linear"]) == 0
    capsys.readouterr()
    for mode in (["--images", "100", "--deadline", "10s"], ["--mode", "online", "--rate", "5/s", "--slo", "1s"]):
        assert main(["plan", "--predictor", str(out), "--model", "tiny", *mode]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "no tiny in the profiles or predictors given; they hold synthetic" in err[0], err
        assert "their fit left it out: synthetic-gpu/tiny/torch/fp16 has a single measured point" in err[0]


def test_a_fit_where_no_group_can_be_fitted_is_refused_in_one_sentence(profile_csv, tmp_path, capsys):
    import pandas as pd

    none, out = tmp_path / "none.csv", tmp_path / "p.json"
    _with_single_point_groups(profile_csv, none, "tiny", "small")
    write_profile(pd.read_csv(none).query("model != 'synthetic'"), none)
    assert main(["fit", str(none), "--out", str(out), "--families", "linear"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no group can be fitted"), err
    for model in ("tiny", "small"):
        assert f"synthetic-gpu/{model}/torch/fp16 has a single measured point (batch 1 at 160 px)" in err[0]
    assert not out.exists()
