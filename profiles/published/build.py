"""Rebuild profiles/published/ from published tables that are not NVIDIA DeepLearningExamples'.

    python profiles/published/build.py --repo NVIDIA/TensorRT=/path/to/clone \
        --repo NVIDIA/FasterTransformer=/path --repo huggingface/diffusers=/path --repo apache/mxnet=/path

Each collection below is one document at one pinned commit. The script reads its tables
(`git show COMMIT:FILE`), writes each collection as one plain table in tables/ (numbers only, one row
per GPU, model, backend, precision and batch size, with the source of every row: repository, commit,
file and the table's heading), and imports the plain table with perfmodel's table importer into
profiles/published/<collection>.csv. Only figures are taken: the cells of the tables. A cell that is
not a number ('OOM', '-', a typo such as '12,.79') is left out and counted; nothing is corrected by hand.

Which collections were set aside for the held-out evaluation, and which may be used for tuning, is in
split.csv (written before any method was tuned; experiments/003_fit_accuracy).

Conventions for what a table does not say in the profile's own terms:
  - text models (BERT): input_size holds the sequence length, and the model's name carries it too
    (bert-base-s128), so that each sequence length is its own curve;
  - a figure in iterations per second (diffusers' May 2023 tables) is one denoising step of the
    whole batch: latency_mean_ms = 1000 / it_s ('2.34s' cells are seconds per iteration);
  - a figure in seconds for a whole generation (diffusers' March 2023 tables, 50 steps) is one call;
  - images per second (MXNet's scoring tables) give latency = batch / throughput (the importer's rule).
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from perfmodel.importers import ImportSettings, import_profile  # noqa: E402
from perfmodel.schema import write_profile  # noqa: E402

OUT_COLUMNS = (
    "hardware",
    "device_name",
    "model",
    "backend",
    "precision",
    "input_size",
    "batch_size",
    "throughput_ips",
    "latency_mean_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "source",
)
NUMBER = re.compile(r"^\d+(\.\d+)?$")


@dataclass(frozen=True)
class Table:
    headings: tuple[str, ...]  # the headings above the table, outermost first
    context: str  # the last line of text before the table (a bullet, a bold line)
    header: list[str]
    rows: list[list[str]]


def tables(text: str) -> Iterator[Table]:
    """Every markdown table of a document, with the headings it sits under."""
    stack: list[tuple[int, str]] = []
    context, lines, i = "", text.splitlines(), 0
    while i < len(lines):
        line = lines[i].strip()
        match = re.match(r"^(#{1,6})\s+(.*)$", line)
        if match:
            level = len(match.group(1))
            stack = [h for h in stack if h[0] < level] + [(level, match.group(2).strip())]
            context = ""
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            if len(block) >= 2 and set("".join(block[1])) <= set("-: "):
                yield Table(tuple(h for _, h in stack), context, block[0], block[2:])
            continue
        elif line:
            context = line
        i += 1


def number(cell: str) -> float | None:
    cell = cell.strip().strip("*").strip()
    return float(cell) if NUMBER.match(cell) else None


class Collection:
    """Rows of one collection, each with its source; cells that are not numbers are counted."""

    def __init__(self, name: str, repository: str, commit: str, path: str):
        self.name, self.repository, self.commit, self.path = name, repository, commit, path
        self.rows: list[dict] = []
        self.skipped: Counter = Counter()

    def source(self, where: str) -> str:
        return f"https://github.com/{self.repository}/blob/{self.commit}/{self.path} ({where})"

    def add(self, where: str, cell: str, **row) -> None:
        value = number(cell)
        if value is None or value <= 0:
            self.skipped[cell.strip() or "(empty)"] += 1
            return
        column = row.pop("column")
        scale = row.pop("scale", 1.0)
        self.rows.append({**row, column: f"{value * scale:.6g}", "source": self.source(where)})


# --- NVIDIA/TensorRT demo/BERT: TensorRT engines, latency vs batch size per sequence length -------------------

TRT_GPUS = {
    "A100 (40GB)": ("a100", "A100 40GB"),
    "T4 (16GB)": ("t4", "T4 16GB"),
    "V100 (16GB)": ("v100", "V100 16GB"),
    "A30": ("a30", "A30"),
    "L4": ("l4", "L4"),
    "L40S": ("l40s", "L40S"),
}


def trt_bert(c: Collection, text: str) -> None:
    for t in tables(text):
        gpu = next((v for k, v in TRT_GPUS.items() if any(h.endswith("NVIDIA " + k) for h in t.headings)), None)
        model = t.headings[-1].lower() if t.headings else ""
        if gpu is None or model not in ("bert base", "bert large") or "Sequence Length" not in t.header[0]:
            continue
        # Header: sequence, batch, INT8 (p95, p99, average), FP16 (p95, p99, average).
        for cells in t.rows:
            if number(cells[0]) is None:
                continue
            seq, batch = int(float(cells[0])), int(float(cells[1]))
            for precision, first in (("int8", 2), ("fp16", 5)):
                where = f"{' > '.join(t.headings[-2:])}: {precision.upper()} latency, sequence length {seq}"
                base = {
                    "hardware": gpu[0],
                    "device_name": gpu[1],
                    "model": f"{model.replace(' ', '-')}-s{seq}",
                    "backend": "tensorrt",
                    "precision": precision,
                    "input_size": seq,
                    "batch_size": batch,
                }
                before = len(c.rows)
                c.add(where, cells[first + 2], column="latency_mean_ms", **base)
                if len(c.rows) > before:
                    for column, k in (("latency_p95_ms", 0), ("latency_p99_ms", 1)):
                        value = number(cells[first + k])
                        if value:
                            c.rows[-1][column] = f"{value:g}"


# --- NVIDIA/FasterTransformer docs: ViT, Swin and BERT guides -------------------------------------------------

FT_GPUS = {"T4": ("t4", "T4"), "A10": ("a10", "A10"), "A100": ("a100", "A100"), "V100": ("v100", "V100")}
FT_BACKENDS = {
    "torch": "torch",
    "torch.jit.trace": "torchscript",
    "torchscript": "torchscript",
    "cpp": "ft-cpp",
    "trt plugin": "ft-trt-plugin",
    "torch op": "ft-torch-op",
    "tf": "tensorflow-xla",
    "ft": "ft-op",
    "eff-ft": "eff-ft-op",
}


def _ft_column(header: str) -> str | None:
    name = re.sub(r"<br/>|latency.*$|\(ms\)", " ", header, flags=re.I).strip().lower()
    return FT_BACKENDS.get(re.sub(r"\s+", " ", name))


def ft_vision(c: Collection, text: str, model_of: Callable[[str], tuple[str, int] | None]) -> None:
    for t in tables(text):
        gpu = next(
            (v for k, v in FT_GPUS.items() if any(re.search(rf"Performance on {k}$", h) for h in t.headings)), None
        )
        if gpu is None or not t.header or t.header[0].lower() != "batch_size" or len(t.headings) < 1:
            continue
        title = t.headings[-1]
        precision = next((p for p in ("FP32", "TF32", "FP16", "INT8") if p in title), None)
        model = model_of(title)
        if precision is None or model is None:
            continue
        for cells in t.rows:
            for header, cell in zip(t.header[1:], cells[1:]):
                backend = _ft_column(header)
                if backend is None:
                    continue
                c.add(
                    f"{t.headings[-2]} > {title}: {header.replace('<br/>', '').strip()}",
                    cell,
                    column="latency_mean_ms",
                    hardware=gpu[0],
                    device_name=gpu[1],
                    model=model[0],
                    backend=backend,
                    precision=precision.lower(),
                    input_size=model[1],
                    batch_size=int(float(cells[0])),
                )


def ft_vit(c: Collection, text: str) -> None:
    ft_vision(c, text, lambda title: ("vit-b16", 384) if title in ("FP32", "FP16", "INT8") else None)


def ft_swin(c: Collection, text: str) -> None:
    def model_of(title: str):
        if title.startswith("Swin-V1 ") and "vs" not in title:
            return "swin-tiny-v1", 224
        if title.startswith("Swin-V2 ") and "vs" not in title:
            return "swin-tiny-v2", 256
        return None

    ft_vision(c, text, model_of)


def ft_bert(c: Collection, text: str) -> None:
    for t in tables(text):
        heading = t.headings[-1] if t.headings else ""
        match = re.match(r"BERT performance on (\w+) and (TensorFlow|PyTorch)$", heading)
        precision = re.match(r"\* Performance on (FP32|TF32|FP16)( \(.*\))?$", t.context)
        if not match or not precision or t.header[:3] != ["Batch_size", "Seq_len", "Precision"]:
            continue
        gpu = FT_GPUS[match.group(1)]
        framework = "tf" if match.group(2) == "TensorFlow" else "pt"
        for cells in t.rows:
            seq, batch = int(float(cells[1])), int(float(cells[0]))
            for header, cell in zip(t.header[3:], cells[3:]):
                if "speedup" in header.lower():
                    continue
                backend = _ft_column(header)
                if backend is None:
                    continue
                c.add(
                    f"{heading}: Performance on {precision.group(1)}: {header.replace('<br/>', '').strip()}",
                    cell,
                    column="latency_mean_ms",
                    hardware=gpu[0],
                    device_name=gpu[1],
                    model=f"bert-base-s{seq}",
                    backend=f"{backend}-{framework}" if backend != "tensorflow-xla" else backend,
                    precision=precision.group(1).lower(),
                    input_size=seq,
                    batch_size=batch,
                )


# --- huggingface/diffusers docs: Stable Diffusion with PyTorch 2.0 ---------------------------------------------

SD_GPUS = {
    "A100": ("a100", "A100"),
    "A10": ("a10", "A10"),
    "T4": ("t4", "T4"),
    "V100": ("v100", "V100"),
    "3090": ("rtx3090", "GeForce RTX 3090"),
    "RTX 3090": ("rtx3090", "GeForce RTX 3090"),
    "3090 Ti": ("rtx3090ti", "GeForce RTX 3090 Ti"),
    "4090": ("rtx4090", "GeForce RTX 4090"),
    "RTX 4090": ("rtx4090", "GeForce RTX 4090"),
}


def diffusers_march(c: Collection, text: str) -> None:
    """Seconds per 50-step generation of stable-diffusion-v1-4, per GPU and batch size, four attention set-ups."""
    backends = {
        "Vanilla Attention": "torch1.13-vanilla-attention",
        "xFormers": "torch1.13-xformers",
        "PyTorch2.0 SDPA": "torch2.0-sdpa",
        "SDPA + torch.compile": "torch2.0-sdpa-compile",
    }
    for t in tables(text):
        title = t.headings[-1] if t.headings else ""
        if title not in ("FP16 benchmark", "FP32 benchmark") or t.header[:2] != ["GPU", "Batch Size"]:
            continue
        for cells in t.rows:
            if cells[0] not in SD_GPUS:
                continue
            batch = re.match(r"^(\d+)", cells[1])
            for header, cell in zip(t.header[2:6], cells[2:6]):
                c.add(
                    f"Benchmark > {title}: {header} (seconds for 50 steps)",
                    cell,
                    column="latency_mean_ms",
                    scale=1000.0,
                    hardware=SD_GPUS[cells[0]][0],
                    device_name=SD_GPUS[cells[0]][1],
                    model="sd-v1.4-50-steps",
                    backend=backends[header],
                    precision=title[:4].lower(),
                    input_size=512,
                    batch_size=int(batch.group(1)),
                )


def diffusers_may(c: Collection, text: str) -> None:
    """Iterations per second of four Stable Diffusion pipelines, per GPU and batch size (fp16)."""
    pipelines = {
        "SD - txt2img": "sd-txt2img",
        "SD - img2img": "sd-img2img",
        "SD - inpaint": "sd-inpaint",
        "SD - controlnet": "sd-controlnet",
    }
    backends = ["torch2.0", "torch-nightly", "torch2.0-compile", "torch-nightly-compile"]
    for t in tables(text):
        match = re.match(r"^(.*) \(batch size: (\d+)\)$", t.headings[-1] if t.headings else "")
        if not match or match.group(1) not in SD_GPUS:
            continue
        gpu, batch = SD_GPUS[match.group(1)], int(match.group(2))
        for cells in t.rows:
            pipeline = pipelines.get(cells[0])
            if pipeline is None:
                continue
            for backend, header, cell in zip(backends, t.header[1:], cells[1:]):
                seconds = re.match(r"^(\d+(\.\d+)?)s$", cell)
                column_title = re.sub(r"<br>|[*]", "", header).strip()
                where = f"{t.headings[-1]}: {cells[0]}, {column_title}"
                row = dict(
                    column="latency_mean_ms",
                    hardware=gpu[0],
                    device_name=gpu[1],
                    model=pipeline,
                    backend=backend,
                    precision="fp16",
                    input_size=512,
                    batch_size=batch,
                )
                if seconds:  # seconds per iteration
                    c.add(where + " (s/it)", seconds.group(1), scale=1000.0, **row)
                elif number(cell):  # iterations per second
                    c.add(where + " (it/s)", f"{1000.0 / number(cell):.6g}", **row)
                else:
                    c.skipped[cell or "(empty)"] += 1


# --- apache/mxnet docs: scoring throughput of six classifiers on K80, M60 and V100 -----------------------------


def mxnet_perf(c: Collection, text: str) -> None:
    gpus = {
        "K80 (single GPU)": ("k80", "Tesla K80 (one GK210)"),
        "M60": ("m60", "Tesla M60 (one GM204)"),
        "V100": ("v100", "V100 (EC2 p3.2xlarge)"),
    }
    models = {
        "Alexnet": ("alexnet", 224),
        "VGG 16": ("vgg16", 224),
        "Inception-BN": ("inception-bn", 224),
        "Inception-v3": ("inception-v3", 299),
        "Resnet 50": ("resnet50", 224),
        "Resnet 152": ("resnet152", 224),
    }
    for t in tables(text):
        if not t.headings or t.headings[-1] != "Scoring results" or t.header[0] != "Batch":
            continue
        fp16 = "float 16" in t.context
        device = "V100" if fp16 else t.context.lstrip("- ").strip()
        if device not in gpus:
            continue
        for cells in t.rows:
            for header, cell in zip(t.header[1:], cells[1:]):
                model = models[header.strip()]
                table = f"{device} float 16" if fp16 else device
                c.add(
                    f"Nvidia GPU > Scoring results: {table}, {header.strip()} (images/sec)",
                    cell,
                    column="throughput_ips",
                    hardware=gpus[device][0],
                    device_name=gpus[device][1],
                    model=model[0],
                    backend="mxnet",
                    precision="fp16" if fp16 else "fp32",
                    input_size=model[1],
                    batch_size=int(float(cells[0])),
                )


COLLECTIONS: dict[str, tuple[str, str, str, Callable[[Collection, str], None]]] = {
    "trt-bert-2021": ("NVIDIA/TensorRT", "ab20a8ac26da03df5e434b4f9d1da0156ca019b6", "demo/BERT/README.md", trt_bert),
    "trt-bert-2022": ("NVIDIA/TensorRT", "1d6bf36034bb07fc88d924ebf5d34d358298e545", "demo/BERT/README.md", trt_bert),
    "trt-bert-2024": ("NVIDIA/TensorRT", "17003e43da9858f574e3a4a1d795fcf218862fe3", "demo/BERT/README.md", trt_bert),
    "ft-vit": ("NVIDIA/FasterTransformer", "df4a7534860137e060e18d2ebf019906120ea204", "docs/vit_guide.md", ft_vit),
    "ft-swin": ("NVIDIA/FasterTransformer", "df4a7534860137e060e18d2ebf019906120ea204", "docs/swin_guide.md", ft_swin),
    "ft-bert": ("NVIDIA/FasterTransformer", "df4a7534860137e060e18d2ebf019906120ea204", "docs/bert_guide.md", ft_bert),
    "diffusers-2023-03": (
        "huggingface/diffusers",
        "a39d42b91dd561d4487240e59455d9e2a53654fb",
        "docs/source/en/optimization/torch2.0.mdx",
        diffusers_march,
    ),
    "diffusers-2023-05": (
        "huggingface/diffusers",
        "bdefabd1a8f155235ee4b65c91ef96ce60602c51",
        "docs/source/en/optimization/torch2.0.mdx",
        diffusers_may,
    ),
    "mxnet-perf": (
        "apache/mxnet",
        "48d7f4af70015a559b20bc58aea037548c7e2658",
        "docs/static_site/src/pages/api/faq/perf.md",
        mxnet_perf,
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="OWNER/NAME=PATH",
        help="a clone (or bare mirror) of each repository named in COLLECTIONS",
    )
    args = parser.parse_args()
    repos = dict(item.split("=", 1) for item in args.repo)
    (HERE / "tables").mkdir(exist_ok=True)
    for name, (repository, commit, path, extract) in COLLECTIONS.items():
        if repository not in repos:
            print(f"{name}: skipped (no --repo {repository}=PATH)", file=sys.stderr)
            continue
        text = subprocess.run(
            ["git", "-C", repos[repository], "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        collection = Collection(name, repository, commit, path)
        extract(collection, text)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=OUT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(collection.rows)
        table_path = HERE / "tables" / f"{name}.csv"
        table_path.write_text(buffer.getvalue())
        profile = import_profile("table", [table_path], ImportSettings())
        write_profile(profile, HERE / f"{name}.csv")
        curves = profile.groupby(["hardware", "model", "backend", "precision"]).ngroups
        skipped = ", ".join(f"{k!r} x{v}" for k, v in collection.skipped.most_common())
        print(f"{name}: {len(profile)} rows, {curves} curves" + (f"; cells left out: {skipped}" if skipped else ""))


if __name__ == "__main__":
    main()
