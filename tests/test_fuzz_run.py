"""Fuzzing `perfmodel run`'s inputs without Ray: labels files of another run, image files that are not
regular files or not 8-bit, and what an early interrupt leaves behind."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from conftest import refused as cli_refused
from run_data import make_images, write_plan

from perfmodel.cli import main
from perfmodel.run.labels import RunIdentity
from perfmodel.run.planfile import read_run_plan


@pytest.fixture
def plan(tmp_path):
    return write_plan(tmp_path, 40, 0.2)


def refused(capsys, *args) -> str:
    return cli_refused(capsys, "run", *args)


def _labels(out, paths, plan_id, inputs_id):
    rows = [(str(p), 1, 0.5, "cpu#0", 0, plan_id, inputs_id) for p in paths]
    pd.DataFrame(rows, columns=["path", "class", "score", "worker", "batch", "plan", "inputs"]).to_csv(out, index=False)


def test_resume_refuses_the_labels_of_another_plan_or_another_folder(tmp_path, plan, capsys):
    folder, other = tmp_path / "images", tmp_path / "other"
    paths = make_images(folder, 40)
    shutil.copytree(folder, other)
    mine = RunIdentity.of(read_run_plan(plan).sha256, folder)
    out = tmp_path / "labels.csv"
    args = [plan, "--images", folder, "--out", out, "--resume"]

    _labels(out, paths[:10], "0123456789abcdef", mine.inputs)
    assert "holds labels of another plan" in refused(capsys, *args)
    _labels(out, paths[:10], mine.plan, RunIdentity.of(read_run_plan(plan).sha256, other).inputs)
    assert "holds labels of another images folder" in refused(capsys, *args)
    _labels(out, [other / p.relative_to(folder) for p in paths[:10]], mine.plan, mine.inputs)
    assert "names 10 image(s) that are not among this run's files" in refused(capsys, *args)
    out.write_text("path,class,score,worker,batch\n" + "".join(f"{p},1,0.5,cpu#0,0\n" for p in paths))
    assert "does not say which plan and images it belongs to" in refused(capsys, *args)
    _labels(out, paths, mine.plan, mine.inputs)
    out.write_text(out.read_text().replace("\n", ",\n").replace("inputs,\n", "inputs\n", 1))  # trailing commas
    assert main(["run", *map(str, args)]) == 0  # every image done before: no Ray started
    assert "0 of 40 images (+40 done before)" in capsys.readouterr().out
    _labels(out, paths, mine.plan, mine.inputs)
    lines = out.read_text().splitlines()
    out.write_text("\n".join([lines[0], lines[1].rsplit(",", 2)[0], *lines[2:]]) + "\n")  # a truncated row
    assert "data row 1 has an empty cell" in refused(capsys, *args)


def test_the_labels_file_of_a_plan_reformatted_is_another_plan(tmp_path, plan, capsys):
    """The plan is named by its file's sha256: a plan rewritten is refused rather than guessed the same."""
    folder = tmp_path / "images"
    paths = make_images(folder, 40)
    out = tmp_path / "labels.csv"
    _labels(out, paths, RunIdentity.of(read_run_plan(plan).sha256, folder).plan, RunIdentity.of("", folder).inputs)
    other = tmp_path / "again.json"
    other.write_text(plan.read_text() + "\n")
    assert "holds labels of another plan" in refused(capsys, other, "--images", folder, "--out", out, "--resume")


# --- image files that are not regular files, or not 8-bit ---------------------------------------------------


def _in_thread(call, *args):
    """call(*args) in a thread, given 20 s: a read that blocks (a FIFO) fails the test instead of hanging it."""
    import threading

    box = {}

    def target():
        try:
            box["value"] = call(*args)
        except Exception as exc:  # the test looks at what was raised
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), f"{call.__name__} blocked"
    return box


def test_a_fifo_named_png_is_skipped_when_listed_and_refused_when_read(tmp_path):
    import os

    from perfmodel.run.images import NotRegularFile, decode, find_images, size_classes

    folder = tmp_path / "images"
    make_images(folder, 3)
    os.mkfifo(folder / "pipe.png")
    images, skipped = find_images(folder)
    assert (
        str(folder / "pipe.png") not in images and (str(folder / "pipe.png"), "not a regular file (a FIFO)") in skipped
    )
    late = tmp_path / "late.png"  # a FIFO that appears between the listing and the reading
    os.mkfifo(late)
    assert isinstance(_in_thread(decode, str(late), 32)["error"], NotRegularFile)
    classes, unreadable = _in_thread(size_classes, [str(late), *images], [32, 64])["value"]
    assert unreadable == [(str(late), "NotRegularFile: not a regular file (a FIFO)")]
    assert sum(map(len, classes.values())) == 3


def test_a_16_bit_png_is_scaled_not_clipped(tmp_path):
    import numpy as np
    from PIL import Image

    from perfmodel.run.images import decode

    ramp = np.linspace(0, 65535, 48 * 48).reshape(48, 48).astype(np.uint16)
    Image.fromarray(ramp).save(tmp_path / "deep.png")
    Image.fromarray((ramp // 257).astype(np.uint8)).save(tmp_path / "eight.png")
    assert Image.open(tmp_path / "deep.png").mode == "I;16"
    deep, eight = decode(str(tmp_path / "deep.png"), 32), decode(str(tmp_path / "eight.png"), 32)
    assert deep.shape == eight.shape == (3, 32, 32)
    assert np.abs(deep - eight).max() < 0.05  # within 8-bit rounding, in units of ImageNet's std
    assert len(np.unique(deep[0])) > 100  # not saturated to one value


# --- an interrupt while the local Ray starts ---------------------------------------------------------------


@pytest.mark.integration  # a real (sleeping) subprocess stands in for the keeper
@pytest.mark.parametrize("where", ["in Popen", "before the keeper's handler"])
def test_an_interrupt_while_the_keeper_starts_leaves_no_folder(tmp_path, monkeypatch, where):
    """Interrupted within ~0.1 s of its start, `run` left an empty perfmodel-ray-* folder without an owner
    file (the keeper killed by SIGTERM before its handler was set), which no later run removed."""
    import signal
    import subprocess
    import sys
    import tempfile

    from perfmodel.run import cluster

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = subprocess.Popen

    def popen(command, **kwargs):
        if where == "in Popen":
            raise KeyboardInterrupt
        # a keeper still importing: SIGTERM's default action kills it, and it never answers
        return real([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)

    monkeypatch.setattr(cluster.subprocess, "Popen", popen)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    local = cluster.LocalRay(1)
    try:
        with pytest.raises(KeyboardInterrupt):
            local.start()
        local.stop()  # as run_plan does, however the run ends
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert list(tmp_path.glob(cluster.TEMP_PREFIX + "*")) == []


def test_a_keeper_whose_driver_is_gone_cleans_up_without_a_traceback(tmp_path):
    """SIGKILL of `run` while Ray starts: the keeper's 'failed ...' line met a closed pipe, and its
    BrokenPipeError traceback reached the terminal."""
    import subprocess
    import sys
    import time

    folder = tmp_path / "perfmodel-ray-x"
    folder.mkdir()
    code = (
        "import sys, time\n"
        "import perfmodel.run.keeper as k\n"
        "def start(self, args):\n"
        "    time.sleep(1.5)\n"
        "    raise RuntimeError('stopped while starting')\n"
        "k.Keeper.start = start\n"
        f"sys.exit(k.main(['--temp-dir', {str(folder)!r}, '--num-cpus', '1']))\n"
    )
    keeper = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path)
    )
    time.sleep(0.5)
    keeper.stdout.close()  # the driver is gone
    _, err = keeper.communicate(timeout=60)
    assert keeper.returncode == 1
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()[-500:]
    assert not folder.exists()


def test_labels_whose_folder_is_removed_during_the_run_are_one_sentence(tmp_path):
    """rm -rf of the --out folder during a run: the periodic flush raised FileNotFoundError (a traceback)."""
    from perfmodel.errors import InputError, PerfmodelError
    from perfmodel.run.labels import LabelWriter

    folder = tmp_path / "out"
    folder.mkdir()
    writer = LabelWriter(folder / "labels.csv", RunIdentity("p" * 16, "i" * 16))
    writer.add([("a.jpg", 1, 0.5, "cpu#0", 0)])
    writer.flush()
    shutil.rmtree(folder)
    writer.add([("b.jpg", 2, 0.5, "cpu#0", 1)])
    with pytest.raises(PerfmodelError, match="its folder was removed during the run") as caught:
        writer.flush()
    assert not isinstance(caught.value, InputError)  # exit 1: a failure while running, not bad input


def test_a_plan_for_a_trillion_images_is_refused_before_its_batches_are_built():
    """run of a plan for 10^12 images: a MemoryError building the list of batches (a traceback)."""
    from perfmodel.errors import InputError
    from perfmodel.run.planfile import WorkerPlan
    from perfmodel.run.shares import synthetic_batches

    worker = WorkerPlan(0, "cpu#0", "cpu", 64, 16, 62_500_000_000, 10**12, "torch", "fp32", 1.0, 0.1, 0.05, 9e9)
    with pytest.raises(InputError, match="would run 62,500,000,000 batches"):
        synthetic_batches(worker)


def test_sigterm_while_the_inputs_are_prepared_is_143(plan, monkeypatch, capsys):
    """It exited 130 'interrupted', as a Ctrl-C."""
    import os
    import signal
    import time

    from perfmodel.run import execute

    def prepare(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler raises here

    monkeypatch.setattr(execute, "prepare_inputs", prepare)
    assert main(["run", str(plan), "--synthetic", "--device", "cpu"]) == 143
    err = capsys.readouterr().err
    assert err == "error: terminated before the run started: nothing was done.\n"


def test_an_interrupt_before_any_label_does_not_say_the_labels_are_kept(plan, tmp_path, monkeypatch, capsys):
    """An interrupted run --out L.csv said the finished labels were in L.csv when none was written."""
    from perfmodel.run import execute
    from perfmodel.run.result import RunResult, WorkerRun

    def interrupted(run_plan, options, on_event):
        workers = [WorkerRun(w, [8]) for w in run_plan.workers]
        return RunResult(run_plan, workers, "interrupted", "synthetic", "local", "cpu", "now", False)

    monkeypatch.setattr(execute, "run_plan", interrupted)
    out = tmp_path / "L.csv"
    assert main(["run", str(plan), "--synthetic", "--device", "cpu", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"no label was finished, so {out} was not written" in err and "are in" not in err
