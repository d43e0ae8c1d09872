"""Fitting: regression models of latency, warm-up and memory, and the predictors built from them.

`perfmodel.fit` is both this package and the fit function: calling the module calls
perfmodel.fit.train.fit(profiles, families=..., on_progress=...) -> Predictor. So `from perfmodel
import fit; fit("p.csv")` works, and so do `import perfmodel.fit.predictor` and every other form of
submodule import, which binding a plain function to the name `perfmodel.fit` would break.

Loading and querying a predictor imports numpy only: fitting (pandas, scikit-learn) loads on first use.
"""

import sys
import types

from perfmodel.fit.predictor import GroupPredictor, Predictor, QuantityModel

__all__ = ["GroupPredictor", "Predictor", "QuantityModel", "fit"]


def __getattr__(name: str):
    if name == "fit":
        from perfmodel.fit.train import fit

        return fit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from perfmodel.fit.train import fit

        return fit(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
