"""perfmodel run starts each worker's batches when its own model is loaded, as the plan counts it: the order
in which the driver asks its actors, with Ray replaced by a recorder (no cluster, no timing)."""

from __future__ import annotations

import sys
import types

from run_data import write_plan

from perfmodel.run import execute
from perfmodel.run.execute import RunOptions, _Execution
from perfmodel.run.planfile import read_run_plan
from perfmodel.run.state import RunState, WorkerRun


class _Call:
    def __init__(self, log: list, name: str):
        self.log, self.name = log, name

    def remote(self, *args):
        self.log.append(self.name)
        return self.name


class _Actor:
    def __init__(self, log: list, n: int):
        for method in ("ready", "load", "run", "has_work"):
            setattr(self, method, _Call(log, f"{method} {n}"))


def _fake_ray(log: list) -> types.ModuleType:
    count = iter(range(100))

    class Remote:
        def options(self, **kw):
            return self

        def remote(self, *args):
            return _Actor(log, next(count))

    ray = types.ModuleType("ray")
    ray.remote = lambda cls: Remote()
    ray.nodes = lambda: []
    ray.kill = lambda actor: None
    return ray


def test_each_worker_runs_its_batches_right_after_its_own_load(tmp_path, monkeypatch):
    plan = read_run_plan(write_plan(tmp_path, 40, 0.2))
    assert len(plan.workers) == 2
    log: list[str] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray(log))
    placement = types.SimpleNamespace(node_id=None, actor_options=lambda: {})
    monkeypatch.setattr(execute.clusters, "place", lambda *a: {w.index: placement for w in plan.workers})

    def get_all(refs, timeout_s, what):
        log.append(f"wait for {what}")
        if what == "starting the workers":
            return [dict(host="h", pid=1, threads=1, device="cpu", niceness=0)] * len(refs)
        return [{"start": 0.0, "end": 1.0}] * len(refs)

    monkeypatch.setattr(execute, "_get_all", get_all)
    monkeypatch.setattr(_Execution, "_stream", lambda self, pending: log.append(f"stream {sorted(pending)}"))
    result = RunState(plan, [WorkerRun(w, []) for w in plan.workers], "running", "synthetic", "local", "cpu", "", False)
    _Execution(plan, RunOptions(synthetic=True), result, None, lambda e: None).run("tiny", None, {"cpu": "cpu"})
    # Actors 0 and 1 are the workers, 2 the batch queue: ready before the clock starts, as the workers are.
    assert log == [
        "ready 0",
        "ready 1",
        "has_work 2",
        "wait for starting the workers",
        "load 0",
        "run 0",  # queued behind its own load: it starts when that load ends, whatever the other's does
        "load 1",
        "run 1",
        "wait for loading the models",
        "stream ['run 0', 'run 1']",
    ]
    assert result.status == "complete"
