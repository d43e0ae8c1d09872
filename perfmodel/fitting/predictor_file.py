"""The predictor file: its format and versions, the quantities and key columns a group holds, and what a
file holds read back into plain values, every value checked (the file may come from anyone):
PredictorFormatError in one sentence otherwise. perfmodel.fitting.predictor makes them its objects.
"""

from __future__ import annotations

from collections import Counter

from perfmodel.errors import PredictorFormatError
from perfmodel.fitting.regressors import _Estimator
from perfmodel.readers import is_number, version
from perfmodel.units import MAX_BATCH_SIZE, MAX_INPUT_SIZE, shown

FORMAT = "perfmodel-predictor"
# Version 2 added load_ms, transfer, the roofline family, and per quantity the measured region and
# signed errors; version 1 files still load (their measured region is the batch x size rectangle). Keys added
# since within version 2 are optional, their absence meaning what files before them held: a group's
# fixed_costs (the samples; load_ms alone before), and in it load_counted_import_ms (none counted).
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)
QUANTITIES: tuple[str, ...] = ("latency_ms", "latency_p99_ms", "warmup_ms", "memory_mb")
KEY_COLUMNS: tuple[str, ...] = ("hardware", "model", "backend", "precision")
EXTRA_KEY_COLUMNS: tuple[str, ...] = ("architecture", "protocol", "mode", "concurrency")
_MAX_MEMORY_MB = _MAX_TIME_MS = 1e9  # as in a profile (perfmodel.schema.BOUNDS)


def predictor_fields(data, source: str) -> tuple[list[dict], dict]:
    """The fields of each group (`group_fields`) and the provenance of the predictor a Predictor.to_dict() wrote."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PredictorFormatError(
            f'{source} is JSON but not a perfmodel predictor (no "format": "{FORMAT}"); make one with `perfmodel fit`.'
        )
    hint = "fit it again with `perfmodel fit`"
    if version(data, source, "predictor", READABLE_VERSIONS, hint, PredictorFormatError) is None:
        raise PredictorFormatError(f"{source} has no schema_version, which every predictor file has; {hint}.")
    try:
        groups = [group_fields(g) for g in data["groups"]]
        provenance = dict(data.get("provenance", {}))
    except PredictorFormatError as exc:
        raise PredictorFormatError(f"{source} is a damaged predictor: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise PredictorFormatError(
            f"{source} is a damaged predictor ({_damage(exc)}); fit it again with `perfmodel fit`."
        ) from None
    if not groups:
        raise PredictorFormatError(f"{source} holds no groups; fit it again with `perfmodel fit`.")
    return groups, provenance


def group_fields(data) -> dict:
    """The fields of the group a GroupPredictor.to_dict() wrote, as GroupPredictor's (plain dicts for its
    read-only mappings; models: quantity -> (estimator or None, error report))."""
    try:
        return _group_fields(data)
    except PredictorFormatError:  # already one sentence (and a ValueError, caught below otherwise)
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise PredictorFormatError(f"a group is not one that fit writes ({_damage(exc)}).") from None


def _group_fields(data: dict) -> dict:
    key = {str(k): v for k, v in data["key"].items()}
    missing = [k for k in KEY_COLUMNS if not isinstance(key.get(k), str)]
    if missing:
        raise PredictorFormatError(f"a group lacks its {', '.join(missing)}.")
    odd = [k for k, v in key.items() if isinstance(v, bool) or not isinstance(v, (str, int))]
    if odd:
        raise PredictorFormatError(
            f"a group's {shown(odd[0])} is {shown(key[odd[0]])}, neither text nor a whole number."
        )
    models = {}
    for quantity in QUANTITIES:
        entry = data["quantities"][quantity]
        estimator = _Estimator.from_dict(entry["model"]) if entry["model"] is not None else None
        models[quantity] = (estimator, _checked_report(entry["report"], quantity))
    batch_sizes = tuple(sorted(_whole(b, "batch_sizes", MAX_BATCH_SIZE) for b in data["batch_sizes"]))
    input_sizes = tuple(sorted(_whole(s, "input_sizes", MAX_INPUT_SIZE) for s in data["input_sizes"]))
    ok_batches = _size_batch_pairs(data["ok_batches"], "ok_batches")
    if not batch_sizes or not input_sizes or not ok_batches:
        raise PredictorFormatError("a group has no measured batch or input sizes.")
    capacity = data["memory_capacity_mb"]
    if capacity is not None and not (is_number(capacity) and 0 < capacity <= _MAX_MEMORY_MB):
        raise PredictorFormatError(
            f"memory_capacity_mb is {shown(capacity)}, not a number of MiB above 0 and at most {_MAX_MEMORY_MB:,.0f}."
        )
    provenance = data.get("provenance", {})
    if not isinstance(provenance, dict):
        raise PredictorFormatError("a group's provenance is not an object.")
    load_ms, transfer = data.get("load_ms"), data.get("transfer")
    if load_ms is not None and not (is_number(load_ms) and load_ms >= 0):
        raise PredictorFormatError(f"a group has load_ms {shown(load_ms)}, not a number of milliseconds >= 0.")
    fixed = data.get("fixed_costs") or {}  # absent from files written before the samples
    samples = (
        {name: fixed.get(name, []) for name in ("load_ms", "first_call_excess_ms")} if isinstance(fixed, dict) else {}
    )
    if not samples or not all(_finite_list(v) and all(0 <= x <= _MAX_TIME_MS for x in v) for v in samples.values()):
        raise PredictorFormatError(
            "a group's fixed_costs is not an object with lists load_ms and first_call_excess_ms of "
            f"milliseconds from 0 to {_MAX_TIME_MS:g}."
        )
    counted = _counted_import(fixed.get("load_counted_import_ms", []), samples["load_ms"], load_ms)
    if transfer is not None and not (isinstance(transfer, dict) and _finite_list(transfer.get("errors_pct", []))):
        raise PredictorFormatError("a group's transfer is not an object with a list of errors_pct.")
    return {
        "key": key,
        "batch_sizes": batch_sizes,
        "input_sizes": input_sizes,
        "models": models,
        "ok_batches": ok_batches,
        "oom_batches": _size_batch_pairs(data["oom_batches"], "oom_batches"),
        "memory_capacity_mb": None if capacity is None else float(capacity),
        "provenance": dict(provenance),
        "load_ms": None if load_ms is None else float(load_ms),
        "load_samples_ms": tuple(float(x) for x in samples["load_ms"]),
        "first_call_samples_ms": tuple(float(x) for x in samples["first_call_excess_ms"]),
        "load_counted_import_ms": counted,
        "transfer": transfer,
    }


def _counted_import(counted, samples: list, load_ms) -> tuple[float, ...]:
    """The loads that counted the import (fixed_costs.counted_import), some of the group's load samples (its
    load_ms where it has none: a transferred group's), each no more often than there; none in older files."""
    loads = samples or ([] if load_ms is None else [load_ms])
    if not (_finite_list(counted) and not Counter(counted) - Counter(loads)):
        raise PredictorFormatError(
            f"a group's fixed_costs.load_counted_import_ms is {shown(counted)}, not a list of some of its load "
            "samples (fixed_costs.load_ms, or its load_ms where it has none): the loads that counted the import; "
            "fit it again with `perfmodel fit`."
        )
    return tuple(float(x) for x in counted)


def _damage(exc: Exception) -> str:
    return f"missing field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"


def reference_errors_ok(reference) -> bool:
    """Whether `reference` holds the errors of a line through two batch sizes as fit writes them: non-empty
    lists of finite errors_pct, between the two batch sizes and beyond them."""
    return isinstance(reference, dict) and all(
        isinstance(reference.get(r), dict)
        and _finite_list(reference[r].get("errors_pct"))
        and len(reference[r]["errors_pct"]) > 0
        for r in ("between", "beyond")
    )


def _finite_list(values) -> bool:
    return isinstance(values, list) and all(is_number(v) for v in values)


def _whole(value, what: str, largest: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= largest:
        raise PredictorFormatError(f"{what} holds {shown(value)}, not a whole number from 1 to {largest:,}.")
    return value


def _size_batch_pairs(pairs, what: str) -> tuple[tuple[int, int], ...]:
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
        raise PredictorFormatError(f"{what} is not a list of [input size, batch size] pairs.")
    return tuple((_whole(s, what, MAX_INPUT_SIZE), _whole(b, what, MAX_BATCH_SIZE)) for s, b in pairs)


def _checked_report(report, quantity: str) -> dict:
    """A quantity's error report: free-form, except what queries compute with: the training range, the
    measured region (version 2: rows of input size, smallest and largest batch, all > 0) and the signed
    errors (finite numbers)."""
    if not isinstance(report, dict):
        raise PredictorFormatError(f"the report of {quantity} is not an object.")
    ranges = report.get("training_range")
    if ranges is not None:
        ok = isinstance(ranges, dict) and all(
            isinstance(ranges.get(k), list)
            and len(ranges[k]) == 2
            and all(is_number(v) and v > 0 for v in ranges[k])
            and ranges[k][0] <= ranges[k][1]
            for k in ("batch_size", "input_size")
        )
        if not ok:
            raise PredictorFormatError(f"the training range of {quantity} is not [low, high] batch and input sizes.")
    region = report.get("measured")
    if region is not None:
        ok = isinstance(region, list) and all(
            isinstance(row, list) and len(row) == 3 and all(is_number(v) and v > 0 for v in row) and row[1] <= row[2]
            for row in region
        )
        if not ok or not region:
            raise PredictorFormatError(
                f"the measured region of {quantity} is not a list of [input size, smallest, largest batch]."
            )
    extrapolation = report.get("extrapolation", {})
    if not isinstance(extrapolation, dict):
        raise PredictorFormatError(f"the extrapolation report of {quantity} is not an object.")
    reference = report.get("reference_errors")
    if reference is not None:
        if not reference_errors_ok(reference):
            raise PredictorFormatError(
                f"the reference errors of {quantity} are not lists of finite errors_pct between and beyond."
            )
    errors = [
        report.get("cv_errors_pct"),
        *(split.get("errors_pct") for split in extrapolation.values() if isinstance(split, dict)),
    ]
    if not all(values is None or _finite_list(values) for values in errors):
        raise PredictorFormatError(f"an error list of {quantity} holds something other than finite numbers.")
    return dict(report)
