"""011 on a GPU: each executed calibration plan's makespan distribution under two load definitions.

For every executed row of the calibration files (gpu_calibration.py's JSON lines), the same assignment as
run (GPU type, input size, batch size, images, GPUs) and its makespan distribution from planning/spread.py's
makespan_of, on the basis that perfmodel's own gathering builds from the plan's profile:

  (a) plan: the profile's loads as the plan counts them (main's code: loads that counted the import kept);
  (b) run:  the load as `perfmodel run` counts it: the profile's loads that counted the import
      (fixed_costs.counted_import) replaced by loads measured as run counts them, read from --loads
      (default: the H200's channels-last profiles of 2026-11-28, six processes, 0.046-0.089 s).

Per row: where the measured makespan falls in each (its quantile), and whether it met the case's P
(measured <= the P-quantile); per definition: how many below p5 / above p95, and the hit rate at each P.
Rows whose run started after --held-out-after are held out; those before are the runs the plan model was
tuned on (the first call's carry, 292f79c, and the load switch, cd7c297, on the 15 runs of 2026-11-28).
Definition (a) must reproduce each row's recorded p5/p50/p95: the table says where it does not.

--first-call main (default) takes the first call and batch time as this checkout plans them, which is what
a plan with (b)'s loads would count; plan takes those the row's plan counted. They differ where the code
moved since the plan was made: the 15 rows of 2026-11-28 were planned before 292f79c carried a first call
past the largest batch measured in a fresh process (1.75 s at batch 2048, now 2.33 s), so (a) reproduces
their recorded quantiles only with --first-call plan (and with main at batch 64 and 128, where nothing
is carried). What (b) checks is the makespan distribution of the assignments as run, not the choices a
planner with (b)'s loads would make (more images, perhaps other batch sizes).

    python experiments/011_deadline_calibration/load_definitions.py \\
        experiments/008_gpu_campaign/results/h200/h200-calibration.jsonl [more.jsonl] \\
        [--held-out-after 2026-11-28T06:21:39Z] [--loads H200-NEW.csv ...] [--first-call plan] [--no-save]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import warnings
from collections import Counter
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

from experiments.lab import finish_results, machine, new_results, wilson  # noqa: E402

H200 = ROOT / "experiments" / "008_gpu_campaign" / "results" / "h200"
DEFAULT_LOADS = (
    H200 / "h200-resnet50-torch-channels-last-fp16.csv",
    H200 / "h200-resnet50-torch-channels-last-cuda-graphs-fp16.csv",
)
# cd7c297 (the load switch, 06:21:39 UTC) came after the first call's carry (292f79c, 06:13:07): both were
# made from the 15 runs of 05:52-05:57 that day. A run that started later is one neither was tuned on.
TUNED_UNTIL = "2026-11-28T06:21:39Z"
REPRODUCED_S = 0.005  # (a) against the row's recorded quantiles: within rounding of a millisecond or so
DEFINITIONS = {"a": "plan", "b": "run"}
PLAN_KEYS = ("assignments", "sources", "deadline_s", "mode", "model", "gpus_by_type")
ASSIGNMENT_KEYS = (
    *("hardware", "input_size", "option", "batch_size", "count", "batches", "images", "images_total"),
    *("last_batch", "load_s", "warmup_s", "latency_s"),
)
FIRST_CALL = {"main": "as this checkout plans them", "plan": "as each plan counted them"}


class BadInput(Exception):
    """A file or row this script cannot use; the message says which and why."""


def executed_rows(paths: list[Path]) -> list[dict]:
    """The executed rows of the calibration files, each as {file, line, row, plan, run}."""
    out = []
    for path in paths:
        if not path.is_file():
            raise BadInput(f"{path} is not a file: give gpu_calibration.py's JSON-lines output")
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise BadInput(f"{path}:{number} is not a JSON line: is it gpu_calibration.py's --out?") from None
            row = record.get("row") if isinstance(record, dict) else None
            if not isinstance(row, dict) or not row.get("executed"):
                continue
            where = f"{path}:{number} ({row.get('name', 'unnamed')})"
            _require(where, row, "row", ("name", "p", "measured_s", "p5_s", "p50_s", "p95_s"))
            _require(where, record, "line", ("plan", "run"))
            _require(where, record["plan"], "plan", PLAN_KEYS)
            for assignment in record["plan"]["assignments"]:
                _require(where, assignment, "plan's assignment", ASSIGNMENT_KEYS)
            _require(where, record["run"], "run", ("started_at",))
            out.append({"where": where, "file": path, **record})
    if not out:
        raise BadInput(f"no executed plan in {', '.join(map(str, paths))}: nothing to compare")
    return out


def _require(where: str, record: dict, what: str, keys: tuple[str, ...]) -> None:
    missing = [k for k in keys if k not in record or record[k] is None]
    if missing:
        raise BadInput(f"{where}: the {what} has no {', '.join(missing)}; was it written by gpu_calibration.py?")


def new_path_loads(paths: list[Path]):
    """The loads measured as `perfmodel run` counts them in these profiles (one per process; rows that
    counted the import left out), as fixed_costs.Samples in seconds."""
    from perfmodel.errors import PerfmodelError
    from perfmodel.fixed_costs import Samples, counted_import, load_samples_ms
    from perfmodel.schema import load_profile

    values, hardware = [], set()
    for path in paths:
        if not path.is_file():
            raise BadInput(f"--loads: {path} is not a file: give profiles whose loads were measured as run counts them")
        try:
            rows = load_profile(path)
        except PerfmodelError as exc:
            raise BadInput(f"--loads: {path}: {exc}") from None
        rows = rows[~counted_import(rows)]
        values += [v / 1000 for v in load_samples_ms(rows)]
        hardware |= set(rows["hardware"].astype(str)) if "hardware" in rows.columns else set()
    if not values:
        raise BadInput(
            f"--loads: no load measured as run counts it in {', '.join(map(str, paths))} (every row counted the "
            "import, or none timed a load): profile with this checkout's perfmodel"
        )
    names = ", ".join(p.name for p in paths)
    return Samples(tuple(values), f"{'/'.join(sorted(hardware)) or 'unnamed hardware'} ({names})")


def _profiles(entry: dict, profile_dirs: list[Path]) -> list[Path]:
    """The profile files the row's plan was made from, found by name and checked by their sha256."""
    found = []
    for source in entry["plan"]["sources"]:
        if source.get("kind") != "profile":
            raise BadInput(f"{entry['where']}: its plan used a {source.get('kind')}; this compares profile plans only")
        name = Path(source["path"]).name
        places = [Path(source["path"]), ROOT / "profiles" / name, *(d / name for d in profile_dirs)]
        match = next((p for p in places if p.is_file() and _sha256(p) == source.get("sha256")), None)
        if match is None:
            raise BadInput(
                f"{entry['where']}: the profile its plan was made from ({name}, sha256 "
                f"{str(source.get('sha256'))[:12]}) is not here as it was: give its folder with --profile-dir"
            )
        found.append(match)
    return found


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def distributions(entry: dict, loads, first_call: str, profile_dirs: list[Path]) -> dict:
    """The row's assignment's makespan distribution under (a) and (b): {'a': Makespan, 'b': Makespan},
    and 'replaced': whether the profile had loads that counted the import (else (b) is (a))."""
    import solvers
    from perfmodel.errors import PerfmodelError, PerfmodelWarning
    from perfmodel.fixed_costs import FixedCost, Samples
    from perfmodel.planning.basis import Basis
    from perfmodel.planning.batch_request import asked
    from perfmodel.planning.batch_sources import gather
    from perfmodel.planning.context import GIVEN_LOAD
    from perfmodel.planning.spread import makespan_of

    plan = entry["plan"]
    sizes = sorted({a["input_size"] for a in plan["assignments"]})
    if len(sizes) != 1:
        raise BadInput(f"{entry['where']}: its plan mixes input sizes {sizes}; this compares one-size plans only")
    settings = dict(
        mode=plan["mode"],
        pool=dict(plan["gpus_by_type"]),
        profiles=_profiles(entry, profile_dirs),
        input_size=sizes[0],
        model=plan["model"]["name"],
        use=plan.get("use") or "p50",
        extrapolate=bool((plan.get("extrapolation") or {}).get("allowed")),
    )
    if any(t.get("source") == GIVEN_LOAD for t in (plan.get("load_time") or {}).values()):
        raise BadInput(f"{entry['where']}: its plan was given a load time, which no profile's load replaces")
    if plan.get("decode_s_per_image"):
        settings["decode"] = plan["decode_s_per_image"]
    basis = Basis()
    with warnings.catch_warnings():  # the plans' own warnings (a load that counted the import) are the subject here
        warnings.simplefilter("ignore", PerfmodelWarning)
        try:
            images = sum(a["images_total"] for a in plan["assignments"])
            request = asked(images, plan["deadline_s"], None, settings)
            options, _ = gather(settings["profiles"], [], settings["model"], request, basis)
        except PerfmodelError as exc:
            raise BadInput(f"{entry['where']}: its plan's profile: {exc}") from None
    assignments = []
    for x in plan["assignments"]:
        t, key = basis.of(x["hardware"]), (x["option"], x["input_size"], x["batch_size"])
        latency, warmup = _candidate(options, x, entry["where"])
        if first_call == "plan":
            carried = t.warmup_carried.get(key, 0.0)
            if carried:  # the plan's first call beyond the measured one's value is as unsure as main's carry
                t.warmup_carried[key] = max(x["warmup_s"] - (warmup - carried), 0.0)
            latency, warmup = x["latency_s"], x["warmup_s"]
        load = t.load.median_s if t.load is not None else x["load_s"]
        finish = load + warmup + (x["batches"] - 1) * latency
        assignments.append(
            solvers.Assignment(
                x["hardware"], x["input_size"], x["batch_size"], x["count"], x["batches"], x["images"],
                x["last_batch"], load, warmup, latency, finish, x["option"],
            )
        )  # fmt: skip
    # makespan_of reads a plan's assignments and GPUs per type only
    fixed = SimpleNamespace(assignments=tuple(assignments), gpus_by_type=dict(plan["gpus_by_type"]))
    out = {"a": makespan_of(fixed, basis), "replaced": False}
    for hardware in plan["gpus_by_type"]:
        t = basis.of(hardware)
        if t.load is not None and t.load.counted_import is not None:
            old, kept = Counter(t.load.counted_import.values_s), []
            for v in t.load.own.values_s:  # own holds the old loads too: each taken out once
                if old[v]:
                    old[v] -= 1
                else:
                    kept.append(v)
            own = Samples(tuple(kept) + loads.values_s, f"{t.load.own.source} less its old loads; {loads.source}")
            t.load = FixedCost("load", own, t.load.default)
            out["replaced"] = True
    out["b"] = makespan_of(fixed, basis)
    return out


def _candidate(options, x: dict, where: str) -> tuple[float, float]:
    """(latency, warm-up) in seconds of the assignment's option and batch size, as this checkout gathers them."""
    c = options[x["hardware"]].candidates(x["input_size"]) if x["hardware"] in options else None
    at = [] if c is None else [i for i, label in enumerate(c.labels) if label == x["option"]]
    at = [i for i in at if int(c.batch_size[i]) == x["batch_size"]]
    if not at:
        raise BadInput(f"{where}: its profile has no {x['option']} batch {x['batch_size']} at {x['input_size']} px")
    return float(c.latency_s[at[0]]), float(c.warmup_s[at[0]])


def compare(entries: list[dict], loads, first_call: str, held_out_after: datetime, profile_dirs) -> list[dict]:
    """One result per row: the measured makespan against (a) and (b)."""
    out = []
    for entry in entries:
        row = entry["row"]
        started = _utc(entry["run"]["started_at"], f"{entry['where']}: the run's started_at")
        d = distributions(entry, loads, first_call, profile_dirs)
        r = {
            "file": entry["file"].name,
            "case": row["name"],
            "started_at": entry["run"]["started_at"],
            "rows": "held out" if started > held_out_after else "tuned on",
            "hardware": "+".join(entry["plan"]["gpus_by_type"]),
            "batch_size": "+".join(str(a["batch_size"]) for a in entry["plan"]["assignments"]),
            "images": sum(a["images_total"] for a in entry["plan"]["assignments"]),
            "p": row["p"],
            "measured_s": row["measured_s"],
            **{f"recorded_p{q}_s": row[f"p{q}_s"] for q in (5, 50, 95)},
            "loads_replaced": d["replaced"],
        }
        for name in DEFINITIONS:
            m = d[name]
            q = m.quantiles((0.05, 0.5, 0.95, row["p"]))
            r.update(
                {
                    f"{name}_p5_s": q[0.05],
                    f"{name}_p50_s": q[0.5],
                    f"{name}_p95_s": q[0.95],
                    f"{name}_quantile": m.probability(row["measured_s"]),
                    f"{name}_met_at_p": row["measured_s"] <= q[row["p"]],
                }
            )
        r["reproduced"] = max(abs(r[f"a_p{q}_s"] - r[f"recorded_p{q}_s"]) for q in (5, 50, 95)) <= REPRODUCED_S
        out.append(r)
    return out


def _utc(text: str, what: str) -> datetime:
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"{what} {text!r} is no time: give one like 2026-11-28T06:21:39Z") from None
    if when.tzinfo is None:
        raise BadInput(f"{what} {text!r} has no time zone: give one like 2026-11-28T06:21:39Z")
    return when


def report(results: list[dict], loads, first_call: str, held_out_after: str) -> str:
    """The markdown: what was compared, the summary per set of rows and definition, then every row."""
    reproduced = sum(r["reproduced"] for r in results)
    lines = [
        f"# Load definitions: {len(results)} executed plans ({', '.join(sorted({r['file'] for r in results}))})",
        "",
        f"Computed on {machine('cpu')}; the runs on {', '.join(sorted({r['hardware'] for r in results}))}, "
        f"started {min(r['started_at'] for r in results)} to {max(r['started_at'] for r in results)}. "
        f"Held out: runs started after {held_out_after}.",
        f"(a) plan: the profile's loads as the plan counts them. (b) run: its loads that counted the import "
        f"replaced by {loads.count} measured as run counts them on {loads.source}: {loads.span()}, median "
        f"{loads.median_s:.3g} s. First call and batch: {FIRST_CALL[first_call]}.",
        f"(a) reproduces the recorded p5/p50/p95 (within {REPRODUCED_S * 1000:g} ms) of {reproduced} of "
        f"{len(results)} rows" + ("." if reproduced == len(results) else _not_reproduced(first_call)),
        "",
        "| rows | definition | runs | below p5 | in [p5, p95] | above p95 | P | met at P | observed | Wilson 95% |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rows in ("tuned on", "held out"):
        group = [r for r in results if r["rows"] == rows]
        if not group:
            lines.append(f"| {rows} | - | 0 | | | | | | | |")
            continue
        for name, label in DEFINITIONS.items():
            below = sum(r["measured_s"] < r[f"{name}_p5_s"] for r in group)
            above = sum(r["measured_s"] > r[f"{name}_p95_s"] for r in group)
            head = f"| {rows} | ({name}) {label} | {len(group)} | {below} | {len(group) - below - above} | {above} |"
            for p in sorted({r["p"] for r in group}):
                at = [r for r in group if r["p"] == p]
                k = sum(r[f"{name}_met_at_p"] for r in at)
                lo, hi = wilson(k, len(at))
                lines.append(f"{head} {p:g} | {k} of {len(at)} | {k / len(at):.2f} | {lo:.2f}-{hi:.2f} |")
                head = "| | | | | | |"
    lines += [
        "",
        "Per run: the measured makespan's quantile in each distribution (below 0.05: under p5; above 0.95: over p95).",
        "",
        "| rows | case | P | batch | images | measured s | (a) p5 / p50 / p95 s | (a) quantile | (b) p5 / p50 / p95 s "
        "| (b) quantile | (a) = recorded |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        spans = {n: f"{r[f'{n}_p5_s']:.2f} / {r[f'{n}_p50_s']:.2f} / {r[f'{n}_p95_s']:.2f}" for n in DEFINITIONS}
        lines.append(
            f"| {r['rows']} | {r['case']} | {r['p']:g} | {r['batch_size']} | {r['images']:,} | {r['measured_s']:.2f} | "
            f"{spans['a']} | {r['a_quantile']:.3f} | {spans['b']}{'' if r['loads_replaced'] else ' (none replaced)'} | "
            f"{r['b_quantile']:.3f} | {'yes' if r['reproduced'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


def _not_reproduced(first_call: str) -> str:
    if first_call == "main":
        return (
            ": the others were planned by other code (before 292f79c's first-call carry) or from another "
            "profile; --first-call plan takes each plan's own first call."
        )
    return ": the others' profile or makespan model changed since they were planned."


def save(results: list[dict], text: str) -> Path:
    """A new results folder with the table and one CSV row per run (lab.py: machine, commit, times)."""
    folder = new_results(HERE)
    (folder / "load_definitions.md").write_text(text)
    with open(folder / "load_definitions.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(results[0]))
        writer.writeheader()
        writer.writerows({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} for r in results)
    finish_results(folder)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=Path(__file__).name, description=__doc__.split("\n\n")[0])
    parser.add_argument("calibration", nargs="+", type=Path, help="gpu_calibration.py's JSON-lines files")
    parser.add_argument(
        "--loads",
        nargs="+",
        type=Path,
        default=list(DEFAULT_LOADS),
        metavar="CSV",
        help="profiles whose loads were measured as run counts them (default: the H200's two)",
    )
    parser.add_argument(
        "--held-out-after",
        default=TUNED_UNTIL,
        metavar="UTC",
        help=f"runs started after this are held out (default {TUNED_UNTIL})",
    )
    parser.add_argument(
        "--first-call",
        choices=("main", "plan"),
        default="main",
        help="the first call and batch time as this checkout plans them (default), or as each plan counted them",
    )
    parser.add_argument("--profile-dir", nargs="+", type=Path, default=[], help="more folders to find profiles in")
    parser.add_argument("--no-save", action="store_true", help="print the table only, no results folder")
    args = parser.parse_args(argv)
    try:
        after = _utc(args.held_out_after, "--held-out-after")
        loads = new_path_loads(args.loads)
        results = compare(executed_rows(args.calibration), loads, args.first_call, after, args.profile_dir)
    except BadInput as exc:
        parser.error(str(exc))
    text = report(results, loads, args.first_call, args.held_out_after)
    print(text, end="")
    if not args.no_save:
        print(f"\nwritten to {save(results, text)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
