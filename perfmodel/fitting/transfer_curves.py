"""A profile's rows as the curves a transfer carries (perfmodel.fitting.transfer): its ways of serving, and per
GPU and precision of each a Curve of the work b x (s/224)^2, with what a GPU's rows cannot give said."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfmodel.errors import InputError
from perfmodel.fitting.gpu_effects import Curve, busy_fraction, rate
from perfmodel.fitting.gpu_specs import GpuSpec, spec_key
from perfmodel.fitting.regressors import MonotonePiecewiseLinear, RooflineRegression
from perfmodel.fitting.traffic import traffic_bytes

PRECISION_FAMILIES = {"fp32": "float32", "tf32": "float32", "fp16": "half", "bf16": "half", "int8": "int8"}
# A floor on which the GPU was busy less than this (%, the profile's gpu_util_avg) is the host's: eager
# PyTorch at batch 1-32 keeps an H200 11% busy (profiles/h200-resnet50-torch-fp16.csv).
HOST_BOUND_UTILISATION = 50.0
# Points of one work (within 2%) whose latencies differ more than this are said to disagree: the transfer
# scales by the work alone.
DISAGREEMENT = 1.5


def ways_of_serving(ok: pd.DataFrame, keys: list[str]):
    """Each way of serving of the rows (their `keys` and precision family, as a dict) with its rows."""
    frame = ok.assign(family=ok["precision"].map(PRECISION_FAMILIES))
    frame = frame[frame["family"].notna()]
    for values, rows in frame.groupby([*keys, "family"], sort=True):
        yield dict(zip([*keys, "family"], values if isinstance(values, tuple) else (values,))), rows


def publications(rows: pd.DataFrame, specs: dict[str, GpuSpec]) -> dict[str, frozenset]:
    """Per GPU of the table, the documents a way of serving's rows on it were published in: a row's `source` up
    to the table named in parentheses, '' for one's own measurements (no source). A same-stack ratio is taken
    only from ways of the same document: one publication is one measurement campaign (its machines, its
    software), as one collection was in the held-out figures; two publications are two stacks."""
    source = rows["source"] if "source" in rows.columns else pd.Series("", index=rows.index)
    document = source.fillna("").astype(str).str.split(" (", n=1, regex=False).str[0].str.strip()
    gpu = rows["hardware"].map(lambda h: spec_key(h, specs))
    return {key: frozenset(document[gpu == key]) for key in gpu.dropna().unique()}


def curves_of(
    rows: pd.DataFrame, specs: dict[str, GpuSpec], quantity: str, way: tuple = (), notes: list[str] | None = None
) -> list[Curve]:
    """One Curve per (hardware, precision) of a way of serving's rows, for GPUs of the table (a profile's
    V100 is the table's v100), named by the table's key. Why a GPU's rows give none, and points of one work
    that disagree, are added to `notes`."""
    notes = [] if notes is None else notes
    curves = []
    for (hardware, precision), part in rows.groupby(["hardware", "precision"], sort=True):
        key = spec_key(hardware, specs)
        if key is None:
            notes.append(f"{hardware} is not in the GPU table")
            continue
        spec = specs[key]
        points = part.groupby(["batch_size", "input_size"], as_index=False)[quantity].median()
        y = points[quantity].to_numpy(dtype=float)
        usable = np.isfinite(y) & (y > 0)
        b = points["batch_size"].to_numpy(dtype=float)[usable]
        s = points["input_size"].to_numpy(dtype=float)[usable]
        y = y[usable]
        work = b * (s / 224.0) ** 2
        if len(np.unique(work)) < 2:
            if len(y) and quantity == "latency_ms":
                notes.append(f"{hardware} {precision} has points of one work b x (s/224)^2 only")
            continue
        try:
            rate(spec, precision)
        except InputError:
            continue
        estimator = RooflineRegression(intercept=False).fit(np.column_stack([b, s]), y)
        if quantity == "latency_ms":
            notes += _disagreeing(hardware, b, s, y)
        curve = MonotonePiecewiseLinear().fit(np.column_stack([b, s]), y)
        host = _host_floor(part, estimator)
        traffic = traffic_bytes(dict(way).get("model", ""), precision)
        curves.append(Curve(way, key, precision, spec, estimator, b, s, y, curve, host, traffic))
    return curves


def _host_floor(rows: pd.DataFrame, estimator: RooflineRegression) -> bool:
    """Whether the GPU was mostly idle on the curve's floor (the profile measured its utilisation)."""
    if "gpu_util_avg" not in rows.columns:
        return False
    util = rows["gpu_util_avg"].to_numpy(dtype=float)
    work = rows["batch_size"].to_numpy(dtype=float) * (rows["input_size"].to_numpy(dtype=float) / 224.0) ** 2
    floor = np.isfinite(util) & (busy_fraction(estimator, work) < 0.5)
    return bool(floor.any() and np.median(util[floor]) < HOST_BOUND_UTILISATION)


def _disagreeing(hardware: str, b: np.ndarray, s: np.ndarray, y: np.ndarray) -> list[str]:
    """A note where points of one work (within 2%) at different input sizes differ more than DISAGREEMENT."""
    work = b * (s / 224.0) ** 2
    worst = None
    for i in range(len(y)):
        for j in range(len(y)):
            if s[i] != s[j] and abs(work[i] / work[j] - 1.0) <= 0.02 and y[i] > DISAGREEMENT * y[j]:
                if worst is None or y[i] / y[j] > worst[0]:
                    worst = (y[i] / y[j], i, j)
    if worst is None:
        return []
    factor, i, j = worst
    return [
        f"on {hardware}, points of one work disagree {factor:.1f}x (batch {b[i]:g} at {s[i]:g} px: {y[i]:.4g} ms; "
        f"batch {b[j]:g} at {s[j]:g} px: {y[j]:.4g} ms): the transfer scales by the work b x (s/224)^2 and "
        "carries their non-decreasing fit"
    ]
