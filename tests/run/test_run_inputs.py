"""perfmodel run without Ray: bad input refused in one sentence (exit 2) before anything starts, and the
parts that need no cluster (plan reading, shares, stealing, reservations, the worker itself)."""

from __future__ import annotations

import json
import socket

import pytest
from conftest import refused as cli_refused
from run_data import fake_run, make_images, write_plan

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.run import cluster as clusters
from perfmodel.run import execute
from perfmodel.run.images import decode, size_classes
from perfmodel.run.labels import RunIdentity
from perfmodel.run.planfile import read_run_plan
from perfmodel.run.shares import split, synthetic_batches
from perfmodel.run.steal import BatchQueue


@pytest.fixture
def plan(tmp_path):
    return write_plan(tmp_path, 40, 0.2)


def refused(capsys, *args) -> str:
    return cli_refused(capsys, "run", *args)


def edited(tmp_path, plan, name="edited.json", **changes):
    data = json.loads(plan.read_text())
    for key, value in changes.items():
        if key.startswith("gpus_"):  # every GPU and its assignment alike (a row repeats its assignment)
            for row in data["gpus"] + data["assignments"]:
                if value is None:
                    row.pop(key[5:], None)
                else:
                    row[key[5:]] = value
        elif value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_plans_that_cannot_be_run_are_refused(tmp_path, plan, capsys):
    (tmp_path / "text.json").write_text("not json")
    assert "is not a plan: it is not JSON" in refused(capsys, tmp_path / "text.json", "--synthetic")
    assert "does not exist" in refused(capsys, tmp_path / "missing.json", "--synthetic")
    infeasible = edited(tmp_path, plan, status="infeasible", reason="1,000 images need 3 more cpu")
    assert "is an infeasible plan (1,000 images need 3 more cpu)" in refused(capsys, infeasible, "--synthetic")
    old = edited(tmp_path, plan, model=None)
    assert "does not name its model; make it again" in refused(capsys, old, "--synthetic")
    triton = edited(tmp_path, plan, gpus_backend="triton-grpc")
    assert "executes in-process PyTorch only" in refused(capsys, triton, "--synthetic")
    unknown_backend = edited(tmp_path, plan, gpus_backend="torch-fast")
    assert "re-plan with --backend torch" in refused(capsys, unknown_backend, "--synthetic")
    graphs = edited(tmp_path, plan, gpus_backend="torch-cuda-graphs")
    assert "needs a CUDA device (CUDA graphs): run it with --device cuda" in refused(capsys, graphs, "--synthetic")
    negative = edited(tmp_path, plan, gpus_batches=-1)
    assert '"batches" is -1, not a whole number from 1 to' in refused(capsys, negative, "--synthetic")
    unknown = edited(tmp_path, plan, model={"name": "mynet", "path": None})
    assert "give its TorchScript file (a .pt) as --model." in refused(capsys, unknown, "--synthetic")
    assert "is a directory: give the TorchScript file" in refused(capsys, plan, "--synthetic", "--model", tmp_path)


@pytest.mark.parametrize(
    "change, says",
    [
        (dict(gpus_batch_size=2**20 + 1), '"batch_size" is 1048577, not a whole number from 1 to 1,048,576'),
        (dict(gpus_input_size=70000), '"input_size" is 70000, not a whole number from 1 to 65,536'),
        (dict(gpus_hardware="../../x y"), '"hardware" is "../../x y", not a GPU type name'),
        (dict(gpus_images=10**6), '"images" is 1000000, which is not what'),
        (dict(gpus_latency_s=1e308), '"latency_s" is 1e+308, not a number of seconds from 0 to 10 years'),
        (dict(gpus_precision="fp7"), '"precision" is "fp7", not one of fp32'),
        (dict(gpus_precision="int8"), "uses precision int8, but perfmodel run executes PyTorch in fp32"),
        (dict(gpus_load_s=None), 'does not say its "load_s"'),
    ],
)
def test_a_bad_gpu_row_is_refused_before_ray_starts(tmp_path, plan, capsys, monkeypatch, change, says):
    """Each per-GPU row is checked as the plan's assignments are, by the one plan checker."""

    def tripwire(*args, **kwargs):
        raise AssertionError("the plan was run")

    monkeypatch.setattr(execute, "run_plan", tripwire)
    assert says in refused(capsys, edited(tmp_path, plan, **change), "--synthetic")


def test_bad_images_and_options_are_refused(tmp_path, plan, capsys):
    assert "does not exist" in refused(capsys, plan, "--images", tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    assert "holds no JPEG, PNG or WebP file" in refused(capsys, plan, "--images", tmp_path / "empty")
    assert "is a file, not a folder" in refused(capsys, plan, "--images", plan)
    many = tmp_path / "many"
    make_images(many, 41)
    assert "there are 41 images for the 32 px class but the plan covers 40" in refused(capsys, plan, "--images", many)
    assert "--resume needs --out" in refused(capsys, plan, "--images", many, "--resume")
    assert "write labels to a .csv or .parquet file" in refused(
        capsys, plan, "--synthetic", "--out", tmp_path / "l.txt"
    )
    assert "one of the arguments --images --synthetic is required" in refused(capsys, plan)
    assert "not allowed with argument" in refused(capsys, plan, "--synthetic", "--images", many)
    assert "--device cuda: this plan's workers are of type cpu" in refused(
        capsys, plan, "--synthetic", "--device", "cuda"
    )
    assert "--decode-threads: must be a positive whole number" in refused(
        capsys, plan, "--synthetic", "--decode-threads", "0"
    )


def test_a_gpu_plan_on_a_machine_without_gpus_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(clusters, "local_gpus", lambda: {})
    gpu = write_plan(tmp_path, 40, 0.2, hardware="h100")
    assert "this plan runs on GPUs (--device cuda), but this machine has none" in refused(capsys, gpu, "--synthetic")


def test_an_unreachable_address_is_refused_at_once(plan, capsys, monkeypatch, tmp_path):
    with socket.socket() as s:  # a port on which nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert f"no Ray cluster answers at 127.0.0.1:{port}" in refused(
        capsys, plan, "--synthetic", "--address", f"127.0.0.1:{port}"
    )
    assert "is not host:port" in refused(capsys, plan, "--synthetic", "--address", "nowhere")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(clusters, "DEFAULT_RAY_ADDRESS_FILE", tmp_path / "none")
    assert "--address auto found no running Ray cluster" in refused(capsys, plan, "--synthetic", "--address", "auto")


def test_an_address_where_something_else_listens_is_refused_within_seconds(plan, capsys, monkeypatch):
    """A web server, or a port that accepts and stays silent, at --address: ray.init retried for minutes."""
    import http.server
    import threading

    monkeypatch.setattr(clusters, "CONNECT_TIMEOUT_S", 0.5)

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # not on the stderr the test reads
            pass

    web = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        try:
            for address in (
                f"127.0.0.1:{web.server_port}",
                f"127.0.0.1:{silent.getsockname()[1]}",
                f"ray://127.0.0.1:{web.server_port}",
            ):
                said = refused(capsys, plan, "--synthetic", "--address", address)
                assert f"{address} does not answer as a Ray cluster" in said
        finally:
            web.shutdown()
            web.server_close()


def test_the_plan_expands_to_one_worker_per_gpu(plan):
    run_plan = read_run_plan(plan)
    assert [w.name for w in run_plan.workers] == ["cpu#0", "cpu#1"]
    w = run_plan.workers[0]
    assert (w.backend, w.precision, w.input_size) == ("torch", "fp32", 32)
    assert w.predicted_end(w.batches) == pytest.approx(w.finish_s)
    assert synthetic_batches(w) == [8, 8, 4]


def test_fewer_files_shrink_every_share_in_proportion(plan):
    run_plan = read_run_plan(plan)
    shares = split(run_plan, {32: [f"f{i}" for i in range(31)]})
    assert sorted(len(s) for s in shares.values()) == [15, 16]
    assert sorted(sum(shares.values(), [])) == sorted(f"f{i}" for i in range(31))


def test_files_go_to_the_smallest_class_that_holds_their_shorter_side(tmp_path):
    paths = [str(p) for p in make_images(tmp_path, 6, sizes=(24, 40, 100))]
    classes, skipped = size_classes(paths, [32, 64])
    assert [len(classes[32]), len(classes[64]), len(skipped)] == [2, 4, 0]
    array = decode(paths[0], 32)
    assert array.shape == (3, 32, 32) and array.dtype.name == "float32"


def test_stealing_takes_the_last_unstarted_batch_of_the_latest_worker():
    queue = BatchQueue(
        {0: ["a0"], 1: ["b0", "b1", "b2"], 2: ["c0"]}, {0: 32, 1: 32, 2: 64}, {0: 1.0, 1: 1.0, 2: 9.0}, steal=True
    )
    assert queue.take(0) == (0, 0, "a0")
    assert queue.take(0) == (1, 2, "b2")  # worker 2 has more time left, but another input size
    assert queue.take(1) == (1, 0, "b0") and queue.take(1) == (1, 1, "b1") and queue.take(1) is None
    assert BatchQueue({0: [], 1: ["b0"]}, {0: 32, 1: 32}, {0: 1, 1: 1}, steal=False).take(0) is None


def test_placements_name_the_missing_resource():
    nodes = [{"Alive": True, "Resources": {"CPU": 16, "GPU": 2, "accelerator_type:H100": 1}}]
    got = clusters.place(["h100"] * 2, "cuda", nodes)
    assert got[0].actor_options() == {"num_cpus": 1, "num_gpus": 1, "resources": {"accelerator_type:H100": 0.001}}
    custom = [{"Alive": True, "Resources": {"CPU": 16, "GPU": 4, "a100": 4}}]
    assert clusters.place(["a100"] * 3, "cuda", custom)[2].reservation.resources == {"a100": 1}
    with pytest.raises(InputError, match="needs 3 h100 GPU.* has 2"):
        clusters.place(["h100"] * 3, "cuda", nodes)
    dry = clusters.place(["h100"] * 3, "cpu", nodes)[0].actor_options()  # a dry run still goes to its type's nodes
    assert dry == {"num_cpus": 1, "num_gpus": 0, "resources": {"accelerator_type:H100": 0.001}}
    plain = [{"Alive": True, "Resources": {"CPU": 4}}]  # a local Ray without GPUs: a dry run goes anywhere
    assert clusters.place(["h100"] * 3, "cpu", plain)[0].actor_options() == {"num_cpus": 1, "num_gpus": 0}


def test_the_worker_runs_its_batches_without_ray(tmp_path):
    from perfmodel.run.worker import RunWorker, WorkerSpec

    paths = [str(p) for p in make_images(tmp_path, 5)]
    (tmp_path / "bad.jpg").write_text("no")
    worker = RunWorker(WorkerSpec("cpu#0", "tiny", None, None, "cpu", "fp32", "torch", 1))
    worker.load(32, [paths[:3], paths[3:] + [str(tmp_path / "bad.jpg")]])
    records = list(worker.records())
    assert [r["images"] for r in records] == [3, 2]
    assert records[1]["failed"][0][0] == str(tmp_path / "bad.jpg")
    assert all(0 <= c < 10 for r in records for c in r["classes"])


@pytest.mark.parametrize("every_s, lists", [(0.0, [1, 1, 1, 1]), (3600.0, [4])])
def test_the_worker_sends_its_records_a_list_at_a_time(monkeypatch, every_s, lists):
    """One message per batch would cost short GPU batches a share of their time: records go in lists."""
    from perfmodel.run import worker as module

    monkeypatch.setattr(module, "SEND_EVERY_S", every_s)
    worker = module.RunWorker(module.WorkerSpec("cpu#0", "tiny", None, None, "cpu", "fp32", "torch", 1))
    worker.load(32, [2, 2, 2, 1], synthetic_batch=2)
    sent = list(worker.run())
    assert [len(chunk) for chunk in sent] == lists
    assert [r["images"] for chunk in sent for r in chunk] == [2, 2, 2, 1]


@pytest.mark.parametrize("backend", ["torch", "torch-channels-last"])
def test_decoded_images_reach_the_model_in_the_layout_the_profile_measured(tmp_path, backend):
    """A stack of transposed views is channels-last in memory: the CPU ran EfficientNet-B0 up to 20% faster
    on it than the profile (channel-first) said, so files runs beat their plans."""
    import torch

    from perfmodel.run.worker import RunWorker, WorkerSpec

    paths = [str(p) for p in make_images(tmp_path, 3)]
    assert decode(paths[0], 32).flags["C_CONTIGUOUS"]
    worker = RunWorker(WorkerSpec("cpu#0", "tiny", None, None, "cpu", "fp32", backend, 1))
    worker.load(32, [paths])
    model, seen = worker.runner.model, []
    worker.runner.model = lambda x: seen.append(x) or model(x)
    list(worker.run())
    layout = torch.channels_last if backend == "torch-channels-last" else torch.contiguous_format
    assert seen and all(x.is_contiguous(memory_format=layout) for x in seen)


def test_report_draws_a_run_beside_its_plan(plan, tmp_path, capsys):
    run = tmp_path / "run.json"
    run.write_text(json.dumps(fake_run(plan)))
    assert main(["report", "--run", str(run), "--plan", str(plan), "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "run-timeline.png").stat().st_size > 0
    page = (tmp_path / "r" / "report.html").read_text()
    assert "Workers: predicted and measured" in page and "cpu#1" in page
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**fake_run(plan), "format": "perfmodel-plan"}))
    assert main(["report", "--run", str(bad), "--out", str(tmp_path / "b")]) == 2
    assert "is not a run of perfmodel" in capsys.readouterr().err


def test_the_run_json_compares_per_worker(plan):
    data = fake_run(plan)
    assert data["status"] == "complete" and data["images_done"] == 40
    assert data["measured_makespan_s"] == pytest.approx(0.18)
    w = data["workers"][0]
    assert w["warmup_s"]["measured"] == pytest.approx(0.02) and w["batch_s"]["measured"] == pytest.approx(0.02)
    assert w["finish_s"] == {
        "predicted": pytest.approx(read_run_plan(plan).workers[0].finish_s),
        "measured": pytest.approx(0.18),
    }


def test_finished_labels_are_never_overwritten_and_a_finished_run_resumes_to_nothing(plan, tmp_path, capsys):
    folder = tmp_path / "images"
    paths = make_images(folder, 40)
    out = tmp_path / "labels.csv"
    run = RunIdentity.of(read_run_plan(plan).sha256, folder)
    out.write_text(
        "path,class,score,worker,batch,plan,inputs\n"
        + "".join(f"{p},1,0.5,cpu#0,0,{run.plan},{run.inputs}\n" for p in paths)
    )
    before = out.read_text()
    assert "exists: add --resume" in refused(capsys, plan, "--images", folder, "--out", out)
    assert main(["run", str(plan), "--images", str(folder), "--out", str(out), "--resume"]) == 0  # no Ray started
    assert "0 of 40 images (+40 done before)" in capsys.readouterr().out
    assert out.read_text() == before


def test_a_weights_file_torch_cannot_read_is_named_plainly(tmp_path):
    """torch.load says 'pop from empty list' for a CSV, and advises an unsafe load for a whole model."""
    import torch

    from perfmodel.loading import weights_failure

    def failure(path):
        with pytest.raises(Exception) as raised:
            torch.load(path, map_location="cpu", weights_only=True)
        return weights_failure(str(path), raised.value)

    table = tmp_path / "profile.csv"
    table.write_text("a,b\n1,2\n")
    assert failure(table) == "it is not a file written by torch.save"
    whole = tmp_path / "model.pt"
    torch.save(torch.nn.Linear(2, 2), whole)
    assert "a whole model saved with torch.save(model)" in failure(whole)


def test_decode_threads_with_random_inputs_is_refused(plan, capsys):
    assert "--decode-threads needs --images" in refused(capsys, plan, "--synthetic", "--decode-threads", "4")
