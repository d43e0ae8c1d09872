"""A fitted predictor's curves over the points it was fitted on, one figure per group.

Codes against the Predictor interface (perfmodel.fitting): groups with hardware/model/backend/precision,
input_sizes, batch_range, latency_ms(b, s) ... and a `report` dict; nothing else is assumed.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from perfmodel.errors import PerfmodelError, PerfmodelWarning
from perfmodel.report import style
from perfmodel.report.content import Figure

QUANTITIES = (  # quantity, what, unit, always on a log axis (else where its values span decades)
    ("latency_ms", "median latency per call", "ms", True),
    ("latency_p99_ms", "p99 latency per call", "ms", True),
    ("warmup_ms", "warm-up: first call", "ms", True),
    ("memory_mb", "peak memory", "MiB", False),
)
EXTRAPOLATE = 2.0  # the dashed part of a curve goes this many times past the largest measured batch
_DENSE_LIMIT = 4096  # up to this batch, draw every integer batch (wave steps such as ceil(b/k) show)


def group_key(group) -> dict:
    """The group's key: perfmodel.fitting's `key` (which may name architecture, protocol ...) or the four basics."""
    key = getattr(group, "key", None)
    return dict(key) if key else {k: getattr(group, k) for k in ("hardware", "model", "backend", "precision")}


def group_name(group) -> str:
    return " / ".join(str(v) for v in group_key(group).values())


def _file_name(group) -> str:
    slug = "-".join(str(v) for v in group_key(group).values())
    return "fit-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", slug) + ".png"


def _batch_grid(hi: float) -> np.ndarray:
    if hi <= _DENSE_LIMIT:
        return np.arange(1, int(hi) + 1, dtype=float)
    return np.unique(np.round(np.geomspace(1, hi, 2000)))


def group_rows(group, profile: pd.DataFrame | None) -> pd.DataFrame:
    """The profile rows of this predictor's group, every status (empty when no profile was given)."""
    if profile is None or profile.empty:
        return pd.DataFrame(columns=["input_size", "batch_size", "status"])
    mask = pd.Series(True, index=profile.index)
    for column, value in group_key(group).items():
        if column in profile.columns:
            mask &= profile[column].astype(str) == str(value)
    return profile[mask]


def _predict(group, quantity: str, b: np.ndarray, s: int) -> np.ndarray | None:
    """The predicted curve, or None where the group has no model for the quantity."""
    with warnings.catch_warnings():  # extrapolating is the point of the dashed part: no warning
        warnings.simplefilter("ignore", PerfmodelWarning)
        try:
            values = np.asarray(getattr(group, quantity)(b, np.full_like(b, float(s))), dtype=float)
        except PerfmodelError:
            return None
    return values if values.shape == b.shape and np.isfinite(values).any() else None


def _largest_ok(group, points: pd.DataFrame, quantity: str, s: int, default: float) -> float:
    """The largest batch at size s where the quantity was measured (in the profile, or in the region the
    predictor was fitted on), else measured ok at all: the curve is solid up to there, dashed beyond. Warm-up
    is often measured at a few batches only: its curve was solid far past them."""
    at = points[points["input_size"] == s]
    measured = []
    if quantity in at.columns:
        measured = at.loc[np.isfinite(at[quantity].astype(float)), "batch_size"].astype(float).tolist()
    measured += [hi for size, hi in _fitted_region(group, quantity) if size == s]
    return max(measured) if measured else _largest_at(group, points, s, default)


def _largest_at(group, points: pd.DataFrame, s: int, default: float) -> float:
    """The largest batch measured ok at size s (in the profile, or as the predictor records it)."""
    measured = points.loc[points["input_size"] == s, "batch_size"].astype(float).tolist()
    measured += [float(b) for size, b in getattr(group, "ok_batches", ()) if int(size) == s]
    return max(measured, default=default)


def _fitted_region(group, quantity: str) -> list[tuple[int, float]]:
    """(input size, largest batch) the predictor's model of the quantity was fitted on: its report's 'measured'."""
    report = getattr(group, "report", None)
    entry = report.get(quantity) if isinstance(report, dict) else None
    region = entry.get("measured") if isinstance(entry, dict) else None
    if not isinstance(region, list):
        return []
    return [
        (int(r[0]), float(r[2]))
        for r in region
        if isinstance(r, list) and len(r) == 3 and all(isinstance(x, (int, float)) and np.isfinite(x) for x in r)
    ]


def _smallest_oom(group, rows: pd.DataFrame, s: int) -> float:
    """The smallest batch measured out of memory at size s: in the profile, or as the predictor records it."""
    measured = rows.loc[(rows["status"] == "oom") & (rows["input_size"] == s), "batch_size"].astype(float).tolist()
    measured += [float(b) for size, b in getattr(group, "oom_batches", ()) if int(size) == s]
    return min(measured, default=np.inf)


def predictor_figure(group, profile: pd.DataFrame | None) -> Figure:
    """Four panels (median, p99, warm-up, memory): per input size the fitted curve, solid over the measured
    batches and dashed beyond them, with the measured points on top."""
    lo_b, hi_b = (float(x) for x in group.batch_range)
    rows = group_rows(group, profile)
    points = rows[rows["status"] == "ok"]
    sizes = sorted({int(s) for s in group.input_sizes} | {int(s) for s in points["input_size"]})
    fig, axes = style.new_figure(ncols=2, nrows=2, width=12, height=7.6)
    extrapolated = False
    for ax, (quantity, what, unit, log_y) in zip(axes.flat, QUANTITIES):
        drawn, right = False, hi_b
        for j, s in enumerate(sizes):
            c, marker = style.colour(j), style.style_for(j)["marker"]
            top = EXTRAPOLATE * _largest_at(group, points, s, hi_b)  # the batches perfmodel plan considers
            b = _batch_grid(max(1.0, min(top, _smallest_oom(group, rows, s) - 1)))
            hi_s = _largest_ok(group, points, quantity, s, hi_b)
            curve = _predict(group, quantity, b, s)
            if curve is not None:
                ax.plot(b[b <= hi_s], curve[b <= hi_s], color=c, linewidth=1.6)
                if b[-1] > hi_s:
                    ax.plot(b[b >= hi_s], curve[b >= hi_s], color=c, linewidth=1.6, linestyle="--")
                    extrapolated = True
                drawn, right = True, max(right, b[-1])
            at_size = points[points["input_size"] == s]
            measured = at_size[quantity].astype(float) if quantity in at_size.columns else pd.Series(dtype=float)
            if np.isfinite(measured).any():
                ax.plot(
                    at_size["batch_size"].astype(float),
                    measured,
                    color=c,
                    marker=marker,
                    linestyle="none",
                    markersize=5,
                    markeredgecolor="black",
                    markeredgewidth=0.5,
                    zorder=5,
                )
        shown = ax.has_data()  # before the vertical line, which counts as data too
        values = [y for line in ax.lines for y in line.get_ydata()]
        if not shown:
            ax.text(
                0.5,
                0.5,
                f"no fitted model\nand no measured points\nfor {quantity}",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="0.4",
            )
            ax.set_yticks([])
        ax.axvline(hi_b, color="0.5", linewidth=0.8)
        style.batch_axis(ax, [min(lo_b, 1.0), right])
        log = False
        if shown and log_y:
            style.plain_log_y(ax)
            log = True
        elif shown:
            log = style.log_y_if_decades(ax, values)
        ax.set_ylabel(f"{what} ({unit}, log scale)" if log else f"{what} ({unit})")
        ax.set_title(what[0].upper() + what[1:] + ("" if drawn else ": no fitted model"))
    style.suptitle(fig, f"Fitted predictor vs measured points: {group_name(group)}")
    sizes_legend = tuple(
        (
            f"{s} px",
            {
                "color": style.colour(j),
                "marker": style.style_for(j)["marker"],
                "markeredgecolor": "black",
                "markeredgewidth": 0.5,
            },
        )
        for j, s in enumerate(sizes)
    )
    lines = [("fitted (inside measured)", {"color": "0.25", "linewidth": 1.6})]
    if extrapolated:
        lines.append(("extrapolated (beyond measured)", {"color": "0.25", "linewidth": 1.6, "linestyle": "--"}))
    if not points.empty:
        lines.append(
            (
                "measured (profile)",
                {
                    "color": "0.6",
                    "marker": "o",
                    "linestyle": "none",
                    "markeredgecolor": "black",
                    "markeredgewidth": 0.5,
                },
            )
        )
    lines.append((f"largest measured batch ({style.number(hi_b)})", {"color": "0.5", "linewidth": 0.8}))
    style.legend_outside(fig, (("input size", sizes_legend), ("lines", tuple(lines))))
    caption = (
        f"Predictions of the fitted models for {group_name(group)} over every batch size from 1 to "
        f"{EXTRAPOLATE:g}x the largest batch measured at each input size (the batches perfmodel plan considers), "
        "stopping short of a batch measured out of memory; dashed beyond the largest batch where the quantity "
        "was measured at that input size, where the model extrapolates; points: the measured profile."
    )
    if points.empty:
        caption += " No profile of this group was given, so no measured points are shown."
    return Figure(_file_name(group), f"Fitted predictor: {group_name(group)}", caption, style.to_png(fig))
