"""Online plans on a drifting machine: how often the SLO holds, and the margin that covers the drift.

An online plan meets its SLO at the profile's speed, or with every batch `margin` slower. A machine
whose speed drifts for seconds at a time (planning/drift.py) runs slower than that for stretches far
longer than a request's wait: the queue then follows the slow speed, and the tail over that stretch is
what the slow speed gives (experiments/007, tail.py). So the SLO holds while the machine runs at most
`margin` slow (at least: the plan's own headroom may carry it further): with the speed's relative
spread `rel_sd` (normal around the profile's median), a share Phi(margin / rel_sd) of the time; the
margin that covers a share P of the time is Phi^-1(P) x rel_sd.
"""

from __future__ import annotations

from statistics import NormalDist

from perfmodel.planning import drift as drifts

COVERED = 0.95  # the share of time the suggested margin covers


def slo_drift(hardware: list[str], margin: float, found: dict[str, drifts.Drift] | None = None) -> dict:
    """Per hardware type of the plan: its drift (as `found` in its profiles, else the default), the share of
    time the SLO holds at `margin`, and the margin that covers COVERED of the time."""
    found = found or {}
    out = {}
    for name in dict.fromkeys(hardware):
        d = found.get(name) or drifts.default_for(name)
        holds = 1.0 if d.rel_sd <= 0 else NormalDist().cdf(margin / d.rel_sd)
        out[name] = {
            **d.to_dict(),
            "slo_holds_share": holds,
            "margin_covering": {"share": COVERED, "margin": NormalDist().inv_cdf(COVERED) * d.rel_sd},
        }
    return out


def measured(frames) -> dict[str, drifts.Drift]:
    """Per hardware type, the drift that a profile's probe measured (planning/drift.from_rows); `frames`: one per
    profile file, a later file's figure in place of an earlier one's."""
    found = {}
    for frame in frames:
        for name, rows in frame.groupby("hardware"):
            d = drifts.from_rows(rows, str(name))
            if d is not None:
                found[str(name)] = d
    return found
