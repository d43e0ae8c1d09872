"""Rebuild profiles/reference/ from NVIDIA DeepLearningExamples' READMEs at a pinned commit.

    python profiles/reference/build.py --repo /path/to/DeepLearningExamples   # a clone with the commit below

1. Reads the inference performance tables of the READMEs listed in SECTIONS (`git show COMMIT:FILE`),
   and writes each README's tables as one plain table in tables/ (numbers only, one row per batch size,
   with hardware, model, backend, precision, device and source columns).
2. Imports every plain table with perfmodel's table importer (`perfmodel import table`) into
   profiles/reference/<name>.csv.

Only figures are taken: the cells of the tables. A cell that is not a number (one published typo,
'17,89 ms') is left empty and reported; nothing is corrected by hand.
"""

from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from perfmodel.importers import ImportSettings, import_profile  # noqa: E402
from perfmodel.schema import write_profile  # noqa: E402

REPOSITORY = "https://github.com/NVIDIA/DeepLearningExamples"
COMMIT = "729963dd47e7c8bd462ad10bfac7a7b0b604e6dd"  # master, 2024-04-04


@dataclass(frozen=True)
class Table:
    heading: str  # the README heading the tables sit under (a substring of it)
    title: str  # the table's own title line (a substring; '' for the only table under the heading)
    hardware: str
    device: str
    backend: str
    precision: str
    model_column: str = ""  # keep only the rows whose Model cell is this


TF_RN50 = "TensorFlow/Classification/ConvNets/resnet50v1.5/README.md"
PT_RN50 = "PyTorch/Classification/ConvNets/resnet50v1.5/README.md"
PT_EFF = "PyTorch/Classification/ConvNets/efficientnet/README.md"
MX_RN50 = "MxNet/Classification/RN50v1.5/README.md"
PD_RN50 = "PaddlePaddle/Classification/RN50v1.5/README.md"


def _tf(heading: str, hardware: str, device: str, single: str) -> list[Table]:
    tables = [
        Table(heading, f"{single.upper()} Inference Latency", hardware, device, "tensorflow", single),
        Table(heading, "Mixed Precision Inference Latency", hardware, device, "tensorflow", "fp16"),
        Table(heading, "Mixed Precision Inference Latency + XLA", hardware, device, "tensorflow-xla", "fp16"),
    ]
    if single == "tf32":
        tables.append(Table(heading, "TF32 Inference Latency + XLA", hardware, device, "tensorflow-xla", "tf32"))
    return tables


SECTIONS: dict[str, tuple[str, str, list[Table]]] = {
    "dle-tensorflow-resnet50": (
        TF_RN50,
        "resnet50",
        [
            *_tf("NVIDIA DGX A100 (1x A100 40GB)", "a100", "A100-SXM4-40GB (DGX A100)", "tf32"),
            *_tf("NVIDIA DGX-1 (1x V100 16G)", "v100", "V100-SXM2-16GB (DGX-1)", "fp32"),
            *_tf("NVIDIA DGX-2 (1x V100 32G)", "v100-32gb", "V100-SXM3-32GB (DGX-2)", "fp32"),
            *_tf("NVIDIA T4 (1x T4 16G)", "t4", "T4 16GB", "fp32"),
        ],
    ),
    "dle-pytorch-resnet50": (
        PT_RN50,
        "resnet50",
        [
            Table(
                "NVIDIA DGX-1 (1x V100 16GB)",
                "FP32 Inference Latency",
                "v100",
                "V100-SXM2-16GB (DGX-1)",
                "torch",
                "fp32",
            ),
            Table(
                "NVIDIA DGX-1 (1x V100 16GB)",
                "Mixed Precision Inference Latency",
                "v100",
                "V100-SXM2-16GB (DGX-1)",
                "torch",
                "fp16",
            ),
            Table("Inference performance: NVIDIA T4", "FP32 Inference Latency", "t4", "T4 16GB", "torch", "fp32"),
            Table(
                "Inference performance: NVIDIA T4",
                "Mixed Precision Inference Latency",
                "t4",
                "T4 16GB",
                "torch",
                "fp16",
            ),
        ],
    ),
    "dle-pytorch-efficientnet_b0": (
        PT_EFF,
        "efficientnet_b0",
        [
            Table(
                "NVIDIA A100 (1x A100 80GB)",
                "TF32 Inference Latency",
                "a100-80gb",
                "A100-SXM4-80GB",
                "torch",
                "tf32",
                "efficientnet-b0",
            ),
            Table(
                "NVIDIA A100 (1x A100 80GB)",
                "Mixed Precision Inference Latency",
                "a100-80gb",
                "A100-SXM4-80GB",
                "torch",
                "fp16",
                "efficientnet-b0",
            ),
            Table(
                "NVIDIA V100 (1x V100 16GB)",
                "FP32 Inference Latency",
                "v100",
                "V100-SXM2-16GB (DGX-1)",
                "torch",
                "fp32",
                "efficientnet-b0",
            ),
            Table(
                "NVIDIA V100 (1x V100 16GB)",
                "Mixed Precision Inference Latency",
                "v100",
                "V100-SXM2-16GB (DGX-1)",
                "torch",
                "fp16",
                "efficientnet-b0",
            ),
        ],
    ),
    "dle-mxnet-resnet50": (
        MX_RN50,
        "resnet50",
        [
            Table(
                "Inference performance: NVIDIA DGX A100 (1x A100 80GB)",
                "",
                "a100-80gb",
                "A100-SXM4-80GB (DGX A100)",
                "mxnet",
                "fp16",
            ),
            Table(
                "Inference performance: NVIDIA DGX-1 (1x V100 16GB)",
                "",
                "v100",
                "V100-SXM2-16GB (DGX-1)",
                "mxnet",
                "fp16",
            ),
            Table("Inference performance: NVIDIA T4", "", "t4", "T4 16GB", "mxnet", "fp16"),
        ],
    ),
    "dle-paddle-resnet50": (
        PD_RN50,
        "resnet50",
        [
            Table(
                "Inference performance: NVIDIA DGX A100 (1x A100 80GB)",
                "TF32 Inference Latency",
                "a100-80gb",
                "A100-SXM4-80GB (DGX A100)",
                "paddle",
                "tf32",
            ),
            Table(
                "Inference performance: NVIDIA DGX A100 (1x A100 80GB)",
                "Mixed Precision Inference Latency",
                "a100-80gb",
                "A100-SXM4-80GB (DGX A100)",
                "paddle",
                "fp16",
            ),
            *(
                Table(
                    f"Paddle-TRT performance: NVIDIA {gpu}",
                    f"{p.upper()} Inference Latency",
                    hw,
                    device,
                    "paddle-tensorrt",
                    p,
                )
                for gpu, hw, device in (
                    ("DGX A100 (1x A100 80GB)", "a100-80gb", "A100-SXM4-80GB (DGX A100)"),
                    ("A30 (1x A30 24GB)", "a30", "A30 24GB"),
                    ("A10 (1x A10 24GB)", "a10", "A10 24GB"),
                )
                for p in ("tf32", "fp16", "int8")
            ),
        ],
    ),
}

# Header words -> the plain table's columns (MXNet's tables give mixed-precision figures beside speedups).
COLUMNS = [
    (re.compile(r"^batch size$"), "batch_size"),
    (re.compile(r"^(avg throughput|throughput avg|throughput \(img/sec\)( - mixed precision)?)$"), "throughput_ips"),
    (re.compile(r"^(avg latency|latency avg|avg latency \(ms\)( - mixed precision)?)$"), "latency_mean_ms"),
    (re.compile(r"^50% latency \(ms\)( - mixed precision)?$"), "latency_p50_ms"),
    (re.compile(r"^(90% latency|latency 90%|90% latency \(ms\)( - mixed precision)?)$"), "latency_p90_ms"),
    (re.compile(r"^(95% latency|latency 95%|95% latency \(ms\)( - mixed precision)?)$"), "latency_p95_ms"),
    (re.compile(r"^(99% latency|latency 99%|99% latency \(ms\)( - mixed precision)?)$"), "latency_p99_ms"),
    (re.compile(r"^model$"), "model_name"),
]
NUMBER = re.compile(r"^(\d+(\.\d+)?)\s*(ms|img/s)?$")
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
    "latency_p50_ms",
    "latency_p90_ms",
    "latency_p95_ms",
    "latency_p99_ms",
    "source",
)


def markdown_tables(text: str) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(heading, title, header, rows) for every markdown table: heading is the last heading of level 1-5,
    title the last non-empty line before the table (a level-6 heading or a bold line)."""
    found, heading, title, lines = [], "", "", text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("#") and len(line) - len(line.lstrip("#")) < 6:
            heading, title = line.lstrip("#").strip(), ""
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append([c.strip().strip("*").strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            if len(block) >= 2 and set("".join(block[1])) <= set("-: "):
                found.append((heading, title, block[0], block[2:]))
            continue
        elif line:
            title = line.strip("*# ").strip()
        i += 1
    return found


def extract(readme: str, model: str, tables: list[Table], path: str) -> tuple[list[dict], list[str]]:
    rows, problems = [], []
    available = markdown_tables(readme)
    source = f"{REPOSITORY}/blob/{COMMIT}/{path}"
    for spec in tables:
        matches = [t for t in available if spec.heading in t[0] and (spec.title == t[1] if spec.title else True)]
        if spec.title == "" and len(matches) > 1:
            matches = matches[:1]
        if len(matches) != 1:
            raise SystemExit(f"{path}: expected one table '{spec.title}' under '{spec.heading}', found {len(matches)}")
        heading, title, header, body = matches[0]
        names = [next((name for pattern, name in COLUMNS if pattern.match(h.lower())), None) for h in header]
        for cells in body:
            values = dict(zip(names, cells))
            if spec.model_column and values.get("model_name") != spec.model_column:
                continue
            row = {
                "hardware": spec.hardware,
                "device_name": spec.device,
                "model": model,
                "backend": spec.backend,
                "precision": spec.precision,
                "input_size": 224,
                "source": f"{source} ({heading}{': ' + spec.title if spec.title else ''})",
            }
            for name, cell in values.items():
                if name in (None, "model_name"):
                    continue
                match = NUMBER.match(cell)
                if match:
                    row[name] = match.group(1)
                else:
                    row[name] = ""
                    problems.append(
                        f"{path} '{heading}' '{title}' batch {values.get('batch_size')}: {name} {cell!r} "
                        "is not a number; left empty"
                    )
            if row.get("batch_size"):
                rows.append(row)
    return rows, problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", required=True, help="a clone (or bare mirror) of NVIDIA/DeepLearningExamples")
    args = parser.parse_args()
    (HERE / "tables").mkdir(exist_ok=True)
    for name, (path, model, tables) in SECTIONS.items():
        readme = subprocess.run(
            ["git", "-C", args.repo, "show", f"{COMMIT}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        rows, problems = extract(readme, model, tables, path)
        for problem in problems:
            print("note:", problem, file=sys.stderr)
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=OUT_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        table_path = HERE / "tables" / f"{name}.csv"
        table_path.write_text(buffer.getvalue())
        profile = import_profile("table", [table_path], ImportSettings())
        write_profile(profile, HERE / f"{name}.csv")
        groups = profile.groupby(["hardware", "backend", "precision"]).size()
        print(f"{name}: {len(profile)} rows, {len(groups)} curves -> {name}.csv")


if __name__ == "__main__":
    main()
