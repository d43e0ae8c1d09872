"""The profiles shipped with perfmodel: installed as the package data of `perfmodel._profiles`
(pyproject.toml maps this folder there; perfmodel/shipped.py reads it)."""
