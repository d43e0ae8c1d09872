"""GPUs never profiled: the specification table, the transfer, its leave-one-GPU-out error, and plans on it."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import perfmodel
from perfmodel.cli import main
from perfmodel.errors import InputError, PerfmodelWarning
from perfmodel.fitting import Predictor, gpu_specs
from perfmodel.fitting.gpu_effects import Curve, GpuEffects, learn
from perfmodel.fitting.gpu_specs import load_gpu_specs
from perfmodel.fitting.regressors import RooflineRegression
from perfmodel.fitting.transfer import validate
from perfmodel.schema import load_profiles

REFERENCE = Path(__file__).resolve().parents[2] / "profiles" / "reference"
TENSORFLOW = REFERENCE / "dle-tensorflow-resnet50.csv"


def test_the_specification_table_is_sourced_and_complete():
    specs = load_gpu_specs()
    rented = {"h100", "h100-pcie", "h100-nvl", "h200", "gh200", "l4", "l40s", "l40", "a100", "a100-pcie"}
    rented |= {"a100-80gb", "a100-pcie-80gb", "a10", "a30", "a40", "a6000", "t4", "v100", "v100-pcie", "rtx4090"}
    assert rented <= set(specs)
    for spec in specs.values():
        assert "http" in spec.source
        assert spec.peak_tflops("fp32") > 0 and spec.memory_bandwidth_gbs > 0 and spec.sm_count > 0
    assert specs["v100"].peak_tflops("tf32") is None and specs["a100"].peak_tflops("tf32") == 156
    # dense tensor figures, not the sparse ones the datasheets print first
    assert specs["h100"].peak_tflops("fp16") == 989.4 and specs["l4"].peak_tflops("fp16") == 121
    assert sum(bool(s.second_source) for s in specs.values()) >= 10


def test_a_bad_specification_table_is_one_clear_error(tmp_path):
    bad = tmp_path / "specs.csv"
    bad.write_text("hardware,name\nx,y\n")
    with pytest.raises(InputError, match="missing fp32_tflops"):
        load_gpu_specs(bad)
    table = (Path(perfmodel.__file__).parent / "data" / "gpu_specs.csv").read_text().replace(",320,", ",fast,")
    bad.write_text(table)
    with pytest.raises(InputError, match="row 17, column 'memory_bandwidth_gbs': 'fast'"):
        load_gpu_specs(bad)


def test_validate_predicts_every_gpu_from_the_others_and_from_each_one_alone():
    frame = load_profiles([REFERENCE / "dle-paddle-resnet50.csv"])
    logo = validate(frame, load_gpu_specs())
    pairs = validate(frame, load_gpu_specs(), one_source=True)
    assert {r["hardware"] for r in logo} == {"a10", "a100-80gb", "a30"}
    assert all(len(r["from"]) == 2 for r in logo) and all(len(r["from"]) == 1 for r in pairs)
    assert len(pairs) == 2 * len(logo)  # 3 GPUs per way of serving: 2 sources each
    for r in logo + pairs:
        ratio = 1.0 + np.array(r["transfer_errors"])  # predicted / measured
        assert np.allclose(r["errors_pct"], (1.0 / ratio - 1.0) * 100.0, atol=0.05)
    # a regression guard, not the target: experiments/003 (transfer.md) measures the method
    assert np.median([r["median_pct"] for r in logo]) < 30


def test_the_gpu_effects_are_learned_back_from_curves_made_with_them():
    specs = load_gpu_specs()
    floor, busy = np.array([-0.2, -0.3, 0.0]), np.array([-0.1, -0.9, -0.1])
    truth = GpuEffects(tuple(floor), tuple(busy), {}, {})
    b = np.array([1, 2, 4, 8, 16, 32, 64, 128], dtype=float)
    s = np.full_like(b, 224.0)
    curves = []
    for way, (f, c) in enumerate([(2.0, 0.1), (5.0, 0.5), (1.0, 0.02), (0.5, 0.3)]):
        base = RooflineRegression(intercept=False)
        base.floor_, base.intercept_, base.slope_, base.sharpness_, base.n_features_in_ = f, 0.0, c, 3.0, 2
        first = Curve((way,), "a100", "fp16", specs["a100"], base, b, s, base.evaluate(b, s))
        curves.append(first)
        for gpu in ("t4", "a10", "v100", "l4"):
            y = base.evaluate(b, s) * np.exp(truth.log_ratio(first, specs[gpu], "fp16", b))
            curves.append(Curve((way,), gpu, "fp16", specs[gpu], base, b, s, y))
    learned_floor, learned_busy, summary = learn(curves)
    assert summary["ways"] == 4 and summary["pairs"] == 4 * 5 * 4  # every ordered pair of the 5 GPUs of each way
    assert np.allclose(learned_floor, floor, atol=0.05) and np.allclose(learned_busy, busy, atol=0.05)


def test_one_profiled_gpu_is_enough_and_says_its_expected_error(tmp_path):
    one_gpu = tmp_path / "a30.csv"
    frame = load_profiles([REFERENCE / "dle-paddle-resnet50.csv"])
    frame[frame["hardware"] == "a30"].to_csv(one_gpu, index=False)
    predictor = perfmodel.fit(one_gpu, families=("roofline",), target_hardware=["h100"])
    transferred = [g for g in predictor.groups if g.transfer is not None]
    assert {g.key["precision"] for g in transferred} == {"tf32", "fp16", "int8"}
    for group in transferred:
        t = group.transfer
        assert t["transfer_sources"] == ["a30"] and t["expected_error"]["sources"] == "1"
        assert len(t["transfer_errors"]) > 100 and min(t["transfer_errors"]) < 0 < max(t["transfer_errors"])
        assert t["expected_error"]["median_pct"] > 0 and "held out" in t["validation"]
        assert group.error_quantile(0.95)["fraction"] > 0
        # faster than the A30 it was carried from: the H100 has 6x its fp16 rate and 3.6x its bandwidth
        assert group.latency_ms(64, 224) < 0.8 * float(
            frame.query(f"hardware == 'a30' and batch_size == 64 and precision == '{t['precision']}'")[
                "latency_ms"
            ].iloc[0]
        )
    saved = tmp_path / "h100.json"
    predictor.save(saved)
    again = Predictor.load(saved).select(hardware="h100")[0]
    assert again.transfer["transfer_errors"] == transferred[0].transfer["transfer_errors"] or len(transferred) > 1


def test_a_profiled_gpu_left_out_is_predicted_and_checked_against_its_measurements():
    predictor = perfmodel.fit(TENSORFLOW, families=("roofline",), target_hardware=["v100"])
    transferred = [g for g in predictor.groups if g.transfer is not None]
    assert {g.hardware for g in transferred} == {"v100"} and len(transferred) == 4  # XLA float32: from a100 alone
    assert not [g for g in predictor.groups if g.hardware == "v100" and g.transfer is None]
    fp32 = predictor.select(hardware="v100", backend="tensorflow", precision="fp32")[0]
    t = fp32.transfer
    assert {s["hardware"] for s in t["from"]} == {"a100", "v100-32gb", "t4"}
    assert {s["precision"] for s in t["from"]} == {"tf32", "fp32"}  # float32 runs in tf32 on the A100
    assert t["checked_against_target"]["points"] == 9 and t["checked_against_target"]["median_pct"] < 15
    # the v100 also ran TensorFlow-XLA beside its sources: the ratio it measured there carries this way (same stack)
    assert t["errors_pct"] and "held out" in t["validation"] and t["expected_error"]["sources"] == "same-stack"
    assert set(t["same_stack"]) == {"a100", "v100-32gb", "t4"} and t["guesses"]["compute-bound"] == "same-stack"
    assert all("resnet50/tensorflow-xla" in s["ways"] for s in t["same_stack"].values())
    guesses = t["checked_against_target"]["guesses"]  # each one-line guess beside it, on the v100's own points
    assert set(guesses) == {"method", "traffic", "copy", "peak", "bandwidth", "roofline"}
    assert all(set(g) >= {"all", "launch-bound", "compute-bound"} for g in guesses.values())
    assert set(t["per_gpu"]) == {"a100 tf32", "v100-32gb fp32", "t4 fp32"}  # each source from the other two
    quantile = fp32.error_quantile(0.9)
    assert quantile["fraction"] >= 0 and quantile["errors"] == len(t["errors_pct"])
    assert fp32.models["warmup_ms"].estimator is None and fp32.models["memory_mb"].estimator is None


def test_a_same_stack_ratio_comes_from_the_same_publication_never_another():
    """Review finding (issue 40 follow-up). Across DeepLearningExamples' tables, EfficientNet-B0 fp16 on the V100
    was scaled by the A100 -> V100 ratio MXNet's ResNet-50 table measured (floor 5.1x: MXNet's 0.68 ms floor on
    the A100 is the GPU's own time, eager PyTorch's 9.5 ms the host's launches): 193% off the V100's own points
    against the 7.5% stated. The held-out figures paired ways of one collection only; so does the fit now."""
    frame = load_profiles([REFERENCE / "dle-pytorch-efficientnet_b0.csv", REFERENCE / "dle-mxnet-resnet50.csv"])
    predictor = perfmodel.fit(frame, families=("roofline",), target_hardware=["v100"])
    fp16 = predictor.select(hardware="v100", model="efficientnet_b0", precision="fp16")[0].transfer
    assert fp16["same_stack"]["a100-80gb"]["ways"] == ["efficientnet_b0/torch"]  # its own table's float32 way
    checked = fp16["checked_against_target"]
    assert checked["median_pct"] <= fp16["expected_error"]["p90_pct"] and checked["max_pct"] < 25
    # MXNet's table has no other way on both GPUs: through the specifications, with that error stated
    mxnet = predictor.select(hardware="v100", backend="mxnet")[0].transfer
    assert mxnet["same_stack"] is None and mxnet["expected_error"]["sources"] != "same-stack"


def test_cli_fit_target_hardware_and_a_plan_on_it(tmp_path, capsys):
    out = tmp_path / "h100.json"
    assert (
        main(
            [
                "fit",
                str(REFERENCE / "dle-paddle-resnet50.csv"),
                "--families",
                "roofline",
                "--target-hardware",
                "h100",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "h100/resnet50/paddle-tensorrt/fp16: transferred from a10 fp16, a100-80gb fp16, a30 fp16" in err
    data = json.loads(out.read_text())
    h100 = [g for g in data["groups"] if g["key"]["hardware"] == "h100"]
    assert h100 and all(g["transfer"]["from"] and g["transfer"]["errors_pct"] for g in h100)
    assert {g["key"]["precision"] for g in h100} == {"tf32", "fp16", "int8"}
    assert (
        main(
            [
                "plan",
                "--images",
                "1M",
                "--deadline",
                "60s",
                "--predictor",
                str(out),
                "--pool",
                "h100=4",
                "--precision",
                "fp16",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    basis = plan["data_by_type"]["h100"]
    assert basis["kinds"] == {"paddle-tensorrt fp16 (transferred)": "transferred"}
    assert "transferred from" in basis["transferred"]["paddle-tensorrt fp16 (transferred)"]
    assert plan["warmup_measured"] is False
    # the reserve is the transfer's held-out error, named as such (not the predictor's own error)
    spread = plan["spread_by_source_s"]
    assert spread["transfer"] > 0 and spread["predictor"] == 0
    Predictor.load(out)  # the file loads back
    plan_args = ["plan", "--images", "1M", "--deadline", "30s", "--predictor", str(out), "--pool", "h100=4"]
    assert main([*plan_args, "--precision", "fp16"]) == 0
    assert "the largest part: the error of the transfer to a GPU never profiled" in capsys.readouterr().out


def test_cli_unknown_target_is_exit_2(tmp_path, capsys):
    code = main(
        [
            "fit",
            str(TENSORFLOW),
            "--families",
            "roofline",
            "--target-hardware",
            "b200",
            "--out",
            str(tmp_path / "x.json"),
        ]
    )
    assert code == 2 and "no specification for 'b200'" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_a_users_own_table_names_a_gpu_the_shipped_one_lacks(tmp_path, capsys):
    table = tmp_path / "mine.csv"
    # only the two GPUs this user cares about; the optional second_source column left out
    table.write_text(
        "hardware,name,fp32_tflops,tf32_tflops,fp16_tflops,int8_tops,memory_bandwidth_gbs,sm_count,memory_gb,l2_mb,"
        "source\nv100,V100,15.7,,125,,900,80,16,6,datasheet (https://example.com/v100)\n"
        "b200x,Some future GPU,80,1100,2250,4500,8000,148,180,126,my vendor's datasheet (https://example.com)\n"
    )
    one_gpu = tmp_path / "v100.csv"
    frame = load_profiles([REFERENCE / "dle-pytorch-resnet50.csv"])
    frame[frame["hardware"] == "v100"].to_csv(one_gpu, index=False)
    out = tmp_path / "b200x.json"
    args = ["fit", str(one_gpu), "--families", "roofline", "--target-hardware", "b200x", "--gpu-specs", str(table)]
    assert main([*args, "--out", str(out)]) == 0
    assert "b200x/resnet50/torch/fp16: transferred from v100 fp16" in capsys.readouterr().err
    groups = [g for g in json.loads(out.read_text())["groups"] if g["key"]["hardware"] == "b200x"]
    assert {g["key"]["precision"] for g in groups} == {"tf32", "fp16"}
    assert all(g["transfer"]["transfer_sources"] == ["v100"] for g in groups)


def _only_a100(tmp_path):
    path = tmp_path / "a100-only.csv"
    frame = load_profiles([TENSORFLOW])
    frame[(frame["hardware"] == "a100") & (frame["precision"] == "tf32")].to_csv(path, index=False)
    return path


def test_the_only_profiled_gpu_as_the_target_says_why_in_one_sentence(tmp_path, capsys):
    out = tmp_path / "x.json"
    code = main(["fit", str(_only_a100(tmp_path)), "--target-hardware", "a100", "--out", str(out)])
    err = " ".join(line for line in capsys.readouterr().err.splitlines() if not line.startswith("["))
    assert code == 2 and not out.exists() and "Traceback" not in err
    # before: "no profiled GPU with a known specification and two or more batch sizes", naming float32
    assert "a100 is the only GPU they were profiled on" in err and "left out of its own transfer" in err
    assert "another GPU with --target-hardware" in err and "without --target-hardware" in err
    assert "resnet50/tensorflow/tf32" in err and "float32" not in err
    assert err.count("error:") == 1


def test_the_report_labels_transferred_rows_as_the_sources_and_the_held_out_error(tmp_path, capsys):
    one_gpu = tmp_path / "v100.csv"
    frame = load_profiles([REFERENCE / "dle-pytorch-resnet50.csv"])
    frame[(frame["hardware"] == "v100") & (frame["precision"] == "fp32")].to_csv(one_gpu, index=False)
    out = tmp_path / "h100.json"
    args = ["fit", str(one_gpu), "--families", "roofline", "--target-hardware", "h100", "--out", str(out)]
    assert main([*args, "--report"]) == 0
    printed = capsys.readouterr()
    group = Predictor.load(out).select(hardware="h100")[0]
    expected = group.transfer["expected_error"]
    table = printed.out[printed.out.index("h100/resnet50/torch/tf32") :]
    assert "transfer error median %" in table and "source rows" in table and "CV MAPE" not in table
    latency = next(line for line in table.splitlines() if line.strip().startswith("latency_ms"))
    assert latency.split()[-3:] == ["9", f"{expected['median_pct']:.3g}", f"{expected['p90_pct']:.3g}"]
    assert "v100 fp32" in latency
    legend = " ".join(printed.err.split())
    assert "source rows are the points of the GPUs it was carried from" in legend and "expected_error" in legend
    # the file no longer files the transfer's error under cross-validation
    report = group.models["latency_ms"].report
    assert report["cv_mape"] is None and report["cv_errors_pct"] == [] and report["rows_from"] == ["v100 fp32"]
    assert report["transfer_error"]["median_pct"] == expected["median_pct"]


def test_target_hardware_is_read_in_any_case_and_an_empty_one_is_refused(tmp_path, capsys):
    out = tmp_path / "h100.json"
    args = ["fit", str(TENSORFLOW), "--families", "roofline", "--out", str(out), "--target-hardware"]
    assert main([*args, "H100"]) == 0
    steps = [line.split()[0] for line in capsys.readouterr().err.splitlines() if line.startswith("[")]
    assert steps[-1] == f"[{len(steps)}/{len(steps)}]"  # every group's quantities, and the target
    assert {g.hardware for g in Predictor.load(out).groups if g.transfer} == {"h100"}
    predictor = perfmodel.fit(TENSORFLOW, families=("roofline",), target_hardware=["V100"])
    assert not [g for g in predictor.groups if g.hardware == "v100" and g.transfer is None]  # left out, as v100
    for empty, words in (("", "is empty"), ("h100,", "holds an empty GPU name"), (" ", "is empty")):
        out.unlink(missing_ok=True)
        assert main([*args, empty]) == 2 and not out.exists()
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--target-hardware {words}" in err[0]


PROFILES = REFERENCE.parent
HEADER = "hardware,model,backend,precision,input_size,batch_size,latency_ms,latency_p99_ms,warmup_ms,memory_mb,status"
H200, H100 = PROFILES / "h200-resnet50-torch-fp16.csv", PROFILES / "h100-resnet50-torch-fp16.csv"


def test_h200_to_h100_on_one_stack_is_within_10_percent_and_never_worse_than_the_h200_copied():
    """Issue 40. Each input size of the H100 predicted from the H200's curve, scaled by the H200 -> H100 ratio
    measured on the other two sizes (standing in for other models profiled on both machines): the H100's own
    points at that size are never used. Through the specifications alone (no other workload on both) the
    transfer scores 5.6% (the next test), the H200 copied 16.3% (experiments/003_fit_accuracy, transfer.md)."""
    frame = load_profiles([H200, H100])
    frame["model"] = frame["model"] + "@" + frame["input_size"].astype(str)
    predictor = perfmodel.fit(frame, families=("roofline",), target_hardware=["h100"])
    measured = frame[(frame["hardware"] == "h100") & (frame["status"] == "ok")]
    h200 = frame[(frame["hardware"] == "h200") & (frame["status"] == "ok")]
    transfer, copy = [], []
    for group in (g for g in predictor.groups if g.transfer is not None):
        assert group.transfer["guesses"] == {"launch-bound": "same-stack", "compute-bound": "same-stack"}
        size = int(group.key["model"].split("@")[1])
        assert group.transfer["same_stack"]["h200"]["ways"] == sorted(
            f"resnet50@{s}/torch" for s in (224, 320, 448) if s != size
        )
        mine = measured[measured["input_size"] == size]
        b, y = mine["batch_size"].to_numpy(float), mine["latency_ms"].to_numpy(float)
        with warnings.catch_warnings():  # the H100 ran larger batches than the region carried from the H200
            warnings.simplefilter("ignore", PerfmodelWarning)
            transfer += list(np.abs(group.latency_ms(b, size) / y - 1.0) * 100.0)
        source = h200[h200["input_size"] == size]  # the H200 measured curve, interpolated in the batch
        copied = np.interp(np.log(b), np.log(source["batch_size"]), source["latency_ms"])
        copy += list(np.abs(copied / y - 1.0) * 100.0)
    assert len(transfer) == 42
    assert np.median(transfer) <= 10.0 and np.median(transfer) < np.median(copy)


def test_h200_to_h100_through_the_specifications_is_within_10_percent_and_never_worse_than_the_h200_copied():
    """Issue 40, a GPU nobody profiled: the H100 predicted from the H200's profile and the GPU table alone (the
    H100's rows are in the data only to check the prediction: a transfer leaves the target's own out). The
    compute-bound part is carried by ResNet-50's counted memory traffic: the share of the H200's time it takes at
    4.8 TB/s is scaled to 3.35 TB/s, the rest by the equal fp16 peaks."""
    predictor = perfmodel.fit(load_profiles([H200, H100]), families=("roofline",), target_hardware=["h100"])
    (group,) = [g for g in predictor.groups if g.transfer is not None]
    assert group.models["latency_ms"].report["rows_from"] == ["h200 fp16"] and group.transfer["same_stack"] is None
    assert group.transfer["guesses"]["compute-bound"] == "traffic"
    checked = group.transfer["checked_against_target"]
    assert checked["points"] == 42 and checked["median_pct"] <= 10.0
    copy = checked["guesses"]["copy"]
    assert checked["by_regime"]["all"] < copy["all"] and checked["by_regime"]["compute-bound"] < copy["compute-bound"]
    assert checked["by_regime"]["launch-bound"] <= copy["launch-bound"]  # the floor: the H200's, carried


def test_the_shipped_choice_is_the_tuning_sets_best_and_beats_every_guess_held_out_per_regime():
    """The guess a transfer uses per regime is the one with the least error on the tuning collections; on the
    held-out collections it (and a same-stack transfer) is below every one-line guess in each regime."""
    from perfmodel.fitting.gpu_effects import shipped_effects
    from perfmodel.fitting.transfer_guesses import BASELINES, GUESSES, REGIMES

    effects = shipped_effects()
    for choice, kind in ((effects.choice, ""), (effects.counted_choice, ", counted models")):
        # counted models: those whose memory traffic was counted, where the traffic guess can be used
        tuning, held = effects.baselines["tuning" + kind], effects.baselines["held-out" + kind]
        for regime in REGIMES:
            best = min(GUESSES, key=lambda g: tuning[g][regime]["median_pct"])
            assert tuning[choice[regime]][regime]["median_pct"] == tuning[best][regime]["median_pct"]
            for used in ("chosen", "same-stack"):
                assert all(held[used][regime]["median_pct"] < held[g][regime]["median_pct"] for g in BASELINES)
    assert effects.counted_choice["compute-bound"] == "traffic"
    assert effects.expected("same-stack")["sources"] == "same-stack"


def _equal_work_profile(path):
    """One good group, and one whose rows give one work b x (s/224)^2 at three batch sizes (issue 40)."""
    rows = [HEADER]
    rows += [f"v100,good,torch,fp16,224,{b},{2 + 0.1 * b},,,,ok" for b in (1, 2, 4, 8, 16, 32, 64)]
    rows += ["v100,eq,torch,fp16,224,1024,100,,,,ok", "v100,eq,torch,fp16,448,256,105,,,,ok"]
    rows += ["v100,eq,torch,fp16,112,4096,98,,,,ok"]
    # two works, but a fold that holds one batch size out leaves one: the roofline cannot be fitted there
    rows += ["v100,eq2,torch,fp16,224,1024,100,,,,ok", "v100,eq2,torch,fp16,448,256,105,,,,ok"]
    rows += ["v100,eq2,torch,fp16,224,64,8,,,,ok", "v100,eq2,torch,fp16,448,16,8.5,,,,ok"]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("target", [None, "h100"])
def test_a_group_of_one_work_is_skipped_with_its_reason_and_every_other_group_kept(tmp_path, capsys, target):
    profile, out = _equal_work_profile(tmp_path / "eq.csv"), tmp_path / "p.json"
    args = ["fit", str(profile), "--families", "roofline,linear", "--out", str(out)]
    assert main([*args, *(["--target-hardware", target] if target else [])]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "v100/eq/torch/fp16 has points of one work only, batch x (size/224)^2 = 1024" in err
    predictor = Predictor.load(out)
    fitted = {(g.hardware, g.key["model"]) for g in predictor.groups}
    assert {("v100", "good"), ("v100", "eq2")} <= fitted and ("v100", "eq") not in fitted
    if target:  # the transfer keeps them too, and says why eq has none
        assert {("h100", "good"), ("h100", "eq2")} <= fitted and ("h100", "eq") not in fitted
        assert "not transferred: h100: eq/torch/fp16: no other profiled GPU" in err and "one work" in err


def test_gpu_names_that_differ_only_in_case(tmp_path):
    """U3: a table with h100 and H100 is refused; U4: a profile's V100 is the table's v100."""
    table = (Path(perfmodel.__file__).parent / "data" / "gpu_specs.csv").read_text()
    twin = table.splitlines()[1].replace("h100,", "H100,", 1)
    bad = tmp_path / "specs.csv"
    bad.write_text(table + twin + "\n")
    with pytest.raises(InputError, match="'H100' differs from 'h100' \\(row 1\\) only in case"):
        load_gpu_specs(bad)
    upper = tmp_path / "upper.csv"
    frame = load_profiles([REFERENCE / "dle-pytorch-resnet50.csv"])
    frame[frame["hardware"] == "v100"].assign(hardware="V100").to_csv(upper, index=False)
    predictor = perfmodel.fit(upper, families=("roofline",), target_hardware=["h100"])
    assert {g.transfer["transfer_sources"][0] for g in predictor.groups if g.transfer} == {"v100"}


def test_a_target_with_its_sources_specifications_says_the_transfer_cannot_tell_them_apart(tmp_path, capsys):
    """M21: a GPU table where the target's figures are the source's: not a silent 'transfer' with a 26% error."""
    table = tmp_path / "same.csv"
    head = ",".join(gpu_specs.COLUMNS)
    table.write_text(
        f"{head}\nv100,V100,15.7,,125,,900,80,16,6,datasheet (https://example.com)\n"
        "twin,Twin,15.7,,125,,900,80,16,6,datasheet (https://example.com)\n"
    )
    one_gpu = tmp_path / "v100.csv"
    frame = load_profiles([REFERENCE / "dle-pytorch-resnet50.csv"])
    frame[frame["hardware"] == "v100"].to_csv(one_gpu, index=False)
    args = ["fit", str(one_gpu), "--families", "roofline", "--gpu-specs", str(table), "--target-hardware", "twin"]
    assert main([*args, "--out", str(tmp_path / "twin.json")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "twin has the same peak FLOP/s at fp16, memory bandwidth and L2 as v100" in err
    assert "cannot tell them apart" in err


def test_points_of_one_work_that_disagree_are_named(tmp_path, capsys):
    """U5: a 224 px curve plus 112 px rows at 4x the batch (the same work) and 3x the time."""
    rows = [HEADER]
    rows += [f"v100,m,torch,fp16,224,{b},{2 + 0.1 * b:.3f},,,,ok" for b in (1, 2, 4, 8, 16, 32, 64)]
    rows += [f"v100,m,torch,fp16,112,{4 * b},{3 * (2 + 0.1 * b):.3f},,,,ok" for b in (1, 2, 4)]
    profile = tmp_path / "coincide.csv"
    profile.write_text("\n".join(rows) + "\n")
    args = ["fit", str(profile), "--families", "roofline", "--target-hardware", "h100"]
    assert main([*args, "--out", str(tmp_path / "h100.json")]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "warning: h100: m/torch/fp16: on v100, points of one work disagree 3.0x (batch 4 at 112 px" in err


def test_plan_on_a_gpu_nobody_profiled_offers_transfer_and_plans_with_it(capsys):
    """Issue 40: --pool l4=2 had no answer but 'no profile or predictor for l4'."""
    args = ["plan", "--images", "20k", "--deadline", "60s", "--profile", str(REFERENCE / "dle-pytorch-resnet50.csv")]
    assert main([*args, "--pool", "l4=2"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "no profile or predictor for l4" in err and "add --transfer" in err
    assert f"perfmodel fit {REFERENCE / 'dle-pytorch-resnet50.csv'} --target-hardware l4 --out" in err
    assert main([*args, "--pool", "l4=2", "--transfer"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("TRANSFERRED: the numbers for l4 were never measured on it")
    assert main([*args, "--pool", "l4=2", "--transfer", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert set(plan["data_by_type"]["l4"]["kinds"].values()) == {"transferred"}
    assert plan["spread_by_source_s"]["transfer"] > 0  # its error is in the deadline probability
    with pytest.raises(InputError, match="`transfer` must be True or False"):
        perfmodel.make_plan(1000, 60, pool={"l4": 1}, transfer="no")
