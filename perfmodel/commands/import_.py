"""perfmodel import: other tools' files and published tables as a profile CSV."""

from __future__ import annotations

from perfmodel import console, exit_codes
from perfmodel.commands.common import formatter

IMPORT_EXAMPLES = """examples:
  perfmodel import perf-analyzer pa-b1.csv pa-b8.csv --batch-size 1,8 --hardware a100 --model resnet50 \\
                   --backend triton-grpc --precision fp16 --input-size 224 --out /tmp/a100-pa.csv
  perfmodel import model-analyzer results/metrics-model-inference.csv --model-config resnet50_config_2 \\
                   --hardware t4 --model resnet50 --backend triton-http --precision fp16 --input-size 224 \\
                   --out /tmp/t4.csv
  perfmodel import table nvidia.csv --hardware v100 --model resnet50 --backend torch --precision fp32 \\
                   --input-size 224 --source "https://github.com/NVIDIA/DeepLearningExamples README @ 729963d" \\
                   --out /tmp/v100.csv

formats:
  perf-analyzer    Triton perf_analyzer -f FILE (a concurrency sweep; times in microseconds). The file does not
                   record the batch size: --batch-size gives the -b of each file (one for all, or one per file).
  model-analyzer   Triton Model Analyzer's metrics-model-inference.csv; --model-config picks one configuration.
  table            a plain CSV: batch_size, and throughput_ips and/or latency_p50_ms, latency_p90_ms, latency_p95_ms,
                   latency_p99_ms, latency_mean_ms (names like 'Batch Size', 'Latency 99%', 'Avg throughput' and
                   cells like '5.26 ms' are read too); hardware, model, backend, precision, input_size, source may
                   be columns instead of options.

latency_ms (the profile's steady-state time of one call) is the median when the file has it, else the time per
call its throughput implies (concurrency x batch / throughput), else the mean latency (--latency-from chooses);
the latency_basis column says which. Imported rows have no warm-up or memory: plans on them say so.
"""


# The library parameters whose flag has another name (console.for_the_command_line: errors name parameters).
PARAMETER_FLAGS = {"batch_sizes": "--batch-size"}


def add_parser(sub) -> None:
    from perfmodel.importers import FORMATS, LATENCY_FROM

    p = sub.add_parser(
        "import",
        help="turn perf_analyzer, Model Analyzer or published tables into a profile CSV",
        description="Convert other tools' measurements into one profile CSV (the profile contract), every row "
        "with its source.",
        epilog=IMPORT_EXAMPLES + "\n" + exit_codes.help_text("import"),
        formatter_class=formatter,
    )
    p.add_argument("format", choices=list(FORMATS), help="the files' format")
    p.add_argument("files", nargs="+", metavar="FILE", help="the files to import (concatenated into one profile)")
    p.add_argument("-o", "--out", required=True, metavar="FILE", help="the profile CSV to write")
    p.add_argument("--hardware", help="hardware key used in pools, e.g. a100, t4")
    p.add_argument("--model", help="model name, e.g. resnet50")
    p.add_argument("--backend", help="serving backend, e.g. triton-grpc, torch, tensorrt")
    p.add_argument("--precision", help="fp32, tf32, fp16, bf16, int8 or fp8")
    p.add_argument("--input-size", metavar="PX", help="side of the square input images in pixels, e.g. 224")
    p.add_argument("--batch-size", metavar="N[,N...]", help="perf_analyzer: the batch size (-b) of each file")
    p.add_argument("--model-config", metavar="NAME", help="Model Analyzer: which model configuration to import")
    p.add_argument(
        "--source",
        metavar="TEXT",
        help="where the figures come from (default: the file's path), e.g. a URL and its version",
    )
    p.add_argument("--device-name", metavar="NAME", help="the device's full name, e.g. 'A100-SXM4-40GB'")
    p.add_argument(
        "--latency-from",
        default="auto",
        choices=list(LATENCY_FROM),
        help="what latency_ms is taken from (default: auto = p50, else throughput, else mean)",
    )
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(run=run)


def run(args) -> int:
    from perfmodel.errors import InputError
    from perfmodel.importers import ImportSettings, import_profile
    from perfmodel.readers import output_file
    from perfmodel.schema import write_profile
    from perfmodel.units import parse_input_size

    for flag, value, fmt in (
        ("--batch-size", args.batch_size, "perf-analyzer"),
        ("--model-config", args.model_config, "model-analyzer"),
    ):
        if value is not None and args.format != fmt:  # it would do nothing: say so rather than ignore it
            raise InputError(f"{flag} is for {fmt} files only; it does nothing for {args.format}: leave it out.")
    output_file(args.out, "--out", args.files)
    settings = ImportSettings(
        hardware=args.hardware,
        model=args.model,
        backend=args.backend,
        precision=args.precision,
        input_size=None if args.input_size is None else parse_input_size(args.input_size, "--input-size"),
        batch_sizes=_batch_sizes(args.batch_size),
        source=args.source,
        latency_from=args.latency_from,
        model_config=args.model_config,
        device_name=args.device_name,
    )
    frame = import_profile(args.format, args.files, settings)
    write_profile(frame, args.out)
    groups = frame.groupby(["hardware", "model", "backend", "precision"]).size()
    if args.json:
        console.print_json(
            {
                "out": args.out,
                "rows": len(frame),
                "groups": [
                    {"hardware": h, "model": m, "backend": b, "precision": p, "rows": int(n)}
                    for (h, m, b, p), n in groups.items()
                ],
            }
        )
        return 0
    console.note(
        f"wrote {len(frame)} row(s) in {len(groups)} group(s) to {args.out} "
        f"(latency from {', '.join(sorted(set(frame['latency_basis'])))}; no warm-up or memory measured)."
    )
    return 0


def _batch_sizes(text: str | None) -> tuple[int, ...]:
    from perfmodel.readers import whole_numbers
    from perfmodel.units import MAX_BATCH_SIZE

    if text is None:
        return ()
    return whole_numbers(text, "--batch-size", high=MAX_BATCH_SIZE, example="1,8,32 (one per file)")
