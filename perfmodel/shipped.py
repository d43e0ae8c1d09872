"""The data shipped with perfmodel, found wherever it is installed.

The repository keeps the profiles at its top level (profiles/, profiles/reference/); the package build
maps that folder into the package as `perfmodel._profiles` (pyproject.toml), so that a wheel, a
`pip install --target` and an editable install all read the same files through importlib.resources.
Run from a checkout without installing (PYTHONPATH=checkout), the checkout's profiles/ is used.
"""

from __future__ import annotations

import os
import warnings
from importlib.resources import files
from pathlib import Path

from perfmodel.errors import InputError, PerfmodelWarning

PROFILES_PACKAGE = "perfmodel._profiles"


def gpu_specs_table() -> Path:
    """The shipped table of GPU specifications (perfmodel/data/gpu_specs.csv)."""
    return Path(str(files("perfmodel.data").joinpath("gpu_specs.csv")))


def profiles_folder() -> Path | None:
    """The shipped profiles: those of the checkout perfmodel runs from, else those installed with it.

    The checkout comes first so that code run from a second checkout (a git worktree, PYTHONPATH=...)
    reads its own data, not that of the checkout the editable install points at.
    """
    root = Path(__file__).resolve().parents[1]
    checkout = root / "profiles" if (root / "pyproject.toml").is_file() else None
    try:
        installed = Path(str(files(PROFILES_PACKAGE)))
    except ModuleNotFoundError:  # run from a checkout that was never installed
        installed = None
    for folder in (checkout, installed):
        if folder is not None and folder.is_dir():
            return folder
    return None


def sources() -> tuple[list[Path], list[Path]]:
    """(profiles, predictors) that a plan uses when given no profiles or predictors.

    The shipped predictors (profiles/*.json and profiles/reference/*.json) if there are any, else the
    shipped profiles: this project's own (profiles/*.csv: its CPU, for CPU pools, and an H200) and the
    published GPU measurements (profiles/reference/*.csv). A profiles/ folder in the working directory comes
    first, with a warning that says so where it is not the shipped one.
    """
    shipped, local = profiles_folder(), Path.cwd() / "profiles"
    for base in (local, shipped):
        if base is None:
            continue
        folders = (base, base / "reference")
        predictors = [p for folder in folders for p in sorted(folder.glob("*.json"))]
        profiles = [p for folder in folders for p in sorted(folder.glob("*.csv"))]
        if (predictors or profiles) and base is local and not _same_folder(local, shipped):
            warnings.warn(
                f"planning on the {len(predictors) or len(profiles)} file(s) in {local}, the working directory's "
                "profiles folder, in place of the data shipped with perfmodel; name the profiles or predictors "
                "to plan on, or run from another folder.",
                PerfmodelWarning,
                stacklevel=2,
            )
        if predictors:
            return [], predictors
        if profiles:
            return profiles, []
    raise InputError("no profiles found in profiles/: give `profiles` or `predictors`, the files to plan on.")


def _same_folder(a: Path, b: Path | None) -> bool:
    try:
        return b is not None and os.path.samefile(a, b)
    except OSError:
        return False
