"""The repository's own documents stand alone: no pointer to files a user does not have, and examples
that do not write into the repository (issue 11, items 11 and 15)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "docs" / "design.md", *sorted(REPO.glob("experiments/*/README.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_pointer_to_the_team_notes(doc):
    text = doc.read_text()
    assert not re.search(r"(?<![\w/])DESIGN\.md|[Ss]eeds/|\bthe seeds'", text), doc


def test_relative_links_exist():
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), (doc, target)


def test_readme_examples_write_outside_the_repository():
    from perfmodel.commands import fit, report

    texts = [(REPO / "README.md").read_text(), fit.FIT_EXAMPLES, report.REPORT_EXAMPLES]
    for text in texts:
        for command, out in re.findall(r"perfmodel (fit|report|import)\b[^\n]*?--out (\S+)", text):
            assert out.startswith("/tmp/"), (command, out)


def test_the_source_papers_are_cited_with_authors():
    readme = (REPO / "README.md").read_text()
    for words in (
        "Tulchinsky",
        "Lavreniuk",
        "Khalimendik",
        "González Vidal",
        "Isenko",
        "Jayaram",
        "Lattuada",
        "Ardagna",
    ):
        assert words in readme
