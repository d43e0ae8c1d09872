"""The planner chooses the serving option per GPU type, counting each option's load and first call: a compiled
model whose first call compiles for a minute loses a short deadline to eager and wins a long one; the plan
says which option and why (`option_choice`). From constructed profiles (the GPU figures are made up)."""

from __future__ import annotations

import pandas as pd
import pytest

from perfmodel.planning.batch import make_plan

EAGER, COMPILED = "torch", "torch-channels-last-compile-max-autotune"


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    """ResNet-50 fp16 on a made-up GPU: eager 30 ms per 256 images, first call 2 s; compiled 12 ms per 256,
    first call 60 s (compilation); both load in 5 s."""
    rows = []
    for backend, ms_per_image, first_ms, compile_ms in (
        (EAGER, 30 / 256, 2000.0, None),
        (COMPILED, 12 / 256, 60e3, 58e3),
    ):
        for b in (64, 256):
            rows.append(
                dict(
                    hardware="gpu1",
                    model="resnet50",
                    backend=backend,
                    precision="fp16",
                    input_size=224,
                    batch_size=b,
                    latency_ms=ms_per_image * b,
                    latency_p99_ms=ms_per_image * b * 1.05,
                    warmup_ms=first_ms,
                    memory_mb=1000.0 + b,
                    status="ok",
                    load_ms=5000.0,
                    compile_ms=compile_ms,
                )
            )
    path = tmp_path_factory.mktemp("options") / "gpu1-resnet50.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def plan(profile, images, deadline_s, **kwargs):
    settings = dict(profiles=[profile], confidence="none", **kwargs)
    job = make_plan(images, deadline_s, **settings)
    (choice,) = job.to_dict()["option_choice"]
    return job.plan, choice


def test_a_short_deadline_takes_the_option_without_compile_time(profile):
    result, choice = plan(profile, 30_000, 10.0)
    assert {a.label for a in result.assignments} == {f"{EAGER} fp16"}
    assert choice["chosen"]["option"] == f"{EAGER} fp16" and choice["runner_up"]["option"] == f"{COMPILED} fp16"
    assert choice["runner_up"]["images_per_gpu"] == 0 and choice["runner_up"]["first_batch_s"] == pytest.approx(65.0)
    assert "would finish its first batch only at 65.0 s, after the 10.0 s the plan has" in choice["why"]


def test_a_long_deadline_takes_the_compiled_option_when_it_needs_fewer_gpus(profile):
    result, choice = plan(profile, 2_000_000, 120.0)
    assert {a.label for a in result.assignments} == {f"{COMPILED} fp16"} and result.total_gpus == 2
    assert choice["runner_up"]["option"] == f"{EAGER} fp16" and choice["runner_up"]["gpus"] == 3
    assert "3 GPUs for these 2,000,000 images instead of 2" in choice["why"]


def test_with_as_many_gpus_the_option_that_finishes_first_is_taken(profile):
    """One GPU does 1M images by 600 s either way: compiled finishes at ~112 s, eager at ~124 s. Half of that
    (500k) eager finishes at ~66 s and compiled at ~88 s (its minute of compiling weighs more)."""
    result, choice = plan(profile, 1_000_000, 600.0)
    assert {a.label for a in result.assignments} == {f"{COMPILED} fp16"} and result.total_gpus == 1
    assert choice["chosen"]["finish_s"] == pytest.approx(65 + 3906 * 0.012)
    assert choice["runner_up"]["finish_s"] == pytest.approx(7 + 3906 * 0.030)
    assert "as many GPUs, but they would finish at 124.2 s instead of 111.9 s" in choice["why"]
    result, choice = plan(profile, 500_000, 600.0)
    assert {a.label for a in result.assignments} == {f"{EAGER} fp16"} and result.total_gpus == 1
    assert choice["runner_up"]["option"] == f"{COMPILED} fp16"


def test_relaxed_plans_take_the_option_with_the_most_images(profile):
    result, choice = plan(profile, None, 10.0, mode="relaxed", pool={"gpu1": 1})
    assert choice["chosen"]["option"] == f"{EAGER} fp16" and result.total_images == choice["chosen"]["images_per_gpu"]
    result, choice = plan(profile, None, 600.0, mode="relaxed", pool={"gpu1": 1})
    assert choice["chosen"]["option"] == f"{COMPILED} fp16"
    assert choice["chosen"]["images_per_gpu"] > choice["runner_up"]["images_per_gpu"] > 0
    assert "the runner-up torch fp16 does" in choice["why"]


def test_one_option_has_nothing_to_explain(profile):
    job = make_plan(30_000, 10.0, profiles=[profile], confidence="none", backend=EAGER)
    assert job.annotations.option_choice == ()
