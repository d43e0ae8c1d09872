"""The repository's own documents stand alone: no pointer to files a user does not have, every file they
cite exists, every command line they show is one perfmodel accepts, and examples do not write into the
repository (issue 11, items 11 and 15; issue 26)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
USER_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
DOCS = [*USER_DOCS, *sorted(REPO.glob("experiments/*/README.md"))]
ids = lambda p: str(p.relative_to(REPO))  # noqa: E731


@pytest.mark.parametrize("doc", DOCS, ids=ids)
def test_no_pointer_to_the_team_notes(doc):
    text = doc.read_text()
    assert not re.search(r"(?<![\w/])DESIGN\.md|[Ss]eeds/|\bthe seeds'", text), doc


@pytest.mark.parametrize("doc", DOCS, ids=ids)
def test_relative_links_exist(doc):
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
        assert (doc.parent / target).exists(), (doc, target)


# A path in backquotes that starts at one of the repository's top-level folders, e.g.
# `experiments/006_plan_execution/` or `perfmodel/data/gpu_specs.csv` (patterns and placeholders excluded).
_CITED = re.compile(r"`((?:perfmodel|solvers|profiles|experiments|tests|docs)/[\w./-]*)`")


@pytest.mark.parametrize("doc", USER_DOCS, ids=ids)
def test_cited_files_exist(doc):
    cited = _CITED.findall(doc.read_text())
    assert cited or doc.name in {"exit-codes.md", "report.md", "profile-format.md"}, doc
    missing = [path for path in cited if not (REPO / path).exists()]
    assert not missing, (doc, missing)


def _command_lines(text: str) -> list[str]:
    """The `perfmodel ...` command lines of a document's code blocks, continuation lines joined."""
    blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
    blocks += re.findall(r"((?:\n {4}[^\n]*)+)", text)  # indented blocks
    lines, joined = [], ""
    for block in blocks:
        for raw in block.splitlines():
            line = raw.strip().removeprefix("$ ")
            line = joined + " " + line if joined else line
            if line.endswith("\\"):
                joined = line[:-1]
                continue
            joined = ""
            line = re.sub(r"\s+#\s.*$", "", line)  # a comment after the command
            line = line.split(" > ")[0].split(" | ")[0]
            if line.startswith("perfmodel ") and len(line.split()) > 2:  # not a bare `perfmodel fit` summary
                lines.append(line)
    return lines


@pytest.mark.parametrize("doc", USER_DOCS, ids=ids)
def test_every_command_shown_is_accepted(doc):
    """Each `perfmodel ...` line of the documents parses with perfmodel's own parser (nothing runs)."""
    from perfmodel.cli import build_parser

    parser = build_parser()
    for line in _command_lines(doc.read_text()):
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit as exc:
            pytest.fail(f"{ids(doc)}: perfmodel refuses `{line}` (exit {exc.code})")


def test_the_commands_are_found():
    """The extraction above finds the documents' commands (a test that reads nothing cannot fail)."""
    found = {line.split()[1] for doc in USER_DOCS for line in _command_lines(doc.read_text())}
    assert {"profile", "import", "fit", "plan", "run", "report"} <= found


def test_readme_examples_write_outside_the_repository():
    from perfmodel.commands import fit, report

    texts = [doc.read_text() for doc in USER_DOCS] + [fit.FIT_EXAMPLES, report.REPORT_EXAMPLES]
    for text in texts:
        for command, out in re.findall(r"perfmodel (fit|report|import|profile)\b[^\n]*?--out (\S+)", text):
            assert out.startswith("/tmp/"), (command, out)


@pytest.mark.parametrize("doc", [REPO / "README.md", REPO / "docs" / "index.md"], ids=ids)
def test_the_source_papers_are_cited_with_authors(doc):
    text = doc.read_text()
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
        assert words in text, (doc, words)


def test_sections_of_the_design_cited_in_the_code_exist():
    """`docs/design.md, section N` in a module's text names a section the page has (two cited a DESIGN.md)."""
    sections = set(re.findall(r"^## (\d+)\. ", (REPO / "docs" / "design.md").read_text(), re.M))
    for path in [*REPO.glob("perfmodel/**/*.py"), *REPO.glob("solvers/*.py")]:
        text = path.read_text()
        assert "DESIGN.md" not in text, path
        for number in re.findall(r"docs/design\.md,? section (\d+)", text):
            assert number in sections, (path, number)


def test_plan_help_names_every_hardware_type_of_the_shipped_data():
    """plan --help lists the types the shipped data offers; it left out h200 when that profile was added."""
    import pandas as pd

    from perfmodel.commands.plan import PLAN_EXAMPLES
    from perfmodel.shipped import sources

    profiles, _ = sources()
    types = set(pd.concat(pd.read_csv(p, usecols=["hardware"]) for p in profiles)["hardware"])
    data = PLAN_EXAMPLES[PLAN_EXAMPLES.index("data:") :].split("\n\n")[0]  # the paragraph on the shipped data
    help_text = " ".join(data.split())  # (the examples' --pool h100=8 hid that h100 was missing there)
    assert types and all(re.search(rf"\b{re.escape(t)}\b(?!-)", help_text) for t in types), types


@pytest.mark.parametrize("doc", USER_DOCS, ids=ids)
def test_cited_python_names_exist(doc):
    """`perfmodel.x.y` and `solvers.x.y` in backquotes name a module or an attribute that exists (modules
    were split and renamed in issue 42; the CHANGELOG keeps the old names on purpose, so it is left out)."""
    import importlib

    for name in set(re.findall(r"`((?:perfmodel|solvers)(?:\.\w+)+)", doc.read_text())):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:i]))
                break
            except ModuleNotFoundError:
                continue
        for attribute in parts[i:]:
            assert hasattr(found, attribute), (ids(doc), name)
            found = getattr(found, attribute)


def test_the_module_map_names_files_that_exist():
    """Every `name.py` in design.md's module map (section 1) is a file of the repository."""
    text = (REPO / "docs" / "design.md").read_text()
    section = text[text.index("## 1. ") : text.index("## 2. ")]
    files = {p.name for p in REPO.glob("**/*.py") if ".venv" not in p.parts}
    named = set(re.findall(r"\b(\w+\.py)\b", section))
    assert named and not named - files, named - files
