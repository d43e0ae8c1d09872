"""perfmodel run on a Ray cluster of several nodes on this machine (perfmodel.run.cluster.LocalRay with
further nodes, each its own raylet with its own resources): workers placed by type, and a lost node.

One cluster serves the module: a head with one CPU (no GPU type: the cpu workers' node), a node carrying
the resource "h100" and one carrying "a100", each with one CPU. The plans run with --device cpu (this
machine has no GPU), which still places every worker on a node of its type.
"""

from __future__ import annotations

import json
import os

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
