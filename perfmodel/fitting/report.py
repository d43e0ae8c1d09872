"""The error report as table rows (for `perfmodel fit --report`) and as plain JSON (for --json)."""

from __future__ import annotations

import numpy as np

from perfmodel.fitting.predictor import GroupPredictor, Predictor
from perfmodel.fitting.predictor_file import QUANTITIES

QUANTITY_HEADERS = (
    "quantity",
    "family",
    "features",
    "rows",
    "CV MAPE %",
    "CV worst %",
    "batch x2 MAPE %",
    "batch x2 worst %",
    "batch half MAPE %",
    "input size MAPE %",
)
# A transferred group (a GPU never profiled) was not cross-validated: its own columns.
TRANSFER_HEADERS = (
    "quantity",
    "family",
    "carried from",
    "source rows",
    "transfer error median %",
    "transfer error p90 %",
)
MAX_BATCH_HEADERS = ("input size px", "largest ok", "smallest oom", "max_batch")
# A transferred group beside the one-line guesses: held-out median |error| % per regime, and on the
# target's own points where it was profiled.
GUESS_HEADERS = (
    "guess",
    "held out: launch-bound %",
    "held out: compute-bound %",
    "held out: all %",
    "vs target: launch-bound %",
    "vs target: compute-bound %",
    "vs target: all %",
)
GUESS_NAMES = {
    "chosen": "this transfer (the guesses marked *)",
    "same-stack": "same stack (other ways on both GPUs)",
    "method": "GPU effects (method)",
    "traffic": "counted memory traffic (method)",
    "copy": "nearest GPU copied",
    "peak": "x peak FLOP/s ratio",
    "bandwidth": "x bandwidth ratio",
    "roofline": "x slower roof ratio",
}

REPORT_LEGEND = """CV: leave-one-batch-size-out, on the batch sizes inside the measured range (interpolation).
batch x2: fit on batch sizes <= half the largest, test on the rest (extrapolating up to 2x);
batch half: fit on batch sizes <= the median, test on the larger; input size: fit on the smaller
input sizes, test on the largest. MAPE = mean |predicted - measured| / measured; worst = its maximum."""
TRANSFER_LEGEND = """Transferred groups (a GPU predicted from others): source rows are the points of the GPUs it was
carried from, not the target's; the transfer error is no cross-validation but the held-out error of such
transfers on published curves never used for tuning, with that number of source GPUs (median and 90th
percentile of |predicted - measured| / measured: the transfer's expected_error, as fit prints it). Beside
the one-line guesses: the held-out median |error| per regime of the transfer and of each guess (launch-bound:
where the source GPU sits on its floor; compute-bound: the rest), and against the target's own points where
it was profiled; * marks what this transfer used."""


def quantity_table(group: GroupPredictor) -> tuple[tuple[str, ...], list[tuple]]:
    """The headers and rows of a group's table: transferred groups have their own columns."""
    if group.transfer is not None:
        return TRANSFER_HEADERS, transfer_rows(group)
    return QUANTITY_HEADERS, quantity_rows(group)


def transfer_rows(group: GroupPredictor) -> list[tuple]:
    expected = (group.transfer or {}).get("expected_error") or {}
    rows = []
    for quantity in QUANTITIES:
        report = group.models[quantity].report
        if report.get("family") is None:
            rows.append((quantity, "-", report.get("reason", ""), report.get("rows", 0), None, None))
            continue
        sources = report.get("rows_from") or [f"{s['hardware']} {s['precision']}" for s in group.transfer["from"]]
        rows.append(
            (
                quantity,
                report["family"],
                ", ".join(sources),
                report["rows"],
                expected.get("median_pct"),
                expected.get("p90_pct"),
            )
        )
    return rows


def guess_rows(group: GroupPredictor) -> list[tuple]:
    """The transfer and every one-line guess side by side (GUESS_HEADERS); the guess used is marked *."""
    t = group.transfer or {}
    held = (t.get("baselines") or {}).get("held-out") or {}
    checked = (t.get("checked_against_target") or {}).get("guesses") or {}
    used = set((t.get("guesses") or {}).values())
    rows = []
    for guess, name in GUESS_NAMES.items():
        mine, target = held.get(guess) or {}, dict(checked.get(guess) or {})
        if guess == "chosen" and "same-stack" in used:
            continue  # the same-stack row is this transfer
        if guess in ("same-stack", "chosen") and guess in used | {"chosen"} and t.get("checked_against_target"):
            target = t["checked_against_target"].get("by_regime") or {}
        if not mine and not target:
            continue
        cells = [mine.get(r, {}).get("median_pct") for r in ("launch-bound", "compute-bound", "all")]
        cells += [target.get(r) for r in ("launch-bound", "compute-bound", "all")]
        rows.append((name + (" *" if guess in used else ""), *cells))
    return rows


def quantity_rows(group: GroupPredictor) -> list[tuple]:
    rows = []
    for quantity in QUANTITIES:
        report = group.models[quantity].report
        if report.get("family") is None:
            rows.append(
                (quantity, "-", report.get("reason", ""), report.get("rows", 0), None, None, None, None, None, None)
            )
            continue
        extrapolation = report["extrapolation"]

        def error(split: str, what: str = "mape"):
            return extrapolation.get(split, {}).get(what)

        rows.append(
            (
                quantity,
                report["family"],
                " + ".join(["1", *report["features"]]) if report["family"] == "linear" else "",
                report["rows"],
                report["cv_mape"],
                report["cv_max_error"],
                error("batch_2x"),
                error("batch_2x", "max_error"),
                error("batch_half"),
                error("input_size"),
            )
        )
    return rows


def noise_note(group: GroupPredictor) -> str | None:
    """One line on the measurement noise of latency, when the profile recorded it."""
    report = group.models["latency_ms"].report
    if "measured_ci_pct_median" not in report:
        return None
    return (
        f"{group.name}: the measured latency medians are known to +-{report['measured_ci_pct_median']:.1f}% "
        f"(median over points; worst +-{report['measured_ci_pct_max']:.1f}%): smaller model errors cannot be told "
        "from noise."
    )


def few_points_note(group: GroupPredictor) -> str | None:
    """One line on a group whose latency was fitted on too few batch sizes to measure its error."""
    model = group.models.get("latency_ms")
    note = model.report.get("note") if model is not None else None
    return f"{group.name}: {note}" if note else None


def transfer_note(group: GroupPredictor) -> str | None:
    """One line on a transferred group: from which GPUs, with which error."""
    t = group.transfer
    if t is None:
        return None
    sources = ", ".join(f"{s['hardware']} {s['precision']}" for s in t["from"])
    expected = t.get("expected_error")
    if expected:
        kind = (
            "same-stack transfers"
            if expected["sources"] == "same-stack"
            else f"transfers from {expected['sources']} source GPU(s)"
        )
        error = (
            f"expected error {expected['median_pct']:.0f}% median, {expected['p90_pct']:.0f}% p90 (measured on "
            f"held-out published curves, {kind})"
        )
    elif t.get("median_pct") is not None:  # files written before issue 25
        error = f"leave-one-GPU-out median error {t['median_pct']:.1f}% ({t['validation']})"
    else:
        error = t["validation"]
    how = "a ratio other ways of serving measured on both GPUs" if t.get("same_stack") else "the GPU specifications"
    line = f"{group.name}: transferred from {sources} through {how}; {error}"
    if t.get("floor") and not t.get("same_stack"):
        line += f"; the launch-bound floor {t['floor']}"
    if (t.get("guesses") or {}).get("compute-bound") == "traffic":
        line += (
            "; the compute-bound part by the model's counted memory traffic (the share of the source's time it takes "
            "at the source's bandwidth scaled by the ratio of bandwidths, the rest by that of peak FLOP/s)"
        )
    checked = t.get("checked_against_target")
    if checked:
        line += (
            f"; against {t['target']}'s own {checked['points']} measured points: median {checked['median_pct']:.1f}%, "
            f"worst {checked['max_pct']:.1f}%"
        )
        regimes = checked.get("by_regime") or {}
        parts = [f"{r} {regimes[r]:.1f}%" for r in ("launch-bound", "compute-bound") if r in regimes]
        if parts:
            line += f" ({', '.join(parts)})"
    return line + "."


def max_batch_rows(group: GroupPredictor) -> list[tuple]:
    ok, oom = dict(group.ok_batches), dict(group.oom_batches)
    sizes = sorted(set(ok) | set(oom))
    predicted = group.max_batch(np.array(sizes, dtype=float))
    return [(s, ok.get(s), oom.get(s), int(m)) for s, m in zip(sizes, predicted)]


def report_json(predictor: Predictor) -> list[dict]:
    return [{"key": dict(g.key), "report": g.report} for g in predictor.groups]
