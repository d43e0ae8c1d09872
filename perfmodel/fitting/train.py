"""fit(): from profiles to a Predictor, one GroupPredictor per group of rows.

A group is one (hardware, model, backend, precision), plus architecture, protocol, mode and
concurrency when the profiles have them (Triton sweeps). Rows with status 'ok' are fitted, 'oom'
rows bound max_batch, 'error' rows are ignored. Each quantity is fitted on the rows that have it.
"""

from __future__ import annotations

import copy
import hashlib
import os
import platform
import warnings
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType

import numpy as np
import pandas as pd

from perfmodel._version import __version__
from perfmodel.errors import InputError, PerfmodelWarning
from perfmodel.fitting.predictor import GroupPredictor, Predictor, QuantityModel
from perfmodel.fitting.predictor_file import EXTRA_KEY_COLUMNS, KEY_COLUMNS, QUANTITIES
from perfmodel.fitting.regressors import FAMILIES
from perfmodel.fitting.selection import BATCH_SIZE_ADVICE, DEFAULT_FAMILIES, fit_quantity, two_batch_size_errors
from perfmodel.fixed_costs import (
    Samples,
    first_call_samples_ms,
    import_counted,
    import_counted_loads_ms,
    is_cpu,
    load_samples_ms,
    more_load_s,
)
from perfmodel.schema import load_profile, validate_profile

# Profile columns worth keeping beside each group: where and how it was measured.
PROVENANCE_COLUMNS = (
    "device_name",
    "device_memory_mb",
    "driver",
    "cuda",
    "torch",
    "perfmodel",
    "host",
    "threads",
    "warmup_method",
)

NEEDS = "a fit needs at least two batch sizes measured 'ok'"  # why a group is left out of a fit
ONE_WORK = (
    "a fit needs two different works to tell how the time grows with the batch; profile another batch size "
    "at one of these input sizes"
)

Profiles = str | os.PathLike | pd.DataFrame | Iterable[str | os.PathLike | pd.DataFrame]


def fit(
    profiles: Profiles,
    *,
    families: Iterable[str] = DEFAULT_FAMILIES,
    on_progress: Callable[[str, str], None] | None = None,
    target_hardware: Iterable[str] = (),
    gpu_specs: str | os.PathLike | None = None,
    on_total: Callable[[int], None] | None = None,
) -> Predictor:
    """Fit latency, p99 latency, warm-up and memory models, and the max-batch bounds, per group.

    profiles: a profile CSV path, a DataFrame following the profile contract, or a list of them.
    families: the model families to choose from by cross-validation ("roofline", "linear", "piecewise", "tree").
    on_progress(group, quantity) is called before each quantity is fitted (and once per target transferred);
    on_total(steps), once before the first, with the number of those calls to come.
    target_hardware: hardware keys to predict from the other GPUs' profiles and the GPU specification
        table (gpu_specs: its path; default perfmodel/data/gpu_specs.csv), as transferred groups
        (see perfmodel.fitting.transfer), in any case (H100 is the table's h100). A target that was
        profiled is left out of the fit and its measurements check the prediction; the other hardware
        is fitted as usual.
    """
    families = _names(families, "families")
    for name, callback in (("on_progress", on_progress), ("on_total", on_total)):
        if callback is not None and not callable(callback):
            raise InputError(f"{name} must be a function (or None), not an object of type {type(callback).__name__}.")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise InputError(
            f"unknown model famil{'ies' if len(unknown) > 1 else 'y'} {', '.join(unknown) or '(none)'}; "
            f"choose from {', '.join(FAMILIES)}."
        )
    frame, sources = _read(profiles)
    frame, open_loop = _without_open_loop(frame)
    frame, keys = _keyed(frame)
    specs, targets = _specs_for([str(t) for t in _names(target_hardware, "target_hardware")], gpu_specs)
    left_out = {t.casefold() for t in targets}  # a profile's H100 is the target h100
    by_group = [
        (_group_key(keys, values), rows)
        for values, rows in frame.groupby(keys, sort=True)
        if str(values[0]).casefold() not in left_out
    ]
    checked = [(key, rows, _unfittable(rows)) for key, rows in by_group]
    unfit = [(key, why) for key, _, why in checked if why is not None]
    by_group = [(key, rows) for key, rows, why in checked if why is None]
    if on_total is not None:  # one step per quantity of each group fitted, one per target transferred
        on_total(len(by_group) * len(QUANTITIES) + len(targets))
    groups = ()
    for key, rows in by_group:
        try:
            groups += (_fit_group(key, rows, families, on_progress),)
        except InputError as exc:  # one group's data no model can be fitted to: the others are still fitted
            unfit.append((key, ("rows no model could be fitted to", str(exc).rstrip("."))))
    transfer_note = None
    if targets:
        transferred, transfer_note = _transfer(frame, keys, targets, specs, gpu_specs, on_progress)
        groups += transferred
    if not groups:
        raise InputError(
            _none_fittable(unfit)
            if unfit
            else "nothing to fit: every profiled hardware type is one of `target_hardware`."
        )
    provenance = {
        "sources": sources,
        "perfmodel": __version__,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scikit-learn": _sklearn_version(),
        "families": list(families),
    }
    if transfer_note is not None:
        provenance["transfer"] = transfer_note
    if open_loop:
        provenance["open_loop_rows_left_out"] = open_loop
    if unfit:  # left out, named in a warning and in the file (plan can say why a group is missing)
        provenance["skipped_groups"] = [
            {"group": dict(key), "reason": f"{what}; {needs}"} for key, (what, needs) in unfit
        ]
        warnings.warn(f"{len(unfit)} group(s) not fitted: {_listed(unfit)}", PerfmodelWarning, stacklevel=2)
    return Predictor(groups, provenance)


def transferred(frame: pd.DataFrame, targets: Iterable[str], gpu_specs=None) -> Predictor:
    """Only the transferred groups of `targets` from a profile DataFrame (what a plan with `transfer` plans on):
    the other hardware's groups are not fitted. Raises InputError where a target cannot be predicted."""
    frame, _ = _without_open_loop(validate_profile(frame, "the profiles"))
    frame, keys = _keyed(frame)
    specs, targets = _specs_for([str(t) for t in targets], gpu_specs)
    groups, note = _transfer(frame, keys, targets, specs, gpu_specs, None)
    return Predictor(groups, {"perfmodel": __version__, "transfer": note})


def _keyed(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The group columns (KEY_COLUMNS, and the extra ones the profiles have), a missing extra key as "" not NaN."""
    keys = list(KEY_COLUMNS) + [c for c in EXTRA_KEY_COLUMNS if c in frame.columns and _present(frame[c]).any()]
    frame = frame.copy()
    for column in keys:
        frame[column] = frame[column].map(lambda v: "" if _missing(v) else v).astype(str)
    return frame, keys


def _specs_for(targets: list[str], gpu_specs) -> tuple[dict, list[str]]:
    """The GPU specification table, checked to hold every target, before any fitting is done, and the
    targets as the table spells them (H100 is h100), each once."""
    if any(not t.strip() for t in targets):
        raise InputError(
            "`target_hardware` holds an empty GPU name: give hardware keys of the GPU table, e.g. h100 or a10, "
            "or leave it out to fit only the hardware profiled."
        )
    if not targets:
        return {}, []
    from perfmodel.fitting.gpu_specs import load_gpu_specs, spec_key

    specs = load_gpu_specs(gpu_specs)  # it refuses two keys that differ only in case
    named = [spec_key(t, specs) or t.strip() for t in targets]
    unknown = [t for t in named if t not in specs]
    if unknown:
        raise InputError(
            f"no specification for {', '.join(repr(t) for t in unknown)} in the GPU table (it has "
            f"{', '.join(sorted(specs))}); add a row to perfmodel/data/gpu_specs.csv, or give a table of your own "
            "(`gpu_specs`)."
        )
    return specs, list(dict.fromkeys(named))


def _transfer(
    frame: pd.DataFrame, keys: list[str], targets: list[str], specs: dict, gpu_specs, on_progress
) -> tuple[tuple, dict]:
    """The transferred groups of every target, and what the predictor file says about them."""
    from perfmodel.fitting.gpu_specs import DEFAULT_TABLE
    from perfmodel.fitting.transfer import transfer_groups

    ok = frame[frame["status"] == "ok"]
    serving = [k for k in keys if k not in ("hardware", "precision")]
    groups, notes = [], []
    for target in targets:
        if on_progress is not None:
            on_progress(f"{target} (transferred)", "latency_ms")
        made, skipped, remarks = transfer_groups(ok, specs, target, serving)
        if not made:
            raise InputError(
                f"cannot predict {target} from these profiles: "
                + " ".join(skipped or ["no way of serving was profiled on a GPU of the specification table."])
            )
        groups += made
        notes += [f"{target}: {n}" for n in skipped]
        for remark in remarks:  # what the transfer cannot see: in the API too, not only on the console
            warnings.warn(f"{target}: {remark}", PerfmodelWarning, stacklevel=3)
    return tuple(groups), {"targets": targets, "gpu_specs": str(gpu_specs or DEFAULT_TABLE), "skipped": notes}


def _names(value, what: str) -> tuple:
    """families or target_hardware: one name, or a list of them (None: none)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise InputError(f"{what} must be a name or a list of names, not an object of type {type(value).__name__}.")
    return tuple(value)


def _read(profiles: Profiles) -> tuple[pd.DataFrame, list[dict]]:
    if isinstance(profiles, (str, os.PathLike, pd.DataFrame)):
        profiles = [profiles]
    if not isinstance(profiles, Iterable) or isinstance(profiles, (bytes, Mapping)):
        raise InputError(
            f"profiles must be a profile CSV path, a DataFrame, or a list of them, not an object of type "
            f"{type(profiles).__name__}."
        )
    frames, sources = [], []
    for i, item in enumerate(profiles):
        if isinstance(item, pd.DataFrame):
            df = validate_profile(item, f"profile DataFrame {i + 1}")
            digest = hashlib.sha256(item.to_csv(index=False).encode()).hexdigest()
            sources.append({"source": f"DataFrame {i + 1}", "sha256": digest, "rows": len(df)})
        else:
            df = load_profile(item)
            with open(item, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            sources.append({"source": os.fspath(item), "sha256": digest, "rows": len(df)})
        frames.append(df)
    if not frames:
        raise InputError("no profile given: name at least one profile CSV.")
    return pd.concat(frames, ignore_index=True, sort=False), sources


def _without_open_loop(frame: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows measured one call at a time, and how many open-loop rows (profiled at a rate) were left
    out: their latency is queueing plus service at a request rate, not a batch's time, and the
    online planner models the queueing itself."""
    if "rate_per_s" not in frame.columns:
        return frame, 0
    open_loop = _present(frame["rate_per_s"])
    if open_loop.all():
        raise InputError(
            "these profiles hold only open-loop rows (measured at a request rate): a fit needs the batch-size "
            "sweep of a closed-loop profile (one measured without a rate)."
        )
    return frame[~open_loop], int(open_loop.sum())


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)) or value == ""


def _present(column: pd.Series) -> pd.Series:
    return ~column.map(_missing).astype(bool)


def _group_key(keys: list[str], values) -> dict:
    key = {}
    for column, value in zip(keys, values if isinstance(values, tuple) else (values,)):
        if value == "" and column in EXTRA_KEY_COLUMNS:
            continue  # this group's profile did not have the column
        key[column] = int(float(value)) if column == "concurrency" else value
    return key


def _name(key) -> str:
    return "/".join(str(v) for v in key.values())


def _unfittable(rows: pd.DataFrame) -> tuple[str, str] | None:
    """Why a group's rows cannot be fitted, or None: (what it has, what a fit needs)."""
    status = rows["status"]
    ok = rows[status == "ok"]
    if ok.empty:
        what = f"no point measured 'ok' ({(status == 'oom').sum()} oom, {(status == 'error').sum()} error)"
        return what, "there is nothing to fit; profile at least two batch sizes that fit in memory"
    if ok["batch_size"].nunique() < 2:
        first = ok.iloc[0]
        what = (
            f"a single measured point (batch {int(first['batch_size'])} at {int(first['input_size'])} px)"
            if len(ok) == 1
            else f"points at only one batch size ({int(first['batch_size'])})"
        )
        return what, NEEDS
    works = ok["batch_size"].to_numpy(dtype=float) * (ok["input_size"].to_numpy(dtype=float) / 224.0) ** 2
    if len(np.unique(works)) < 2:  # 1024 at 224 px and 256 at 448 px: one work, nothing says how time grows
        points = ", ".join(
            f"batch {int(b)} at {int(s)} px" for b, s in sorted(set(zip(ok["batch_size"], ok["input_size"])))
        )
        what = f"points of one work only, batch x (size/224)^2 = {works[0]:g} ({points})"
        return what, ONE_WORK
    return None


def _listed(unfit: list[tuple[dict, tuple[str, str]]]) -> str:
    """'a/b has what (needs); c/d has ...', and the batch-size advice once where a group lacks batch sizes."""
    listed = "; ".join(f"{_name(key)} has {what} ({needs})" for key, (what, needs) in unfit)
    return listed + (f"; {BATCH_SIZE_ADVICE}." if any(needs == NEEDS for _, (_, needs) in unfit) else ".")


def _none_fittable(unfit: list[tuple[dict, tuple[str, str]]]) -> str:
    """The one sentence that refuses a fit where no group can be fitted."""
    if len(unfit) == 1:
        key, (what, needs) = unfit[0]
        advice = f"; {BATCH_SIZE_ADVICE}" if needs == NEEDS else ""
        return f"group {_name(key)} has {what}: {needs}{advice}."
    return f"no group can be fitted: {_listed(unfit)}"


def _fit_group(key: dict, rows: pd.DataFrame, families: tuple[str, ...], on_progress) -> GroupPredictor:
    name = _name(key)
    status = rows["status"]
    ok, oom = rows[status == "ok"], rows[status == "oom"]
    models = {}
    for quantity in QUANTITIES:
        if on_progress is not None:
            on_progress(name, quantity)
        values = ok[quantity].to_numpy(dtype=float)
        usable = np.isfinite(values) & (values > 0)
        batches = ok["batch_size"].to_numpy(dtype=float)[usable]
        if len(np.unique(batches)) < 2:
            reason = (
                f"no row has {quantity}"
                if not usable.any()
                else f"{quantity} is measured at fewer than two batch sizes"
            )
            models[quantity] = QuantityModel(None, {"family": None, "reason": reason, "rows": int(usable.sum())})
            continue
        result = fit_quantity(batches, ok["input_size"].to_numpy(dtype=float)[usable], values[usable], families)
        report = {**result.report, **(_measurement_noise(ok) if quantity == "latency_ms" else {})}
        if quantity == "latency_ms" and len(np.unique(batches)) < 3:
            # a line through two batch sizes has no error of its own: it carries the one measured for such
            # lines on published latency curves, so that plan widens by it (latency only: what was measured)
            report["reference_errors"] = copy.deepcopy(two_batch_size_errors())
        models[quantity] = QuantityModel(result.estimator, report)

    loads = load_samples_ms(rows)  # one per process, never one per row
    counted = import_counted_loads_ms(rows)  # those of them that counted the import (fixed_costs.py)
    _warn_if_import_counted(name, key["hardware"], counted)
    memory = ok["memory_mb"].to_numpy(dtype=float)
    memory = memory[np.isfinite(memory) & (memory > 0)]
    return GroupPredictor(
        key=MappingProxyType(key),
        batch_sizes=tuple(sorted(int(b) for b in ok["batch_size"].unique())),
        input_sizes=tuple(sorted(int(s) for s in ok["input_size"].unique())),
        models=MappingProxyType(models),
        ok_batches=_per_size(ok, "max"),
        oom_batches=_per_size(oom, "min"),
        memory_capacity_mb=float(memory.max()) if len(memory) else None,
        provenance=MappingProxyType(_provenance(rows)),
        load_ms=float(np.median(loads)) if loads else None,
        load_samples_ms=tuple(loads),
        first_call_samples_ms=tuple(first_call_samples_ms(rows)),
        load_counted_import_ms=tuple(counted),
    )


def _warn_if_import_counted(name: str, hardware: str, old: list[float]) -> None:
    """A GPU group whose loads (`old`, ms) counted the import (perfmodel/fixed_costs.py): the predictor carries
    them as measured, and marks them (fixed_costs.load_counted_import_ms), so its plans say so too."""
    if old and not is_cpu(hardware):
        samples = Samples(tuple(x / 1000 for x in old), "its profile")
        warnings.warn(
            f"{name}: {import_counted(samples, more_load_s(samples, on_gpu=True))}.", PerfmodelWarning, stacklevel=4
        )


def _measurement_noise(ok: pd.DataFrame) -> dict:
    """How well the profiler knew each median (no model can be more accurate than the data it fits)."""
    if "latency_ci_rel" not in ok.columns:
        return {}
    ci = ok["latency_ci_rel"].to_numpy(dtype=float)
    ci = ci[np.isfinite(ci)]
    if not len(ci):
        return {}
    return {"measured_ci_pct_median": float(np.median(ci) * 100), "measured_ci_pct_max": float(np.max(ci) * 100)}


def _per_size(rows: pd.DataFrame, how: str) -> tuple[tuple[int, int], ...]:
    per_size = rows.groupby("input_size")["batch_size"].agg(how)
    return tuple((int(s), int(b)) for s, b in per_size.items())


def _provenance(rows: pd.DataFrame) -> dict:
    found = {}
    for column in PROVENANCE_COLUMNS:
        if column in rows.columns:
            values = sorted({str(v) for v in rows[column] if not _missing(v)})
            if values:
                found[column] = values[0] if len(values) == 1 else values
    return found


def _sklearn_version() -> str | None:
    try:
        from sklearn import __version__ as version
    except ImportError:
        return None
    return version
