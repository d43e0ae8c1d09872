"""The sources of an online plan: its files read once (read), then the batch service times they give per
hardware type (options_of).

A profile gives, per hardware type and option (backend, precision; for Triton profiles also protocol
and mode), the median and p99 time of one call at each batch size measured: those rows measured one
request at a time (no concurrency above 1, no open-loop rate). Between measured batch sizes the
times are interpolated linearly, below the smallest they are taken as the smallest's; the candidate
max_batch settings are the batch sizes measured. A Triton profile also gives the server's own time
(server_compute_ms): the rest of a request's latency (network, client) is added to every latency but
takes no server time. A predictor answers every batch size up to its max_batch; the candidates are
the powers of two up to it and max_batch itself.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from perfmodel import shipped
from perfmodel.errors import InputError, PerfmodelWarning
from perfmodel.files import read_csv_text
from perfmodel.planning.online_request import OnlineAsked
from perfmodel.planning.sources import load_predictor, option_label, pick_model, warn_if_extrapolated
from solvers.online_problem import ServiceTimes

ARRIVAL_COLUMN = "arrival_s"
PREDICTED_LARGEST = 4096  # a predictor's batch sizes are asked up to this many images (max_batch may say far more)


@dataclass(frozen=True)
class OnlineSources:
    """What the files of an online plan say, each read once."""

    profiles: tuple  # one frame per profile file (schema.load_profile), in the order given
    predictors: tuple  # Predictor objects
    arrivals: np.ndarray | None  # sorted arrival times (seconds), or None: a Poisson process at the rate

    @property
    def frame(self):
        """Every profile's rows in one frame (schema.load_profiles), or None without profiles."""
        import pandas as pd

        return pd.concat(self.profiles, ignore_index=True, sort=False) if self.profiles else None


def read(asked: OnlineAsked) -> OnlineSources:
    """The profiles, predictors and arrival trace asked for (the shipped files where no profile or predictor
    is named), each read once."""
    from perfmodel.schema import load_profile

    profiles, predictors = asked.profiles, asked.predictors
    if not profiles and not predictors:
        profiles, predictors = shipped.sources()
    frames = tuple(load_profile(p) for p in profiles)
    loaded = tuple(load_predictor(p) for p in predictors)
    trace = read_arrivals(asked.arrivals) if isinstance(asked.arrivals, (str, os.PathLike)) else asked.arrivals
    return OnlineSources(frames, loaded, trace)


def service_options(
    profiles, predictors, model, input_size: int, backend=None, precision=None
) -> dict[str, list[ServiceTimes]]:
    """Per hardware type, every way of serving `model` at `input_size` that the sources (files) time."""
    from perfmodel.schema import load_profiles

    frame = load_profiles(profiles) if profiles else None
    return options_of(frame, [load_predictor(p) for p in predictors], model, input_size, backend, precision)


def options_of(frame, loaded, model, input_size: int, backend=None, precision=None) -> dict[str, list[ServiceTimes]]:
    """service_options on what was read: the profiles' rows (one frame, or None) and the predictors loaded."""
    models = set() if frame is None else set(frame["model"])
    models |= {g.model for p in loaded for g in p.groups}
    model = pick_model(model, models, loaded)
    options: dict[str, list[ServiceTimes]] = {}
    if frame is not None:
        _from_profiles(options, frame, model, input_size, backend, precision)
    for predictor in loaded:
        _from_predictor(options, predictor, model, input_size, backend, precision)
    if not options:
        what = " ".join(x for x in (backend, precision) if x)
        sizes = _sizes_timed(frame, model, backend, precision) if frame is not None else []
        if sizes:
            measured = f"sizes timed so: {', '.join(map(str, sizes))}: plan at one with `input_size` {sizes[0]}"
        elif frame is not None:
            measured = (
                "the profiles time it so at no input size: profile it one request at a time (no open-loop rate, "
                "concurrency 1)"
            )
        else:
            measured = "give `input_size` of a size measured"
        raise InputError(
            f"nothing times {model}{' ' + what if what else ''} at {input_size} px one request at a time (status ok, "
            f"concurrency 1, no open-loop rate); {measured}, or give a predictor."
        )
    return options


def _sizes_timed(frame, model, backend, precision) -> list[int]:
    """The input sizes at which a profile times `model` one request at a time (what _from_profiles reads)."""
    rows = frame[(frame["status"] == "ok") & (frame["model"] == model)]
    if backend:
        rows = rows[rows["backend"] == backend]
    if precision:
        rows = rows[rows["precision"] == precision]
    return sorted({int(x) for x in _single_requests(rows)["input_size"]})


def _single_requests(frame):
    """The rows that time one call alone: no open-loop rate, concurrency 1 (or not recorded)."""
    keep = np.ones(len(frame), dtype=bool)
    if "rate_per_s" in frame.columns:
        keep &= frame["rate_per_s"].isna().to_numpy()
    if "concurrency" in frame.columns:
        c = frame["concurrency"].astype("Float64")
        keep &= (c.isna() | (c == 1)).to_numpy(dtype=bool)
    return frame[keep]


def _from_profiles(options, frame, model, size, backend, precision) -> None:
    rows = frame[(frame["status"] == "ok") & (frame["model"] == model) & (frame["input_size"] == size)]
    if backend:
        rows = rows[rows["backend"] == backend]
    if precision:
        rows = rows[rows["precision"] == precision]
    rows = _single_requests(rows)
    if not len(rows):
        return
    labels = [option_label(r) for r in rows.itertuples(index=False)]
    for (hardware, label), group in rows.assign(_label=labels).groupby(["hardware", "_label"], sort=True):
        by_batch = group.groupby("batch_size")[["latency_ms", "latency_p99_ms"]].median()
        measured = by_batch.index.to_numpy(dtype=int)
        b = np.arange(1, measured.max() + 1)
        p50 = np.interp(b, measured, by_batch["latency_ms"].to_numpy(dtype=float)) / 1000
        p99 = np.interp(b, measured, by_batch["latency_p99_ms"].to_numpy(dtype=float)) / 1000
        overhead = _overhead_s(group, p50)
        options.setdefault(str(hardware), []).append(
            ServiceTimes(p50 - overhead, np.maximum(p99, p50) - overhead, label, tuple(measured), overhead)
        )


def _overhead_s(group, p50) -> float:
    """A server's profile (Triton: server_compute_ms beside the client's latency) splits each request's
    time into the server's and the rest (network, client), which takes no server time: the rest of the
    smallest batch measured, as each request of a dynamic batch travels alone. 0 without that column."""
    if "server_compute_ms" not in group.columns:
        return 0.0
    smallest = group[group["batch_size"] == group["batch_size"].min()]
    client = smallest["latency_ms"].astype(float)  # means against the server's mean where the profile has them
    if "latency_mean_ms" in smallest.columns and smallest["latency_mean_ms"].notna().all():
        client = smallest["latency_mean_ms"].astype(float)
    rest = float((client - smallest["server_compute_ms"].astype(float)).median()) / 1000
    if not np.isfinite(rest) or rest <= 0:
        return 0.0
    return min(rest, 0.9 * float(np.min(p50)))  # the server's own time stays above zero at every batch size


def _from_predictor(options, predictor, model, size, backend, precision) -> None:
    for group in predictor.select(model=model, backend=backend, precision=precision):
        if int(group.key.get("concurrency", 1) or 1) != 1:
            continue
        warn_if_extrapolated(group, size, stacklevel=5)
        largest = min(int(np.asarray(group.max_batch(size)).ravel()[0]), PREDICTED_LARGEST)
        if largest < 1:
            continue
        b = np.arange(1, largest + 1)
        p50 = np.broadcast_to(np.asarray(group.latency_ms(b, size), dtype=float), b.shape) / 1000
        try:
            p99 = np.broadcast_to(np.asarray(group.latency_p99_ms(b, size), dtype=float), b.shape) / 1000
        except InputError:
            warnings.warn(
                f"{group.hardware}: the predictor has no p99 model; the batch time is taken as fixed.",
                PerfmodelWarning,
                stacklevel=5,
            )
            p99 = p50
        good = np.isfinite(p50) & (p50 > 0) & np.isfinite(p99)
        if not good.all():  # keep the batch sizes up to the first one without a usable time
            b = b[: int(np.argmin(good))]
        if len(b):
            label = f"{group.backend} {group.precision} (predicted)"
            options.setdefault(group.hardware, []).append(
                ServiceTimes(p50[: len(b)], np.maximum(p99, p50)[: len(b)], label)
            )


def read_arrivals(path: str | os.PathLike) -> np.ndarray:
    """Arrival times (seconds, any origin) from a CSV with an `arrival_s` column; returned sorted."""
    import pandas as pd

    source = os.fspath(path)
    hint = f"give a CSV with a column '{ARRIVAL_COLUMN}' of arrival times in seconds"
    frame = read_csv_text(path, InputError, f"an arrivals CSV (a column '{ARRIVAL_COLUMN}' of times in seconds)")
    columns = [c.strip() for c in frame.columns]
    if ARRIVAL_COLUMN not in columns:
        raise InputError(f"{source} has no column '{ARRIVAL_COLUMN}' (it has {', '.join(columns) or 'none'}): {hint}.")
    text = frame.iloc[:, columns.index(ARRIVAL_COLUMN)].str.strip()
    values = pd.to_numeric(text, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{source}, row {i + 1}, column '{ARRIVAL_COLUMN}': {text.iloc[i]!r} is not a finite number of seconds."
        )
    values = np.sort(values)
    if len(values) < 2 or values[-1] <= values[0]:
        raise InputError(f"{source} needs at least two arrivals at different times to give a rate.")
    return values
