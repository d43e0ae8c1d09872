"""perfmodel run on a Ray cluster of several nodes on this machine (perfmodel.run.cluster.LocalRay with
further nodes, each its own raylet with its own resources): workers placed by type, and a lost node.

One cluster serves the module: a head with one CPU (no GPU type: the cpu workers' node), a node carrying
the resource "h100" and one carrying "a100", each with one CPU. The plans run with --device cpu (this
machine has no GPU), which still places every worker on a node of its type.
"""

from __future__ import annotations

import json
import os

import pandas as pd
import psutil
import pytest
from run_data import alive, ray_processes_of, tiny_profile

from perfmodel.cli import main
from perfmodel.planning.batch import make_plan
from perfmodel.run.cluster import LocalRay, NodeSpec, connect

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# A lost node is noticed by the head's health check: every 0.5 s, dead after 3 misses (Ray's default
# takes tens of seconds, which the tests need not wait).
FAST_HEALTH_CHECK = {
    "RAY_health_check_initial_delay_ms": "0",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


@pytest.fixture(scope="module")
def cluster():
    saved = dict(os.environ)
    os.environ.update(FAST_HEALTH_CHECK)
    local = LocalRay(num_cpus=1, nodes=[NodeSpec(1, 0, {"h100": 1}), NodeSpec(1, 0, {"a100": 1})])
    try:
        local.start()
        os.environ.update(local.settings)  # the token of this cluster, as a user's shell would hold it
        yield local
    finally:
        started = [psutil.Process(local.process.pid), *ray_processes_of(local.process.pid)] if local.process else []
        local.stop()
        os.environ.clear()
        os.environ.update(saved)
        assert alive(started) == [] and not local.temp_dir.exists()  # nothing of it left


def plan_for(folder, pool: dict[str, int], images: int, deadline_s: float, **kw):
    profiles = [tiny_profile(folder / f"{h}.csv", hardware=h) for h in pool]
    kw.setdefault("confidence", "none")  # the plan as the tests lay it out, not widened for a probability
    job = make_plan(images, deadline_s, profiles=profiles, pool=pool, input_size=32, **kw)
    path = folder / "plan.json"
    path.write_text(json.dumps(job.to_dict()))
    return path


def node_resources(local: LocalRay) -> dict[str, dict]:
    """Node ID -> its resources, as the cluster lists them."""
    import ray

    connect(local.address, local.settings)
    try:
        return {n["NodeID"]: n["Resources"] for n in ray.nodes() if n["Alive"]}
    finally:
        ray.shutdown()


def test_a_heterogeneous_pool_runs_each_type_on_its_own_node(cluster, tmp_path, capsys):
    plan = plan_for(tmp_path, {"h100": 1, "a100": 1, "cpu": 1}, 10_000, 0.3, mode="relaxed")
    assert main(["run", str(plan), "--synthetic", "--device", "cpu", "--address", cluster.address, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "complete" and data["images_done"] == data["images_planned"]
    nodes = node_resources(cluster)
    where = {w["hardware"]: nodes[w["node"]] for w in data["workers"]}
    assert set(where) == {"h100", "a100", "cpu"}
    assert where["h100"].get("h100") == 1 and where["a100"].get("a100") == 1
    assert "h100" not in where["cpu"] and "a100" not in where["cpu"]  # the cpu worker on the plain node


def test_a_cluster_without_a_planned_type_is_refused_before_anything_runs(cluster, tmp_path, capsys):
    plan = plan_for(tmp_path, {"l4": 2}, 100, 0.3)
    assert main(["run", str(plan), "--synthetic", "--device", "cpu", "--address", cluster.address]) == 2
    err = capsys.readouterr().err
    assert "the plan needs 2 l4 GPU(s) but the Ray cluster has 0" in err and err.count("\n") == 1


def lose_when(local: LocalRay, node: int, worker: str, batches: int):
    """An on_event callback that kills `node` once `worker` has done `batches` batches."""
    state = {"lost": False}

    def on_event(e) -> None:
        if state["lost"] or e.kind != "progress":
            return
        done = {p.hardware: p.images_done for p in e.progress}
        if done.get(worker.split("#")[0], 0) >= batches * 8:
            local.lose_node(node)
            state["lost"] = True

    return on_event, state


def test_a_lost_node_is_survived_each_image_labelled_once(cluster, tmp_path):
    from perfmodel.run.execute import RunOptions, run_plan
    from perfmodel.run.planfile import read_run_plan
    from perfmodel.run.text import lost_line, replan_line

    plan = read_run_plan(plan_for(tmp_path, {"h100": 1, "a100": 1, "cpu": 1}, 36_000, 30, mode="relaxed"))
    out = tmp_path / "labels.csv"
    on_event, state = lose_when(cluster, 1, "h100#0", 3)
    options = RunOptions(synthetic=True, out=str(out), address=cluster.address, device="cpu")
    result = run_plan(plan, options, on_event)
    data = result.to_dict()
    assert state["lost"], "the node was not lost while the run went on"
    assert data["status"] == "complete" and data["images_done"] == data["images_planned"], data["status"]
    labels = pd.read_csv(out)
    assert len(labels) == data["images_planned"] and labels["path"].is_unique  # each image once
    [lost] = data["lost_workers"]
    assert lost["worker"] == "h100#0" and lost["batches_put_back"] > 0 and set(lost["rerun_on"]) <= {"a100#0", "cpu#0"}
    assert len(data["rerun_batches"]) == lost["batches_put_back"]
    assert {b["owner"] for b in data["rerun_batches"]} == {"h100#0"}
    batch_size = {w["worker"]: w["batch_size"] for w in data["workers"]}  # split for the smallest survivor
    assert all(b["images"] <= batch_size[b["worker"]] for b in data["rerun_batches"]), data["rerun_batches"]
    assert data["later_than_planned_s"] is not None and data["met_deadline"] is not None
    h100 = data["workers"][[w["hardware"] for w in data["workers"]].index("h100")]
    assert h100["status"] == "lost"
    said = lost_line(result.lost_workers[0], result)
    assert "re-run on" in said and "deadline" in said
    replan = lost["replan"]  # the survivors have seconds of work left against a 30 s deadline
    assert replan["enough"] and replan["add"] == [] and replan["survivors"] == 2
    assert "make the 30 s deadline with probability" in replan_line(result.lost_workers[0].replan, 30)


def test_a_lost_node_whose_work_nobody_can_take_exits_1_with_the_labels_kept(cluster, tmp_path, capsys):
    """After the test above, the a100 node is the only typed one left: losing it leaves no a100 worker."""
    from perfmodel.run.execute import RunOptions, run_plan
    from perfmodel.run.planfile import read_run_plan

    plan = read_run_plan(plan_for(tmp_path, {"a100": 1}, 12_000, 30, mode="relaxed"))
    out = tmp_path / "labels.csv"
    on_event, state = lose_when(cluster, 2, "a100#0", 3)
    result = run_plan(plan, RunOptions(synthetic=True, out=str(out), address=cluster.address, device="cpu"), on_event)
    data = result.to_dict()
    assert state["lost"] and data["status"] == "worker-failed" and data["images_unfinished"] > 0
    assert len(pd.read_csv(out)) == data["images_done"] > 0  # the finished labels are kept
    assert data["lost_workers"][0]["rerun_on"] == [] and data["rerun_batches"] == []
