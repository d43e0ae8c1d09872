"""Ray Serve deployment settings that an online plan means, one deployment per GPU type.

    write_settings("serve.json", ray_serve_settings(plan), header)
    s = read_settings("serve.json")["h100"]
    @serve.deployment(**s.deployment_options())
    class Classifier:
        @serve.batch(**s.batch_options())
        async def __call__(self, requests): ...

The plan's batcher (per GPU: max_batch images, max_queue_delay) maps to Ray Serve as:
- num_replicas: the plan's count of that type (one replica per GPU, as one model instance per GPU);
- @serve.batch's max_batch_size: requests per batch, the plan's max_batch images over the images per
  request; batch_wait_timeout_s: the plan's max_queue_delay;
- max_ongoing_requests: twice that batch (one batch served while the next one forms); Ray Serve's
  default (5) would cap every batch at 5 requests;
- ray_actor_options: one GPU, one CPU and the type as a custom resource ({"h100": 1}, as `perfmodel run`
  places its workers); a cpu type one CPU.

The file is JSON (format "perfmodel-ray-serve"), written atomically; its deployment keys are Ray Serve's
own (DeploymentSchema) names.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from perfmodel.errors import InputError
from perfmodel.files import atomic_write_text, read_json
from perfmodel.readers import number, shown, whole_number

FORMAT = "perfmodel-ray-serve"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ServeSettings:
    """One GPU type's deployment."""

    hardware: str
    num_replicas: int
    max_ongoing_requests: int
    max_batch_size: int  # requests per batch (@serve.batch)
    batch_wait_timeout_s: float
    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self):
        if self.num_replicas < 1 or self.max_batch_size < 1 or self.max_ongoing_requests < self.max_batch_size:
            raise InputError(
                "Ray Serve settings need at least one replica, a batch of at least one request and "
                "max_ongoing_requests of at least the batch."
            )
        if not self.batch_wait_timeout_s >= 0:
            raise InputError("a Ray Serve batch_wait_timeout_s must be >= 0 seconds.")

    def deployment_options(self) -> dict:
        """Keyword arguments of @serve.deployment (or Deployment.options)."""
        actor = {"num_cpus": self.num_cpus, "num_gpus": self.num_gpus}
        if self.num_gpus:
            actor["resources"] = {self.hardware: 1}
        return {
            "num_replicas": self.num_replicas,
            "max_ongoing_requests": self.max_ongoing_requests,
            "ray_actor_options": actor,
        }

    def batch_options(self) -> dict:
        """Keyword arguments of @serve.batch."""
        return {"max_batch_size": self.max_batch_size, "batch_wait_timeout_s": self.batch_wait_timeout_s}


def ray_serve_settings(plan, cpu_types=("cpu",)) -> dict[str, ServeSettings]:
    """Each GPU type's deployment for an online plan (perfmodel.planning.online)."""
    out = {}
    for a in plan.assignments:
        batch = max(1, a.max_batch // plan.request_size)
        cpu = a.hardware in set(cpu_types)
        out[a.hardware] = ServeSettings(
            a.hardware, a.count, 2 * batch, batch, a.max_queue_delay_s, 1.0, 0.0 if cpu else 1.0
        )
    return out


def write_settings(path: str | os.PathLike, settings: dict[str, ServeSettings], header: str) -> None:
    atomic_write_text(path, settings_text(settings, header))


def settings_text(settings: dict[str, ServeSettings], header: str) -> str:
    """The file's text: JSON, the deployment keys Ray Serve's own."""
    data = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "plan": header,
        "deployments": {
            name: {
                **s.deployment_options(),
                "user_config": s.batch_options(),  # for a deployment that sets its batch in reconfigure()
            }
            for name, s in settings.items()
        },
    }
    return json.dumps(data, indent=2) + "\n"


def read_settings(path: str | os.PathLike) -> dict[str, ServeSettings]:
    """The settings of a file that write_settings wrote; InputError for anything else."""
    hint = "give a file written by `perfmodel plan --mode online --ray-serve-config`"
    data = read_json(path, InputError, "Ray Serve settings", hint)
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("deployments"), dict):
        raise InputError(f"{os.fspath(path)} is not a perfmodel Ray Serve settings file: {hint}.")
    out = {}
    for name, d in data["deployments"].items():
        try:
            actor, batch = d["ray_actor_options"], d["user_config"]
            at = f"{os.fspath(path)}: the deployment {shown(name)}'s"
            out[name] = ServeSettings(
                name,
                whole_number(d["num_replicas"], f"{at} num_replicas", text=False),
                whole_number(d["max_ongoing_requests"], f"{at} max_ongoing_requests", text=False),
                whole_number(batch["max_batch_size"], f"{at} max_batch_size", text=False),
                number(batch["batch_wait_timeout_s"], f"{at} batch_wait_timeout_s", low=0, text=False),
                number(actor.get("num_cpus", 1), f"{at} num_cpus", low=0, text=False),
                number(actor.get("num_gpus", 0), f"{at} num_gpus", low=0, text=False),
            )
        except InputError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError):  # AttributeError: options not an object
            raise InputError(f"{os.fspath(path)}: the deployment {name!r} is incomplete: {hint}.") from None
    return out
