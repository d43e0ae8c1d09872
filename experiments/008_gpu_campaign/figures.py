"""The figures of one GPU type's campaign files, recomputed from them (README.md's Results quote this output).

    python experiments/008_gpu_campaign/figures.py results/h100 [--other results/h200]

Reads, in the folder: `<hw>-check.txt` (the device), every `<hw>-<model>-torch-<option>.csv` (the
profiles), `<hw>-bare.json` (an independent bare PyTorch loop, where there is one), `<hw>-validate.jsonl`
(plans executed) and `<hw>-calibration.jsonl` (the GPU calibration). With --other, the two GPU types' ok
points at the same (model, option, size, batch) are compared. Prints Markdown; every figure names its file.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
PROFILE = re.compile(r"^(?P<hw>[a-z0-9]+)-(?P<model>.+)-torch-(?P<option>[\w-]+)\.csv$")


def profiles(folder: Path) -> dict[tuple[str, str], pd.DataFrame]:
    """(model, option) -> the profile's rows, for every profile CSV in the folder."""
    out = {}
    for path in sorted(folder.glob("*-torch-*.csv")):
        m = PROFILE.match(path.name)
        if m:
            df = pd.read_csv(path)
            df.attrs["file"] = path.name
            out[(m["model"], m["option"])] = df
    return out


def device_line(folder: Path) -> str:
    checks = sorted(folder.glob("*-check.txt"))
    if not checks:
        return "(no environment log)"
    text = checks[0].read_text()
    gpu = re.search(r"^(NVIDIA [^,]+), (\d+) MiB, ([\d.]+)", text, re.M)
    versions = {k: v for k, v in re.findall(r"^(torch|torchvision|numpy|pandas) (\S+)$", text, re.M)}
    cuda = re.search(r"^cuda (\S+) cudnn (\d+)", text, re.M)
    parts = [f"{gpu[1]}, {int(gpu[2]):,} MiB, driver {gpu[3]}" if gpu else "GPU unknown"]
    parts += [f"{k} {versions[k]}" for k in ("torch", "torchvision") if k in versions]
    if cuda:
        parts.append(f"CUDA {cuda[1]}, cuDNN {cuda[2]}")
    return "; ".join(parts) + f" (`{checks[0].name}`)"


def profile_table(df: pd.DataFrame) -> list[str]:
    lines = [
        f"`{df.attrs['file']}`: {len(df)} points ({(df['status'] == 'ok').sum()} ok, "
        f"{(df['status'] == 'oom').sum()} oom, {(~df['status'].isin(['ok', 'oom'])).sum()} other)",
        "",
        "| input | batch 1 | best images/s (batch, ms) | largest batch that fits (first that does not) "
        "| memory per image |",
        "|---|---|---|---|---|",
    ]
    for size, rows in df.groupby("input_size"):
        ok = rows[rows["status"] == "ok"].sort_values("batch_size")
        if ok.empty:
            continue
        one = ok[ok["batch_size"] == 1]
        first = f"{one['latency_ms'].iloc[0]:.2f} ms, {one['throughput_ips'].iloc[0]:,.0f}/s" if len(one) else "-"
        best = ok.loc[ok["throughput_ips"].idxmax()]
        largest = int(ok["batch_size"].max())
        oom = rows[(rows["status"] == "oom") & (rows["batch_size"] > largest)]["batch_size"]
        first_oom = f"{int(oom.min()):,}" if len(oom) else "none measured"
        slope = np.polyfit(ok["batch_size"], ok["memory_mb"], 1)[0] if len(ok) > 1 else math.nan
        lines.append(
            f"| {size} px | {first} | {best['throughput_ips']:,.0f}/s ({int(best['batch_size'])}, "
            f"{best['latency_ms']:.1f} ms) | {largest:,} ({first_oom}) | {slope:.2f} MiB |"
        )
    return lines


def fresh_processes(df: pd.DataFrame) -> list[str]:
    """The fresh warm-up processes: each row with a warm-up measured in a fresh process has its own load."""
    fresh = df[(df["status"] == "ok") & df["warmup_ms"].notna()]
    if fresh.empty:
        return []
    loads, firsts = sorted(fresh["load_ms"] / 1e3), sorted(fresh["warmup_ms"] / 1e3)
    steady = df[(df["status"] == "ok") & df["warmup_ms"].isna()]["load_ms"].dropna().unique() / 1e3
    where = ", ".join(f"{int(s)} px/{int(b)}" for s, b in zip(fresh["input_size"], fresh["batch_size"]))
    return [
        f"- fresh processes ({len(fresh)}: {where}): load {', '.join(f'{x:.2f}' for x in loads)} s "
        f"(median {np.median(loads):.2f}); first call {', '.join(f'{x:.2f}' for x in firsts)} s "
        f"(median {np.median(firsts):.2f}); the measuring worker's one load, repeated in the other "
        f"{len(df[df['warmup_ms'].isna()])} rows: {', '.join(f'{x:.2f}' for x in steady)} s"
    ]


def stability(df: pd.DataFrame) -> list[str]:
    ok = df[df["status"] == "ok"]
    stable = ok["stable"].astype(str).str.lower() == "true"
    unknown = ok["latency_ci_rel"].isna()
    wide = ~stable & ~unknown
    out = [
        f"- medians known to +-1% (95% interval): {int(stable.sum())} of {len(ok)}; "
        f"wider: {int(wide.sum())} (batches {fmt_batches(ok[wide])}; "
        f"worst +-{ok.loc[wide, 'latency_ci_rel'].max():.1%}, samples {int(ok.loc[wide, 'samples'].min())}-"
        f"{int(ok.loc[wide, 'samples'].max())}); no interval (too few samples for the rule then in use): "
        f"{int(unknown.sum())} (batches {fmt_batches(ok[unknown])}, {int(ok.loc[unknown, 'samples'].min())}-"
        f"{int(ok.loc[unknown, 'samples'].max())} samples, sd {sd_text(ok[unknown])} of the median)"
        if wide.any() and unknown.any()
        else f"- medians known to +-1% (95% interval): {int(stable.sum())} of {len(ok)}"
    ]
    return out


def sd_text(rows: pd.DataFrame) -> str:
    rel = rows["latency_std_ms"] / rows["latency_ms"]
    return f"{rel.min():.2%}-{rel.max():.2%}"


def fmt_batches(rows: pd.DataFrame) -> str:
    by_size = rows.groupby("input_size")["batch_size"].apply(lambda b: ",".join(str(int(x)) for x in sorted(b)))
    return "; ".join(f"{s} px: {b}" for s, b in by_size.items())


def point_times(df: pd.DataFrame) -> list[str]:
    """How long the sweep took: each row's created_at is its point's start (1 s resolution)."""
    t = pd.to_datetime(df["created_at"])
    span = (t.max() - t.min()).total_seconds()
    took = t.diff().shift(-1).dt.total_seconds()  # a point's start to the next one's
    ok = df["status"] == "ok"
    fresh = df["warmup_ms"].notna()
    parts = [f"- the sweep: {span:.0f} s from its first point's start to its last's (`created_at`)"]
    for label, mask in (
        ("an ok point with a fresh warm-up process", ok & fresh),
        ("an ok point without", ok & ~fresh),
        ("a batch that did not fit", df["status"] == "oom"),
    ):
        x = took[mask].dropna()
        if len(x):
            parts.append(f"{label}: median {x.median():.0f} s ({x.min():.0f}-{x.max():.0f}, {len(x)} points)")
    return ["; ".join(parts)]


def bare(folder: Path, profile: pd.DataFrame | None) -> list[str]:
    found = sorted(folder.glob("*-bare.json"))
    if not found or profile is None:
        return []
    path = found[0]
    rows = json.loads(path.read_text())["rows"]
    ok = profile[profile["status"] == "ok"].set_index(["input_size", "batch_size"])["latency_ms"]
    lines = [
        f"Bare loop (`{path.name}`) against the profile (`{profile.attrs['file']}`), median ms:",
        "",
        "| loop | input | batch | bare ms | profile ms | profile / bare |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("oom"):
            continue
        prof = ok.get((r["size"], r["batch"])) if r["label"].startswith("eager") else None
        ratio = f"{prof / r['median_ms']:.3f}" if prof else "-"
        lines.append(
            f"| {r['label']} | {r['size']} | {r['batch']} | {r['median_ms']:.2f} | "
            f"{f'{prof:.2f}' if prof else '-'} | {ratio} |"
        )
    return lines


def executed(path: Path) -> list[str]:
    if not path.is_file():
        return []
    lines = [
        f"Plans executed (`{path.name}`):",
        "",
        "| plan | images | batch | load s pred / meas | first call s pred / meas | batch ms pred / meas | "
        "makespan s pred / meas | stated P | deadline |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        run = r["run"]
        (w,) = run["workers"]
        pred, meas = run["predicted_makespan_s"], run["measured_makespan_s"]
        lines.append(
            f"| {r['name']} | {run['images_done']:,} | {w['batch_size']} | "
            f"{w['load_s']['predicted']:.2f} / {w['load_s']['measured']:.2f} | "
            f"{w['warmup_s']['predicted']:.2f} / {w['warmup_s']['measured']:.2f} | "
            f"{1e3 * w['batch_s']['predicted']:.1f} / {1e3 * w['batch_s']['measured']:.1f} | "
            f"{pred:.2f} / {meas:.2f} ({meas / pred - 1:+.1%}) | {run['deadline_probability']:.15g} | "
            f"{'met' if run['met_deadline'] else 'missed'} |"
        )
    return lines


def across(folder: Path, other: Path) -> list[str]:
    """The two GPU types at the same points: the other's median taken as this one's."""
    mine, theirs = profiles(folder), profiles(other)
    lines = []
    for key in sorted(set(mine) & set(theirs)):
        a = mine[key][mine[key]["status"] == "ok"].set_index(["input_size", "batch_size"])["latency_ms"]
        b = theirs[key][theirs[key]["status"] == "ok"].set_index(["input_size", "batch_size"])["latency_ms"]
        both = a.index.intersection(b.index)
        if len(both) == 0:
            continue
        error = (b[both] / a[both] - 1).abs()
        big = [i for i in both if i[1] >= 64]
        ratio = (a[big] / b[big]) if big else pd.Series(dtype=float)
        lines.append(
            f"- {key[0]} {key[1]}: `{theirs[key].attrs['file']}` taken as `{mine[key].attrs['file']}` at the "
            f"{len(both)} points both measured: median |error| {error.median():.0%}, p90 {error.quantile(0.9):.0%}; "
            f"at batch >= 64 this GPU takes {ratio.min():.2f}-{ratio.max():.2f}x the other's time"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="one GPU type's results folder, e.g. results/h100")
    parser.add_argument("--other", type=Path, help="another GPU type's folder, to compare the same points")
    args = parser.parse_args()
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    out = [f"## {args.folder.name}", "", f"Device: {device_line(args.folder)}", ""]
    found = profiles(args.folder)
    for (model, option), df in found.items():
        out += [f"### {model}, {option}", "", *profile_table(df), ""]
        out += fresh_processes(df) + stability(df) + point_times(df) + [""]
    out += bare(args.folder, found.get(("resnet50", "fp16"))) + [""]
    for name in sorted(args.folder.glob("*-validate.jsonl")):
        out += executed(name) + [""]
    if args.other:
        out += across(args.folder, args.other) + [""]
    print("\n".join(out).rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
