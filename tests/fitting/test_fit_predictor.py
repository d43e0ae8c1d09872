"""Predictor files and queries: JSON round trip, bad files, vectorised queries, extrapolation, max_batch."""

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perfmodel
from perfmodel.errors import InputError, PerfmodelWarning, PredictorFormatError
from perfmodel.fitting import GroupPredictor, Predictor
from perfmodel.fitting.synthetic import GpuLikeCurve, gpu_like_profile

CURVE = GpuLikeCurve(capacity_mb=6000.0)
BATCHES = (1, 2, 4, 8, 16, 32, 48, 64, 128, 256, 384, 512)
FAST = ("linear",)


@pytest.fixture(scope="module")
def profile():
    return gpu_like_profile(CURVE, batch_sizes=BATCHES, input_sizes=(160, 224, 288), seed=2)


@pytest.fixture(scope="module")
def predictor(profile):
    return perfmodel.fit(profile, families=FAST)


@pytest.fixture(scope="module")
def saved(predictor, tmp_path_factory):
    path = tmp_path_factory.mktemp("predictor") / "p.json"
    predictor.save(path)
    return path


def test_public_api_exports_fit_and_the_predictor():
    from perfmodel import GroupPredictor as exported_group
    from perfmodel import Predictor as exported
    from perfmodel import fit

    assert callable(fit) and exported is Predictor and exported_group is GroupPredictor
    assert {"fit", "Predictor", "GroupPredictor", "load_profile"} <= set(perfmodel.__all__)
    for name in perfmodel.__all__:
        assert getattr(perfmodel, name) is not None


def test_the_file_is_json_with_schema_provenance_and_report(saved, predictor):
    data = json.loads(saved.read_text())
    assert data["format"] == "perfmodel-predictor" and data["schema_version"] == 2
    assert data["perfmodel"] == perfmodel.__version__
    assert len(data["provenance"]["sources"][0]["sha256"]) == 64
    latency = data["groups"][0]["quantities"]["latency_ms"]
    assert latency["model"]["family"] == "linear" and latency["model"]["fitted"]["coef"]
    assert latency["report"]["training_range"]["batch_size"][0] == 1
    assert set(latency["report"]["extrapolation"]) == {"batch_2x", "batch_half", "input_size"}


def test_a_loaded_predictor_answers_like_the_fitted_one(saved, predictor):
    loaded = Predictor.load(saved)
    b, s = np.arange(1, 200), 224
    for quantity in ("latency_ms", "latency_p99_ms", "warmup_ms", "memory_mb", "throughput_ips"):
        np.testing.assert_allclose(getattr(loaded, quantity)(b, s), getattr(predictor, quantity)(b, s))
    np.testing.assert_array_equal(loaded.max_batch([160, 224, 288]), predictor.max_batch([160, 224, 288]))
    assert loaded.groups[0].report == predictor.groups[0].report


@pytest.mark.integration
def test_loading_and_querying_imports_neither_torch_nor_scikit_learn(saved):
    code = (
        "import sys, numpy as np, perfmodel\n"
        f"p = perfmodel.Predictor.load({str(saved)!r})\n"
        "p.latency_ms(np.arange(1, 9), 224); p.max_batch(224); p.max_batch(224, memory_budget_mb=1000)\n"
        "print(sorted(m for m in ('torch', 'sklearn', 'scipy') if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(perfmodel.__file__).parent.parent,
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "content, message",
    [
        ("not json at all", "not JSON"),
        ("[1, 2]", "not a perfmodel predictor"),
        ('{"format": "perfmodel-predictor", "schema_version": 99, "groups": []}', "schema_version 99"),
        ('{"format": "perfmodel-predictor", "schema_version": 1}', "missing field 'groups'"),
    ],
)
def test_bad_predictor_files_raise_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(PredictorFormatError, match=message) as info:
        Predictor.load(path)
    assert info.value.exit_code == 2 and str(path) in str(info.value)


def test_a_damaged_model_is_refused(saved, tmp_path):
    data = json.loads(saved.read_text())
    data["groups"][0]["quantities"]["latency_ms"]["model"]["fitted"]["features"] = ["__import__('os')"]
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PredictorFormatError, match="unknown feature"):
        Predictor.load(path)


def test_queries_broadcast_like_numpy(predictor):
    out = predictor.latency_ms(np.array([[1], [8], [64]]), np.array([160, 224]))
    assert out.shape == (3, 2)
    assert np.ndim(predictor.latency_ms(8, 224)) == 0
    assert predictor.max_batch(np.array([[160, 224]])).shape == (1, 2)
    assert predictor.max_batch(224).dtype == np.int64
    np.testing.assert_allclose(predictor.throughput_ips(8, 224), 8 / predictor.latency_ms(8, 224) * 1000)


@pytest.mark.parametrize("b", [0, -1, np.nan, np.inf])
def test_queries_refuse_impossible_batch_sizes(predictor, b):
    with pytest.raises(InputError):
        predictor.latency_ms(b, 224)


def test_extrapolation_is_flagged_with_one_warning(predictor):
    b = np.arange(1, 2001)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        predictor.latency_ms(b[:100], 224)
        assert caught == []
        predictor.latency_ms(b, 224)
    assert len(caught) == 1 and issubclass(caught[0].category, PerfmodelWarning)
    assert "extrapolates" in str(caught[0].message)
    flags = predictor.extrapolates(b, 224)
    largest_at_224 = int(predictor.groups[0].measured_batch_range(224)[1])  # the region measured at 224 px
    assert largest_at_224 < predictor.groups[0].batch_range[1]  # less than at 160 px: not a rectangle
    assert not flags[:largest_at_224].any() and flags[largest_at_224:].all()


def test_max_batch_stays_below_every_measured_oom(predictor, profile):
    group = predictor.groups[0]
    assert group.oom_batches  # the fixture's capacity is small enough to run out of memory
    for s, b_oom in group.oom_batches:
        for size in (s, s + 1, s * 2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PerfmodelWarning)
                assert group.max_batch(size) < b_oom


@settings(max_examples=60, deadline=None)
@given(st.floats(64, 512), st.floats(600, 20000))
def test_max_batch_with_a_budget_fits_the_budget(predictor, s, budget):
    group = predictor.groups[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfmodelWarning)
        b = int(group.max_batch(s, memory_budget_mb=budget))
        if b > 0:
            assert group.memory_mb(b, s) <= budget
        assert all(b < b_oom for s_oom, b_oom in group.oom_batches if s_oom <= s)


def _frame(**overrides):
    rows = gpu_like_profile(CURVE, batch_sizes=(1, 4, 16, 64), input_sizes=(224,), seed=3)
    return rows.assign(**overrides)


def test_a_quantity_without_data_says_so_and_raises_when_asked(predictor):
    group = perfmodel.fit(_frame(warmup_ms=np.nan), families=FAST).groups[0]
    assert group.report["warmup_ms"]["family"] is None
    assert "no row has warmup_ms" in group.report["warmup_ms"]["reason"]
    with pytest.raises(InputError, match="warmup_ms"):
        group.warmup_ms(4, 224)
    assert group.latency_ms(4, 224) > 0


def test_max_batch_with_a_budget_needs_the_memory_model():
    group = perfmodel.fit(_frame(memory_mb=np.nan), families=FAST).groups[0]
    assert group.max_batch(224) == 64  # the largest measured, as nothing says more fits
    with pytest.raises(InputError, match="memory_mb"):
        group.max_batch(224, memory_budget_mb=1000)


def test_groups_are_selected_by_key_including_triton_columns():
    frames = [_frame(backend="triton-grpc", architecture="local-server", concurrency=c) for c in (1, 4)]
    frames.append(_frame(hardware="other-gpu"))
    predictor = perfmodel.fit(frames, families=FAST)
    assert len(predictor.groups) == 3
    with pytest.raises(InputError, match="3 groups"):
        predictor.latency_ms(1, 224)
    (group,) = predictor.select(backend="triton-grpc", concurrency=4)
    assert isinstance(group, GroupPredictor) and dict(group.key)["concurrency"] == 4
    assert group.hardware == "synthetic-gpu" and group.precision == "fp16"
    (other,) = predictor.select(hardware="other-gpu")
    assert "concurrency" not in other.key
    assert predictor.select(model="nothing") == ()


def test_open_loop_rows_are_left_out_of_the_fit():
    """Open-loop rows (profile --rate) time queueing at a rate, not a batch: fitted with the closed-loop
    sweep they would pull the curve up; the fit leaves them out and says how many."""
    closed = _frame()
    open_loop = _frame(
        latency_ms=closed["latency_ms"] * 50, latency_p99_ms=closed["latency_p99_ms"] * 80, rate_per_s=100.0
    )
    mixed = perfmodel.fit([closed, open_loop], families=FAST)
    alone = perfmodel.fit(closed, families=FAST)
    assert mixed.provenance["open_loop_rows_left_out"] == len(open_loop)
    assert mixed.latency_ms(16, 224) == pytest.approx(alone.latency_ms(16, 224))
    with pytest.raises(InputError, match="only open-loop rows"):
        perfmodel.fit(open_loop, families=FAST)


@pytest.mark.parametrize(
    "frame, message",
    [
        (_frame().iloc[:1], "a single measured point"),
        (_frame(status="oom", latency_ms=np.nan), "no point measured 'ok'"),
        (_frame(batch_size=8), "only one batch size"),
        (_frame(memory_mb=-1.0), "must be a finite number >= 0"),
        (_frame(latency_ms=np.nan), "needs a time in milliseconds"),
        (_frame().iloc[:0], "no measured points"),
    ],
)
def test_bad_profiles_raise_one_input_error(frame, message):
    with pytest.raises(InputError, match=message) as info:
        perfmodel.fit(frame, families=FAST)
    assert info.value.exit_code == 2


# ---- version 2: the region measured per input size, load time, version 1 files --------------------


def test_extrapolates_follows_the_region_measured_at_each_input_size():
    rows = gpu_like_profile(GpuLikeCurve(capacity_mb=1e9), batch_sizes=(1, 2, 4, 8, 16, 32, 64), input_sizes=(160, 224))
    rows = rows[(rows["input_size"] == 160) | (rows["batch_size"] <= 16)].assign(load_ms=1234.0)
    group = perfmodel.fit(rows, families=FAST).groups[0]
    assert group.report["latency_ms"]["measured"] == [[160.0, 1.0, 64.0], [224.0, 1.0, 16.0]]
    b, s = np.array([32, 32, 32, 16, 16, 16]), np.array([160, 224, 192, 224, 192, 300])
    assert list(group.extrapolates(b, s)) == [False, True, True, False, False, True]
    assert list(group.measured_batch_range(np.array([160, 192, 224]))[1]) == [64, 16, 16]
    assert group.load_ms == 1234.0
    assert Predictor.from_dict(json.loads(Predictor((group,)).to_json())).groups[0].load_ms == 1234.0


def test_version_1_files_still_load(predictor, tmp_path):
    data = json.loads(predictor.to_json())
    data["schema_version"] = 1
    for g in data["groups"]:
        del g["load_ms"], g["transfer"]
        for q in g["quantities"].values():
            q["report"].pop("measured", None)
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    old = Predictor.load(path).groups[0]
    assert old.load_ms is None and old.transfer is None
    (b_lo, b_hi) = old.report["latency_ms"]["training_range"]["batch_size"]
    assert not old.extrapolates(b_hi, 288) and old.extrapolates(b_hi + 1, 288)  # the rectangle, as in version 1


@pytest.mark.parametrize(
    "change",
    [
        lambda g: g["quantities"]["latency_ms"]["report"].__setitem__("measured", [[224, 8, 4]]),
        lambda g: g["quantities"]["latency_ms"]["report"].__setitem__("cv_errors_pct", [1.0, "x"]),
        lambda g: g.__setitem__("load_ms", -5),
        lambda g: g.__setitem__("transfer", ["not", "an", "object"]),
    ],
)
def test_damaged_version_2_fields_are_refused(predictor, tmp_path, change):
    data = json.loads(predictor.to_json())
    change(data["groups"][0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(PredictorFormatError, match="damaged predictor"):
        Predictor.load(path)
