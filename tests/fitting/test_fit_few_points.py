"""`perfmodel fit` on one, two or three batch sizes: a predictor or one clear sentence, never a traceback."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.errors import InputError, PredictorFormatError
from perfmodel.fitting import Predictor
from perfmodel.fitting.regressors import RooflineRegression
from perfmodel.fitting.selection import (
    BATCH_SIZE_ADVICE,
    TWO_BATCH_SIZES,
    fit_quantity,
    two_batch_size_errors,
    two_batch_size_errors_of,
)
from perfmodel.schema import load_profiles, write_profile

REFERENCE = Path(__file__).resolve().parents[2] / "profiles" / "reference" / "dle-pytorch-resnet50.csv"


@pytest.fixture(scope="module")
def curve() -> pd.DataFrame:
    frame = pd.read_csv(REFERENCE)
    return frame[(frame["hardware"] == "v100") & (frame["precision"] == "fp16")]


def _fit(curve, batches, tmp_path, capsys) -> tuple[int, str, Path]:
    path, out = tmp_path / "profile.csv", tmp_path / "p.json"
    write_profile(curve[curve["batch_size"].isin(batches)], path)
    code = main(["fit", str(path), "--out", str(out)])
    return code, capsys.readouterr().err, out


def test_one_batch_size_is_refused_in_one_sentence(curve, tmp_path, capsys):
    code, err, out = _fit(curve, [16], tmp_path, capsys)
    assert code == 2 and not out.exists()
    assert "a fit needs at least two batch sizes" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_the_advice_on_how_many_batch_sizes_to_profile_is_the_same_everywhere(curve, tmp_path, capsys):
    assert "five or more" in BATCH_SIZE_ADVICE and "three is the least" in BATCH_SIZE_ADVICE
    _, refused, _ = _fit(curve, [16], tmp_path, capsys)
    with pytest.raises(InputError) as one_size:
        fit_quantity(np.array([8.0, 8.0]), np.array([224.0, 224.0]), np.array([3.0, 3.1]))
    _, noted, _ = _fit(curve, [1, 8], tmp_path, capsys)
    for text in (refused, str(one_size.value), noted):
        assert BATCH_SIZE_ADVICE in " ".join(text.split())  # the CLI may wrap a long line
        assert "four or more" not in text and "better" not in text


def test_two_batch_sizes_fit_a_line_and_say_its_error_is_large(curve, tmp_path, capsys):
    code, err, out = _fit(curve, [1, 256], tmp_path, capsys)
    assert code == 0 and "Traceback" not in err
    assert "fitted on two batch sizes: a straight line through them" in err
    group = Predictor.load(out).groups[0]
    report = group.models["latency_ms"].report
    assert report["family"] == "linear" and report["cv_errors_pct"] == [] and "note" in report
    measured = curve.set_index("batch_size")["latency_ms"]
    assert group.latency_ms([1, 256], 224) == pytest.approx(measured[[1, 256]].to_numpy(), rel=1e-9)
    # Its own error cannot be measured: it carries those of such lines on the published curves, between
    # its two batch sizes and beyond them, and says where they come from.
    shipped = two_batch_size_errors()
    for beyond, region in ((False, "between"), (True, "beyond")):
        samples = group.error_samples(beyond=beyond)
        assert samples == pytest.approx(np.asarray(shipped[region]["errors_pct"]) / 100)
        quantile = group.error_quantile(0.95, beyond=beyond)
        assert quantile["fraction"] > 0 and "profiles/reference/" in quantile["origin"]
    assert group.error_samples(quantity="latency_p99_ms") is None  # measured for the median latency only


def test_a_plan_on_two_batch_sizes_widens_by_the_lines_errors(curve, tmp_path, capsys):
    code, _, out = _fit(curve, [1, 8], tmp_path, capsys)
    assert code == 0
    args = [
        "plan",
        "--predictor",
        str(out),
        "--images",
        "10000",
        "--deadline",
        "30s",
        "--json",
    ]  # + a guessed 7.4 s of load, first call
    assert main(args) == 0
    plan = json.loads(capsys.readouterr().out)
    # before: no error samples, a predictor spread of 0 and "probability > 0.999"
    assert plan["spread_by_source_s"]["predictor"] > 0
    assert plan["deadline_probability"] < 0.999


def test_the_shipped_line_errors_are_what_the_reference_curves_measure():
    measured = two_batch_size_errors_of(load_profiles(sorted(REFERENCE.parent.glob("*.csv"))))
    assert json.loads(json.dumps(measured)) == two_batch_size_errors()
    assert measured["between"]["points"] > 1000 and measured["beyond"]["points"] > 500


def test_a_predictor_with_damaged_line_errors_is_refused(curve, tmp_path, capsys):
    _, _, out = _fit(curve, [1, 8], tmp_path, capsys)
    data = json.loads(out.read_text())
    data["groups"][0]["quantities"]["latency_ms"]["report"]["reference_errors"]["beyond"]["errors_pct"] = ["x"]
    out.write_text(json.dumps(data))
    with pytest.raises(PredictorFormatError, match="reference errors of latency_ms"):
        Predictor.load(out)


def test_three_batch_sizes_fit_with_a_measured_error(curve, tmp_path, capsys):
    code, err, out = _fit(curve, [1, 16, 256], tmp_path, capsys)
    assert code == 0 and "Traceback" not in err and "two batch sizes" not in err
    report = Predictor.load(out).groups[0].models["latency_ms"].report
    assert report["cv_points"] == 1 and len(report["cv_errors_pct"]) == 1


def test_the_roofline_alone_refuses_one_batch_size():
    X = np.column_stack([[8.0, 8.0], [224.0, 224.0]])
    with pytest.raises(InputError, match="two or more batch sizes"):
        RooflineRegression().fit(X, [3.0, 3.1])


def test_the_note_names_measured_figures(curve, tmp_path, capsys):
    text = TWO_BATCH_SIZES.format(between=1, between_p90=2, beyond=3, beyond_p90=4)
    assert "median 1%" in text and "experiments/003_fit_accuracy" in text
    _, err, _ = _fit(curve, [1, 8], tmp_path, capsys)
    between = two_batch_size_errors()["between"]
    assert f"median {between['median_pct']:.2g}% (90th percentile {between['p90_pct']:.2g}%)" in " ".join(err.split())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    count=st.integers(min_value=1, max_value=3),
)
def test_few_batch_sizes_of_real_curves_fit_or_refuse(curve, data, count):
    batches = data.draw(
        st.lists(st.sampled_from(sorted(curve["batch_size"].unique())), min_size=count, max_size=count, unique=True)
    )
    rows = curve[curve["batch_size"].isin(batches)]
    b, s, y = (rows[c].to_numpy(dtype=float) for c in ("batch_size", "input_size", "latency_ms"))
    if count == 1:
        with pytest.raises(InputError):
            fit_quantity(b, s, y)
        return
    result = fit_quantity(b, s, y)
    assert np.all(np.isfinite(result.estimator.evaluate(np.arange(1.0, 513.0), 224.0)))
