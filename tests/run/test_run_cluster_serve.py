"""perfmodel plan --mode online --ray-serve-config: the Ray Serve settings an online plan means, and a
tiny model deployed with them on a local Ray Serve (HTTP bound to 127.0.0.1) that answers requests."""

from __future__ import annotations

import json
import socket

import pytest
from run_data import alive, ray_processes_of, tiny_profile

from perfmodel.cli import main
from perfmodel.errors import InputError
from perfmodel.planning.ray_serve_config import ServeSettings, read_settings


def online_plan_args(profile) -> list[str]:
    """An online plan of the tiny CNN on its CPU profile: 100 requests/s within 100 ms."""
    rate = ["--rate", "100/s", "--slo", "100ms"]
    return ["plan", "--mode", "online", *rate, "--input-size", "32", "--profile", str(profile)]


def plan_with_settings(tmp_path, capsys, *extra) -> tuple[dict, dict[str, ServeSettings]]:
    out = tmp_path / "serve.json"
    args = online_plan_args(tiny_profile(tmp_path / "cpu.csv"))
    assert main([*args, *extra, "--ray-serve-config", str(out), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["ray_serve_config"] == str(out)
    return plan, read_settings(out)


def test_the_settings_are_the_plans(tmp_path, capsys):
    plan, settings = plan_with_settings(tmp_path, capsys, "--request-size", "2")
    [a] = plan["assignments"]
    s = settings[a["hardware"]]
    assert s.num_replicas == a["count"] and s.batch_wait_timeout_s == pytest.approx(a["max_queue_delay_ms"] / 1000)
    assert s.max_batch_size == max(1, a["max_batch"] // 2)  # requests of 2 images each
    assert s.max_ongoing_requests == 2 * s.max_batch_size  # one batch served while the next one forms
    assert s.deployment_options()["ray_actor_options"] == {"num_cpus": 1.0, "num_gpus": 0.0}


def test_gpu_types_reserve_a_gpu_and_their_type():
    options = ServeSettings("h100", 3, 16, 8, 0.002, 1, 1).deployment_options()
    assert options == {
        "num_replicas": 3,
        "max_ongoing_requests": 16,
        "ray_actor_options": {"num_cpus": 1, "num_gpus": 1, "resources": {"h100": 1}},
    }


def test_a_file_that_is_not_settings_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "perfmodel-run"}')
    with pytest.raises(InputError, match="not a perfmodel Ray Serve settings file"):
        read_settings(bad)


@pytest.mark.parametrize("field, value", [("ray_actor_options", []), ("user_config", "fast"), (None, [])])
def test_a_deployment_of_the_wrong_shape_is_refused(tmp_path, field, value):
    deployment = {"num_replicas": 1, "max_ongoing_requests": 2, "ray_actor_options": {}, "user_config": {}}
    deployment["user_config"] = {"max_batch_size": 1, "batch_wait_timeout_s": 0.0}
    if field is not None:
        deployment[field] = value
    bad = tmp_path / "x.json"
    bad.write_text(
        json.dumps({"format": "perfmodel-ray-serve", "deployments": {"cpu": deployment if field else value}})
    )
    with pytest.raises(InputError, match="the deployment 'cpu' is incomplete"):
        read_settings(bad)


def test_an_input_is_never_written_over(tmp_path, capsys):
    profile = tiny_profile(tmp_path / "cpu.csv")
    assert main([*online_plan_args(profile), "--ray-serve-config", str(profile)]) == 2
    assert "--ray-serve-config" in capsys.readouterr().err and profile.read_text().startswith("hardware")


@pytest.mark.integration
@pytest.mark.slow
def test_a_tiny_model_deployed_with_the_settings_answers_requests(tmp_path, capsys):
    from perfmodel.run.cluster import LocalRay, connect

    _, settings = plan_with_settings(tmp_path, capsys)
    s = settings["cpu"]
    local = LocalRay(num_cpus=2)
    try:
        connect(local.start(), local.settings)  # before Ray Serve is imported: it reads the token settings
        from ray import serve

        port = _free_port()
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(_classifier(s).bind(), name="tiny", route_prefix="/tiny")
        handle = serve.get_app_handle("tiny")
        answers = [handle.remote([[0.1 * k] * 3]) for k in range(12)]  # concurrent: the batcher groups them
        classes = [r.result(timeout_s=120) for r in answers]
        assert all(isinstance(c["class"], int) for c in classes)
        assert 1 <= max(c["batch"] for c in classes) <= s.max_batch_size
        import urllib.request

        request = urllib.request.Request(f"http://127.0.0.1:{port}/tiny", data=b"[[0.5, 0.5, 0.5]]")
        with urllib.request.urlopen(request, timeout=60) as reply:
            assert isinstance(json.loads(reply.read())["class"], int)
        serve.shutdown()
    finally:
        _disconnect()
        started = ray_processes_of(local.process.pid) if local.process else []
        local.stop()
    assert alive(started) == [] and not local.temp_dir.exists()  # nothing of Ray or Serve left


def _classifier(s: ServeSettings):
    """A deployment of the tiny CNN with the plan's settings (made here, so that Ray ships it by value)."""
    from ray import serve

    @serve.deployment(**s.deployment_options())
    class Classifier:
        def __init__(self):
            import torch

            from perfmodel.models import ModelSpec, build_model

            torch.set_num_threads(1)
            self.torch, self.model = torch, build_model(ModelSpec("tiny")).eval()

        @serve.batch(**s.batch_options())
        async def classify(self, pixels: list) -> list:
            torch = self.torch
            # one request: an image's mean colour per channel, spread over a 32 px image
            x = torch.tensor([p[0] for p in pixels], dtype=torch.float32)[:, :, None, None].expand(-1, 3, 32, 32)
            with torch.inference_mode():
                top = self.model(x.contiguous()).argmax(dim=1).tolist()
            return [{"class": c, "batch": len(pixels)} for c in top]

        async def __call__(self, request):
            if not isinstance(request, list):  # over HTTP: a starlette Request with a JSON body
                request = json.loads(await request.body())
            return await self.classify(request)

    return Classifier


def _disconnect() -> None:
    import sys

    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
