"""Which curves a profile figure draws: one per (group, input size), and how each one looks.

A group is one (hardware, model, backend, precision) -- plus architecture, protocol, mode and
concurrency where a profile varies them, and the source file where two files measured the same group.
Its label names only what differs between the groups drawn; what they share goes in the title.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from perfmodel.report import style

KEY_COLUMNS = ("hardware", "model", "backend", "precision")
EXTRA_COLUMNS = ("architecture", "protocol", "mode", "concurrency")
SOURCE = "source"  # the column build.py adds: the profile's file name


@dataclass(frozen=True, eq=False)
class Series:
    """The ok rows of one group at one input size, sorted by batch size, and how to draw them."""

    group: str  # the group's label
    input_size: int
    rows: pd.DataFrame
    smallest_oom: int | None  # the smallest batch measured out-of-memory at this size, if any
    colour: str
    marker: str
    linestyle: str

    @property
    def throughput_ips(self) -> pd.Series:
        """Images per second: the measured column where there is one, else batch / median latency."""
        computed = self.rows["batch_size"] / self.rows["latency_ms"].astype(float) * 1000.0
        if "throughput_ips" not in self.rows.columns:
            return computed
        return self.rows["throughput_ips"].astype(float).fillna(computed)

    @property
    def label(self) -> str:
        return f"{self.group}, {self.input_size} px" if self.group else f"{self.input_size} px"


@dataclass(frozen=True)
class Layout:
    """The curves of a figure and its legend: what is common (for the title) and what each style means."""

    common: str
    series: tuple[Series, ...]
    legend: tuple[tuple[str, tuple[tuple[str, dict], ...]], ...]


def group_columns(df: pd.DataFrame) -> list[str]:
    columns = list(KEY_COLUMNS) + [c for c in EXTRA_COLUMNS if c in df.columns and df[c].nunique(dropna=True) > 1]
    if SOURCE in df.columns and df.groupby(columns, dropna=False)[SOURCE].nunique().gt(1).any():
        columns.append(SOURCE)
    return columns


def _describe(column: str, value) -> str:
    if pd.isna(value):  # e.g. no concurrency in a profile compared with one that has it
        return ""
    if column == "concurrency":
        return f"concurrency {value}"
    return str(value)


def label_groups(keys: list[tuple], columns: list[str]) -> tuple[str, list[str]]:
    """(what all keys share, one label per key naming only what varies)."""
    varying = [i for i in range(len(columns)) if len({k[i] for k in keys}) > 1]
    common = ", ".join(
        _describe(columns[i], keys[0][i]) for i in range(len(columns)) if i not in varying and columns[i] != SOURCE
    )
    labels = [" ".join(filter(None, (_describe(columns[i], k[i]) for i in varying))) for k in keys]
    return common, labels


def layout(df: pd.DataFrame) -> Layout:
    """The series of a profile figure: colour per group and marker/line style per input size; with one
    group, colour per input size (easier to tell apart than line styles)."""
    columns = group_columns(df)
    ok = df["status"] == "ok"
    grouped = list(
        df[df.groupby(columns, dropna=False)["status"].transform(lambda s: (s == "ok").any())].groupby(
            columns, dropna=False, sort=False
        )
    )
    keys = [k if isinstance(k, tuple) else (k,) for k, _ in grouped]
    common, labels = label_groups(keys, columns) if keys else ("", [])
    sizes = sorted(int(s) for s in df.loc[ok, "input_size"].unique())
    single = len(grouped) == 1
    series = []
    for g, ((_, frame), label) in enumerate(zip(grouped, labels)):
        for size, part in frame.groupby("input_size", sort=True):
            measured = part[part["status"] == "ok"].sort_values("batch_size")
            if measured.empty:
                continue
            oom = part.loc[part["status"] == "oom", "batch_size"]
            j = sizes.index(int(size))
            look = style.style_for(j)
            series.append(
                Series(
                    group=label,
                    input_size=int(size),
                    rows=measured,
                    smallest_oom=int(oom.min()) if len(oom) else None,
                    colour=style.colour(j if single else g),
                    marker=look["marker"],
                    linestyle="-" if single else look["linestyle"],
                )
            )
    if single:
        legend = (
            (
                "input size",
                tuple(
                    (f"{s} px", {"color": style.colour(j), "marker": style.style_for(j)["marker"]})
                    for j, s in enumerate(sizes)
                ),
            ),
        )
    else:
        legend = (
            ("compared", tuple((label, {"color": style.colour(g), "linewidth": 3}) for g, label in enumerate(labels))),
            ("input size", tuple((f"{s} px", {"color": "0.25", **style.style_for(j)}) for j, s in enumerate(sizes))),
        )
    return Layout(common=common, series=tuple(series), legend=legend)
