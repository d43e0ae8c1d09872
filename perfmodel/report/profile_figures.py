"""The figures of one or several profiles: latency, throughput, memory and warm-up against batch size."""

from __future__ import annotations

import numpy as np
import pandas as pd

from perfmodel.report import style
from perfmodel.report.content import Figure
from perfmodel.report.groups import Layout, Series

# A capacity line this far above the largest measured memory would squash every curve to the floor.
CAPACITY_SCALE = 10.0


def _title(what: str, lay: Layout) -> str:
    return f"{what}\n{lay.common}" if lay.common else what


def _finite(s: Series, *columns: str) -> pd.DataFrame:
    """The series' rows where every one of the columns holds a number."""
    if any(c not in s.rows.columns for c in columns):
        return s.rows.iloc[0:0]
    return s.rows[np.isfinite(s.rows[list(columns)].astype(float)).all(axis=1)]


def _all_batches(lay: Layout) -> list[float]:
    batches = [float(b) for s in lay.series for b in s.rows["batch_size"]]
    return batches + [float(s.smallest_oom) for s in lay.series if s.smallest_oom]


def latency_figure(lay: Layout) -> Figure | None:
    fig, axes = style.new_figure(width=8.5)
    ax = axes[0, 0]
    banded = False
    for s in lay.series:
        rows = _finite(s, "latency_ms")
        b = rows["batch_size"].to_numpy(float)
        ax.plot(b, rows["latency_ms"], color=s.colour, marker=s.marker, linestyle=s.linestyle, markersize=4)
        band = _finite(s, "latency_ms", "latency_p99_ms")  # published curves often give no p99
        if len(band):
            banded = True
            b = band["batch_size"].to_numpy(float)
            ax.fill_between(b, band["latency_ms"], band["latency_p99_ms"], color=s.colour, alpha=0.15, linewidth=0)
    style.batch_axis(ax, _all_batches(lay))
    style.plain_log_y(ax)
    ax.set_ylabel("latency per call (ms, log scale)")
    basis = _latency_basis(lay)
    what = f"{basis}, shaded up to the 99th percentile" if banded else f"{basis} (no 99th percentile given)"
    ax.set_title(_title(f"Latency vs batch size: {what}", lay))
    shade = ((f"{basis} to p99 (shaded)", {"color": "0.55", "linewidth": 7, "alpha": 0.3}),) if banded else ()
    style.legend_outside(fig, (*lay.legend, ("latency", shade)))
    caption = (
        f"{basis[0].upper() + basis[1:]} time of one call of a batch (line and points)"
        + (" and its 99th percentile (top of the shaded band)" if banded else " (the profile gives no 99th percentile)")
        + ", after warm-up. Both axes are logarithmic: a slope of 1 means time grows in proportion to the batch."
    )
    return Figure("latency.png", "Latency vs batch size", caption, style.to_png(fig))


# What latency_ms was taken from (the column `latency_basis` of imported rows; measured rows are medians).
_BASIS = {"p50": "median", "mean": "mean", "throughput": "batch ÷ throughput"}


def _latency_basis(lay: Layout) -> str:
    """'median', or what published rows give instead (their mean, or the batch over their throughput)."""
    found = set()
    for s in lay.series:
        if "latency_basis" in s.rows.columns:
            found |= {str(v) for v in s.rows["latency_basis"].fillna("p50")}
        else:
            found.add("p50")
    return " or ".join(_BASIS.get(v, v) for v in sorted(found, key=lambda v: (v != "p50", v)))


def throughput_figure(lay: Layout) -> Figure | None:
    fig, axes = style.new_figure(width=8.5)
    ax = axes[0, 0]
    for s in lay.series:
        ax.plot(
            s.rows["batch_size"].astype(float),
            s.throughput_ips,
            color=s.colour,
            marker=s.marker,
            linestyle=s.linestyle,
            markersize=4,
        )
    style.batch_axis(ax, _all_batches(lay))
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(style.FuncFormatter(lambda v, _: style.number(v)))
    ax.set_ylabel("throughput (images/s)")
    ax.set_title(_title("Throughput vs batch size", lay))
    style.legend_outside(fig, lay.legend)
    caption = (
        "Images per second while serving back-to-back calls of one batch size "
        "(the batch divided by its median latency)."
    )
    return Figure("throughput.png", "Throughput vs batch size", caption, style.to_png(fig))


def memory_figure(lay: Layout) -> Figure | None:
    measured = [(s, _finite(s, "memory_mb")) for s in lay.series]
    if not any(len(rows) for _, rows in measured):
        return None
    fig, axes = style.new_figure(width=8.5)
    ax = axes[0, 0]
    top = max(float(rows["memory_mb"].max()) for _, rows in measured if len(rows))
    for s, rows in measured:
        if len(rows):
            b = rows["batch_size"].to_numpy(float)
            ax.plot(b, rows["memory_mb"], color=s.colour, marker=s.marker, linestyle=s.linestyle, markersize=4)
            ax.plot(
                b[-1:],
                rows["memory_mb"].iloc[-1:],
                color=s.colour,
                marker="*",
                markersize=14,
                markeredgecolor="black",
                markeredgewidth=0.6,
                linestyle="none",
                zorder=5,
            )
        if s.smallest_oom:
            ax.axvline(s.smallest_oom, color=s.colour, linestyle=":", linewidth=1.6)
    marks = [
        (
            "largest batch measured ok",
            {
                "color": "0.4",
                "marker": "*",
                "markersize": 12,
                "markeredgecolor": "black",
                "markeredgewidth": 0.6,
                "linestyle": "none",
            },
        )
    ]
    if any(s.smallest_oom for s in lay.series):
        marks.append(("smallest batch out of memory", {"color": "0.25", "linestyle": ":", "linewidth": 1.6}))
    marks += _capacity_lines(ax, lay, top)
    style.batch_axis(ax, _all_batches(lay))
    log = style.log_y_if_decades(ax, [v for _, rows in measured for v in rows["memory_mb"].astype(float)])
    if not log:
        ax.set_ylim(0, ax.get_ylim()[1] * 1.06)  # room above the top star
    ax.set_ylabel("peak memory (MiB, log scale)" if log else "peak memory (MiB)")
    ax.set_title(_title("Memory vs batch size, and where it stops fitting", lay))
    style.legend_outside(fig, (*lay.legend, ("memory", tuple(marks))))
    caption = (
        "Peak memory while serving one batch, model weights included (on a CPU: the growth of the process's "
        "resident memory). The star marks the largest batch measured ok (larger ones may fit too, unless one ran "
        "out of memory); a dotted vertical line the smallest batch that ran out of memory; a dash-dotted "
        "horizontal line the device's memory."
    )
    return Figure("memory.png", "Memory vs batch size", caption, style.to_png(fig))


def _capacity_lines(ax, lay: Layout, top: float) -> list[tuple[str, dict]]:
    """The device memory of each group: a line when it is on the plot's scale, a legend note when far above."""
    capacities: dict[float, str] = {}
    for s in lay.series:
        if "device_memory_mb" in s.rows.columns:
            values = s.rows["device_memory_mb"].astype(float).dropna()
            if len(values):
                capacities.setdefault(float(values.max()), s.colour)
    if len(capacities) == 1:  # one device (or several alike): black, not the colour of one group
        capacities = {c: "black" for c in capacities}
    entries = []
    for capacity, colour in capacities.items():
        if capacity <= top * CAPACITY_SCALE:
            ax.axhline(capacity, color=colour, linestyle="-.", linewidth=1.4)
            entries.append((f"device memory {style.number(capacity)} MiB", {"color": colour, "linestyle": "-."}))
        else:
            entries.append(
                (
                    f"device memory {style.number(capacity)} MiB\n(far above, not drawn)",
                    {"color": colour, "linestyle": "-.", "alpha": 0.4},
                )
            )
    return entries


def warmup_figure(lay: Layout) -> Figure | None:
    measured = [(s, _finite(s, "warmup_ms", "latency_ms")) for s in lay.series]
    if not any(len(rows) for _, rows in measured):
        return None
    fig, axes = style.new_figure(ncols=2, width=12, height=4.4)
    times, ratios = axes[0, 0], axes[0, 1]
    for s, rows in measured:
        if not len(rows):
            continue
        # Warm-up is often measured at a few batches only (1 and 256): its line joins neighbours alone, and the
        # steady state is drawn at every batch between (a line through those two hid its shape).
        steady = _finite(s, "latency_ms")
        steady = steady[steady["batch_size"].between(rows["batch_size"].min(), rows["batch_size"].max())]
        b, warmup, latency = _broken(rows, steady["batch_size"])
        times.plot(b, warmup, color=s.colour, marker=s.marker, linestyle=s.linestyle, markersize=4)
        times.plot(
            steady["batch_size"].to_numpy(float),
            steady["latency_ms"].to_numpy(float),
            color=s.colour,
            linestyle=(0, (1, 1.5)),
            linewidth=1.2,
            alpha=0.8,
        )
        ratios.plot(b, warmup / latency, color=s.colour, marker=s.marker, linestyle=s.linestyle, markersize=4)
    batches = [float(b) for _, rows in measured for b in rows["batch_size"]]
    for ax in (times, ratios):
        style.batch_axis(ax, batches)
        style.plain_log_y(ax)
    times.set_ylabel("time (ms, log scale)")
    times.set_title("First call vs steady state")
    ratios.set_ylabel("warm-up ÷ steady-state latency (×, log scale)")
    ratios.axhline(1, color="0.5", linewidth=0.8)
    ratios.set_title("How much slower the first call is")
    style.suptitle(fig, _title("Warm-up vs batch size", lay))
    lines = (
        ("warm-up: first call", {"color": "0.25", "marker": "o", "markersize": 4}),
        ("steady-state median", {"color": "0.25", "linestyle": (0, (1, 1.5)), "linewidth": 1.2}),
    )
    style.legend_outside(fig, (*lay.legend, ("left panel", lines)))
    caption = (
        "Left: the first call at each batch size on a freshly loaded model (warm-up: autotuning, lazy loading, "
        "allocator growth) beside the steady-state median for scale. Right: their ratio. Warm-up lines join "
        "neighbouring batch sizes only: where it was measured at a few batches, its points stand alone."
    )
    return Figure("warmup.png", "Warm-up vs batch size", caption, style.to_png(fig))


def _broken(rows: pd.DataFrame, batches: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Batch, warm-up and latency of the rows, with a NaN (a break in the line) between two rows that have
    another of these batch sizes between them."""
    b, w, lat = (rows[c].to_numpy(float) for c in ("batch_size", "warmup_ms", "latency_ms"))
    gaps = [i + 1 for i in range(len(b) - 1) if ((batches > b[i]) & (batches < b[i + 1])).any()]
    return np.insert(b, gaps, np.nan), np.insert(w, gaps, np.nan), np.insert(lat, gaps, np.nan)


def profile_figures(lay: Layout) -> tuple[list[Figure], list[str]]:
    """All profile figures that have data, and a note for each one that has none."""
    figures, notes = [], []
    if not lay.series:
        return figures, ["No point was measured ok, so there is nothing to draw."]
    coloured = len(lay.legend[0][1])  # the legend's first section: one entry per colour drawn
    if coloured > len(style.COLOURS):
        notes.append(
            f"The figures need {coloured} colours and have {len(style.COLOURS)} (they repeat), so some curves look "
            "alike: report fewer profiles at a time for a readable comparison."
        )
    for make, missing in (
        (latency_figure, ""),
        (throughput_figure, ""),
        (memory_figure, "No memory was recorded (memory_mb is empty), so there is no memory figure."),
        (warmup_figure, "No warm-up was recorded (warmup_ms is empty), so there is no warm-up figure."),
    ):
        figure = make(lay)
        if figure is None:
            notes.append(missing)
        else:
            figures.append(figure)
    return figures, notes
