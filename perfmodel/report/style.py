"""What every report figure shares: matplotlib (Agg, no display), the batch-size axis, colours and legends.

matplotlib is imported here and nowhere outside perfmodel.report, so `import perfmodel` never pays for it.
"""

from __future__ import annotations

import io
import math
import textwrap
import warnings
import weakref
from collections.abc import Iterable, Sequence

import numpy as np

from perfmodel.errors import InputError

try:
    import matplotlib

    matplotlib.use("Agg")  # render to files only; this machine (and CI) has no display
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, MaxNLocator, NullLocator
except ImportError:  # matplotlib is the optional extra 'report'
    raise InputError("perfmodel report needs matplotlib: in perfmodel's clone, pip install '.[report]'.") from None

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
LINESTYLES = ("-", "--", "-.", ":")

RC = {
    "figure.dpi": 110,
    "savefig.dpi": 110,
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
}


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 7.5, height: float = 4.2):
    """A figure with constrained layout (titles, labels and outside legends never overlap or clip)."""
    with plt.rc_context(RC):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", squeeze=False)
    return fig, axes


def suptitle(fig, text: str, width: int = 0) -> None:
    """A figure title from the left edge: centred, a long one would run into the legend on the right.
    With `width`, each line is wrapped at that many characters."""
    if width:
        text = "\n".join(textwrap.fill(line, width) for line in text.splitlines())
    fig.suptitle(text, x=0.01, ha="left")


def to_png(fig) -> bytes:
    """Render and close the figure (pyplot keeps every open figure alive otherwise)."""
    buffer = io.BytesIO()
    try:
        with plt.rc_context(RC), warnings.catch_warnings():
            # A name from a file in a script the font lacks is drawn as boxes: no warning per character.
            warnings.filterwarnings("ignore", message="Glyph .* missing from font", category=UserWarning)
            _literal_text(fig)
            _thin_batch_labels(fig)
            fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _literal_text(fig) -> None:
    """Every text drawn as written: names come from files, and matplotlib reads '$...$' as mathtext (a model
    named '$\\oops$' made the report fail). No figure of the report uses mathtext itself."""
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_parse_math(False)


def batch_axis(ax, batches: Iterable[float]) -> None:
    """Log2 x-axis for batch sizes, labelled on powers of two written 1, 2, 4 ... (not 2^0).

    to_png labels every other power instead where the labels would touch.
    """
    values = [float(b) for b in batches if b and b > 0 and math.isfinite(b)]
    if not values:
        return
    lo, hi = min(values), max(values)
    ax.set_xscale("log", base=2)
    _BATCH_POWERS[ax] = [2**k for k in range(math.floor(math.log2(lo)), math.ceil(math.log2(hi)) + 1)]
    _label_powers(ax, 1)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    pad = 2**0.25
    ax.set_xlim(lo / pad, hi * pad)
    ax.set_xlabel("batch size (images per call)")


_BATCH_POWERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # axes -> the powers of two on its x-axis


def _label_powers(ax, step: int) -> None:
    powers = _BATCH_POWERS[ax]
    ax.xaxis.set_major_locator(FixedLocator(powers[::step]))
    ax.xaxis.set_minor_locator(FixedLocator([p for i, p in enumerate(powers) if i % step]))  # unlabelled ticks


def _thin_batch_labels(fig) -> None:
    """Label every 2nd (4th ...) power of two on batch axes whose labels would otherwise touch."""
    batch_axes = [ax for ax in fig.axes if ax in _BATCH_POWERS]
    if not batch_axes:
        return
    fig.draw_without_rendering()  # lay out first: label and axes widths are final only then
    gap = 0.08 * fig.dpi  # about 6 points of white between two labels
    for ax in batch_axes:
        boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
        if len(boxes) < 2:
            continue
        spacing = min((b.x0 + b.x1 - a.x0 - a.x1) / 2 for a, b in zip(boxes, boxes[1:]))  # one power apart
        widest = max(b.width for b in boxes)
        step = 1
        while step * spacing < widest + gap and step < len(_BATCH_POWERS[ax]):
            step *= 2
        if step > 1:
            _label_powers(ax, step)


def plain_log_y(ax) -> None:
    """Log y-axis whose labels read 0.5, 1, 10, 1,000 rather than 10^3; call it after plotting.

    Over a short range more than the powers of ten are labelled, so the axis has enough numbers to read.
    """
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    decades = math.log10(hi / lo) if lo > 0 else 99
    if decades < 1:  # within a decade (0.8 to 1.7): evenly spaced round numbers, or only one or two would show
        locator = MaxNLocator(nbins=7, steps=[1, 2, 2.5, 5, 10])
        below = locator.tick_values(lo, hi)[0]
        if 0 < below < lo:  # down to the round number below the data, so that the bottom is labelled too
            ax.set_ylim(below, hi)
        ax.yaxis.set_major_locator(locator)
        ax.yaxis.set_minor_locator(NullLocator())
    else:
        # Just over a decade, 1 to 9 crowd at its top (8,000 9,000 10,000 overlapped): 1, 2, 3, 5 are enough.
        subs = (1, 2, 3, 5) if decades < 1.2 else (1, 2, 5) if decades < 2.5 else (1,)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: number(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def log_y_if_decades(ax, values, decades: float = 2.0) -> bool:
    """A log y-axis (plain_log_y) where the positive values span more than `decades` decades, else a linear
    one from 0; True if log. Memory from 89 MiB to 110,000 MiB on a linear axis laid every batch up to 256,
    and a CPU beside an H200, flat on the floor. Call it after plotting."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    if v.size and v.max() > v.min() * 10**decades:
        plain_log_y(ax)
        return True
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda x, _: number(x)))
    return False


def number(value: float) -> str:
    """A number as a person writes it on an axis or in a table: 3 significant digits, thousands separated."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    value = float(value)
    if abs(value) < 1e-6:  # zero but for rounding (an error of 2e-05 %, a time of 9e-19 s): not 2.02e-05
        return "0"
    if abs(value) < 1e-3:  # written out, not in e-notation: 0.000439
        return np.format_float_positional(value, precision=3, fractional=False, trim="-")
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 1 and value == round(value):
        return f"{value:.0f}"
    return f"{value:.3g}"


LEGEND_ROW_IN = 0.2  # the height of one legend row at the legend's font size, in inches
LEGEND_CHAR_IN = 0.075  # the width of one character of a legend label, in inches (a generous mean)
MAX_LEGEND_ROWS = 36  # rows in one legend column; more make a second column


def _fit_legend(fig, labels: Sequence[str]) -> int:
    """The columns of a legend right of the axes, with the figure grown so that all of it shows: taller
    while one column fits MAX_LEGEND_ROWS, then wider by a column (a legend taller than the figure was cut
    off at the bottom, say 24 groups of a published profile)."""
    rows = sum(1 + label.count("\n") for label in labels)
    ncols = math.ceil(rows / MAX_LEGEND_ROWS)
    fig.set_figheight(max(fig.get_figheight(), math.ceil(rows / ncols) * LEGEND_ROW_IN + 0.6))
    if ncols > 1:
        column = max(len(line) for label in labels for line in label.splitlines()) * LEGEND_CHAR_IN + 0.6
        fig.set_figwidth(fig.get_figwidth() + (ncols - 1) * column)
    return ncols


def style_for(index: int) -> dict:
    """Marker and line style of the index-th input size (combined with a group's colour)."""
    return {"marker": MARKERS[index % len(MARKERS)], "linestyle": LINESTYLES[index % len(LINESTYLES)]}


def colour(index: int) -> str:
    return COLOURS[index % len(COLOURS)]


def legend_outside(fig, sections: Sequence[tuple[str, Sequence[tuple[str, dict]]]], below: bool = False) -> None:
    """One legend right of the axes (or below them), in sections under a bold title (none if empty);
    entries are (label, Line2D kwargs).

    Outside the axes it never hides a data point, and constrained layout makes room for it.
    """
    handles, labels, titles = [], [], []
    for title, entries in sections:
        if not entries:
            continue
        if title:
            titles.append(len(handles))
            handles.append(Line2D([], [], linestyle="none"))
            labels.append(title)
        for label, kwargs in entries:
            handles.append(Line2D([], [], **kwargs))
            labels.append(label)
    if handles:
        where = {"loc": "outside lower center", "ncols": 3} if below else {"loc": "outside right upper"}
        if not below:
            where["ncols"] = _fit_legend(fig, labels)
        legend = fig.legend(handles, labels, frameon=False, handlelength=2.6, **where)
        texts = legend.get_texts()
        for i in titles:
            texts[i].set_fontweight("bold")
