"""experiments/lab.py: every run gets a new results folder that says where and when it ran."""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lab", Path(__file__).resolve().parents[2] / "experiments" / "lab.py")
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
    lab.finish_results(second)
    assert finished["minutes"] >= 0 and "ended_utc" in json.loads((first / "run.json").read_text())


def test_the_start_is_the_experiments_even_where_the_folder_is_made_at_the_end(tmp_path, monkeypatch):
    """004, 005 and 010 make their folder once the work is done: run.json said 0.0 minutes, started at the end."""
    monkeypatch.setattr(lab, "STARTED", (time.time() - 120, 3.5))
    folder = lab.new_results(tmp_path, argv=["run.py"])
    record = lab.finish_results(folder)
    assert record["minutes"] == 2.0 and record["load_avg_start"] == 3.5


def test_a_run_stopped_before_it_wrote_anything_leaves_no_folder(tmp_path):
    stopped, working, finished = (lab.new_results(tmp_path, argv=["run.py"]) for _ in range(3))
    (stopped / "runs").mkdir()  # 011 makes its folders first
    (working / "rounds.csv").write_text("a\n")
    lab.finish_results(finished)
    for folder in (stopped, working, finished):
        lab.drop_if_empty(folder)  # what the exit does
    assert not stopped.exists() and working.exists() and finished.exists()
