"""Triton's model configuration (config.pbtxt): the dynamic-batching settings an online plan assumes.

    write_batching(Path("model_repository/resnet50"), {"h100": BatchingSettings(64, (64,), 500, "KIND_GPU")}, header)
    read_batching(Path("model_repository/resnet50"))   # -> BatchingSettings, e.g. for the local test server

One GPU type: DIR/config.pbtxt. Several: DIR/configs/<type>.pbtxt each, which Triton loads with
`tritonserver --model-config-name=<type>` (a custom config must be complete, so each is based on
DIR/config.pbtxt when there is one). An existing file keeps everything else it says (name, platform,
inputs ...); only max_batch_size, dynamic_batching's preferred sizes and delay, and instance_group
are set. Comments in it are not kept: protobuf's text format has no place for them. Every file is
written atomically, and one that cannot be parsed is reported, never overwritten.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import InputError
from perfmodel.files import atomic_write_texts

CONFIG = "config.pbtxt"
WRITES = (CONFIG, "configs/*.pbtxt")  # the files a plan writes into its model directory (see targets)
KINDS = ("KIND_GPU", "KIND_CPU")


@dataclass(frozen=True)
class BatchingSettings:
    """What a plan sets: the largest batch (images), the sizes the batcher prefers, its delay (µs),
    and the model instances per device (one: the plan's model is one batcher per GPU)."""

    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...]
    max_queue_delay_us: int
    kind: str = "KIND_GPU"
    instance_count: int = 1

    def __post_init__(self):
        if self.max_batch_size < 1 or any(not 1 <= b <= self.max_batch_size for b in self.preferred_batch_sizes):
            raise InputError("a Triton max_batch_size must be >= 1 and every preferred batch size within it.")
        if self.max_queue_delay_us < 0 or self.instance_count < 1 or self.kind not in KINDS:
            raise InputError("a Triton config needs a delay >= 0 µs, at least one instance, and KIND_GPU or KIND_CPU.")

    def as_text(self) -> str:
        """The settings in config.pbtxt's text format (for a new file)."""
        sizes = ", ".join(str(b) for b in self.preferred_batch_sizes)
        return (
            f"max_batch_size: {self.max_batch_size}\n"
            "dynamic_batching {\n"
            f"  preferred_batch_size: [ {sizes} ]\n"
            f"  max_queue_delay_microseconds: {self.max_queue_delay_us}\n"
            "}\n"
            "instance_group [\n"
            f"  {{\n    count: {self.instance_count}\n    kind: {self.kind}\n  }}\n"
            "]\n"
        )


def targets(directory: Path, names: list[str]) -> dict[str, Path]:
    """Where each GPU type's config goes: DIR/config.pbtxt for one type, DIR/configs/<type>.pbtxt for several."""
    if len(names) == 1:
        return {names[0]: directory / CONFIG}
    return {name: directory / "configs" / f"{name}.pbtxt" for name in names}


def batching_texts(directory: str | os.PathLike, settings: dict[str, BatchingSettings], header: str) -> dict[Path, str]:
    """Each GPU type's config file and its text (see the module's doc), every existing one parsed; nothing written."""
    directory = Path(directory)
    base = directory / CONFIG
    texts = {}
    for name, path in targets(directory, list(settings)).items():
        source = path if path.exists() else base if base.exists() else None
        if source is None:
            texts[path] = _comment(header) + settings[name].as_text()
        else:
            texts[path] = _merged(source, settings[name], header)
    return texts


def write_batching(directory: str | os.PathLike, settings: dict[str, BatchingSettings], header: str) -> list[Path]:
    """Write each GPU type's settings (see the module's doc), every file parsed before any is written; returns the
    files written."""
    texts = batching_texts(directory, settings, header)
    atomic_write_texts(texts)
    return list(texts)


def triton_settings(plan, cpu_types: Iterable[str] = ("cpu",)) -> dict[str, BatchingSettings]:
    """The config.pbtxt settings each GPU type of an online plan (solvers.OnlinePlan) assumes (one model instance
    per device)."""
    cpu = set(cpu_types)
    return {
        a.hardware: BatchingSettings(
            a.max_batch,
            a.preferred_batch_sizes,
            int(round(a.max_queue_delay_s * 1e6)),
            "KIND_CPU" if a.hardware in cpu else "KIND_GPU",
        )
        for a in plan.assignments
    }


def read_batching(location: str | os.PathLike) -> BatchingSettings:
    """The dynamic-batching settings of a config.pbtxt (or of DIR/config.pbtxt)."""
    path = Path(location)
    if path.is_dir():
        path = path / CONFIG
    config = _parse(path)
    if config.max_batch_size < 1:
        raise InputError(f"{path} sets no max_batch_size >= 1: dynamic batching needs one.")
    batching = config.dynamic_batching
    cpu = _model_config().ModelInstanceGroup.Kind.Value("KIND_CPU")
    kind = "KIND_CPU" if any(g.kind == cpu for g in config.instance_group) else "KIND_GPU"
    count = max((g.count for g in config.instance_group), default=1) or 1
    return BatchingSettings(
        int(config.max_batch_size),
        tuple(int(b) for b in batching.preferred_batch_size),
        int(batching.max_queue_delay_microseconds),
        kind,
        int(count),
    )


def _comment(header: str) -> str:
    return "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())


def _merged(source: Path, settings: BatchingSettings, header: str) -> str:
    from google.protobuf import text_format

    config = _parse(source)
    config.max_batch_size = settings.max_batch_size
    batching = config.dynamic_batching
    del batching.preferred_batch_size[:]
    batching.preferred_batch_size.extend(settings.preferred_batch_sizes)
    batching.max_queue_delay_microseconds = settings.max_queue_delay_us
    del config.instance_group[:]
    group = config.instance_group.add()
    group.count = settings.instance_count
    group.kind = _model_config().ModelInstanceGroup.Kind.Value(settings.kind)
    text = text_format.MessageToString(config)
    if settings.max_queue_delay_us == 0:  # proto3 leaves out zeros; say it, so the file reads as the plan does
        text = text.replace("dynamic_batching {\n", "dynamic_batching {\n  max_queue_delay_microseconds: 0\n", 1)
    return _comment(header) + text


def _parse(path: Path):
    from google.protobuf import text_format

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: give a model directory holding a config.pbtxt.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path} ({exc}).") from None
    config = _model_config().ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise InputError(f"{path} is not a valid Triton model configuration ({exc}); fix it or move it away.") from None
    return config


def _model_config():
    try:
        from tritonclient.grpc import model_config_pb2
    except ImportError:
        raise InputError(
            "reading a Triton config.pbtxt needs tritonclient: in perfmodel's clone, pip install '.[triton]'."
        ) from None
    return model_config_pb2
