"""Each serving option's profile rows against a bare PyTorch loop of the same option, and issue 39's targets.

    python3 experiments/008_gpu_campaign/options_vs_bare.py compare --bare h100-bare.json \\
            --profile h100-resnet50-torch-fp16.csv --profile h100-resnet50-torch-compile-fp16.csv \\
            --out h100-options.json

The bare loops are bare_check.py's (eager, channels-last, `--graphs` CUDA graphs, `--compile` torch.compile
in its default and reduce-overhead modes), each row labelled by the profile's backend without `torch-`
(`eager` for `torch`), its compile mode, and the precision: `channels-last-compile-reduce-overhead-fp16`.
`compare` prints, per option, the profile's median against the bare loop's at each shared point (for a
compiled option also the first call, which is its compilation, in both), the option's best images/s and
its batch-1 time, and checks issue 39's targets on an H100: the best option at least 2x eager
channels-first at its best batch and at least 21,000 images/s; batch 1 in at most 2 ms.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

TARGET_SPEEDUP, TARGET_IMAGES_S, TARGET_BATCH1_MS = 2.0, 21_000.0, 2.0


def label_of(backend: str, precision: str) -> str:
    """The bare loop's label of a profile's backend: torch -> eager-fp16, torch-channels-last -> channels-last-fp16."""
    return f"{'eager' if backend == 'torch' else backend.removeprefix('torch-')}-{precision}"


def compare(args) -> int:
    import pandas as pd

    bare = {}
    for path in args.bare:
        for row in json.loads(Path(path).read_text())["rows"]:
            if "median_ms" in row:
                size = int(row["size"])
                label = row["label"].removesuffix(f"-{size}")
                bare[(label, size, int(row["batch"]))] = row
    frame = pd.concat([pd.read_csv(p) for p in args.profile], ignore_index=True)
    frame = frame[frame["status"] == "ok"]
    options, lines = {}, []
    for (backend, precision), rows in frame.groupby(["backend", "precision"], sort=False):
        label = label_of(backend, precision)
        at224 = rows[rows["input_size"] == 224]
        pairs = []
        for r in rows.itertuples(index=False):
            other = bare.get((label, int(r.input_size), int(r.batch_size)))
            if other is not None:
                pair = {
                    "input_size": int(r.input_size),
                    "batch_size": int(r.batch_size),
                    "profile_ms": float(r.latency_ms),
                    "bare_ms": other["median_ms"],
                    "ratio": float(r.latency_ms) / other["median_ms"],
                }
                if "compile" in label and pd.notna(r.warmup_ms) and "first_ms" in other:
                    # the compilation: the profile's first call in its measuring process, the bare loop's
                    pair.update(profile_first_ms=float(r.warmup_ms), bare_first_ms=other["first_ms"])
                pairs.append(pair)
        best = at224.loc[at224["throughput_ips"].idxmax()] if len(at224) else None
        one = at224[at224["batch_size"] == 1]
        name = f"{backend} {precision}"
        options[name] = {
            "against_bare": pairs,
            "best_images_s": None if best is None else float(best["throughput_ips"]),
            "best_batch": None if best is None else int(best["batch_size"]),
            "batch1_ms": float(one["latency_ms"].iloc[0]) if len(one) else None,
            "first_call_ms": {int(r.batch_size): r.warmup_ms for r in at224.itertuples() if pd.notna(r.warmup_ms)},
        }
        lines.append(f"{name}: best {options[name]['best_images_s'] or 0:,.0f} images/s at 224 px")
        for p in pairs:
            first = ""
            if "bare_first_ms" in p:  # seconds: a compilation
                profile_s, bare_s = p["profile_first_ms"] / 1e3, p["bare_first_ms"] / 1e3
                first = f"; first call profile {profile_s:.1f} s, bare {bare_s:.1f} s"
            lines.append(
                f"  {p['input_size']} px batch {p['batch_size']}: profile {p['profile_ms']:.3f} ms, bare "
                f"{p['bare_ms']:.3f} ms ({p['ratio'] - 1:+.1%}){first}"
            )
    verdict = _targets(options)
    print("\n".join(lines + verdict["lines"]))
    Path(args.out).write_text(json.dumps({"options": options, "targets": verdict["targets"]}, indent=1) + "\n")
    return 0


def _targets(options: dict) -> dict:
    eager = options.get("torch fp16", {}).get("best_images_s")
    best = max((o["best_images_s"] or 0, name) for name, o in options.items())
    fastest_one = min(((o["batch1_ms"], name) for name, o in options.items() if o["batch1_ms"]), default=(None, None))
    targets = {
        "eager_best_images_s": eager,
        "best_option": best[1],
        "best_images_s": best[0],
        "speedup": best[0] / eager if eager else None,
        "speedup_met": bool(eager) and best[0] >= TARGET_SPEEDUP * eager,
        "images_s_met": best[0] >= TARGET_IMAGES_S,
        "batch1_option": fastest_one[1],
        "batch1_ms": fastest_one[0],
        "batch1_met": fastest_one[0] is not None and fastest_one[0] <= TARGET_BATCH1_MS,
    }
    speedup = f"{targets['speedup']:.2f}x eager" if targets["speedup"] else "no eager fp16 rows to compare"
    lines = [
        f"best: {best[1]} {best[0]:,.0f} images/s ({speedup}; target >= {TARGET_SPEEDUP:g}x and >= "
        f"{TARGET_IMAGES_S:,.0f}: {'met' if targets['speedup_met'] and targets['images_s_met'] else 'not met'})",
        f"batch 1: {fastest_one[1]} {fastest_one[0] or float('nan'):.2f} ms (target <= {TARGET_BATCH1_MS:g} ms: "
        f"{'met' if targets['batch1_met'] else 'not met'})",
    ]
    return {"targets": targets, "lines": lines}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compare", help="profile rows against bare rows, and the targets")
    c.add_argument("--bare", nargs="+", required=True, help="bare_check.py's JSON files")
    c.add_argument("--profile", action="append", required=True, help="a profile CSV (repeatable)")
    c.add_argument("--out", required=True, help="the JSON to write")
    return compare(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
