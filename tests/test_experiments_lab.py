"""experiments/lab.py: every run gets a new results folder that says where and when it ran."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lab", Path(__file__).resolve().parents[1] / "experiments" / "lab.py")
lab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lab)


def test_each_run_gets_a_new_folder_that_records_machine_commit_time_and_load(tmp_path):
    first = lab.new_results(tmp_path, argv=["run.py", "--quick"])
    second = lab.new_results(tmp_path, argv=["run.py"])
    assert first != second and second.name == first.name + "-2"  # the same day, machine and commit
    assert first.parent == tmp_path / "results"
    record = json.loads((first / "run.json").read_text())
    assert record["commit"] == lab.commit() and record["commit"] in first.name
    assert record["command"] == "run.py --quick" and record["machine"] and record["load_avg_start"] >= 0
    finished = lab.finish_results(first)
    assert finished["minutes"] >= 0 and "ended_utc" in json.loads((first / "run.json").read_text())
