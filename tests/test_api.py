"""The public API as a scheduler uses it (perfmodel.* only): arguments of the wrong type or shape are
refused with a PerfmodelError in one sentence, never a TypeError, ValueError or AttributeError from
deep inside; results survive pickling; nothing is printed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import perfmodel

ROOT = Path(__file__).resolve().parents[1]
CPU_PROFILE = ROOT / "profiles" / "cpu-resnet50-torch.csv"


def one_sentence(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text
    return text


@pytest.mark.parametrize("path", [None, 3, pd.DataFrame({"a": [1]})])
@pytest.mark.parametrize(
    "read", [perfmodel.load_profile, perfmodel.Predictor.load, perfmodel.read_run_plan], ids=lambda f: f.__name__
)
def test_readers_refuse_what_is_not_a_path(read, path, capsys):
    with pytest.raises(perfmodel.InputError) as caught:
        read(path)
    assert "expected the path of a file" in one_sentence(caught.value)
    assert capsys.readouterr() == ("", "")


def test_writers_refuse_a_path_they_cannot_write(tmp_path):
    predictor = perfmodel.fit(perfmodel.load_profile(CPU_PROFILE).query("input_size == 64"), families=["linear"])
    profile = perfmodel.load_profile(CPU_PROFILE)
    for target in (None, tmp_path, tmp_path / "missing" / "x.out"):
        with pytest.raises(perfmodel.InputError) as caught:
            predictor.save(target)
        one_sentence(caught.value)
        with pytest.raises(perfmodel.InputError) as caught:
            perfmodel.write_profile(profile, target)
        one_sentence(caught.value)
    assert [p.name for p in tmp_path.iterdir()] == []
