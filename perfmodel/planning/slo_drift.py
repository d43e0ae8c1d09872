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

import math
from statistics import NormalDist

from perfmodel.planning import drift as drifts

COVERED = 0.95  # the share of time the suggested margin covers


def slo_drift(hardware: list[str], margin: float, profiles=()) -> dict:
    """Per hardware type of the plan: its drift, the share of time the SLO holds at `margin`, and the
    margin that covers COVERED of the time."""
    found = _measured(profiles)
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


def lines(found: dict, margin: float) -> list[str]:
    """One sentence per type, for the readable output."""
    out = []
    for name, d in found.items():
        share = d["slo_holds_share"]
        if margin:
            planned = f"the SLO is planned with every batch {margin:.0%} slower, covering the drift about {share:.0%}"
        else:
            planned = f"the SLO is planned at the profile's speed, a speed it keeps about {share:.0%}"
        line = (
            f"{name}: its speed drifts (relative sd {d['rel_sd']:.1%}; {d['source']}): {planned} of the time "
            "(the plan's headroom may carry it further)"
        )
        if share < COVERED:  # a whole percent, rounded up: a margin rounded down would cover less
            need = math.ceil(d["margin_covering"]["margin"] * 100 - 1e-9)
            line += f"; `margin` {need}% covers {COVERED:.0%} of it"
        out.append(line + ".")
    return out


def _measured(profiles) -> dict:
    from perfmodel.schema import load_profile

    found = {}
    for path in profiles:
        if not isinstance(path, (str, bytes)) and not hasattr(path, "__fspath__"):
            continue
        frame = load_profile(path)
        for name, rows in frame.groupby("hardware"):
            d = drifts.from_rows(rows, str(name))
            if d is not None:
                found[str(name)] = d
    return found
