"""One self-contained HTML page: the figures inline as base64 PNGs, the tables, no external resource."""

from __future__ import annotations

import base64
import html
import re

from perfmodel.report.content import Figure, Section, Table

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 1250px;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; margin-top: 2.5rem; }
.meta, .note, figcaption, caption small { color: #555; font-size: 0.9rem; }
nav ul { padding-left: 1.2rem; }
figure { margin: 1.5rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
.scroll { overflow-x: auto; margin: 1.2rem 0; }
table { border-collapse: collapse; font-size: 0.88rem; }
caption { text-align: left; font-weight: 600; padding-bottom: 0.3rem; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 0.25rem 0.6rem; text-align: right; vertical-align: top; }
th { background: #f6f6f6; }
th:first-child, td:first-child { text-align: left; }
"""


def _anchor(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _table(table: Table) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in table.headers)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in table.rows)
    note = f"<br><small>{e(table.note)}</small>" if table.note else ""
    return (
        f'<div class="scroll"><table><caption>{e(table.title)}{note}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def _figure(figure: Figure) -> str:
    data = base64.b64encode(figure.png).decode("ascii")
    e = html.escape
    return (
        f'<figure id="{e(_anchor(figure.name))}"><img src="data:image/png;base64,{data}" alt="{e(figure.title)}">'
        f"<figcaption><b>{e(figure.title)}.</b> {e(figure.caption)} <i>({e(figure.name)})</i></figcaption></figure>"
    )


def render_page(title: str, meta: str, sections: tuple[Section, ...]) -> str:
    e = html.escape
    toc = "".join(f'<li><a href="#{_anchor(s.title)}">{e(s.title)}</a></li>' for s in sections)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f'<h1>{e(title)}</h1><p class="meta">{e(meta)}</p>',
        f"<nav><ul>{toc}</ul></nav>" if len(sections) > 1 else "",
    ]
    for section in sections:
        parts.append(f'<section><h2 id="{_anchor(section.title)}">{e(section.title)}</h2>')
        parts.extend(f'<p class="note">{e(n)}</p>' for n in section.notes)
        for item in section.items:
            parts.append(_figure(item) if isinstance(item, Figure) else _table(item))
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)
