"""Same-stack ratios from one publication or from any: checked on the reference tables (tuning data).

    python experiments/003_fit_accuracy/same_publication.py   # 20 s on 2 loaded cores: same_publication.md

A same-stack transfer scales a way of serving by the ratio other ways measured on both GPUs. The held-out
figures (transfer.md) took those ways from the same collection only: one publication, one measurement
campaign. `perfmodel fit A.csv B.csv --target-hardware X` took them from any table given, so a table of
another framework, measured on other machines, could scale a way (issue 40 follow-up: EfficientNet-B0
fp16, A100 -> V100, scaled by MXNet's ResNet-50 ratio, 193% off). The physics: the launch-bound floor is
the host's and the framework's (MXNet's ResNet-50 floor on the A100, 0.68 ms, is the GPU's own time;
eager PyTorch's EfficientNet-B0 floor, 9.5 ms, the host's launches), and the busy part the GPU's on that
software, so only one campaign's ratio describes the two machines a way of serving ran on.

Here every GPU of every way of serving of profiles/reference/ (DeepLearningExamples' tables, part of the
library the effects are learned from: tuning data, never the held-out collections) is predicted from each
other GPU alone, same-stack, with the ratios taken (a) from the same table only, as the fit does now, and
(b) from any table, as it did. Median and 90th percentile of |predicted / measured - 1| over points.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import log, no_options  # noqa: E402
from perfmodel.errors import PerfmodelWarning  # noqa: E402
from perfmodel.files import atomic_write_text  # noqa: E402
from perfmodel.fitting.gpu_specs import load_gpu_specs  # noqa: E402
from perfmodel.fitting.transfer import validate  # noqa: E402
from perfmodel.schema import load_profile  # noqa: E402


def errors(rows: list[dict]) -> str:
    """'median / p90 (points, transfers)' of the rows' |errors| in %."""
    if not rows:
        return "- (0, 0)"
    e = np.abs(np.concatenate([r["transfer_errors"] for r in rows])) * 100.0
    return f"{np.median(e):.1f} / {np.quantile(e, 0.9):.1f} ({len(e)}, {len(rows)})"


def main() -> None:
    no_options(__doc__)
    warnings.simplefilter("ignore", PerfmodelWarning)
    specs = load_gpu_specs()
    paths = sorted((ROOT / "profiles" / "reference").glob("*.csv"))
    frame = pd.concat([load_profile(p).assign(table=p.stem) for p in paths])
    log("same-stack transfers, one source, ratios from the same table and from any")
    same = validate(frame, specs, ("table", "model", "backend"), one_source=True, same_stack=True)
    anyt = validate(frame, specs, ("model", "backend"), one_source=True, same_stack=True)

    def key(r: dict) -> tuple:
        return (r["model"], r["backend"], r["family"], r["hardware"], tuple(r["from"]))

    by_same, by_any = {key(r): r for r in same}, {key(r): r for r in anyt}
    changed = [k for k in by_same if k in by_any and by_same[k]["transfer_errors"] != by_any[k]["transfer_errors"]]
    only_other = [k for k in by_any if k not in by_same]
    load = [round(v, 2) for v in os.getloadavg()]
    lines = [
        "# 003: same-stack ratios from one publication or from any (tuning data: profiles/reference/)",
        "",
        f"Written by same_publication.py; load average at the end {load} (accuracy does not depend on it).",
        "",
        "|transfers | ratios from the same table (now) | ratios from any table (before) |",
        "|---|---|---|",
        f"| all same-stack transfers | {errors(same)} | {errors(anyt)} |",
        f"| those whose ratio changed | {errors([by_same[k] for k in changed])} "
        f"| {errors([by_any[k] for k in changed])} |",
        f"| those with another table's ratio only (now through the specifications) | - "
        f"| {errors([by_any[k] for k in only_other])} |",
        "",
        "Cells: median / 90th percentile |error| % (points, transfers).",
        "",
        "Transfers with another table's ratio only, before (median %):",
        "",
        *[
            f"- {m}/{b} {f} on {h} from {', '.join(s)}: {by_any[(m, b, f, h, s)]['median_pct']:.1f}"
            for m, b, f, h, s in sorted(only_other)
        ],
        "",
    ]
    atomic_write_text(HERE / "same_publication.md", "\n".join(lines))
    log("wrote same_publication.md")


if __name__ == "__main__":
    main()
