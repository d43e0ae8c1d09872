"""The server settings an online plan means, as files: Triton's config.pbtxt (triton_config.py) and Ray Serve's
deployments (ray_serve_config.py). Every file is made (config_files) before any is written (ConfigFiles.write);
where they go the command checks before planning (readers.output_folder with triton_config.WRITES,
readers.output_file)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from perfmodel.files import atomic_write_texts
from perfmodel.planning import ray_serve_config, triton_config
from perfmodel.readers import plain
from perfmodel.units import figure
from solvers.online_solution import percent
from solvers.online_solve import OnlinePlan


@dataclass(frozen=True)
class ConfigFiles:
    """The files to write, path -> text: Triton's configs, then Ray Serve's settings (each empty where not asked)."""

    triton: dict[Path, str]
    ray_serve: dict[str | os.PathLike, str]

    def write(self) -> None:
        atomic_write_texts({**self.triton, **self.ray_serve})


def config_files(plan: OnlinePlan, triton: Path | None, ray_serve: str | os.PathLike | None) -> ConfigFiles:
    """The settings `plan` means in the Triton model directory `triton` and the Ray Serve file `ray_serve`, every
    existing config parsed; nothing written."""
    cpus = [a.hardware for a in plan.assignments if a.hardware.startswith("cpu")]
    said = header(plan)
    triton_texts, serve = {}, {}
    if triton is not None:
        triton_texts = triton_config.batching_texts(triton, triton_config.triton_settings(plan, cpus), said)
    if ray_serve is not None:
        settings = ray_serve_config.ray_serve_settings(plan, cpus)
        serve = {ray_serve: ray_serve_config.settings_text(settings, said)}
    return ConfigFiles(triton_texts, serve)


def header(plan: OnlinePlan) -> str:
    """What the plan is, at the head of each file it writes."""
    margin = f", margin {percent(plan.margin)}" if plan.margin else ""
    lines = [
        f"perfmodel plan --mode online: {plan.rate_per_s:,.6g} requests/s, p{plain(plan.percentile)} <= "
        f"{plan.slo_s * 1000:g} ms{margin}, {plan.request_size} image(s) per request."
    ]
    for a in plan.assignments:
        lines.append(
            f"{a.hardware}: {a.count} device(s), each its own model instance behind a load balancer "
            f"({figure(a.rate_per_gpu_s)} requests/s each); predicted p50 {a.predicted_p50_s * 1000:.3g} ms, "
            f"p99 {a.predicted_p99_s * 1000:.3g} ms."
        )
    return "\n".join(lines)
