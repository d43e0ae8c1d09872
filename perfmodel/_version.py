"""perfmodel's version: the one place it is written (pyproject.toml reads it; a leaf, so any module may import it)."""

__version__ = "0.2.0"
