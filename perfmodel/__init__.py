"""perfmodel: how fast a ready-made neural network serves on GPUs, and how to meet a deadline."""

__version__ = "0.1.0"

# perfmodel.fit is the fitting subpackage and is also callable: fit(profiles, ...) -> Predictor.
from perfmodel import fit  # noqa: E402
from perfmodel.fit import GroupPredictor, Predictor  # noqa: E402

__all__ = ["GroupPredictor", "Predictor", "__version__", "fit"]
