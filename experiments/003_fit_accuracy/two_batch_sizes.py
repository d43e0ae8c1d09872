"""The error of the straight line `perfmodel fit` draws through a profile with only two batch sizes.

    python experiments/003_fit_accuracy/two_batch_sizes.py  # rewrites perfmodel/data/two_batch_size_errors.json

On the 35 published curves of profiles/reference/, every pair of batch sizes of every curve (one input
size) gives a line (perfmodel.fitting.accuracy.two_batch_size_line_errors), tested at the batch sizes
between its two ('between') and above the larger up to twice it ('beyond'). The file holds, per region,
the number of points, the median and 90th percentile of |line - measured| / measured (the figures fit's
note quotes) and the signed errors 100 x (measured / line - 1) as 201 evenly spaced quantiles (what a
two-batch-size predictor carries, and plan draws its spread from). tests/fitting/test_fit_few_points.py checks
that the file still matches what this measures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import no_options  # noqa: E402
from perfmodel.files import atomic_write_text  # noqa: E402
from perfmodel.fitting.selection import TWO_BATCH_SIZE_FILE, two_batch_size_errors_of  # noqa: E402
from perfmodel.schema import load_profiles  # noqa: E402


def main() -> None:
    no_options(__doc__)
    frame = load_profiles(sorted((ROOT / "profiles" / "reference").glob("*.csv")))
    data = two_batch_size_errors_of(frame)
    atomic_write_text(TWO_BATCH_SIZE_FILE, json.dumps(data, indent=1) + "\n")
    for region in ("between", "beyond"):
        r = data[region]
        signed = np.asarray(r["errors_pct"])
        print(
            f"{region}: {r['points']} points, |error| median {r['median_pct']}%, p90 {r['p90_pct']}%; signed "
            f"p5 {np.quantile(signed, 0.05):.1f}%, p95 {np.quantile(signed, 0.95):.1f}%"
        )
    print(f"written to {TWO_BATCH_SIZE_FILE}")


if __name__ == "__main__":
    main()
