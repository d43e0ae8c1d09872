"""Executing plans on Ray: one actor per planned GPU, each doing exactly its share; measured beside predicted.

    plan = perfmodel.read_run_plan("plan.json")          # a plan from `perfmodel plan --json`, checked
    result = perfmodel.run_plan(plan, perfmodel.RunOptions(images="photos/", out="labels.csv"))
    result.to_dict()                                       # the JSON of `perfmodel run --json`

Names are imported on first use (PEP 562), so that `python -m perfmodel.run.keeper` starts light and
Ray is imported only when a run starts.
"""

from perfmodel.lazy import lazy_getattr

_NAMES = {
    "RunEvent": "perfmodel.run.execute",
    "RunOptions": "perfmodel.run.execute",
    "run_plan": "perfmodel.run.execute",
    "RunPlan": "perfmodel.run.planfile",
    "WorkerPlan": "perfmodel.run.planfile",
    "read_run_plan": "perfmodel.run.planfile",
    "RunResult": "perfmodel.run.result",
    "WorkerResult": "perfmodel.run.result",
    "RunState": "perfmodel.run.state",
    "WorkerRun": "perfmodel.run.state",
}

__all__ = sorted(_NAMES)


__getattr__ = lazy_getattr(__name__, _NAMES)
