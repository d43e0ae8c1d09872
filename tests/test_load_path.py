"""The model's load (perfmodel/loading.py): its parts are recorded, profile and run load through the same
code, and the fast load (built on the device or on meta, weights assigned) computes what the slow one did."""

from __future__ import annotations

import itertools

import pytest

from perfmodel.errors import InputError
from perfmodel.models import BUILTIN_MODELS, ModelSpec, build_model
from perfmodel.run.worker import RunWorker, WorkerSpec
from perfmodel.torch_runner import TorchOptions, TorchRunner

LOAD = ("load_build_ms", "load_weights_ms")


def _spy(monkeypatch) -> list:
    """Record every call of the shared load's two steps."""
    from perfmodel import loading

    calls = []
    build, place = loading.build, loading.place_weights

    def spy_build(spec, device, seed, weights):
        calls.append(("build", spec, str(device), seed, weights))
        return build(spec, device, seed, weights)

    def spy_place(model, spec, device, dtype, weights):
        calls.append(("place", spec, str(device), dtype, weights))
        return place(model, spec, device, dtype, weights)

    monkeypatch.setattr(loading, "build", spy_build)
    monkeypatch.setattr(loading, "place_weights", spy_place)
    return calls


def test_profile_and_run_load_the_model_through_one_path(monkeypatch):
    """The profiler's worker and perfmodel run's worker make the same calls of perfmodel.loading, and end
    with the same model: a plan's load is its run's."""
    import torch

    from perfmodel.profile.worker import Worker

    calls = _spy(monkeypatch)
    profiler = Worker(lambda message: None)
    request = {
        "op": "load",
        "model": {"name": "tiny", "path": None},
        "options": {"device": "cpu", "precision": "bf16", "threads": 1},
        "seed": 3,
        "call_timeout_s": 60,
    }
    assert profiler.handle(request)["status"] == "ok"
    profiled, calls[:] = list(calls), []
    run = RunWorker(WorkerSpec("cpu#0", "tiny", None, None, "cpu", "bf16", "torch", 1, seed=3, batch_size=2))
    loaded = run.load(32, [2])
    assert calls == profiled and [c[0] for c in calls] == ["build", "place"]
    assert set(loaded["parts"]) == {"start_import_ms", "start_device_ms", *LOAD}
    x = torch.randn(2, 3, 32, 32, dtype=torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(profiler.runner.model(x), run.runner.model(x))


def _slow_load(spec: ModelSpec, dtype, state: dict | None):
    """The load before perfmodel/loading.py (up to 74e9855): random weights built and initialised on the CPU,
    moved, then a weights file copied into them."""
    model = build_model(spec, seed=0).to("cpu", dtype)
    if state is not None:
        model.load_state_dict(state)
    return model


@pytest.mark.parametrize(
    "name, precision, kinds",
    [("tiny", "fp32", "random,file"), ("tiny", "bf16", "random,file"), ("resnet50", "fp32", "file")],
)
def test_the_fast_load_computes_what_the_slow_one_did(tmp_path, name, precision, kinds):
    """Random weights are the same (built where they were, on the CPU); a weights file assigned to a model
    built on the meta device gives the outputs it gave copied into random weights."""
    import torch

    spec = ModelSpec(name)
    path = tmp_path / "w.pt"
    state = build_model(spec, seed=7).state_dict()
    torch.save(state, path)
    x = torch.randn(2, 3, 32, 32)
    for weights in [{"random": None, "file": str(path)}[kind] for kind in kinds.split(",")]:
        runner = TorchRunner(spec, TorchOptions(precision=precision, threads=1))
        runner.load(weights)
        slow = _slow_load(spec, runner.dtype, None if weights is None else state)
        assert all(not t.is_meta for t in itertools.chain(runner.model.parameters(), runner.model.buffers()))
        with torch.inference_mode():
            assert torch.equal(runner.model(x.to(runner.dtype)), slow(x.to(runner.dtype))), weights


def test_a_torchscript_model_takes_a_weights_file_too(tmp_path):
    import torch

    script = tmp_path / "tiny.pt"
    torch.jit.save(torch.jit.script(build_model(ModelSpec("tiny"))), str(script))
    path = tmp_path / "w.pt"
    eager = build_model(ModelSpec("tiny"), seed=7)
    torch.save(eager.state_dict(), path)
    runner = TorchRunner(ModelSpec("tiny", str(script)), TorchOptions(threads=1))
    runner.load(str(path))
    x = torch.randn(2, 3, 32, 32)
    with torch.inference_mode():
        assert torch.equal(runner.model(x), eager(x))


@pytest.mark.parametrize("name", BUILTIN_MODELS)
def test_a_builtin_model_on_meta_is_whole_with_its_state_dict(name):
    """Every tensor of a built-in model is in its state_dict, so a weights file assigned to the model built on
    the meta device leaves nothing on meta."""
    model = build_model(ModelSpec(name), device="meta")
    held = {n for n, _ in itertools.chain(model.named_parameters(), model.named_buffers())}
    assert held == set(model.state_dict())


def test_weights_that_do_not_fit_are_refused_in_one_sentence(tmp_path):
    import torch

    bad = tmp_path / "bad.pt"
    torch.save({"weight": torch.zeros(3)}, bad)
    with pytest.raises(InputError, match="the weights .*bad.pt do not fit tiny: .*"):
        TorchRunner(ModelSpec("tiny"), TorchOptions(threads=1)).load(str(bad))
    listed = tmp_path / "list.pt"
    torch.save([torch.zeros(3)], listed)
    with pytest.raises(InputError, match="are not a state_dict"):
        TorchRunner(ModelSpec("tiny"), TorchOptions(threads=1)).load(str(listed))
