"""A run's timeline: per worker, the plan's bar (load, warm-up, further batches) above the measured one
(load, the wait from its load's end to its first batch, the first batch, the further batches), against the
deadline.
A worker lost with its node is marked where the driver knew it; the batches it left, re-run by survivors,
are hatched on their rows. Also the run's table: per worker, predicted beside measured.

Reads the JSON of `perfmodel run --json`.
"""

from __future__ import annotations

from perfmodel.report import style
from perfmodel.report.content import Figure, Table
from perfmodel.report.plan_figures import BATCHES, LOAD, WARMUP, _number

MAX_WORKERS = 40
WAIT = "#f0dc82"  # not a grey: the plan's pale load bar would look like it
DEADLINE = "#d62728"
LOST = "black"
RERUN = "#9467bd"  # re-run batches, drawn over the survivor's own ones


def _lost_at(run: dict) -> dict[str, float | None]:
    """Worker name -> when the driver knew its node lost (s), for each lost worker."""
    return {x["worker"]: _number(x.get("lost_at_s")) for x in run.get("lost_workers") or []}


def _reruns(run: dict) -> dict[str, list[float]]:
    """Worker name -> the ends of the lost workers' batches it re-ran."""
    ends: dict[str, list[float]] = {}
    for x in run.get("rerun_batches") or []:
        ends.setdefault(x["worker"], []).append(_number(x.get("end_s")))
    return ends


def _rerun_spans(w: dict, ends: list[float]) -> list[tuple[float, float]]:
    """The (start, width) of the worker's re-run batches: its timeline's batches that end when a re-run one did
    (the run file gives each re-run batch's end, the timeline every batch's start and end)."""
    wanted = set(ends)
    batches = (w.get("timeline") or {}).get("batches") or []
    return [(b[0], b[1] - b[0]) for b in batches if b[1] in wanted]


def _planned(w: dict) -> list[tuple[float, float, str]]:
    load, warmup, finish = (_number(w[k]["predicted"]) or 0.0 for k in ("load_s", "warmup_s", "finish_s"))
    return [
        s
        for s in [(0.0, load, LOAD), (load, warmup, WARMUP), (load + warmup, finish - load - warmup, BATCHES)]
        if s[1] > 0
    ]


def _measured(w: dict) -> list[tuple[float, float, str]]:
    timeline = w.get("timeline") or {}
    segments = []
    load = timeline.get("load")
    if load:
        segments.append((load[0], load[1] - load[0], LOAD))
    batches = timeline.get("batches") or []
    if batches:
        if load and batches[0][0] > load[1]:
            segments.append((load[1], batches[0][0] - load[1], WAIT))
        segments.append((batches[0][0], batches[0][1] - batches[0][0], WARMUP))
        if len(batches) > 1:
            segments.append((batches[1][0], batches[-1][1] - batches[1][0], BATCHES))
    return [s for s in segments if s[1] > 0]


def run_timeline(run: dict) -> Figure | None:
    drawn = draw_timeline(run)
    if drawn is None:
        return None
    fig, caption = drawn
    return Figure("run-timeline.png", "Run timeline: predicted and measured", caption, style.to_png(fig))


def draw_timeline(run: dict):
    """The timeline's matplotlib figure and caption (None without workers); run_timeline renders it."""
    workers = list(run.get("workers") or [])[:MAX_WORKERS]
    if not workers:
        return None
    fig, axes = style.new_figure(width=11, height=min(max(3.6, 2.2 + 0.8 * len(workers)), 16))  # legend below
    ax = axes[0, 0]
    ticks, labels = [], []
    lost_at, reruns = _lost_at(run), _reruns(run)
    for i, w in enumerate(workers):
        spans = _rerun_spans(w, reruns.get(w["worker"], []))
        if spans:
            ax.broken_barh(
                spans, (i + 0.02, 0.36), facecolors=RERUN, edgecolor="white", linewidth=0.4, hatch="//", zorder=3
            )
        if w["worker"] in lost_at:
            _mark_lost(ax, i, lost_at[w["worker"]] or _end(w))
        for offset, segments, alpha in ((-0.2, _planned(w), 0.55), (0.2, _measured(w), 1.0)):
            for start, width, colour in segments:
                ax.barh(
                    i + offset,
                    width,
                    left=start,
                    height=0.36,
                    color=colour,
                    alpha=alpha,
                    edgecolor="white",
                    linewidth=0.4,
                )
        ticks += [i - 0.2, i + 0.2]
        labels += [f"{w['worker']} plan", f"{w['worker']} measured"]
    ax.set_yticks(ticks, labels)
    ax.set_ylim(len(workers) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    legend = [
        ("model load", {"color": LOAD, "linewidth": 8}),
        ("waiting: from its model loaded to its first batch", {"color": WAIT, "linewidth": 8}),
        ("warm-up: first batch", {"color": WARMUP, "linewidth": 8}),
        ("further batches", {"color": BATCHES, "linewidth": 8}),
    ]
    if reruns:
        legend.append(("re-run batches of a lost worker", {"color": RERUN, "linewidth": 8}))
    if lost_at:
        legend.append(("node lost (when the run knew it)", {"color": LOST, "linewidth": 2, "marker": "X"}))
    for key, colour, style_ in (
        ("deadline_s", DEADLINE, "-"),
        ("predicted_makespan_s", "black", ":"),
        ("measured_makespan_s", "black", "-"),
    ):
        value = _number(run.get(key))
        if value is not None:
            ax.axvline(value, color=colour, linewidth=1.5 if key == "deadline_s" else 1, linestyle=style_)
            name = key.replace("_s", "").replace("_", " ")
            legend.append((f"{name} {style.number(value)} s", {"color": colour, "linewidth": 1.5, "linestyle": style_}))
    ax.set_xlabel("time from asking the workers to load (s)")
    error = _number(run.get("error_rel"))
    hardware = ", ".join(dict.fromkeys(str(w["hardware"]) for w in workers if w.get("hardware")))
    # Over the whole figure, from the left, and the legend below (as the plan's): a long title never runs into it.
    style.suptitle(
        fig,
        f"Run of {(run.get('model') or {}).get('name') or 'a plan'}"
        + (f" on {hardware}" if hardware else "")
        + f": {run.get('status', '')}"
        + (f", makespan {error:+.1%} against the plan" if error is not None else ""),
        width=110,
    )
    style.legend_outside(fig, (("", tuple(legend)),), below=True)
    caption = (
        "Per worker, the plan's bar (pale) above the measured one. The clock starts when the workers are asked "
        "to load their models; each worker starts its batches as soon as its own model has loaded."
    )
    if lost_at:
        caption += (
            " A worker lost with its node is marked (X) when the run knew it; its unfinished batches were "
            "re-run by the survivors of its input size (hatched)."
        )
    return fig, caption


def _mark_lost(ax, row: int, at: float | None) -> None:
    """A cross and a line across the worker's row at the time its node was known lost, with the time written."""
    if at is None:
        return
    ax.plot([at, at], [row - 0.45, row + 0.45], color=LOST, linewidth=2, zorder=4)
    ax.plot([at], [row + 0.2], marker="X", color=LOST, markersize=9, zorder=5)
    ax.annotate(
        f"node lost {style.number(at)} s",
        (at, row - 0.45),
        xytext=(4, 2),
        textcoords="offset points",
        fontsize=8,
        va="top",
        color=LOST,
    )


def _end(w: dict) -> float | None:
    batches = (w.get("timeline") or {}).get("batches") or []
    return batches[-1][1] if batches else None


def _batches_cell(w: dict, lost_at: dict, reruns: dict) -> str:
    """Done of given, the own ones apart from a lost worker's that this one re-ran, and when it was lost."""
    done, given, rerun = w.get("batches_done"), w.get("batches_given"), len(reruns.get(w.get("worker"), []))
    text = f"{done - rerun if isinstance(done, int) else done} of {given}" + (f" (+{rerun} re-run)" if rerun else "")
    if w.get("worker") in lost_at:
        at = lost_at[w.get("worker")]
        text += " (lost" + (f" at {style.number(at)} s)" if at is not None else ")")
    return text


def run_table(run: dict) -> Table:
    headers = (
        "worker",
        "size px",
        "batch",
        "batches done",
        "images done",
        *(f"{q} {k}" for q in ("load s", "warm-up s", "batch s", "finish s") for k in ("plan", "measured")),
        "decode ms/image",
        "bottleneck",
    )
    rows = []
    lost_at, reruns = _lost_at(run), _reruns(run)
    for w in run.get("workers") or []:
        pairs = [
            _cell(w.get(q, {}).get(k))
            for q in ("load_s", "warmup_s", "batch_s", "finish_s")
            for k in ("predicted", "measured")
        ]
        decode = w.get("decode_s_per_image")
        rows.append(
            (
                str(w.get("worker")),
                _cell(w.get("input_size")),
                _cell(w.get("batch_size")),
                _batches_cell(w, lost_at, reruns),
                _cell(w.get("images_done")),
                *pairs,
                "-" if decode is None else style.number(decode * 1000),
                str(w.get("bottleneck") or "-"),
            )
        )
    note = (
        f"Makespan: {_cell(run.get('measured_makespan_s'))} s measured, {_cell(run.get('predicted_makespan_s'))} s "
        f"predicted; deadline {_cell(run.get('deadline_s'))} s{_load_average(run.get('load_avg_1m'))}."
    )
    if lost_at:
        later = _number(run.get("later_than_planned_s"))
        note += (
            f" Lost with their node: {', '.join(lost_at)}; {sum(map(len, reruns.values()))} of their batches "
            "re-run elsewhere (counted as +N re-run on the worker that ran them)"
            + (f"; the run ended {later:+.2f} s from the plan's makespan." if later is not None else ".")
        )
    return Table("Workers: predicted and measured", headers, tuple(rows), note)


def _load_average(value) -> str:
    """'; load average (1 min) 1.18 at the start, 1.55 at the end' from the run's [start, end]; '' if unknown."""
    values = [_cell(v) for v in value] if isinstance(value, list) else []
    if not values:
        return ""
    return "; load average (1 min) " + (
        f"{values[0]} at the start, {values[1]} at the end" if len(values) == 2 else ", ".join(values)
    )


def _cell(value) -> str:
    number = _number(value)
    return "-" if number is None else style.number(number)
