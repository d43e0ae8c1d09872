"""A run's timeline: per worker, the plan's bar (load, warm-up, further batches) above the measured one
(load, waiting for the other workers to load, the first batch, the further batches), against the deadline.
Also the run's table: per worker, predicted beside measured.

Reads the JSON of `perfmodel run --json`.
"""

from __future__ import annotations

from perfmodel.report import style
from perfmodel.report.content import Figure, Table
from perfmodel.report.plan_figures import BATCHES, LOAD, WARMUP, _number

MAX_WORKERS = 40
WAIT = "#f0dc82"  # not a grey: the plan's pale load bar would look like it
DEADLINE = "#d62728"


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
    workers = list(run.get("workers") or [])[:MAX_WORKERS]
    if not workers:
        return None
    fig, axes = style.new_figure(width=11, height=min(max(3.0, 1.6 + 0.8 * len(workers)), 16))
    ax = axes[0, 0]
    ticks, labels = [], []
    for i, w in enumerate(workers):
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
        ("waiting: every worker loading, then the batches starting", {"color": WAIT, "linewidth": 8}),
        ("warm-up: first batch", {"color": WARMUP, "linewidth": 8}),
        ("further batches", {"color": BATCHES, "linewidth": 8}),
    ]
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
    ax.set_title(
        f"Run of {run.get('model', {}).get('name', 'a plan')}: {run.get('status', '')}"
        + (f", makespan {error:+.1%} against the plan" if error is not None else "")
    )
    style.legend_outside(fig, (("", tuple(legend)),))
    caption = (
        "Per worker, the plan's bar (pale) above the measured one. The clock starts when the workers are asked "
        "to load their models; every worker starts its batches once all have loaded."
    )
    return Figure("run-timeline.png", "Run timeline: predicted and measured", caption, style.to_png(fig))


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
                f"{w.get('batches_done')} of {w.get('batches_given')}",
                _cell(w.get("images_done")),
                *pairs,
                "-" if decode is None else style.number(decode * 1000),
                str(w.get("bottleneck") or "-"),
            )
        )
    note = (
        f"Makespan: {_cell(run.get('measured_makespan_s'))} s measured, {_cell(run.get('predicted_makespan_s'))} s "
        f"predicted; deadline {_cell(run.get('deadline_s'))} s; load average {run.get('load_avg_1m')}."
    )
    return Table("Workers: predicted and measured", headers, tuple(rows), note)


def _cell(value) -> str:
    number = _number(value)
    return "-" if number is None else style.number(number)
