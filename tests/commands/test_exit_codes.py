"""One table of exit codes (perfmodel/exit_codes.py): every --help, the errors and the docs page take from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from perfmodel import errors, exit_codes
from perfmodel.cli import main

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ["profile", "import", "fit", "plan", "report", "run"]


def test_the_docs_page_shows_the_table():
    assert exit_codes.markdown() in (REPO / "docs" / "exit-codes.md").read_text()


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_help_lists_the_codes_of_its_command(command, capsys):
    assert main([command, "--help"] if command else ["--help"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith(exit_codes.help_text(command).rstrip())
    listed = {int(line.split()[0]) for line in exit_codes.help_text(command).splitlines()[1:] if line[2] != " "}
    assert listed == {e.code for e in exit_codes.for_command(command)}
    assert (exit_codes.NO_PLAN in listed) == (command in (None, "plan"))
    assert (exit_codes.TERMINATED in listed) == (command in (None, "profile", "run"))


def test_every_error_class_carries_a_code_of_the_table():
    codes = {e.code for e in exit_codes.TABLE}
    classes = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.PerfmodelError)]
    assert len(classes) >= 7 and all(c.exit_code in codes for c in classes)
    assert errors.InputError.exit_code == exit_codes.BAD_INPUT
    assert errors.InfeasibleError.exit_code == exit_codes.NO_PLAN


def test_a_usage_error_is_bad_input(capsys):
    assert main(["plan", "--no-such-flag"]) == exit_codes.BAD_INPUT
    assert main([]) == exit_codes.BAD_INPUT


def test_a_reader_that_went_away_is_a_quiet_stop(monkeypatch, capsys):
    class ClosedPipe:
        def write(self, text):
            raise BrokenPipeError

        def flush(self):
            raise BrokenPipeError

    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert main(["plan", "--images", "1000", "--deadline", "60s", "--pool", "a100=1", "--json"]) == 141
    assert "error" not in capsys.readouterr().err
