"""Names a package exports without importing their modules before first use (PEP 562's module __getattr__)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_getattr(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module-level __getattr__ for `package`: names[name] is the module to import `name` from."""

    def __getattr__(name: str):
        if name in names:
            return getattr(importlib.import_module(names[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
