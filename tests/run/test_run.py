"""perfmodel run on a local Ray with two workers: every image done once, labels kept and resumed, faults.

One local Ray (started as `perfmodel run` starts its own, through the keeper) serves the whole module;
the runs join it with --address, so that each test pays a connection, not a cluster start.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import psutil
import pytest
from run_data import alive, make_images, ray_processes_of, write_plan

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.run.cluster import LocalRay
from perfmodel.run.execute import RunOptions, run_plan
from perfmodel.run.planfile import read_run_plan

pytestmark = pytest.mark.integration  # a local Ray cluster serves the module
IMAGES = 40  # two workers, three batches of 8 each (the last one of 4)


@pytest.fixture(scope="module")
def cluster():
    local = LocalRay(num_cpus=2)
    address = local.start()
    saved = {k: os.environ.get(k) for k in local.settings}
    os.environ.update(local.settings)  # the token of this cluster, as a user's shell would hold it
    try:
        yield address
    finally:
        started = ray_processes_of(local.process.pid) + [psutil.Process(local.process.pid)]
        local.stop()  # as `perfmodel run` does at its end: nothing may be left
        assert alive(started) == [] and not local.temp_dir.exists()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def plan(tmp_path):
    path = write_plan(tmp_path, IMAGES, 0.2)
    assert [(w.batch_size, w.batches, w.images) for w in read_run_plan(path).workers] == [(8, 3, 20), (8, 3, 20)]
    return path


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "images"
    paths = make_images(folder, IMAGES - 1)
    (folder / "broken.jpg").write_text("not a picture")  # counted by the plan, listed as unreadable
    (folder / "notes.txt").write_text("not an image")
    return folder, paths


def run(plan, address, **options):
    return run_plan(read_run_plan(plan), RunOptions(address=address, **options))


def test_a_synthetic_run_does_exactly_the_plan(plan, cluster, capsys):
    assert main(["run", str(plan), "--synthetic", "--address", cluster, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "perfmodel-run" and data["status"] == "complete" and data["images_done"] == IMAGES
    assert {
        "predicted_makespan_s",
        "measured_makespan_s",
        "error_rel",
        "deadline_s",
        "met_deadline",
        "images_done",
        "workers",
        "decode_s_per_image",
        "bottleneck",
    } <= set(data)
    assert data["measured_makespan_s"] == max(w["finish_s"]["measured"] for w in data["workers"])
    for w in data["workers"]:
        assert (w["batches_done"], w["images_done"]) == (w["batches"], w["images"])
        assert w["niceness"] == 0  # as the profiler measured, not Ray's default 15
        for quantity in ("load_s", "warmup_s", "batch_s", "finish_s"):
            assert w[quantity]["predicted"] > 0 and w[quantity]["measured"] > 0
        starts = [s for s, _ in w["timeline"]["batches"]]
        assert starts == sorted(starts) and starts[0] >= w["timeline"]["load"][1]  # loaded before any batch
    assert data["bottleneck"] == "model" and data["decode_s_per_image"] is None


def test_a_run_over_files_labels_every_readable_image_once(plan, images, cluster, tmp_path):
    folder, paths = images
    out = tmp_path / "labels.csv"
    result = run(plan, cluster, images=str(folder), out=str(out))
    labels = pd.read_csv(out)
    assert result.status == "complete"
    assert sorted(labels["path"]) == sorted(str(p) for p in paths)  # all, and each once
    assert set(labels["worker"]) == {"cpu#0", "cpu#1"} and labels["score"].between(0, 1).all()
    data = result.to_dict()
    failed = {f["path"] for f in data["skipped_files"]}
    assert failed == {str(folder / "broken.jpg"), str(folder / "notes.txt")}
    assert data["decode_s_per_image"] > 0 and data["bottleneck"] in ("model", "decoding")


def test_a_dead_worker_exits_1_keeps_the_finished_labels_and_resume_completes_them(
    plan, images, cluster, tmp_path, capsys, monkeypatch
):
    folder, paths = images
    out = tmp_path / "labels.parquet" if _has_parquet() else tmp_path / "labels.csv"
    monkeypatch.setenv("PERFMODEL_RUN_KILL_WORKER", "1:1")  # worker 1 dies after its first batch
    args = ["run", str(plan), "--images", str(folder), "--out", str(out), "--address", cluster]
    assert main([*args, "--json"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert "worker cpu#1 (after 1 of 3 batches) died" in captured.err and "run again with --resume" in captured.err
    dead = data["workers"][1]
    assert data["status"] == "worker-failed" and dead["status"] == "died" and "died" in dead["error"]
    kept = _read(out)
    assert len(kept) == data["images_done"] == 20 + 8 - 1  # worker 0's 20 (one unreadable) and one batch of 8
    assert data["images_unfinished"] == 12 and len(data["unfinished_files"]) == 12

    monkeypatch.delenv("PERFMODEL_RUN_KILL_WORKER")
    assert main([*args, "--resume", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["images_resumed"] == len(kept) and again["images_done"] == IMAGES - 1 - len(kept)
    assert sorted(_read(out)["path"]) == sorted(str(p) for p in paths)  # none lost, none done twice


def test_work_stealing_with_weights_finishes_every_image_once(plan, images, cluster, tmp_path):
    import torch

    from perfmodel.models import ModelSpec, build_model

    weights = tmp_path / "tiny-weights.pt"
    torch.save(build_model(ModelSpec("tiny"), seed=7).state_dict(), weights)
    folder, paths = images
    out = tmp_path / "labels.csv"
    result = run(plan, cluster, images=str(folder), out=str(out), steal=True, weights=str(weights))
    assert result.status == "complete" and result.steal
    assert sorted(pd.read_csv(out)["path"]) == sorted(str(p) for p in paths)


def test_a_thief_runs_stolen_batches_at_its_own_batch_size(plan, cluster, tmp_path):
    """U6: a worker of batch 1 stealing from one of batch 4 ran 4-image batches, a shape never timed. The
    victim holds enough batches (a tiny model's are milliseconds) that the thief, started up to seconds later
    on a loaded machine, still finds some to steal."""
    data = json.loads(plan.read_text())
    groups = [dict(data["assignments"][0], count=1) for _ in range(2)]
    for a, (batch, batches, images) in zip(groups, [(4, 1000, 4000), (1, 2, 2)]):
        a.update(batch_size=batch, batches=batches, images=images, images_total=images, last_batch=batch)
        a.update(option=f"torch fp32 batch {batch}", latency_s=0.004 + 0.002 * batch)
    data.update(assignments=groups, gpus=None, images=4002, images_by_size={"32": 4002}, images_planned=4002)
    data["images_planned_by_size"] = {"32": 4002}
    (tmp_path / "steal.json").write_text(json.dumps(data))
    result = run(tmp_path / "steal.json", cluster, synthetic=True, steal=True)
    out = result.to_dict()
    assert result.status == "complete" and out["images_done"] == 4002 and out["images_unfinished"] == 0
    thief = result.workers[1]
    assert len(thief.batches) > 2 and all(b["images"] <= 1 for b in thief.batches)  # it stole, one image a batch
    victim = out["workers"][0]
    assert victim["batches_done"] < 1000 and victim["images_done"] + thief.images_done == 4002


def test_weights_that_do_not_fit_are_refused(plan, cluster, tmp_path):
    import torch

    bad = tmp_path / "bad.pt"
    torch.save({"weight": torch.zeros(3)}, bad)
    with pytest.raises(InputError, match="the weights .*bad.pt do not fit tiny"):
        run(plan, cluster, synthetic=True, weights=str(bad))


def test_a_torchscript_model_named_by_the_plan_runs(cluster, tmp_path):
    import torch

    from perfmodel.models import ModelSpec, build_model

    script = tmp_path / "tiny.pt"
    torch.jit.save(torch.jit.script(build_model(ModelSpec("tiny"))), str(script))
    plan = write_plan(tmp_path, IMAGES, 0.2, model=str(script))
    assert json.loads(plan.read_text())["model"] == {"name": "tiny", "path": str(script)}
    assert run(plan, cluster, synthetic=True).status == "complete"


def test_a_cluster_without_the_planned_resources_is_refused(tmp_path, cluster, capsys):
    too_many = write_plan(tmp_path, 1000, 0.2, pool={"cpu": 3}, mode="relaxed", name="three.json")
    with pytest.raises(InputError, match=r"the plan needs 3 CPU\(s\), one per worker, but the Ray cluster has 2"):
        run(too_many, cluster, synthetic=True)
    gpu = write_plan(tmp_path, IMAGES, 0.2, hardware="h100", name="h100.json")
    code = main(["run", str(gpu), "--synthetic", "--address", cluster])
    assert code == 2
    err = capsys.readouterr().err
    assert "the plan needs 2 h100 GPU(s) but the Ray cluster has 0" in err and err.count("\n") == 1


def _has_parquet() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _read(path):
    return pd.read_parquet(path) if str(path).endswith(".parquet") else pd.read_csv(path)


def test_a_pool_larger_than_this_machine_is_refused_before_a_local_ray_starts(tmp_path, monkeypatch, capsys):
    import perfmodel.run.cluster

    def no_start(self):
        raise AssertionError("a local Ray was started for a plan this machine cannot run")

    monkeypatch.setattr(perfmodel.run.cluster.LocalRay, "start", no_start)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    too_many = write_plan(tmp_path, 1000, 0.2, pool={"cpu": 3}, mode="relaxed", name="three.json")
    assert main(["run", str(too_many), "--synthetic"]) == 2
    err = capsys.readouterr().err
    assert "the plan needs 3 CPU(s), one per worker, but the Ray cluster has 2" in err and err.count("\n") == 1
