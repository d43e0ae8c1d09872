"""Library errors name Python parameters (`confidence`); the command line shows the flag that sets each."""

from __future__ import annotations

import pytest

import perfmodel
from perfmodel import cli


def test_a_parameter_in_backquotes_becomes_its_flag_and_other_text_stays():
    flags = {"confidence": "--confidence", "batch_sizes": "--batch-size"}
    said = cli.for_the_command_line("`confidence` is 7; `batch_sizes` too; fit with `perfmodel fit`", flags)
    assert said == "--confidence is 7; --batch-size too; fit with `perfmodel fit`"
    assert cli.for_the_command_line("`unknown` stays", flags) == "`unknown` stays"


def test_the_library_names_the_parameter_and_the_command_line_the_flag(tmp_path, capsys):
    with pytest.raises(perfmodel.InputError, match="^`latency_from` must be one of"):
        perfmodel.ImportSettings(hardware="a100", model="m", latency_from="median")
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for f in files:
        f.write_text("Concurrency,Inferences/Second\n1,100\n")
    argv = ["import", "perf-analyzer", *map(str, files), "--batch-size", "1,2,4", "--hardware", "a100", "--model", "m"]
    assert cli.main([*argv, "--out", str(tmp_path / "p.csv")]) == 2
    said = capsys.readouterr().err
    assert "--batch-size lists 3 batch sizes for 2 files" in said and "`" not in said
