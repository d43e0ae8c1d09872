"""perfmodel: how fast a ready-made neural network serves on GPUs, and how to meet a deadline.

    profile = perfmodel.load_profile("profiles/cpu-resnet50-torch.csv")   # validated DataFrame
    predictor = perfmodel.fit(profile)                                     # or Predictor.load(path)
    predictor.latency_ms(b, s)                                             # vectorised over numpy arrays

`import perfmodel` loads numpy only: the profiler (torch), fitting (pandas, scikit-learn) and reports
(matplotlib) load when first used, so a scheduler that only queries predictors stays light.
"""

from perfmodel._version import __version__
from perfmodel.errors import (
    BackendError,
    DeviceError,
    InfeasibleError,
    InputError,
    PerfmodelError,
    PerfmodelWarning,
    PredictorFormatError,
    ProfileFormatError,
)
from perfmodel.fitting import GroupPredictor, Predictor, fit
from perfmodel.lazy import lazy_getattr

# Exported names whose modules are heavy: imported on first access (PEP 562).
_LAZY = {
    "load_profile": "perfmodel.schema",
    "load_profiles": "perfmodel.schema",
    "validate_profile": "perfmodel.schema",
    "write_profile": "perfmodel.schema",
    "ProfileConfig": "perfmodel.profile",
    "StabilityRule": "perfmodel.profile",
    "run_profile": "perfmodel.profile",
    "make_report": "perfmodel.report",
    "import_profile": "perfmodel.importers",
    "ImportSettings": "perfmodel.importers",
    "load_gpu_specs": "perfmodel.fitting.gpu_specs",
    "make_plan": "perfmodel.planning.batch",
    "PlanRequest": "perfmodel.planning.batch",
    "NoPlanError": "perfmodel.planning.batch",
    "Plan": "solvers",
    "make_online_plan": "perfmodel.planning.online",
    "NoOnlinePlanError": "perfmodel.planning.online",
    "OnlinePlan": "solvers.online_solve",
    "PlannedJob": "perfmodel.planning.context",
    "PlanContext": "perfmodel.planning.context",
    "read_run_plan": "perfmodel.run",
    "run_plan": "perfmodel.run",
    "RunOptions": "perfmodel.run",
    "RunResult": "perfmodel.run",
}

__all__ = [
    "BackendError",
    "DeviceError",
    "GroupPredictor",
    "InfeasibleError",
    "InputError",
    "PerfmodelError",
    "PerfmodelWarning",
    "Predictor",
    "PredictorFormatError",
    "ProfileFormatError",
    "__version__",
    "fit",
    *_LAZY,
]


__getattr__ = lazy_getattr(__name__, _LAZY)
