"""Every argument of every command, by the class of input it takes (perfmodel/readers.py has one reader per class).

The command line uses this table for what it can check alone: text flags go through readers.text as they
are parsed (an escape sequence in --source never reaches a terminal or a file). tests/commands/test_input_classes.py
walks the parsers and fails for an argument missing here, then throws each class's bad values at every
argument of that class, so a new flag is checked the day it is added. Positionals are named by their dest.
"""

from __future__ import annotations

NUMBER = "number"  # a number or list of numbers in text, with or without a unit: ASCII digits, finite
TEXT = "text"  # free text that is echoed: names, sources, addresses; printable, bounded
OUTPUT_FILE = "output file"  # readers.output_file
OUTPUT_FOLDER = "output folder"  # readers.output_folder
INPUT_FILE = "input file"  # read with files.read_bytes and friends (tests/commands/test_fuzz_cli.py: hostile files)
INPUT_FOLDER = "input folder"
CHOICE = "choice"  # argparse's choices
SWITCH = "switch"  # store_true
CLASSES = (NUMBER, TEXT, OUTPUT_FILE, OUTPUT_FOLDER, INPUT_FILE, INPUT_FOLDER, CHOICE, SWITCH)

ARGUMENTS: dict[str, dict[str, str]] = {
    "profile": {
        "--model": TEXT,  # a built-in name, or a TorchScript file's path, echoed in every line
        "--out": OUTPUT_FILE,
        "--backend": CHOICE,
        "--device": TEXT,
        "--batch-sizes": NUMBER,
        "--input-sizes": NUMBER,
        "--precision": CHOICE,
        "--channels-last": SWITCH,
        "--compile": SWITCH,
        "--compile-mode": CHOICE,  # torch.compile's mode, with --compile
        "--cuda-graphs": SWITCH,
        "--warmup": CHOICE,
        "--fresh-warmup-at": NUMBER,
        "--threads": NUMBER,
        "--alongside": NUMBER,
        "--processes": NUMBER,
        "--drift-probe": NUMBER,
        "--hardware": TEXT,
        "--max-batch-size": NUMBER,
        "--max-call-ms": NUMBER,
        "--search-tolerance": NUMBER,
        "--memory-limit-mb": NUMBER,
        "--max-time-per-point": NUMBER,
        "--max-time-short-calls": NUMBER,
        "--call-timeout": NUMBER,
        "--worker-timeout": NUMBER,
        "--resume": SWITCH,
        "--estimate": SWITCH,
        "--protocol": TEXT,
        "--mode": TEXT,
        "--concurrency": NUMBER,
        "--url": TEXT,
        "--architecture": CHOICE,
        "--server-model": TEXT,
        "--request-timeout": NUMBER,
        "--server-timeout": NUMBER,
        "--rate": NUMBER,
        "--duration": NUMBER,
        "--max-queue-delay": NUMBER,
        "--triton-config": INPUT_FOLDER,
        "--server-cpus": NUMBER,
        "--json": SWITCH,
    },
    "import": {
        "format": CHOICE,
        "files": INPUT_FILE,
        "--out": OUTPUT_FILE,
        "--hardware": TEXT,
        "--model": TEXT,
        "--backend": TEXT,
        "--precision": TEXT,
        "--input-size": NUMBER,
        "--batch-size": NUMBER,
        "--model-config": TEXT,
        "--source": TEXT,
        "--device-name": TEXT,
        "--latency-from": CHOICE,
        "--json": SWITCH,
    },
    "fit": {
        "profiles": INPUT_FILE,
        "--out": OUTPUT_FILE,
        "--report": SWITCH,
        "--json": SWITCH,
        "--target-hardware": TEXT,
        "--gpu-specs": INPUT_FILE,
        "--families": TEXT,
    },
    "plan": {
        "--images": NUMBER,
        "--deadline": NUMBER,
        "--input-size": NUMBER,
        "--mix": NUMBER,
        "--mode": CHOICE,
        "--objective": CHOICE,
        "--pool": NUMBER,
        "--price": NUMBER,
        "--profile": INPUT_FILE,
        "--predictor": INPUT_FILE,
        "--model": TEXT,
        "--backend": TEXT,
        "--precision": TEXT,
        "--use": CHOICE,
        "--margin": NUMBER,
        "--load-time": NUMBER,
        "--extrapolate": SWITCH,
        "--transfer": SWITCH,
        "--confidence": NUMBER,
        "--decode-time": NUMBER,
        "--max-batches": NUMBER,
        "--gap": NUMBER,
        "--time-limit": NUMBER,
        "--json": SWITCH,
        "--rate": NUMBER,
        "--slo": NUMBER,
        "--percentile": NUMBER,
        "--request-size": NUMBER,
        "--arrivals": INPUT_FILE,
        "--triton-config": OUTPUT_FOLDER,
        "--ray-serve-config": OUTPUT_FILE,
        "--max-queue-delay": NUMBER,
        "--no-simulation": SWITCH,
    },
    "report": {
        "profiles": INPUT_FILE,
        "--predictor": INPUT_FILE,
        "--plan": INPUT_FILE,
        "--run": INPUT_FILE,
        "--out": OUTPUT_FOLDER,
        "--json": SWITCH,
    },
    "run": {
        "plan": INPUT_FILE,
        "--images": INPUT_FOLDER,
        "--synthetic": SWITCH,
        "--out": OUTPUT_FILE,
        "--resume": SWITCH,
        "--address": TEXT,
        "--device": CHOICE,
        "--model": INPUT_FILE,
        "--weights": INPUT_FILE,
        "--steal": SWITCH,
        "--decode-threads": NUMBER,
        "--json": SWITCH,
    },
}


def name_of(action) -> str:
    """An argparse action's key in ARGUMENTS: its long option ('--out' for -o/--out), or a positional's dest."""
    return max(action.option_strings, key=len) if action.option_strings else action.dest
