"""Executing plans on Ray: one actor per planned GPU, each doing exactly its share; measured beside predicted.

    plan = perfmodel.read_run_plan("plan.json")          # a plan from `perfmodel plan --json`, checked
    result = perfmodel.run_plan(plan, perfmodel.RunOptions(images="photos/", out="labels.csv"))
    result.to_dict()                                       # the JSON of `perfmodel run --json`

Ray is imported only when a run starts.
"""

from perfmodel.run.execute import RunEvent, RunOptions, run_plan
from perfmodel.run.planfile import RunPlan, WorkerPlan, read_run_plan
from perfmodel.run.result import RunResult, WorkerRun

__all__ = ["RunEvent", "RunOptions", "RunPlan", "RunResult", "WorkerPlan", "WorkerRun", "read_run_plan", "run_plan"]
