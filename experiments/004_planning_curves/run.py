"""Planning with the shipped profiles: how many GPUs 100 000 images need as the deadline shrinks,
soft real-time versus relaxed, and what a safety margin (or planning on p99) costs.

For every deadline on a grid, perfmodel.planning.batch.make_plan (the same code as `perfmodel plan`) solves, on the
fixed rule (confidence "none", not plan's default 0.95):
  soft, margin 0 / 5% / 10%, on the median latency, and soft, margin 0, on the p99 latency:
      the fewest GPUs that finish every image by the deadline;
  relaxed with a fixed pool (--pool-size of each type): the most images finished by the deadline.
An infeasible soft plan (no GPU finishes even its first batch in time) is recorded as such.

    python experiments/004_planning_curves/run.py                      # shipped profiles, 224 px and 64 px
    python experiments/004_planning_curves/run.py --profile h100-resnet50-torch-fp16.csv --input-size 224

Writes results.csv and planning.png in a new folder results/<date>-<machine>-<commit>/ and prints the tables
pasted into README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, log, new_results  # noqa: E402
from perfmodel.errors import InputError  # noqa: E402
from perfmodel.planning.batch import NoPlanError, make_plan  # noqa: E402


def solve_grid(
    profiles: list[str], model: str, size: int, images: int, deadlines: np.ndarray, pool_size: int
) -> pd.DataFrame:
    rows = []
    for deadline in deadlines:
        log(f"{size} px, deadline {deadline:g} s")
        for label, margin, use in (
            ("soft", 0.0, "p50"),
            ("soft, margin 5%", 0.05, "p50"),
            ("soft, margin 10%", 0.10, "p50"),
            ("soft, p99", 0.0, "p99"),
        ):
            try:
                plan = make_plan(
                    images,
                    float(deadline),
                    input_size=size,
                    profiles=profiles,
                    model=model,
                    margin=margin,
                    use=use,
                    confidence="none",
                )
                rows.append(
                    {
                        "input_size": size,
                        "deadline_s": deadline,
                        "plan": label,
                        "gpus": plan.total_gpus,
                        "images_planned": plan.total_images,
                        "makespan_s": plan.makespan_s,
                        "solve_ms": plan.solve_time_s * 1e3,
                        "batch_sizes": _batches(plan),
                    }
                )
            except NoPlanError:
                rows.append(
                    {
                        "input_size": size,
                        "deadline_s": deadline,
                        "plan": label,
                        "gpus": np.nan,
                        "images_planned": 0,
                        "makespan_s": np.nan,
                        "solve_ms": np.nan,
                        "batch_sizes": "",
                    }
                )
        types = _hardware_types(profiles, model)
        try:
            plan = make_plan(
                None,
                float(deadline),
                input_size=size,
                profiles=profiles,
                model=model,
                mode="relaxed",
                pool={t: pool_size for t in types},
                confidence="none",
            )
            done, gpus, makespan = plan.total_images, plan.total_gpus, plan.makespan_s
        except NoPlanError:
            done, gpus, makespan = 0, 0, np.nan
        rows.append(
            {
                "input_size": size,
                "deadline_s": deadline,
                "plan": f"relaxed, {pool_size} per type",
                "gpus": gpus,
                "images_planned": done,
                "makespan_s": makespan,
                "solve_ms": np.nan,
                "batch_sizes": "",
            }
        )
    return pd.DataFrame(rows)


def _batches(plan) -> str:
    return ",".join(str(a.batch_size) for a in plan.assignments)


def _hardware_types(profiles: list[str], model: str) -> list[str]:
    frames = [pd.read_csv(p, usecols=["hardware", "model"]) for p in profiles]
    df = pd.concat(frames)
    return sorted(df.loc[df["model"] == model, "hardware"].unique())


def figure(results: pd.DataFrame, images: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results["input_size"].unique())
    fig, axes = plt.subplots(2, len(sizes), figsize=(6.2 * len(sizes), 8.5), squeeze=False)
    for col, size in enumerate(sizes):
        r = results[results["input_size"] == size]
        ax = axes[0, col]
        for label, style in (
            ("soft", "-o"),
            ("soft, margin 5%", "--s"),
            ("soft, margin 10%", ":^"),
            ("soft, p99", "-.d"),
        ):
            s = r[r["plan"] == label]
            ax.plot(s["deadline_s"], s["gpus"], style, ms=4, label=label)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="deadline (s, log scale)",
            ylabel="devices needed (log scale)",
            title=f"{images:,} images at {size} px: devices needed",
        )
        ax.grid(alpha=0.3, which="both")
        ax.legend()
        ax = axes[1, col]
        relaxed = r[r["plan"].str.startswith("relaxed")]
        ax.plot(relaxed["deadline_s"], relaxed["images_planned"], "-o", ms=4, label=relaxed["plan"].iloc[0])
        ax.axhline(images, color="grey", ls=":", label=f"{images:,} images (the soft target)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="deadline (s, log scale)",
            ylabel="images finished (log scale)",
            title=f"relaxed: images a fixed pool finishes by the deadline ({size} px)",
        )
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def seconds(text: str) -> np.ndarray:
    """--deadlines: seconds, separated by commas."""
    try:
        return np.array([float(d) for d in text.split(",")])
    except ValueError:
        raise argparse.ArgumentTypeError(f"give seconds separated by commas, e.g. 10,60,600; not {text!r}") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", action="append", help="profile CSV (repeat); default: profiles/cpu-*.csv")
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--input-size", type=int, action="append", help="default: 224 and 64")
    parser.add_argument("--images", type=int, default=100_000)
    parser.add_argument("--pool-size", type=int, default=64, help="devices of each type for the relaxed plans")
    parser.add_argument(
        "--deadlines", type=seconds, default="5,10,20,30,45,60,90,120,180,300,600,1200,1800,3600", help="seconds"
    )
    args = parser.parse_args()
    profiles = args.profile or sorted(str(p) for p in (ROOT / "profiles").glob("cpu-*.csv"))
    try:
        results = pd.concat(
            [
                solve_grid(profiles, args.model, size, args.images, args.deadlines, args.pool_size)
                for size in (args.input_size or [224, 64])
            ],
            ignore_index=True,
        )
    except InputError as exc:  # perfmodel's own one-sentence refusal (a missing profile, a size not measured)
        parser.error(str(exc))
    out = new_results(HERE)
    results.to_csv(out / "results.csv", index=False)
    figure(results, args.images, out / "planning.png")
    finish_results(out)
    print(f"wrote {out}")
    pd.set_option("display.width", 200)
    print(
        f"profiles: {', '.join(os.path.relpath(p, ROOT) for p in profiles)}; model {args.model}; {args.images:,} images"
    )
    for size, r in results.groupby("input_size"):
        table = r.pivot_table(index="deadline_s", columns="plan", values="gpus", aggfunc="first")
        relaxed = r[r["plan"].str.startswith("relaxed")].set_index("deadline_s")["images_planned"]
        table["relaxed: images done"] = relaxed
        print(f"\n{size} px: devices needed (soft) and images a fixed pool finishes (relaxed)")
        print(table.to_string(float_format=lambda v: f"{v:,.0f}"))
    soft = results[results["plan"] == "soft"].dropna(subset=["gpus"])
    for label in ("soft, margin 5%", "soft, margin 10%", "soft, p99"):
        other = results[results["plan"] == label].dropna(subset=["gpus"])
        merged = soft.merge(other, on=["input_size", "deadline_s"], suffixes=("", "_other"))
        extra = (merged["gpus_other"] / merged["gpus"] - 1) * 100
        print(
            f"{label}: {extra.median():.1f}% more devices than margin 0 (median over deadlines; range "
            f"{extra.min():.1f}% to {extra.max():.1f}%)"
        )
    print(
        f"solve time per soft plan: median {results['solve_ms'].median():.1f} ms, max "
        f"{results['solve_ms'].max():.1f} ms"
    )


if __name__ == "__main__":
    main()
