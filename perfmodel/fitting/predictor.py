"""Predictor and GroupPredictor: fitted models that answer vectorised queries, written as JSON (to_dict, save)
and read back from it (from_dict, load: the file's format and checks are perfmodel.fitting.predictor_file).

Loading and querying need numpy alone (no torch, no scikit-learn, no pickle). A query outside the
measured range is answered and flagged: `extrapolates(b, s)` says which queries are, and each call
that has any emits one PerfmodelWarning whose text is the same every time (so Python's warning
filter shows it once, not once per query).

max_batch rests on one assumption about memory: it grows with the batch and with the work b*s^2
(weights + activations per pixel + a per-image part). Under it, a batch measured 'ok' at one size
is safe at the sizes and batches that do less of both, and a batch measured 'oom' is out of reach
at the sizes and batches that do more of both.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass, field, fields
from types import MappingProxyType

import numpy as np

from perfmodel._version import __version__
from perfmodel.errors import InputError, PerfmodelWarning, PredictorFormatError
from perfmodel.files import atomic_write_text, parse_json, read_json, source_of
from perfmodel.fitting.features import pixels
from perfmodel.fitting.predictor_arguments import check_quantity, numbers, pair, positive_numbers
from perfmodel.fitting.predictor_file import (
    EXTRA_KEY_COLUMNS,
    FORMAT,
    KEY_COLUMNS,
    SCHEMA_VERSION,
    group_fields,
    predictor_fields,
)
from perfmodel.fitting.regressors import _Estimator
from perfmodel.readers import output_file
from perfmodel.units import MAX_BATCH_SIZE, shown

_SEARCH_LIMIT = MAX_BATCH_SIZE  # the largest batch max_batch will ever answer (and a file may hold)
_EPS = 1e-9  # relative slack so that pixel ratios like 4.0000000001 do not round the wrong way


@dataclass(frozen=True)
class QuantityModel:
    """The fitted model of one quantity (None when the group has no data for it) and its error report."""

    estimator: _Estimator | None
    report: dict


@dataclass(frozen=True, eq=False)
class GroupPredictor:
    """The predictors of one (hardware, model, backend, precision[, architecture, protocol, mode, concurrency])."""

    key: MappingProxyType  # hardware, model, backend, precision, and the extra key columns present
    batch_sizes: tuple[int, ...]  # batch sizes measured 'ok'
    input_sizes: tuple[int, ...]  # input sizes measured 'ok'
    models: MappingProxyType  # quantity -> QuantityModel
    ok_batches: tuple[tuple[int, int], ...]  # (input size, largest batch measured ok)
    oom_batches: tuple[tuple[int, int], ...] = ()  # (input size, smallest batch measured oom)
    memory_capacity_mb: float | None = None  # the most memory a point measured ok used
    provenance: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))
    load_ms: float | None = None  # model load and preparation, once per process (the median of load_samples_ms)
    # The profile's fixed costs, one value per process that measured it (perfmodel/fixed_costs.py): the
    # loads, and the fresh first calls' excess over their steady batch. Empty in files written before.
    load_samples_ms: tuple[float, ...] = ()
    first_call_samples_ms: tuple[float, ...] = ()
    # Those of the loads that counted the import of the model's code (fixed_costs.counted_import): plans
    # say they count more load than `perfmodel run` takes. Empty in files written before.
    load_counted_import_ms: tuple[float, ...] = ()
    transfer: MappingProxyType | None = None  # for a GPU never profiled: from what, how, and its validated error

    @property
    def hardware(self) -> str:
        return self.key["hardware"]

    @property
    def model(self) -> str:
        return self.key["model"]

    @property
    def backend(self) -> str:
        return self.key["backend"]

    @property
    def precision(self) -> str:
        return self.key["precision"]

    @property
    def name(self) -> str:
        return "/".join(str(v) for v in self.key.values())

    @property
    def batch_range(self) -> tuple[int, int]:
        return self.batch_sizes[0], self.batch_sizes[-1]

    @property
    def report(self) -> dict:
        """The error report: per quantity, the chosen family, its cross-validated and extrapolation errors."""
        report = {q: m.report for q, m in self.models.items()}
        report["max_batch"] = {
            "memory_capacity_mb": self.memory_capacity_mb,
            "largest_ok": [list(p) for p in self.ok_batches],
            "smallest_oom": [list(p) for p in self.oom_batches],
            "method": "memory model up to the measured capacity, capped below every measured oom"
            if self.memory_capacity_mb is not None and self._has("memory_mb")
            else "measured batches only (no memory model), capped below every measured oom",
        }
        return report

    def __reduce__(self):
        """Pickling (multiprocessing, Ray, copy.deepcopy): the read-only mappings travel as dicts; the cache
        of look-up tables is rebuilt on first use."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return _group_from_fields, ({k: dict(v) if k in _MAPPINGS and v is not None else v for k, v in values.items()},)

    # --- queries -------------------------------------------------------------------------------

    def latency_ms(self, b, s) -> np.ndarray:
        """Median latency of one call of batch b (images) at input size s (pixels per side), in milliseconds.

        b and s: numbers or arrays, broadcast together; returns float64 of their shape (a numpy float for
        two numbers, which json.dumps takes; an array's .tolist() for JSON). A query outside the region
        measured is answered and emits one PerfmodelWarning (see `extrapolates`). InputError for sizes
        that are not finite numbers > 0, or shapes that do not broadcast; InputError if the profile had
        no figures for the quantity (warm-up, memory or p99 may be missing).
        """
        return self._predict("latency_ms", b, s)

    def latency_p99_ms(self, b, s) -> np.ndarray:
        """99th-percentile latency of one call of batch b at input size s, in milliseconds (as latency_ms)."""
        return self._predict("latency_p99_ms", b, s)

    def warmup_ms(self, b, s) -> np.ndarray:
        """Time of the first call at batch b on a freshly loaded model, in milliseconds (as latency_ms)."""
        return self._predict("warmup_ms", b, s)

    def memory_mb(self, b, s) -> np.ndarray:
        """Peak device memory serving batch b at input size s, weights included, in MiB (as latency_ms)."""
        return self._predict("memory_mb", b, s)

    def throughput_ips(self, b, s) -> np.ndarray:
        """Images per second: b / latency_ms(b, s) x 1000 (as latency_ms)."""
        b = positive_numbers(b, "batch sizes")
        with np.errstate(divide="ignore"):
            return b / self._predict("latency_ms", b, s) * 1000.0

    def extrapolates(self, b, s, quantity: str = "latency_ms") -> np.ndarray:
        """True where (b, s) lies outside the region the quantity was fitted on: outside the input sizes
        measured, or outside the batch sizes measured at that input size (see `measured_batch_range`)."""
        b, s = pair(b, s, positive=False)
        sizes, lows, highs = self._region_table(quantity)
        if b.size and b.min() >= lows.max() and b.max() <= highs.min() and s.min() >= sizes[0] and s.max() <= sizes[-1]:
            return np.zeros(b.shape, dtype=bool)  # inside what every measured size covers: no look-up needed
        lo, hi, outside = self._lookup(s, quantity)
        return (b < lo) | (b > hi) | outside

    def measured_batch_range(self, s, quantity: str = "latency_ms") -> tuple[np.ndarray, np.ndarray]:
        """The smallest and largest batch measured at input size s, per s.

        Between two measured sizes, the batches measured at both (the larger smallest, the smaller
        largest); beyond the sizes measured, the nearest size's, its largest batch scaled down by
        image area above the largest size (the same work per call).
        """
        lo, hi, _ = self._lookup(numbers(s, "input sizes"), quantity)
        return lo, hi

    def _lookup(self, s: np.ndarray, quantity: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(smallest, largest batch measured, outside the sizes measured) per s: one binary search and two
        table look-ups, so that 10^6 queries stay cheap. Rows of the table: below the first size,
        at it, between it and the next, at the next, ..., above the last size."""
        sizes, lows, highs = self._region_table(quantity)
        pos = np.searchsorted(sizes, s, side="left")
        exact = (pos < len(sizes)) & (sizes[np.minimum(pos, len(sizes) - 1)] == s)
        row = 2 * pos + exact
        lo, hi = lows[row], highs[row]
        above = pos == len(sizes)
        if above.any():  # the same work per call as the largest batch at the largest size
            scaled = np.floor(highs[-1] * pixels(sizes[-1]) / pixels(np.where(above, s, sizes[-1])) * (1 + _EPS))
            hi = np.where(above, np.maximum(scaled, 1.0), hi)
        return lo, hi, (pos == 0) & ~exact | above

    def _region_table(self, quantity: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        cache = self.__dict__.setdefault("_tables", {})
        if quantity not in cache:
            region = self._region(quantity)
            sizes, lows, highs = region[:, 0], region[:, 1], region[:, 2]
            row_lo, row_hi = [lows[0]], [highs[0]]
            for i in range(len(sizes)):
                row_lo.append(lows[i])
                row_hi.append(highs[i])
                j = min(i + 1, len(sizes) - 1)
                row_lo.append(max(lows[i], lows[j]))
                row_hi.append(min(highs[i], highs[j]))
            cache[quantity] = (sizes, np.array(row_lo), np.array(row_hi))
        return cache[quantity]

    def error_samples(self, beyond: bool = False, quantity: str = "latency_ms") -> np.ndarray | None:
        """The measured relative errors (measured - predicted) / predicted, or None when none were measured.

        Inside the measured batch range: the cross-validated errors (each batch size predicted by a fit
        without it); beyond it (up to 2x): the errors of the fit on the smaller half tested on the
        larger (the batch_2x split); a transferred group: its held-out transfer errors. A line fitted
        on two batch sizes has none of its own: it carries those of such lines on the published curves
        of profiles/reference/, between its two batch sizes and beyond them (`reference_errors`).
        """
        return self._errors(beyond, quantity)[0]

    def _errors(self, beyond: bool, quantity: str) -> tuple[np.ndarray | None, str]:
        check_quantity(quantity)
        report = self.models[quantity].report if quantity in self.models else {}
        if self.transfer is not None:
            errors = self.transfer.get("errors_pct")
            origin = f"errors of the transfer, {self.transfer.get('validation', 'leave one GPU out')}"
        elif beyond:
            errors = report.get("extrapolation", {}).get("batch_2x", {}).get("errors_pct")
            origin = "errors extrapolating (fit on batch <= half the largest, tested on the larger)"
        else:
            errors, origin = report.get("cv_errors_pct"), "cross-validated errors inside the measured range"
        reference = report.get("reference_errors")
        if not errors and self.transfer is None and reference:  # two batch sizes: a line's errors, measured elsewhere
            region = "beyond" if beyond else "between"
            errors = reference[region]["errors_pct"]
            where = "above the larger batch size, up to twice it" if beyond else "between the two batch sizes"
            origin = f"{reference.get('origin', 'errors of a line through two batch sizes')}, {where}"
        if not errors:
            return None, origin
        return np.asarray(errors, dtype=float) / 100.0, origin

    def error_quantile(self, confidence: float, beyond: bool = False, quantity: str = "latency_ms") -> dict | None:
        """How much slower than predicted the truth may be, at this confidence, from the measured errors
        (`error_samples`). Returns {"fraction", "errors", "origin"} with fraction >= 0 the `confidence`
        quantile of the errors (the largest seen when there are too few to tell), or None when no error
        was measured.
        """
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0 < confidence < 1:
            raise InputError(f"the confidence must lie between 0 and 1 (e.g. 0.99), not {confidence!r}.")
        values, origin = self._errors(beyond, quantity)
        if values is None:
            return None
        fraction = max(float(np.quantile(values, confidence, method="higher")), 0.0)
        return {"fraction": fraction, "errors": int(len(values)), "origin": f"{quantity} of {self.name}: {origin}"}

    def max_batch(self, s, memory_budget_mb: float | None = None) -> np.ndarray:
        """The largest batch that fits at input size s (pixels per side; int64 array of s's shape, 0 when not
        even one image fits); memory_budget_mb in MiB. InputError for sizes or a budget that are not
        finite numbers > 0.

        Without a budget: the larger of the batches known safe from the measurements and of what the
        memory model predicts fits in the most memory a measured point used; never at or above a batch
        measured (or implied) out-of-memory. With memory_budget_mb: the memory model inverted at that
        budget, again below every out-of-memory batch.
        """
        s = positive_numbers(s, "input sizes")
        sizes, inverse = np.unique(s, return_inverse=True)
        limit = self._oom_limit(sizes)
        if memory_budget_mb is not None:
            try:
                budget = float(memory_budget_mb)
            except (TypeError, ValueError):  # a list, text that is no number: refused below
                budget = math.nan
            if not (math.isfinite(budget) and budget > 0):
                raise InputError(f"memory_budget_mb must be a positive number of MiB, not {shown(memory_budget_mb)}.")
            best = self._memory_fit(sizes, budget, limit)
        else:
            best = self._safe_measured(sizes)
            if self.memory_capacity_mb is not None and self._has("memory_mb"):
                best = np.maximum(best, self._memory_fit(sizes, self.memory_capacity_mb, limit))
        best = np.minimum(best, limit)
        lo, hi = self.input_sizes[0], self.input_sizes[-1]
        if np.any(sizes < lo) or np.any(sizes > hi):
            self._warn(f"max_batch for input sizes outside the measured {lo}-{hi} px extrapolates", stacklevel=3)
        return best[inverse].reshape(s.shape).astype(np.int64)

    # --- internals -------------------------------------------------------------------------------

    def _has(self, quantity: str) -> bool:
        model = self.models.get(quantity)
        return model is not None and model.estimator is not None

    def _model(self, quantity: str) -> _Estimator:
        model = self.models.get(quantity)
        if model is None or model.estimator is None:
            reason = model.report.get("reason", "not measured") if model is not None else "not measured"
            raise InputError(
                f"{self.name} has no {quantity} model ({reason}); profile it with {quantity} recorded and fit again."
            )
        return model.estimator

    def _region(self, quantity: str) -> np.ndarray:
        """Rows (input size, smallest batch, largest batch) measured for the quantity, sorted by size."""
        check_quantity(quantity, self.models)
        measured = self.models[quantity].report.get("measured")
        if measured:
            return np.array(sorted(measured), dtype=float)
        (b_lo, b_hi), (s_lo, s_hi) = self._training_range(quantity)  # a version 1 file: the rectangle
        return np.array([[s_lo, b_lo, b_hi], [s_hi, b_lo, b_hi]] if s_hi > s_lo else [[s_lo, b_lo, b_hi]], dtype=float)

    def _training_range(self, quantity: str) -> tuple[tuple[float, float], tuple[float, float]]:
        check_quantity(quantity, self.models)
        ranges = self.models[quantity].report.get("training_range")
        if ranges is None:
            return (self.batch_sizes[0], self.batch_sizes[-1]), (self.input_sizes[0], self.input_sizes[-1])
        return tuple(ranges["batch_size"]), tuple(ranges["input_size"])

    def _predict(self, quantity: str, b, s) -> np.ndarray:
        estimator = self._model(quantity)
        b, s = pair(b, s)
        if not b.size:
            return np.zeros(b.shape)
        if np.any(self.extrapolates(b, s, quantity)):
            region = "; ".join(f"{lo:g}-{hi:g} at {size:g} px" for size, lo, hi in self._region(quantity))
            self._warn(f"{quantity} outside the batch sizes measured ({region}) extrapolates")
        with np.errstate(over="ignore", invalid="ignore"):  # a damaged file's model: inf or NaN, never a warning flood
            return np.maximum(estimator.evaluate(b, s), 0.0)

    def _warn(self, what: str, stacklevel: int = 4) -> None:
        # The same text for every call, so Python shows it once per place in the caller's code.
        warnings.warn(
            f"{self.name}: {what} (see GroupPredictor.extrapolates).", PerfmodelWarning, stacklevel=stacklevel
        )

    def _safe_measured(self, sizes: np.ndarray) -> np.ndarray:
        """Per size, the largest batch known to fit: a batch ok at size s_j fits at any size with no more
        pixels per image, and at larger sizes as long as the batch does no more work b*s^2."""
        measured_s = np.array([p[0] for p in self.ok_batches], dtype=float)[:, None]
        measured_b = np.array([p[1] for p in self.ok_batches], dtype=float)[:, None]
        scaled = np.floor(measured_b * pixels(measured_s) / pixels(sizes)[None, :] * (1 + _EPS))
        return np.minimum(measured_b, scaled).max(axis=0)

    def _oom_limit(self, sizes: np.ndarray) -> np.ndarray:
        """Per size, the largest batch below every out-of-memory: an oom at (b_o, s_o) also happens at
        any size and batch that do at least as much of both b and b*s^2."""
        if not self.oom_batches:
            return np.full(sizes.shape, float(_SEARCH_LIMIT))
        oom_s = np.array([p[0] for p in self.oom_batches], dtype=float)[:, None]
        oom_b = np.array([p[1] for p in self.oom_batches], dtype=float)[:, None]
        scaled = np.ceil(oom_b * pixels(oom_s) / pixels(sizes)[None, :] * (1 - _EPS))
        return np.minimum(np.maximum(oom_b, scaled).min(axis=0) - 1, _SEARCH_LIMIT)

    def _memory_fit(self, sizes: np.ndarray, budget_mb: float, limit: np.ndarray) -> np.ndarray:
        """Per size, the largest batch the memory model says fits in budget_mb (bisection, all sizes at once)."""
        memory = self._model("memory_mb")
        lo = np.zeros(sizes.shape)  # fits (0 images always do)
        hi = np.maximum(limit, 0) + 1  # beyond the search
        while np.any(hi - lo > 1):
            mid = np.floor((lo + hi) / 2)
            with np.errstate(over="ignore", invalid="ignore"):
                fits = memory.evaluate(np.maximum(mid, 1), sizes) <= budget_mb
            lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid)
        return lo

    # --- JSON ------------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "key": dict(self.key),
            "batch_sizes": list(self.batch_sizes),
            "input_sizes": list(self.input_sizes),
            "ok_batches": [list(p) for p in self.ok_batches],
            "oom_batches": [list(p) for p in self.oom_batches],
            "memory_capacity_mb": self.memory_capacity_mb,
            "load_ms": self.load_ms,
            "fixed_costs": {
                "per": "process that measured it",
                "load_ms": list(self.load_samples_ms),
                "first_call_excess_ms": list(self.first_call_samples_ms),
                "load_counted_import_ms": list(self.load_counted_import_ms),
            },
            "transfer": None if self.transfer is None else dict(self.transfer),
            "provenance": dict(self.provenance),
            "quantities": {
                q: {"model": m.estimator.to_dict() if m.estimator is not None else None, "report": m.report}
                for q, m in self.models.items()
            },
        }

    @classmethod
    def from_dict(cls, data: dict) -> GroupPredictor:
        """The group a to_dict() wrote, every value checked (the file may come from anyone):
        PredictorFormatError in one sentence otherwise."""
        return _group_read(group_fields(data))


_MAPPINGS = ("key", "models", "provenance", "transfer")  # the fields a GroupPredictor holds read-only


def _group_from_fields(values: dict) -> GroupPredictor:
    return GroupPredictor(
        **{k: MappingProxyType(v) if k in _MAPPINGS and v is not None else v for k, v in values.items()}
    )


def _group_read(values: dict) -> GroupPredictor:
    """The group of the fields predictor_file read (a model per quantity as its estimator and report)."""
    return _group_from_fields({**values, "models": {q: QuantityModel(*m) for q, m in values["models"].items()}})


class Predictor:
    """All the groups of one predictor file. With a single group, its queries work here directly."""

    def __init__(self, groups: tuple[GroupPredictor, ...], provenance: dict | None = None):
        self.groups = tuple(groups)
        self.provenance = dict(provenance or {})

    def __repr__(self) -> str:
        return f"Predictor({len(self.groups)} group(s): {', '.join(g.name for g in self.groups)})"

    def select(self, hardware=None, model=None, backend=None, precision=None, **extra) -> tuple[GroupPredictor, ...]:
        """The groups matching every key given (None matches anything); the other keys are architecture,
        protocol, mode and concurrency. A key of another name is a TypeError, as a misspelt keyword is
        (it matched nothing, so a typo read as "no such group")."""
        unknown = [k for k in extra if k not in EXTRA_KEY_COLUMNS]
        if unknown:
            raise TypeError(
                f"select() got an unexpected key {unknown[0]!r}; the keys are "
                f"{', '.join(KEY_COLUMNS + EXTRA_KEY_COLUMNS)}."
            )
        wanted = {"hardware": hardware, "model": model, "backend": backend, "precision": precision, **extra}
        wanted = {k: v for k, v in wanted.items() if v is not None}
        return tuple(g for g in self.groups if all(k in g.key and str(g.key[k]) == str(v) for k, v in wanted.items()))

    def _single(self) -> GroupPredictor:
        if len(self.groups) != 1:
            names = ", ".join(g.name for g in self.groups)
            raise InputError(f"this predictor holds {len(self.groups)} groups ({names}); choose one with select(...).")
        return self.groups[0]

    def latency_ms(self, b, s) -> np.ndarray:
        return self._single().latency_ms(b, s)

    def latency_p99_ms(self, b, s) -> np.ndarray:
        return self._single().latency_p99_ms(b, s)

    def warmup_ms(self, b, s) -> np.ndarray:
        return self._single().warmup_ms(b, s)

    def memory_mb(self, b, s) -> np.ndarray:
        return self._single().memory_mb(b, s)

    def throughput_ips(self, b, s) -> np.ndarray:
        return self._single().throughput_ips(b, s)

    def max_batch(self, s, memory_budget_mb: float | None = None) -> np.ndarray:
        return self._single().max_batch(s, memory_budget_mb)

    def extrapolates(self, b, s, quantity: str = "latency_ms") -> np.ndarray:
        return self._single().extrapolates(b, s, quantity)

    @property
    def report(self) -> dict:
        """The error report of the predictor's only group (see GroupPredictor.report)."""
        return self._single().report

    # --- JSON ------------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        return {
            "format": FORMAT,
            "schema_version": SCHEMA_VERSION,
            "perfmodel": __version__,
            "provenance": self.provenance,
            "groups": [g.to_dict() for g in self.groups],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"

    def save(self, path: str | os.PathLike) -> None:
        """Write the predictor as JSON, atomically (a reader never sees half a file), once its text has been
        read back as Predictor.load reads a file (the same parser and checks): what fit writes, plan reads.
        PredictorFormatError, and nothing written, if it would be refused; InputError if `path` is not a
        path or cannot be written (a directory, a missing folder)."""
        source = source_of(path, InputError, "give the name of the JSON file to write")
        text = self._read_back(source)
        output_file(path, "the predictor's path")
        atomic_write_text(path, text)

    def _read_back(self, path: str) -> str:
        source = "the fitted predictor"
        try:
            try:
                text = self.to_json()
            except ValueError:  # allow_nan=False: json.dumps refuses NaN and infinities
                raise PredictorFormatError(f"{source} holds a number that is not finite (NaN or infinity)") from None
            Predictor.from_dict(parse_json(text, source, PredictorFormatError, "a perfmodel predictor", "-"), source)
        except PredictorFormatError as exc:
            reason = str(exc).removesuffix(".").removesuffix("; fit it again with `perfmodel fit`").removesuffix("; -")
            raise PredictorFormatError(
                f"{reason}, so it was not written to {path} (plan would refuse it): check the figures of the "
                "profiles (and of the GPU table, `gpu_specs`) it was fitted from."
            ) from None
        return text

    @classmethod
    def from_dict(cls, data, source: str = "the predictor") -> Predictor:
        groups, provenance = predictor_fields(data, source)
        return cls(tuple(_group_read(g) for g in groups), provenance)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Predictor:
        """Read a predictor file; PredictorFormatError if it is not one this perfmodel reads."""
        data = read_json(
            path,
            PredictorFormatError,
            "a perfmodel predictor",
            "give the path of a predictor JSON file from `perfmodel fit`",
        )
        return cls.from_dict(data, os.fspath(path))


for _query in ("latency_ms", "latency_p99_ms", "warmup_ms", "memory_mb", "throughput_ips", "max_batch", "extrapolates"):
    getattr(Predictor, _query).__doc__ = (
        f"GroupPredictor.{_query} of the predictor's only group; InputError if it holds several (choose one "
        f"with select).\n\n{getattr(GroupPredictor, _query).__doc__}"
    )
