"""Fitting: regression models of latency, warm-up and memory, and the predictors built from them.

`perfmodel.fit(profiles, ...)` (the function, re-exported by perfmodel) returns a Predictor. Loading and
querying a predictor imports numpy only; fitting (pandas, scikit-learn) loads on the first call of fit.
"""

from perfmodel.fitting.predictor import GroupPredictor, Predictor, QuantityModel

__all__ = ["GroupPredictor", "Predictor", "QuantityModel", "fit"]


def fit(profiles, *, families=None, on_progress=None, target_hardware=(), gpu_specs=None) -> Predictor:
    """Fit one GroupPredictor per (hardware, model, backend, precision) group of `profiles`.

    profiles: a profile CSV path, a DataFrame following the profile contract, or a list of them.
    families: the model families to choose from by cross-validation (default: roofline, linear, piecewise, tree).
    on_progress(group, quantity) is called before each quantity is fitted.
    target_hardware: GPUs to predict from the others' profiles, their specifications (e.g. ["v100"]) and
    the ratio other models measured on both GPUs show, where the profiles have one: transferred groups, each
    saying from what, how per regime, and with which held-out error; gpu_specs: the specification table
    (default: perfmodel/data/gpu_specs.csv). A group that cannot be fitted (one batch size, or one work
    b x (s/224)^2) is skipped with its reason (a PerfmodelWarning), the others kept.
    """
    from perfmodel.fitting import train  # pandas and scikit-learn load only when fitting

    options = {} if families is None else {"families": families}
    return train.fit(profiles, on_progress=on_progress, target_hardware=target_hardware, gpu_specs=gpu_specs, **options)
