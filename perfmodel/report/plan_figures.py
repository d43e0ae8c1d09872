"""A plan's timeline: per group of identical GPUs, model load, warm-up (the first batch) and the further
batches, against the deadline.

Reads the JSON of `perfmodel plan --json`. Only hardware, batch_size and finish_s are needed per
assignment; count, input_size, load_s, warmup_s, latency_s and batches are drawn where present.
"""

from __future__ import annotations

import math
import textwrap

from perfmodel.report import style
from perfmodel.report.content import Figure

MAX_ROWS = 40  # more groups than this and the rows become unreadable: draw the first ones, say so
MAX_TICKS = 60  # batch boundaries are drawn as ticks up to this many batches per row

LOAD, WARMUP, BATCHES, BUSY = "#9e9e9e", "#ff7f0e", "#1f77b4", "#6baed6"
SEGMENT_NAMES = {
    LOAD: "model load",
    WARMUP: "warm-up: first batch",
    BATCHES: "further batches",
    BUSY: "busy (the plan gives no breakdown)",
}


def assignment_label(a: dict) -> str:
    count = a.get("count", 1)
    parts = [f"{count} x {a['hardware']}" if count != 1 else str(a["hardware"])]
    if a.get("option"):
        parts.append(str(a["option"]))
    if a.get("input_size") is not None:
        parts.append(f"{a['input_size']} px")
    parts.append(f"batch {a['batch_size']}")
    return ", ".join(parts)


def _tick_label(a: dict) -> str:
    """assignment_label on two lines, the GPUs first: long names leave the bars their width."""
    first, _, rest = assignment_label(a).partition(", ")
    return textwrap.shorten(first, 60, placeholder="...") + (
        "\n" + textwrap.shorten(rest, 60, placeholder="...") if rest else ""
    )


def _segments(a: dict) -> list[tuple[float, float, str]]:
    """(start, width, colour) of load, warm-up and further batches; one bar to finish_s where parts are missing."""
    finish = float(a["finish_s"])
    load = _number(a.get("load_s")) or 0.0
    warmup = _number(a.get("warmup_s"))
    if warmup is None:
        return [s for s in [(0.0, load, LOAD), (load, max(finish - load, 0.0), BUSY)] if s[1] > 0]
    segments = [(0.0, load, LOAD), (load, warmup, WARMUP)]
    rest = max(finish - load - warmup, 0.0)
    if rest > 0:
        segments.append((load + warmup, rest, BATCHES))
    return [s for s in segments if s[1] > 0]


def _number(value) -> float | None:
    """A finite number from the plan, or None for anything else (absent, text, NaN ...)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def timeline_figure(plan: dict) -> Figure | None:
    assignments = list(plan.get("assignments") or [])
    if not assignments:
        return None
    shown = assignments[:MAX_ROWS]
    rows = len(shown)
    fig, axes = style.new_figure(width=11, height=min(max(3.2, 2.2 + 0.5 * rows), 18))  # two-line labels, legend below
    ax = axes[0, 0]
    drawn = []
    for y, a in enumerate(shown):
        for start, width, colour in _segments(a):
            ax.barh(y, width, left=start, height=0.6, color=colour, edgecolor="white", linewidth=0.4)
            drawn.append(colour)
        _batch_ticks(ax, y, a)
    ax.set_yticks(range(rows), [_tick_label(a) for a in shown])
    extra = max(0.0, (3 - rows) / 2)  # at least three rows' room, so a lone bar is not a slab
    ax.set_ylim(rows - 0.5 + extra, -0.5 - extra)  # first group on top
    ax.grid(axis="y", visible=False)
    deadline = _number(plan.get("deadline_s"))
    usable = _number(plan.get("usable_s"))
    makespan = _number(plan.get("makespan_s"))
    right = max([float(a["finish_s"]) for a in assignments] + [deadline or 0.0])
    ax.set_xlim(0, right * 1.04 if right > 0 else 1)
    legend = [(name, {"color": colour, "linewidth": 8}) for colour, name in SEGMENT_NAMES.items() if colour in drawn]
    if deadline is not None:
        ax.axvline(deadline, color="#d62728", linewidth=2)
        legend.append((f"deadline {style.number(deadline)} s", {"color": "#d62728", "linewidth": 2}))
    if usable is not None and deadline is not None and usable < deadline:
        ax.axvline(usable, color="#d62728", linewidth=1.2, linestyle="--")
        margin = _number(plan.get("margin"))
        what = f"deadline minus the {margin:.0%} margin" if margin else "usable time"
        legend.append((f"{what}: {style.number(usable)} s", {"color": "#d62728", "linewidth": 1.2, "linestyle": "--"}))
    if makespan is not None:
        ax.axvline(makespan, color="black", linewidth=1, linestyle=":")
        legend.append(
            (f"predicted makespan {style.number(makespan)} s", {"color": "black", "linewidth": 1, "linestyle": ":"})
        )
    ax.set_xlabel("time from the start (s)")
    # Over the whole figure, from the left, and the legend below: a long title never runs into the legend.
    style.suptitle(
        fig,
        _title(plan) + (f"\n(the first {rows} of {len(assignments)} groups)" if len(assignments) > rows else ""),
        width=110,
    )
    style.legend_outside(fig, (("", tuple(legend)),), below=True)
    caption = (
        "One row per group of identical GPUs (count x type, input size, batch size): each GPU loads the model, "
        "runs its "
        "first batch (warm-up, slower than the rest), then the further batches back to back; the plan must finish "
        "every row before the deadline."
    )
    if len(assignments) > rows:
        caption += f" Only the first {rows} of {len(assignments)} groups are drawn; the table lists them all."
    return Figure("plan-timeline.png", "Plan timeline", caption, style.to_png(fig))


def _batch_ticks(ax, y: int, a: dict) -> None:
    """Thin white boundaries between the further batches, while there are few enough to see."""
    latency, batches, warmup = _number(a.get("latency_s")), a.get("batches"), _number(a.get("warmup_s"))
    if latency is None or warmup is None or not isinstance(batches, int) or not 1 < batches <= MAX_TICKS:
        return
    start = (_number(a.get("load_s")) or 0.0) + warmup
    ticks = [start + k * latency for k in range(1, batches - 1)]
    ax.vlines(ticks, y - 0.3, y + 0.3, color="white", linewidth=0.6)


def _title(plan: dict) -> str:
    model = plan.get("model")
    name = model.get("name") if isinstance(model, dict) else None
    head = ("Plan" + (f" for {name}" if name else "") + ": ") + ", ".join(
        str(x) for x in (f"{plan['mode']} mode" if plan.get("mode") else "", plan.get("status")) if x
    )
    gpus, planned, requested, makespan = (
        _number(plan.get(k)) for k in ("total_gpus", "images_planned", "images", "makespan_s")
    )
    facts = []
    if gpus is not None:
        facts.append(f"{style.number(gpus)} GPU" + ("" if gpus == 1 else "s"))
    if planned is not None:
        facts.append(
            f"{style.number(planned)} images" + (f" of {style.number(requested)}" if requested is not None else "")
        )
    if makespan is not None:
        facts.append(f"makespan {style.number(makespan)} s")
    return head + ("\n" + ", ".join(facts) if facts else "")
