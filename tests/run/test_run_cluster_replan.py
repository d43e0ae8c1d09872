"""The re-plan suggestion after a lost node (no Ray needed): enough survivors say so; too few get the
number of added workers of each type that brings the deadline back to the plans' confidence."""

from __future__ import annotations

from perfmodel.run.planfile import WorkerPlan
from perfmodel.run.replan import CONFIDENCE, suggest
from perfmodel.run.state import WorkerRun


def worker(index: int, hardware: str, batch_s: float, done: int, status: str = "running") -> WorkerRun:
    plan = WorkerPlan(
        index, f"{hardware}#{index}", hardware, 224, 8, 100, 800, "torch", "fp32", 2.0, 0.5, batch_s, 52.5
    )
    w = WorkerRun(plan, [8] * 100, status=status)
    t = 2.0
    for k in range(done):  # measured: 10% slower than planned, with a little spread
        length = batch_s * (1.1 + 0.02 * (k % 3 - 1))
        w.batches.append({"owner": index, "batch": k, "start": t, "end": t + length, "images": 8})
        t += length
    return w


def test_enough_survivors_need_nothing_added():
    workers = [worker(0, "h100", 0.1, 50), worker(1, "a100", 0.2, 25, status="lost"), worker(2, "h100", 0.1, 50)]
    out = suggest(workers, workers[1], now_s=7.5, images_left=800, deadline_s=60)
    assert out.enough and out.add == () and out.probability_with_survivors >= CONFIDENCE
    end = out.end_with_survivors_s
    assert 7.5 < end["p50"] <= end["p95"] < 60  # 800 images at ~145 images/s from 7.5 s: about 13 s


def test_too_few_survivors_get_the_workers_that_would_hold_the_deadline():
    workers = [worker(0, "h100", 0.5, 10), worker(1, "a100", 1.0, 5, status="lost")]
    out = suggest(workers, workers[1], now_s=7.5, images_left=1200, deadline_s=60)
    assert not out.enough and out.probability_with_survivors < 0.5
    by_type = {a.hardware: a for a in out.add}
    assert set(by_type) == {"h100", "a100"}
    assert by_type["a100"].workers >= by_type["h100"].workers >= 1  # the slower type needs more
    for a in out.add:
        assert a.probability >= CONFIDENCE
        fewer = suggest(workers, workers[1], 7.5, 1200, 60)  # deterministic: the same answer again
        assert fewer.add == out.add


def test_a_deadline_already_past_cannot_be_held():
    workers = [worker(0, "h100", 0.5, 10), worker(1, "a100", 1.0, 5, status="lost")]
    out = suggest(workers, workers[1], now_s=70, images_left=80, deadline_s=60)
    assert not out.enough and out.add == ()


def test_the_text_names_what_to_add():
    from perfmodel.run.text import replan_line

    workers = [worker(0, "h100", 0.5, 10), worker(1, "a100", 1.0, 5, status="lost")]
    line = replan_line(suggest(workers, workers[1], 7.5, 1200, 60), 60)
    assert "the 1 surviving worker(s)" in line and "add 1 h100 (P" in line and " or " in line
    assert "no number of added workers" in replan_line(suggest(workers, workers[1], 70, 80, 60), 60)
