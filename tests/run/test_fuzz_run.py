"""Fuzzing `perfmodel run`'s inputs without Ray: labels files of another run, image files that are not
regular files or not 8-bit, and what an early interrupt leaves behind."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from conftest import refused as cli_refused
from run_data import make_images, tiny_profile, write_plan

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


def _big_plan(folder, images: float):
    """A plan of the tiny CNN at batch sizes up to 1,024, for `images` in 1 h (83e9: 11,620 cpu workers of
    about 7,000 batches, as large as the fuzzing round's 27,718-GPU plan)."""
    import json

    import pandas as pd

    from perfmodel.planning.batch import make_plan

    rows = [
        dict(hardware="cpu", model="tiny", backend="torch", precision="fp32", input_size=32, batch_size=b,
             latency_ms=4 + 0.5 * b, latency_p99_ms=6 + 0.75 * b, warmup_ms=9 + 0.5 * b, memory_mb=10.0,
             status="ok", load_ms=100.0)
        for b in (1, 8, 64, 256, 1024)
    ]  # fmt: skip
    pd.DataFrame(rows).to_csv(folder / "tiny-1024.csv", index=False)
    job = make_plan(int(images), 3600.0, profiles=[folder / "tiny-1024.csv"], input_size=32, confidence="none")
    path = folder / "big.json"
    path.write_text(json.dumps(job.to_dict()))
    return path


@pytest.mark.slow  # a plan of 11,620 workers, read twice (about 8 s on the loaded 2-core VM)
def test_a_huge_plan_is_refused_before_its_inputs_are_prepared(tmp_path, monkeypatch, capsys):
    """T6 (rounds 2 and 3): `run` of a 27,718-GPU plan died of a MemoryError in shares.synthetic_batches,
    which built every worker's list of batches before the "plan needs N CPUs" check."""
    from perfmodel.run import execute

    def tripwire(*args, **kwargs):
        raise AssertionError("the inputs were prepared")

    monkeypatch.setattr(execute, "prepare_inputs", tripwire)
    big = _big_plan(tmp_path, 83e9)
    workers = read_run_plan(big).workers
    batches = sum(w.batches for w in workers)
    assert len(workers) > 10_000 and batches > 80_000_000
    err = refused(capsys, big, "--synthetic")
    assert f"the plan needs {len(workers)} CPU(s), one per worker, but the Ray cluster has" in err
    err = refused(capsys, big, "--synthetic", "--address", "127.0.0.1:1")  # its records alone: about 6 TB
    assert f"keeps a record of each of its {batches:,} batches and 83,000,000,000 images on this machine" in err


def test_a_plan_of_more_gpus_than_ray_starts_actors_is_refused_before_it_is_expanded(tmp_path, capsys):
    """A plan of 1.7 million GPUs (10^12 images) took 36 s and 635 MB to expand into one row per GPU."""
    big = _big_plan(tmp_path, 1e12)
    err = refused(capsys, big, "--synthetic")
    assert "plans 139,989 GPUs, one Ray actor each, more than the 100,000 perfmodel run starts" in err


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
    from perfmodel.run.state import RunState, WorkerRun

    def interrupted(run_plan, options, on_event):
        workers = [WorkerRun(w, [8]) for w in run_plan.workers]
        return RunState(run_plan, workers, "interrupted", "synthetic", "local", "cpu", "now", False).result()

    monkeypatch.setattr(execute, "run_plan", interrupted)
    out = tmp_path / "L.csv"
    assert main(["run", str(plan), "--synthetic", "--device", "cpu", "--out", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"no label was finished, so {out} was not written" in err and "are in" not in err


# --- the third fuzzing round (issue 41) --------------------------------------------------------------------


def _edited(tmp_path, plan, name="edited.json", rows=None, **top):
    """The plan with `rows` changed in every assignment and GPU row alike, and `top` keys set (None: removed)."""
    import json

    data = json.loads(plan.read_text())
    for row in data["assignments"] + data["gpus"]:
        row.update(rows or {})
    for key, value in top.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def _no_run(monkeypatch):
    from perfmodel.run import execute

    def tripwire(*args, **kwargs):
        raise AssertionError("the plan was run")

    monkeypatch.setattr(execute, "run_plan", tripwire)


def _gpu_row_changed(data):
    data["gpus"][0]["input_size"] = 64


@pytest.mark.parametrize(
    "edit, says",
    [
        (_gpu_row_changed, "GPU 1 (cpu, 64 px, batch 8) is none of the assignments' GPUs"),
        (lambda d: d.update(gpus=d["gpus"] * 3), '"gpus" lists 6 GPU(s) of cpu, 32 px, batch 8, but its assignment'),
        (lambda d: d.update(images=5), '"images" is 5, but "images_by_size" asks 40'),
        (lambda d: d.update(images_by_size={"32": 50}), '"images_by_size" asks 50 images of 32 px, but the'),
        (lambda d: d.update(total_gpus=0), '"total_gpus" is 0, but the assignments hold 2 GPU(s)'),
        (lambda d: d.update(gpus_by_type={"cpu": 3}), '"gpus_by_type" is {"cpu": 3}, but the assignments hold {"cpu"'),
        (lambda d: d.pop("format"), "does not say its format; make it again"),
        (lambda d: d.pop("schema_version"), "does not say its schema_version; make it again"),
        (lambda d: d.update(makespan_quantiles_s={"p50": "x"}), "\"makespan_quantiles_s\" gives 'p50' the value \"x\""),
        (lambda d: d.update(deadline_probability=7), '"deadline_probability" is 7, not a probability from 0 to 1'),
    ],
)  # fmt: skip
def test_a_plan_whose_fields_disagree_is_refused_before_ray_starts(tmp_path, plan, capsys, monkeypatch, edit, says):
    """E2 (rounds 2 and 3), U7: each of these reached the cluster connection (`--address 127.0.0.1:1`)."""
    import json

    _no_run(monkeypatch)
    data = json.loads(plan.read_text())
    edit(data)
    (tmp_path / "edited.json").write_text(json.dumps(data))
    assert says in refused(capsys, tmp_path / "edited.json", "--synthetic")


def test_a_batch_far_above_its_images_or_beyond_memory_is_refused_before_ray_starts(
    tmp_path, plan, capsys, monkeypatch
):
    """D1: batch_size 65,536 for 100 images took 3 GB and 6.8 s (0.01 s predicted); 2^20 would take ~13 GB,
    input_size 20,000 ~19 GB a batch: the worker padded every batch to the planned size without a bound."""
    import psutil

    from perfmodel.run import budget, execute

    def tripwire(*args, **kwargs):
        raise AssertionError("the inputs were prepared")

    monkeypatch.setattr(execute, "prepare_inputs", tripwire)  # after every check, before Ray starts
    for size in (65536, 2**20):
        huge = _edited(tmp_path, plan, rows=dict(batch_size=size, batches=1, last_batch=20))
        assert f"plans batches of {size:,} for its 20 images" in refused(capsys, huge, "--synthetic")
    memory = psutil.virtual_memory()._replace(available=16 * 2**30)  # 17.18 GB free, whatever this machine has
    monkeypatch.setattr(budget.psutil, "virtual_memory", lambda: memory)
    wide = _edited(tmp_path, plan, rows=dict(input_size=20000), images_by_size={"20000": 40},
                   images_planned_by_size={"20000": 40})  # fmt: skip
    err = refused(capsys, wide, "--synthetic")
    assert "need about 76.8 GB for their input batches on this machine (cpu#0: batches of 8 images of 20000 px" in err
    assert "more than the 17.18 GB available" in err


def test_a_plan_that_perfmodel_plan_made_passes_runs_checks_whatever_its_batch_fills(tmp_path, capsys):
    """The D1 rule (a batch at most MAX_FILL times its images) refused a plan of `perfmodel plan` itself, and
    sent the user back to plan, which made it again: a profile measured at batches 512 and 1024 only, 3
    images, batch 512. Plan marks the rows where it chose such a batch; run runs them, and still refuses the
    same batch where the mark is gone (an edit), or set on a GPU row but not on its assignment."""
    import json

    from perfmodel.run import budget
    from solvers.batch_solution import MAX_FILL

    profile = tiny_profile(tmp_path / "bigbatch.csv")
    frame = pd.read_csv(profile)
    frame.assign(batch_size=frame["batch_size"] * 512).iloc[:2].to_csv(profile, index=False)  # 512, 1024
    assert main(["plan", "--images", "3", "--deadline", "60s", "--profile", str(profile), "--input-size", "32",
                 "--pool", "cpu=1", "--json"]) == 0  # fmt: skip
    made = tmp_path / "made.json"
    made.write_text(capsys.readouterr().out)
    data = json.loads(made.read_text())
    assert [(r["batch_size"], r["images"], r.get("fill_planned")) for r in data["gpus"]] == [(512, 3, True)]
    budget.check(read_run_plan(made), {"cpu": "cpu"}, True, False, local=True)  # no InputError: it runs

    for row in data["assignments"] + data["gpus"]:
        del row["fill_planned"]
    unmarked = tmp_path / "unmarked.json"
    unmarked.write_text(json.dumps(data))
    err = refused(capsys, unmarked, "--synthetic")
    assert "plans batches of 512 for its 3 images: perfmodel run fills a batch up to the planned size" in err
    assert f"give that row a batch_size of at most {MAX_FILL * 3}" in err
    data["gpus"][0]["fill_planned"] = True  # on the GPU row only
    (tmp_path / "half.json").write_text(json.dumps(data))
    assert "is none of the assignments' GPUs" in refused(capsys, tmp_path / "half.json", "--synthetic")

    assert main(["plan", "--images", "40", "--deadline", "60s", "--profile", str(tiny_profile(tmp_path / "t.csv")),
                 "--input-size", "32", "--json"]) == 0  # fmt: skip
    assert not any("fill_planned" in r for r in json.loads(capsys.readouterr().out)["gpus"])  # a batch of its images


def test_a_cluster_node_without_the_memory_for_its_workers_batches_is_refused():
    """D1 on a cluster (--address): each node's workers against the memory Ray gives the node."""
    from perfmodel.errors import InputError
    from perfmodel.run import budget
    from perfmodel.run.cluster import Placement, Reservation
    from perfmodel.run.planfile import RunPlan, WorkerPlan

    worker = WorkerPlan(0, "cpu#0", "cpu", 4096, 8, 1, 8, "torch", "fp32", 1.0, 0.1, 0.05, 1.2)
    plan = RunPlan("p.json", "0" * 64, "tiny", None, 9.0, 0.1, 1.2, {4096: 8}, (worker,))
    placed = [Placement(Reservation(1, 0, {}), "node-a", "cpu")]
    nodes = [{"NodeID": "node-a", "Resources": {"CPU": 1, "memory": 1e9}}]
    with pytest.raises(InputError, match="node-a need about 1.611 GB for their input batches, more than the 1 GB"):
        budget.check_nodes(plan, {"cpu": "cpu"}, True, placed, nodes)
    nodes[0]["Resources"]["memory"] = 2e9
    budget.check_nodes(plan, {"cpu": "cpu"}, True, placed, nodes)


def test_run_without_ray_says_how_to_install_it(plan, capsys, monkeypatch):
    """E1: without the [run] extra, `ray start` failed: exit 1 with Python's ModuleNotFoundError."""
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    err = refused(capsys, plan, "--synthetic")
    assert err == "error: perfmodel run needs ray: in perfmodel's clone, pip install '.[run]'.\n"


def test_resume_refuses_duplicate_and_garbage_label_rows(tmp_path, plan, capsys):
    """D5 (rounds 2 and 3): 5 rows twice gave 23 rows for 18 images; rows of class 'abc', score -7, worker
    'nobody' or batch 'x' were counted as done. run.md promises none done twice."""
    folder = tmp_path / "images"
    paths = make_images(folder, 40)
    mine = RunIdentity.of(read_run_plan(plan).sha256, folder)
    out = tmp_path / "labels.csv"
    args = [plan, "--images", folder, "--out", out, "--resume"]
    _labels(out, paths[:5] + paths[:5], mine.plan, mine.inputs)
    assert "data rows 1 and 6 both label" in refused(capsys, *args)
    for column, value, says in (
        ("class", "abc", "class 'abc' is not a class index"),
        ("score", "-7", "score '-7' is not a score from 0 to 1"),
        ("score", "1.5", "score '1.5' is not a score from 0 to 1"),
        ("worker", "nobody", "worker 'nobody' is not a worker of this plan"),
        ("batch", "x", "batch 'x' is not a batch number"),
        ("class", "١", "class '١' is not a class index"),
    ):
        _labels(out, paths[:5], mine.plan, mine.inputs)
        frame = pd.read_csv(out, dtype=str)
        frame.loc[2, column] = value
        frame.to_csv(out, index=False)
        assert f"data row 3: {says}" in refused(capsys, *args), column


@pytest.mark.integration  # the keeper's own process
def test_a_keeper_whose_folder_is_gone_exits_quietly(tmp_path):
    """T2: SIGTERM while `run` started its keeper: the driver removed the folder, and the orphaned keeper's
    FileNotFoundError traceback (writing owner.pid) reached the terminal."""
    import subprocess
    import sys

    gone = tmp_path / "perfmodel-ray-gone"
    keeper = subprocess.run(
        [sys.executable, "-m", "perfmodel.run.keeper", "--temp-dir", str(gone), "--num-cpus", "1"],
        capture_output=True,
        timeout=120,
    )
    assert keeper.returncode == 1 and keeper.stderr == b"" and keeper.stdout == b"", keeper.stderr[-500:]


@pytest.mark.integration  # a real (sleeping) subprocess stands in for the keeper
def test_an_interrupt_as_the_keeper_starts_stops_the_keeper(tmp_path, monkeypatch):
    """T2: a signal while Popen started the keeper raised inside Popen, which returned no process: stop() had
    none to terminate, and the keeper lived on (to print a traceback once its folder was gone)."""
    import signal
    import subprocess
    import sys
    import tempfile

    from perfmodel.run import cluster

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real, started = subprocess.Popen, []

    def popen(command, **kwargs):
        started.append(real([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs))
        signal.raise_signal(signal.SIGINT)  # Ctrl-C the moment the keeper exists
        return started[-1]

    monkeypatch.setattr(cluster.subprocess, "Popen", popen)
    local = cluster.LocalRay(1)
    try:
        with pytest.raises(KeyboardInterrupt):
            local.start()
        assert started[0].wait(timeout=30) is not None  # terminated by stop(), not left to run
    finally:
        if started and started[0].poll() is None:
            started[0].kill()
    assert list(tmp_path.glob(cluster.TEMP_PREFIX + "*")) == []


@pytest.mark.parametrize(("sig", "name"), [("SIGTERM", "SIGTERM"), ("SIGINT", "Ctrl-C")])
def test_sigterm_once_every_batch_is_done_prints_the_result_and_exits_0(plan, monkeypatch, capsys, sig, name):
    """E2: SIGTERM when all labels were written (while Ray was being stopped) gave exit 143 and no output, a
    Ctrl-C exit 130 and no result. (test_run_signals.py: the same with a real Ray.)"""
    import os
    import signal

    from perfmodel.run import execute

    class Local:
        settings: dict = {}

        def __init__(self, *args):
            pass

        def nodes(self):
            return [{"Alive": True, "Resources": {"CPU": 2}}]

        def start(self):
            return "127.0.0.1:1"

        def stop(self):
            os.kill(os.getpid(), getattr(signal, sig))  # while Ray is stopped, the work done

    def finish(self, model, model_path, device_of):
        for w in self.state.workers:
            for i, n in enumerate(w.given):
                w.batches.append(
                    dict(seq=i, owner=w.plan.index, batch=i, start=0.2 + 0.02 * i, end=0.22 + 0.02 * i, model_s=0.02,
                         wait_s=0.0, decode_s=0.0, images=n, paths=None, classes=[], scores=[], failed=[])
                )  # fmt: skip
            w.status = "done"
        self.state.status = "complete"

    monkeypatch.setattr(execute.clusters, "LocalRay", Local)
    monkeypatch.setattr(execute.clusters, "connect", lambda *args: None)
    monkeypatch.setattr(execute._Execution, "run", finish)
    assert main(["run", str(plan), "--synthetic"]) == 0
    out, err = capsys.readouterr()
    assert "40 of 40 images; makespan" in out
    assert f"{name} came once every batch was done: the run is complete." in err
