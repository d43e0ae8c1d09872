"""Put a report together: read every input (failing before anything is written), draw, then write."""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from perfmodel._version import __version__
from perfmodel.errors import InputError
from perfmodel.files import atomic_write_bytes, atomic_write_text
from perfmodel.readers import output_folder
from perfmodel.report import tables
from perfmodel.report.content import Figure, Section
from perfmodel.report.groups import SOURCE, layout
from perfmodel.report.html import render_page
from perfmodel.report.inputs import read_plan, read_predictors, read_profiles, read_run
from perfmodel.report.plan_figures import timeline_figure
from perfmodel.report.predictor_figures import group_name, predictor_figure
from perfmodel.report.profile_figures import profile_figures
from perfmodel.report.run_figures import MAX_WORKERS, run_table, run_timeline

PAGE = "report.html"


@dataclass(frozen=True)
class Report:
    """What was written: the page and the figures (their paths), and notes on what could not be drawn."""

    out_dir: Path
    page: Path
    figures: tuple[Path, ...]
    notes: tuple[str, ...]


def profile_section(profile: pd.DataFrame) -> Section:
    lay = layout(profile)
    figures, notes = profile_figures(lay)
    items = []
    if lay.series:
        items.append(tables.key_numbers(lay))
    items += figures
    items.append(tables.provenance(profile))
    return Section(
        "Profiles" if profile[SOURCE].nunique() > 1 else f"Profile: {profile[SOURCE].iloc[0]}",
        tuple(items),
        tuple(notes),
    )


def predictor_sections(predictors, profile: pd.DataFrame | None) -> list[Section]:
    sections = []
    for predictor in predictors:
        for group in getattr(predictor, "groups", (predictor,)):
            name = group_name(group)
            figure = predictor_figure(group, profile)
            report = getattr(group, "report", None)
            items = [figure] + ([tables.error_report(f"Error report: {name}", report)] if report is not None else [])
            sections.append(Section(f"Predictor: {name}", tuple(items)))
    return sections


def plan_section(plan: dict) -> Section:
    items, notes = [tables.plan_summary(plan)], []
    figure = timeline_figure(plan)
    if figure is not None:
        items.append(figure)
    elif plan.get("status") == "infeasible":
        notes.append("No plan meets the deadline" + (f": {plan['reason']}" if plan.get("reason") else "."))
    else:
        notes.append("The plan assigns no GPU, so there is no timeline.")
    assignments = tables.plan_assignments(plan)
    if assignments is not None:
        items.append(assignments)
    return Section("Plan", tuple(items), tuple(notes))


def run_section(run: dict) -> Section:
    figure = run_timeline(run)
    items = ([figure] if figure is not None else []) + [run_table(run)]
    workers = len(run.get("workers") or [])
    if figure is None:
        notes = ("The run has no worker, so there is no timeline.",)
    elif workers > MAX_WORKERS:
        notes = (f"The run's timeline draws the first {MAX_WORKERS} of its {workers:,} workers; the table has all.",)
    else:
        notes = ()
    return Section("Run", tuple(items), notes)


def make_sections(
    profile: pd.DataFrame | None, predictors=(), plan: dict | None = None, run: dict | None = None
) -> tuple[Section, ...]:
    sections = []
    if profile is not None:
        if SOURCE not in profile.columns:
            profile = profile.assign(**{SOURCE: "profile"})
        sections.append(profile_section(profile))
    sections += predictor_sections(predictors, profile)
    if plan is not None:
        sections.append(plan_section(plan))
    if run is not None:
        sections.append(run_section(run))
    return _unique(sections)


def _unique(sections: list[Section]) -> tuple[Section, ...]:
    """Distinct section titles (they are the page's anchors) and figure names (they are files)."""
    titles, names, out = {}, {}, []
    for section in sections:
        n = titles[section.title] = titles.get(section.title, 0) + 1
        title = section.title if n == 1 else f"{section.title} ({n})"
        items = []
        for item in section.items:
            if isinstance(item, Figure):
                k = names[item.name] = names.get(item.name, 0) + 1
                if k > 1:
                    stem, ext = os.path.splitext(item.name)
                    item = Figure(f"{stem}-{k}{ext}", item.title, item.caption, item.png)
            items.append(item)
        out.append(Section(title, tuple(items), section.notes))
    return tuple(out)


def _check_out_dir(out, inputs=()) -> Path:
    """`out_dir` is a directory (or will be), and none of the files a report writes there (report.html,
    *.png) is a folder or one of its inputs."""
    return output_folder(out, "`out_dir`", inputs, writes=("*.png", PAGE))


def write_report(sections: tuple[Section, ...], out_dir, inputs: list[str]) -> Report:
    out = Path(out_dir)
    _check_out_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the directory {out} ({exc.strerror or exc}).") from None
    figures = [f for s in sections for f in s.figures]
    written = []
    try:
        for figure in figures:
            atomic_write_bytes(out / figure.name, figure.png)
            written.append(out / figure.name)
        created = dt.datetime.now(dt.UTC).astimezone().isoformat(timespec="seconds")
        meta = f"Made by perfmodel {__version__} on {created} from {', '.join(inputs)}."
        atomic_write_text(out / PAGE, render_page("perfmodel report", meta, sections))
    except OSError as exc:
        raise InputError(f"cannot write the report into {out} ({exc.strerror or exc}).") from None
    notes = tuple(n for s in sections for n in s.notes)
    return Report(out, out / PAGE, tuple(written), notes)


def make_report(profiles=(), predictors=(), plan=None, out_dir=".", run=None) -> Report:
    """Read the profiles (CSV), predictors (JSON), plan (JSON) and run (JSON), draw them, and write the
    figures and one self-contained HTML page into out_dir. Any bad input raises InputError before
    anything is written."""
    profiles, predictors = [os.fspath(p) for p in profiles], [os.fspath(p) for p in predictors]
    if not profiles and not predictors and plan is None and run is None:
        raise InputError(
            "nothing to report: give at least one profile CSV, a predictor (`predictors`), a `plan` or a `run`."
        )
    inputs = profiles + predictors + [os.fspath(p) for p in (plan, run) if p is not None]
    _check_out_dir(out_dir, inputs)  # before the work of drawing
    profile = read_profiles(profiles)
    loaded = read_predictors(predictors)
    plan_data = read_plan(plan)
    run_data = read_run(run)
    sections = make_sections(profile, loaded, plan_data, run_data)
    return write_report(sections, out_dir, inputs)
