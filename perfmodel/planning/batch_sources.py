"""A batch plan's candidates, gathered from its profiles and predictors: per hardware type, the batch
sizes each option offers at each input size with their latency and first-batch time (seconds), and what
those numbers rest on, recorded in the plan's Basis (where they come from, what was not measured, their
spreads and fixed costs).

Profiles offer the batch sizes measured (status ok); predictors every batch size from 1 to max_batch (up
to 2x the largest measured unless `extrapolate`). Every (backend, precision) measured on a type is a
candidate for that type: the solver picks the fastest. Profiles hold milliseconds; the solver works in
seconds.
"""

from __future__ import annotations

import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import solvers
from perfmodel import shipped
from perfmodel.errors import InputError, PerfmodelWarning
from perfmodel.fixed_costs import (
    FixedCost,
    Samples,
    default_samples,
    first_call_samples_ms,
    import_counted,
    import_counted_loads_ms,
    is_cpu,
    load_samples_ms,
)
from perfmodel.planning import drift
from perfmodel.planning.basis import EXTRAPOLATION_FACTOR, Basis
from perfmodel.planning.batch_request import LATENCY_COLUMNS, Asked
from perfmodel.planning.context import GIVEN_LOAD, Option, option_of
from perfmodel.planning.sources import load_predictor, option_label, pick_model, warn_if_extrapolated
from perfmodel.planning.spread import batch_moments, undirected

MOMENT_COLUMNS = ("latency_mean_ms", "latency_std_ms")  # one batch's mean and sd, where the profile has them
TRANSFER_NAME = "made by `transfer`"  # how a plan names the predictor `transfer` fits on the fly


@dataclass
class TypeOptions:
    """Candidate batch sizes gathered for one hardware type, per input size (seconds)."""

    # per input size: (batch, latency, warm-up, labels, where no warm-up was measured) per source
    columns: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, list[str], np.ndarray]]] = field(
        default_factory=dict
    )
    # The fixed costs' samples (seconds), one per process that measured them (perfmodel/fixed_costs.py):
    # the loads, and per option the fresh first calls' excess over a steady batch (a compiled option's
    # first call compiles: its own); `sources` where they come from.
    loads: list[float] = field(default_factory=list)
    first_calls: dict[str, list[float]] = field(default_factory=dict)
    sources: dict[str, None] = field(default_factory=dict)
    # the loads among them measured before the load split, which counted the import (fixed_costs.py)
    old_loads: list[float] = field(default_factory=list)
    old_load_sources: dict[str, None] = field(default_factory=dict)
    details: dict[str, Option] = field(default_factory=dict)  # what each candidate label stands for

    def add(self, size: int, batch, latency_s, warmup_s, labels, unmeasured) -> None:
        unmeasured = np.broadcast_to(np.asarray(unmeasured, bool), np.shape(batch))
        self.columns.setdefault(size, []).append(
            (np.asarray(batch), np.asarray(latency_s), np.asarray(warmup_s), list(labels), unmeasured)
        )

    def add_first_calls(self, excess_s: dict[str, float]) -> None:
        """Add each option's first call beyond a steady batch to its candidates whose warm-up nobody measured."""
        for size, parts in self.columns.items():
            self.columns[size] = [
                (b, lat, warm + no * np.array([excess_s.get(x, 0.0) for x in labels]), labels, no)
                for b, lat, warm, labels, no in parts
            ]

    def add_fixed_costs(self, source: str, loads_ms, first_calls_ms: dict[str, list[float]], old_loads_ms=()) -> None:
        """Add a source's samples (ms); `old_loads_ms`: those of its loads that counted the import."""
        if len(old_loads_ms):
            self.old_load_sources[source] = None
            self.old_loads += [x / 1000 for x in old_loads_ms]
        if len(loads_ms) or any(len(v) for v in first_calls_ms.values()):
            self.sources[source] = None
        self.loads += [x / 1000 for x in loads_ms]
        for label, values in first_calls_ms.items():
            self.first_calls.setdefault(label, []).extend(x / 1000 for x in values)

    def fixed_costs(self, hardware: str, load_given: float | None, unmeasured) -> tuple[FixedCost, dict]:
        """The type's load, and each option's first call (`unmeasured`: the options whose warm-up nobody
        measured), each with the default that stands in where too few were measured."""
        source = "; ".join(self.sources) or "none"
        own = Samples(tuple(self.loads), source) if load_given is None else Samples((load_given,), GIVEN_LOAD)
        old = Samples(tuple(self.old_loads), "; ".join(self.old_load_sources)) if self.old_loads else None
        first = default_samples(hardware, "first call")
        load = FixedCost(
            "load", own, default_samples(hardware, "load"), counted_import=old if load_given is None else None
        )
        return load, {
            label: FixedCost(
                "first call", Samples(tuple(self.first_calls.get(label, ())), source), first, label not in unmeasured
            )
            for label in self.details
        }

    def candidates(self, size: int) -> solvers.Candidates | None:
        parts = self.columns.get(size)
        if not parts:
            return None
        b, lat, warm, labels, _ = zip(*parts)
        return solvers.Candidates(
            size,
            np.concatenate(b),
            np.concatenate(lat),
            np.concatenate(warm),
            labels=[x for part in labels for x in part],
        )


def gather(profiles, predictors, model: str | None, asked: Asked, basis: Basis) -> tuple[dict[str, TypeOptions], str]:
    """Each hardware type's candidates for what was asked, with their fixed costs and decoding, and the model
    planned for (`model`, or the one the sources hold); `basis` records what they rest on."""
    r, sizes = asked.request, sorted(asked.workload)
    use, backend, precision = r.use, r.backend, r.precision
    frame = _load_tagged(profiles) if profiles else None
    loaded = [(_source_name(p), load_predictor(p)) for p in predictors]
    models = set() if frame is None else set(frame["model"])
    models |= {g.model for _, p in loaded for g in p.groups}
    model = pick_model(model, models, [p for _, p in loaded])

    options: dict[str, TypeOptions] = {}
    if frame is not None:
        _from_profiles(options, frame, model, sizes, use, backend, precision, basis)
    for name, predictor in loaded:
        _from_predictor(options, predictor, model, sizes, use, backend, precision, basis, name)
    unknown = [t for t in (r.pool or {}) if t not in options]
    if unknown and r.transfer:
        transferred = _transferred(frame, model, unknown, options)
        _from_predictor(options, transferred, model, sizes, use, backend, precision, basis, TRANSFER_NAME)
    elif unknown:
        raise InputError(_no_source_for(unknown, options, profiles))
    for size in sizes:
        if not any(size in o.columns for o in options.values()):
            measured = sorted(_profile_sizes(frame, model))
            if size in measured:
                what = " ".join(x for x in (backend, precision) if x)
                raise InputError(f"no point of {model}{' ' + what if what else ''} at {size} px has status ok.")
            hint = f"plan at one of them (`input_size` {measured[0]}), or give" if measured else "give"
            raise InputError(
                f"nothing measured at input size {size} for {model}; sizes measured: "
                f"{', '.join(map(str, measured)) or 'none'}: {hint} a predictor, which can extrapolate."
            )
    for name, o in options.items():
        t = basis.of(name)
        t.load, t.first_call = o.fixed_costs(name, r.load_time, {*t.warmup_unmeasured, *t.no_warmup_model})
        if not is_cpu(name):  # a GPU's first call is seconds: where not measured, the option's or the default's
            o.add_first_calls({label: cost.median_s for label, cost in t.first_call.items() if not cost.per_batch})
    if r.decode:
        _with_decode(options, r.decode, basis)
    return options, model


def _transferred(frame, model: str, targets: list[str], options):
    """A predictor of `targets`, nobody's profiled GPUs, carried from the profiles' other GPUs (plan --transfer)."""
    from perfmodel.fitting.train import transferred

    if frame is None:
        raise InputError(
            "`transfer` carries measured curves to a GPU nobody profiled: give the `profiles`, not only `predictors`."
        )
    rows = frame[frame["model"] == model].drop(columns=["profile_file"], errors="ignore")
    with warnings.catch_warnings():  # what the transfer cannot see is in its note, which the plan repeats
        warnings.simplefilter("ignore", PerfmodelWarning)
        return transferred(rows, targets)


def _no_source_for(unknown: list[str], options, profiles) -> str:
    """No profile or predictor for a pool type: and, for GPUs of the specification table, how to plan anyway."""
    from perfmodel.fitting.gpu_specs import load_gpu_specs, spec_key

    message = f"no profile or predictor for {', '.join(unknown)} (hardware found: {', '.join(sorted(options))})"
    specs = load_gpu_specs()
    known = [spec_key(t, specs) for t in unknown if spec_key(t, specs) is not None]
    if not known or not profiles:
        return message + "."
    paths = [str(p) for p in profiles]
    folder = shipped.profiles_folder()
    if folder is not None and sorted(map(Path, profiles)) == sorted(shipped.sources()[0]):  # the shipped ones
        paths = [str(folder / "*.csv"), str(folder / "reference" / "*.csv")]
    names = ",".join(known)
    return (
        message + f"; to plan on {', '.join(known)} from the curves measured on the other GPUs, carried through "
        "the GPU specifications (about 25% error, median, counted in the deadline probability), add `transfer`, "
        f"or fit a predictor and plan on it: `perfmodel fit {' '.join(paths)} --target-hardware {names} "
        f"--out transferred.json`, then `predictors` transferred.json."
    )


def _profile_sizes(frame, model) -> set[int]:
    return set() if frame is None else {int(s) for s in frame.loc[frame["model"] == model, "input_size"]}


def _load_tagged(paths):
    """The profiles concatenated, each row tagged with its file (`profile_file`) for the plan's basis."""
    import pandas as pd

    from perfmodel.schema import load_profile

    return pd.concat([load_profile(p).assign(profile_file=os.fspath(p)) for p in paths], ignore_index=True, sort=False)


def _source_name(source) -> str:
    return "a Predictor object" if hasattr(source, "select") else os.fspath(source)


def _record_profile_basis(basis, hardware, group) -> None:
    """Where each option's profile rows come from: their `source` (published or imported), else their file;
    how well each point's median is known; for a CPU type, how many workers ran while they were measured
    (--alongside)."""
    import pandas as pd

    labels = []
    for row in group.itertuples(index=False):
        label = option_label(row)
        labels.append(label)
        ci = getattr(row, "latency_ci_rel", None)
        if ci is not None and np.isfinite(ci):  # published and imported rows have no spread to report
            known, key = basis.of(hardware).median_ci, (label, int(row.input_size), int(row.batch_size))
            known[key] = max(float(ci), known.get(key, 0.0))
        cited = str(getattr(row, "source", "") or "").strip()
        if cited and cited != "nan":
            basis.cite(hardware, label, cited, "published")
        else:
            basis.cite(hardware, label, f"profile {row.profile_file}", "measured")
    if hardware.startswith("cpu"):  # CPU workers share a machine's cores; GPU workers each have their own GPU
        alongside = group.get("alongside", pd.Series(0, index=group.index)).fillna(0)  # older files: measured alone
        t = basis.of(hardware)
        for label, n in (alongside.astype(int) + 1).groupby(labels).min().items():
            t.measured_workers[label] = min(int(n), t.measured_workers.get(label, int(n)))
    measured = group["warmup_ms"].notna().groupby([group["input_size"].to_numpy(), labels]).any()
    if not measured.all():  # an option with no warm-up at an input size: its first batch is timed as a steady one
        basis.of(hardware).warmup_measured = False


def _from_profiles(options, frame, model, sizes, use, backend, precision, basis) -> None:
    options_rows = frame[frame["model"] == model]
    if backend:
        options_rows = options_rows[options_rows["backend"] == backend]
    if precision:
        options_rows = options_rows[options_rows["precision"] == precision]
    rows = options_rows[(options_rows["status"] == "ok") & options_rows["input_size"].isin(sizes)]
    if "rate_per_s" in rows.columns:  # open-loop rows time a served stream, not a batch
        rows = rows[rows["rate_per_s"].isna()]
    column = LATENCY_COLUMNS[use]
    for hardware, group in rows.groupby("hardware", sort=True):
        o = options.setdefault(str(hardware), TypeOptions())
        _record_profile_basis(basis, str(hardware), group)
        # every row of the option (any input size or status) that timed a load or a fresh first call
        processes = options_rows[options_rows["hardware"] == hardware]
        for file, part in processes.groupby("profile_file", sort=False):
            labels = np.array([option_label(r) for r in part.itertuples(index=False)])
            first = {label: first_call_samples_ms(part[labels == label]) for label in dict.fromkeys(labels)}
            old = import_counted_loads_ms(part)
            o.add_fixed_costs(f"profile {file}", load_samples_ms(part), first, old)
        _record_drift(basis.of(str(hardware)), group, str(hardware))
        for size, at in group.groupby("input_size", sort=True):
            latency = at[column].to_numpy(dtype=float)
            points = list(at.itertuples(index=False))
            labels = [option_label(r) for r in points]  # once per row: the warm-up fill, the options and their details
            warmup, beyond, filled, unmeasured = _fill_warmup(
                at["batch_size"].to_numpy(dtype=float), np.array(labels), latency, at["warmup_ms"].to_numpy(dtype=float)
            )
            t = basis.of(str(hardware))
            t.warmup_filled.update(filled)
            t.warmup_unmeasured.update(unmeasured)
            batch = at["batch_size"].to_numpy(dtype=np.int64)
            t.warmup_carried.update(((labels[i], int(size), int(batch[i])), ms / 1000) for i, ms in beyond.items())
            o.add(int(size), batch, latency / 1000, warmup / 1000, labels, np.isin(labels, list(unmeasured)))
            o.details.update((label, option_of(r)) for label, r in zip(labels, points))
            mean, sd = batch_moments(*(_column(at, c) for c in ("latency_ms", "latency_p99_ms", *MOMENT_COLUMNS)))
            moments = basis.of(str(hardware)).moments
            for label, b, m, d in zip(labels, at["batch_size"].astype(int), mean / 1000, sd / 1000):
                moments[(label, int(size), int(b))] = (float(m), float(d))


def _column(frame, name):
    return frame[name].to_numpy(dtype=float) if name in frame.columns else None


def _record_drift(t, group, hardware: str) -> None:
    t.drift = drift.from_rows(group, hardware) or t.drift


def _fill_warmup(batch, labels, latency, warmup):
    """Warm-up times for every point of one input size: a point without one (a profile that measured
    warm-up at a few batch sizes only, --fresh-warmup-at) gets its latency plus the warm-up's excess over
    latency from the points of its option that have one: interpolated in batch size between them, held
    flat below the smallest, and past the largest carried on along the last two's rise (never down). The
    excess grows with the batch on a GPU (cuDNN's autotuning times each candidate at the call's own
    shape): an H200's fresh first calls of ResNet-50 took 1.3-1.6 s over the batch at 1 and 256 images, and
    2.2-2.9 s at 512-2048 (experiments/008, results/h200). What is carried past the largest is a guess: it
    is returned as the point's extra spread. An option with none keeps its latency. Returns (warm-up,
    {point index: the excess carried past the largest measured, in the warm-up's unit}, points filled and
    points left at latency, each by option)."""
    out, filled, unmeasured = warmup.copy(), Counter(), Counter()
    beyond: dict[int, float] = {}
    for label in dict.fromkeys(labels):
        mine = labels == label
        missing, known = mine & np.isnan(warmup), mine & ~np.isnan(warmup)
        if not missing.any():
            continue
        if known.any():
            order = np.argsort(batch[known])
            at, excess = batch[known][order], np.maximum(warmup[known] - latency[known], 0.0)[order]
            fill = np.interp(batch[missing], at, excess)
            if len(at) >= 2 and at[-1] > at[-2]:
                rise = max(excess[-1] - excess[-2], 0.0) / (at[-1] - at[-2])
                carried = rise * np.maximum(batch[missing] - at[-1], 0.0)
                fill = fill + carried
                beyond.update((int(i), float(c)) for i, c in zip(np.flatnonzero(missing), carried) if c > 0)
            out[missing] = latency[missing] + fill
            filled[label] += int(missing.sum())
        else:
            out[missing] = latency[missing]
            unmeasured[label] += int(missing.sum())
    return out, beyond, filled, unmeasured


def _from_predictor(options, predictor, model, sizes, use, backend, precision, basis, name="") -> None:
    quantity = LATENCY_COLUMNS[use]
    for group in predictor.select(model=model, backend=backend, precision=precision):
        o = options.setdefault(group.hardware, TypeOptions())
        t = basis.of(group.hardware)
        loads = getattr(group, "load_samples_ms", ()) or ()
        if not loads and getattr(group, "load_ms", None) is not None:  # a file written before the samples
            loads = (group.load_ms,)
        label = f"{group.backend} {group.precision} " + (
            "(transferred)" if getattr(group, "transfer", None) else "(predicted)"
        )
        first = list(getattr(group, "first_call_samples_ms", ()) or ())
        old = getattr(group, "load_counted_import_ms", ()) or ()  # said as a profile's are (fixed_costs.py)
        o.add_fixed_costs(f"predictor {name}", loads, {label: first}, old)
        _record_predictor_basis(basis, group, label, name, predictor)
        for size in sizes:
            warn_if_extrapolated(group, size, stacklevel=3)
            largest = int(np.asarray(group.max_batch(size)).ravel()[0])
            measured = _largest_measured(group, size)
            t.measured[(label, size)] = measured
            if not basis.extrapolate:
                largest = min(largest, int(EXTRAPOLATION_FACTOR * measured))
            if largest < 1:
                continue
            b = np.arange(1, largest + 1)
            with warnings.catch_warnings():  # beyond the measured range on purpose (up to 2x): said in the plan
                warnings.simplefilter("ignore", PerfmodelWarning)
                latency = np.broadcast_to(np.asarray(getattr(group, quantity)(b, size), dtype=float), b.shape)
                try:
                    warmup = np.broadcast_to(np.asarray(group.warmup_ms(b, size), dtype=float), b.shape)
                except InputError:  # the profile had no warm-up times, so the predictor has no model for them
                    warmup = None
            if warmup is None:
                t.no_warmup_model[label] = f"{group.hardware} {group.backend} {group.precision}"
                t.warmup_measured = False
                warmup = latency
            good = np.isfinite(latency) & (latency > 0) & np.isfinite(warmup) & (warmup >= 0)
            if not good.all():
                warnings.warn(
                    f"{group.hardware}: the predictor gives no usable time for {int((~good).sum())} batch "
                    f"size(s) at {size} px; they are left out.",
                    PerfmodelWarning,
                    stacklevel=3,
                )
            no_model = label in t.no_warmup_model
            o.add(size, b[good], latency[good] / 1000, warmup[good] / 1000, [label] * int(good.sum()), no_model)
            o.details[label] = option_of(group)
            _record_predictor_spread(t, group, label, size, b[good])


def _largest_measured(group, size: int) -> float:
    """The largest batch the group measured at this input size (its batch range for other predictors)."""
    if hasattr(group, "measured_batch_range"):
        return float(np.asarray(group.measured_batch_range(np.array([float(size)]))[1]).ravel()[0])
    return float(group.batch_range[1])


def _record_predictor_basis(basis, group, label: str, name: str, predictor) -> None:
    fitted_on = [
        os.path.basename(str(s.get("source", ""))) for s in getattr(predictor, "provenance", {}).get("sources", [])
    ]
    source = f"predictor {name}" + (f" (fitted on {', '.join(fitted_on)})" if fitted_on else "")
    transfer = getattr(group, "transfer", None)
    basis.cite(group.hardware, label, source, "transferred" if transfer else "predicted")
    if transfer:
        from perfmodel.fitting.report import transfer_note

        basis.of(group.hardware).transferred[label] = transfer_note(group)


def _record_predictor_spread(t, group, label: str, size: int, b: np.ndarray) -> None:
    """A predicted batch's mean and sd (a lognormal through the predicted p50 and p99, where the predictor
    models both) and the predictor's measured errors, inside its batch range and beyond."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerfmodelWarning)
        p50 = np.broadcast_to(np.asarray(group.latency_ms(b, size), dtype=float), b.shape)
        p99 = None
        if "latency_p99_ms" in getattr(group, "models", {}):
            p99 = np.broadcast_to(np.asarray(group.latency_p99_ms(b, size), dtype=float), b.shape)
    mean, sd = batch_moments(p50, p99)
    for batch, m, d in zip(b, mean / 1000, sd / 1000):
        t.moments[(label, size, int(batch))] = (float(m), float(d))
    for region in ("inside", "beyond"):
        if (label, region) not in t.errors and hasattr(group, "error_samples"):
            samples = group.error_samples(beyond=region == "beyond", quantity="latency_ms")
            if samples is not None and getattr(group, "transfer", None) is None:
                samples = undirected(samples)
            if samples is not None:  # measured/predicted <= 0 (a negative prediction) is no slowdown factor
                t.errors[(label, region)] = tuple(float(x) for x in samples if x > -1)


def _with_decode(options: dict[str, TypeOptions], seconds: float, basis: Basis) -> None:
    """Add the time to decode each image to every batch (and first batch): b x `seconds`. For workers whose
    model shares the CPU cores with their image decoding (CPU workers on every core)."""
    for o in options.values():
        for size, parts in o.columns.items():
            o.columns[size] = [
                (b, lat + b * seconds, warm + b * seconds, labels, no) for b, lat, warm, labels, no in parts
            ]
    for t in basis.types.values():
        t.moments = {key: (mean + key[2] * seconds, sd) for key, (mean, sd) in t.moments.items()}


def warn_unmeasured_warmup(basis, plan: solvers.Plan) -> None:
    """Say which of the options the plan uses had no warm-up time: profile points without one, predictor
    groups without its model (options it does not use, e.g. GPU rows under --pool cpu=2, are none of the
    user's concern)."""
    used = sorted({(a.hardware, a.label) for a in plan.assignments})
    names = list(
        dict.fromkeys(basis.of(h).no_warmup_model[label] for h, label in used if label in basis.of(h).no_warmup_model)
    )
    if names:
        warnings.warn(
            f"{len(names)} predictor group(s) have no warm-up model ({', '.join(names[:3])}"
            f"{', ...' if len(names) > 3 else ''}); planning their first batch with the latency"
            f"{_first_call_added(basis, used)}.",
            PerfmodelWarning,
            stacklevel=3,
        )
    filled = sum(basis.of(h).warmup_filled[label] for h, label in used)
    unmeasured = sum(basis.of(h).warmup_unmeasured[label] for h, label in used)
    if filled:
        warnings.warn(
            f"{filled} profile point(s) have no warm-up time; planning with the warm-up excess over latency "
            "interpolated from the batch sizes measured with a fresh warm-up (same option and input size)"
            f"{_carried(basis, plan)}.",
            PerfmodelWarning,
            stacklevel=3,
        )
    if unmeasured:
        warnings.warn(
            f"{unmeasured} profile point(s) have no warm-up time; planning with their latency"
            f"{_first_call_added(basis, used)}.",
            PerfmodelWarning,
            stacklevel=3,
        )


def _carried(basis, plan: solvers.Plan) -> str:
    """'; past the largest such batch carried on along their rise, +0.56 s at h200 ... batch 2048, ...'"""
    said = [
        f"+{carried:.2g} s at {a.hardware} {a.label} {a.input_size} px batch {a.batch_size}"
        for a in plan.assignments
        if (carried := basis.of(a.hardware).warmup_carried.get((a.label, a.input_size, a.batch_size)))
    ]
    if not said:
        return ""
    return "; past the largest such batch carried on along their rise, and as unsure as the carry: " + ", ".join(
        dict.fromkeys(said)
    )


def warn_counted_import(basis, hardware) -> None:
    """Say which profiles of these GPU types (those a plan uses, or all a refused one could have used) timed
    a load that counted the import, which run does before its clock (fixed_costs.py): seconds of a short
    deadline. A CPU's load line says it too, without a warning on every plan from the shipped CPU profiles (a
    second or two of a minute)."""
    for name in sorted(hardware):
        load = basis.of(name).load
        if load is not None and load.counted_import is not None and not is_cpu(name):
            warnings.warn(
                f"{name}: {import_counted(load.counted_import, load.more_load_s())}.", PerfmodelWarning, stacklevel=3
            )


def _first_call_added(basis, used) -> str:
    """' plus a first call of 2.08 s on a100' where a GPU's first batch got one (make_plan), else ' instead'."""
    said = []
    for h, label in used:
        cost = basis.of(h).first_call.get(label)
        if not is_cpu(h) and cost is not None and not cost.per_batch and cost.median_s > 0:
            said.append(f"{cost.median_s:.3g} s on {h} {label}")
    return f" plus a first call of {', '.join(said)} (see the load line)" if said else " instead"
