"""perfmodel as a package: the shipped data travels with it, and its version is written once (issue 26)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from perfmodel import shipped

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_the_package_list_is_the_source_tree():
    """pyproject.toml lists the packages (mapping profiles/ into the package needs that): none forgotten."""
    from setuptools import find_packages

    found = set(find_packages(where=str(REPO), include=["perfmodel*", "solvers*"]))
    data = {"perfmodel.data", "perfmodel._profiles", "perfmodel._profiles.reference"}
    assert set(PYPROJECT["tool"]["setuptools"]["packages"]) == found | data
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"perfmodel._profiles": "profiles"}


def test_the_shipped_profiles_are_found_through_the_package():
    folder = shipped.profiles_folder()
    assert folder is not None and (folder / "cpu-resnet50-torch.csv").is_file()
    assert sorted(p.name for p in (folder / "reference").glob("dle-*.csv"))
    assert shipped.gpu_specs_table().is_file()


@pytest.mark.slow
@pytest.mark.integration
def test_a_target_install_plans_from_another_directory_with_the_shipped_data(tmp_path):
    """`pip install --no-deps --target DIR .`, then `python -m perfmodel plan` anywhere: the shipped data answers."""
    pytest.importorskip("setuptools", minversion="77")  # builds without isolation (no network needed)
    source = _mkdir(tmp_path / "source")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for name in ("perfmodel", "solvers", "profiles"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    target, elsewhere = tmp_path / "site", _mkdir(tmp_path / "elsewhere")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target)]
    subprocess.run([*pip, str(source)], check=True, cwd=tmp_path, timeout=600)

    env = {**os.environ, "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, "-m", "perfmodel", "plan", "--images", "100000", "--deadline", "60s", "--json"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["status"] == "optimal" and plan["images_planned"] == 100000
    assert all(Path(s["path"]).is_relative_to(target / "perfmodel" / "_profiles") for s in plan["sources"])

    version = subprocess.run(
        [sys.executable, "-c", "import perfmodel; print(perfmodel.__file__, perfmodel.__version__)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert Path(version[0]).is_relative_to(target)
    (dist,) = importlib.metadata.distributions(name="perfmodel", path=[str(target)])
    assert version[1] == dist.version


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_input_errors_are_value_errors_and_the_version_is_a_leaf():
    import perfmodel._version

    assert isinstance(perfmodel.InputError("bad"), ValueError)
    assert isinstance(perfmodel.ProfileFormatError("bad"), ValueError)
    assert perfmodel.__version__ == perfmodel._version.__version__
    tree = ast.parse(Path(perfmodel._version.__file__).read_text())
    # a leaf: any module may import it without climbing back up to the package root
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]
