"""The values a report is made of: figures (PNG bytes), tables and notes, gathered in sections."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    name: str  # file name in the output directory, e.g. latency.png
    title: str
    caption: str
    png: bytes


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]  # already formatted for a person
    note: str = ""


@dataclass(frozen=True)
class Section:
    title: str
    items: tuple[Figure | Table, ...]
    notes: tuple[str, ...] = ()  # e.g. why a figure is missing

    @property
    def figures(self) -> tuple[Figure, ...]:
        return tuple(i for i in self.items if isinstance(i, Figure))
