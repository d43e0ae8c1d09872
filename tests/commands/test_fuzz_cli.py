"""Fuzzing every command with bad input: no traceback, the documented exit code, one sentence on
stderr, and no file changed.

Each command is one entry of COMMANDS: a valid call, the slots that take a file, and the flags with
the kind of value each takes. The tests throw the same classes of bad input at every entry, so a new
command (run, import) is covered by adding its entry. Commands run in-process through
perfmodel.cli.main (fast); a few run in a real subprocess, where the interpreter's own exit matters.
`perfmodel profile` is only fed invalid flag values, with its sweep replaced by a tripwire: nothing
is ever measured.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest
from conftest import perfmodel_command, repo_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel import cli

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "profiles" / "cpu-resnet50-torch.csv"


# --- the commands ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """A command as the fuzz sees it: a valid call ({name} placeholders name workspace files), the
    positional slot that takes a profile (if any), its options that take input files (with the kind
    of file: profile, predictor, plan), and its flags, each with the kind of value it takes (a key
    of BAD_VALUES)."""

    name: str
    call: tuple[str, ...]
    positional_file: str | None = None  # the placeholder of the positional input, e.g. "{profile}"
    positional_kind: str = "profile"  # the kind of file the positional slot reads
    file_options: dict[str, str] = field(default_factory=dict)  # option -> the kind of file it reads
    flags: dict[str, str] = field(default_factory=dict)

    def argv(
        self, ws: Path, flag: str | None = None, value: str | None = None, drop: tuple[str, ...] = ()
    ) -> list[str]:
        """The call with `flag` set to `value` (the positional slot when flag is None and value given)."""
        names = {p.stem: str(p) for p in ws.iterdir()} | {"out": str(ws / "out")}
        tokens = [t.format(**names) for t in self.call]
        for option in drop:
            i = tokens.index(option)
            del tokens[i : i + 2]
        if flag is None and value is not None:
            tokens[tokens.index(self.positional_file.format(**names))] = value
        elif flag is not None:
            if flag in tokens:
                tokens[tokens.index(flag) + 1] = value
            else:
                tokens += [flag, value]
        return tokens


COMMANDS = {
    "plan": Command(
        "plan",
        ("plan", "--images", "1000", "--deadline", "60s", "--profile", "{profile}"),
        file_options={"--profile": "profile", "--predictor": "predictor"},
        flags={
            "--images": "count",
            "--deadline": "deadline",
            "--load-time": "duration",
            "--time-limit": "deadline",
            "--margin": "fraction",
            "--input-size": "size",
            "--mix": "mix",
            "--pool": "pool",
            "--price": "price",
            "--max-batches": "whole",
            "--gap": "gap",
            "--model": "name",
            "--backend": "name",
            "--precision": "name",
            "--use": "choice",
            "--mode": "choice",
            "--objective": "choice",
        },
    ),
    "fit": Command(
        "fit",
        ("fit", "{profile}", "--out", "{out}.json"),
        positional_file="{profile}",
        flags={"--families": "families", "--out": "outfile"},
    ),
    "report": Command(
        "report",
        ("report", "{profile}", "--out", "{out}"),
        positional_file="{profile}",
        file_options={"--predictor": "predictor", "--plan": "plan"},
        flags={"--out": "outdir"},
    ),
    "profile": Command(
        "profile",
        (
            "profile",
            "--model",
            "tiny",
            "--out",
            "{out}.csv",
            "--batch-sizes",
            "1",
            "--input-sizes",
            "32",
            "--drift-probe",
            "0",
        ),
        flags={
            "--batch-sizes": "sizes",
            "--input-sizes": "sizes",
            "--threads": "whole",
            "--max-batch-size": "whole",
            "--max-call-ms": "positive",
            "--memory-limit-mb": "positive",
            "--max-time-per-point": "positive",
            "--precision": "choice",
            "--warmup": "choice",
            "--backend": "choice",
            "--alongside": "workers",
        },
    ),
    "profile --rate": Command(
        "profile --rate",
        (
            "profile",
            "--backend",
            "triton",
            "--model",
            "tiny",
            "--out",
            "{out}.csv",
            "--batch-sizes",
            "1",
            "--input-sizes",
            "32",
            "--rate",
            "50/s",
            "--duration",
            "2s",
        ),
        flags={"--rate": "rates", "--duration": "deadline", "--server-cpus": "cores"},
    ),
    "online": Command(
        "online",
        (
            "plan",
            "--mode",
            "online",
            "--rate",
            "400/s",
            "--slo",
            "100ms",
            "--profile",
            "{profile}",
            "--input-size",
            "64",
        ),
        file_options={"--profile": "profile", "--predictor": "predictor", "--arrivals": "arrivals"},
        flags={
            "--rate": "rate",
            "--slo": "slo",
            "--percentile": "percentile",
            "--request-size": "whole",
            "--max-queue-delay": "delays",
            "--pool": "pool",
            "--price": "price",
            "--input-size": "size",
            "--objective": "choice",
            "--triton-config": "outdir",
            "--ray-serve-config": "outfile",
            "--margin": "fraction",
        },
    ),
    "import": Command(
        "import",
        (
            "import",
            "table",
            "{table}",
            "--out",
            "{out}.csv",
            "--hardware",
            "t4",
            "--model",
            "resnet50",
            "--backend",
            "tensorflow",
            "--precision",
            "fp16",
            "--input-size",
            "224",
        ),
        positional_file="{table}",
        positional_kind="table",
        flags={
            "--input-size": "size",
            "--batch-size": "sizes",
            "--hardware": "identity",
            "--out": "outfile",
            "--latency-from": "choice",
        },
    ),
    "run": Command(
        "run",
        ("run", "{plan}", "--synthetic", "--device", "cpu", "--out", "{out}.csv"),
        positional_file="{plan}",
        positional_kind="plan",
        flags={"--decode-threads": "whole", "--device": "choice", "--out": "outfile", "--address": "address"},
    ),
    "report --run": Command(
        "report --run",
        ("report", "--run", "{run}", "--out", "{out}"),
        file_options={"--run": "run"},
    ),
}

# Bad values by kind: each must be refused (exit 2) wherever that kind of value goes.
LONG = "9" * 5000
_NUMBERS = ["nan", "inf", "-inf", "1e309", "abc", "", " ", "5\x00", "²", "٣", LONG, "0x10", "1_0_", "5 5"]
BAD_VALUES = {
    "count": ["-5", "1.5", "9999999999999999", "1" + "0" * 30, "1e5", "1,2,3", *_NUMBERS],
    "deadline": ["-5s", "-1", "0", "0s", "1e309s", "60 s s", "60S", "1d", "-0.5m", *_NUMBERS],
    "duration": ["-1s", "-0.5", "1e309", "1d", *_NUMBERS],
    "fraction": ["-5%", "100%", "1.5", "nan%", "1e309%", "5", "--5%", *_NUMBERS],
    "size": ["0", "-64", "65537", "1.5", *_NUMBERS],
    "whole": ["0", "-3", "1.5", *_NUMBERS],
    "workers": ["-1", "1.5", "99999", *_NUMBERS],  # 0 is fine: alone
    "gap": ["-1", "1", "2", *_NUMBERS],
    "positive": ["0", "-1", "nan", "inf", "1e309", "abc", ""],
    "sizes": ["0", "-1", "1,,2", "a,b", "1.5", LONG, ""],
    "mix": [
        "-64=100",
        "64=-1",
        "64=1.5",
        "64=abc",
        "abc",
        "64",
        "64=50%,96=40%",
        "64=1e999%",
        f"64={LONG}",
        "=",
        "64=1,64=2",
        "64=9999999999999",
    ],
    "pool": [
        "cpu=1.5",
        "cpu=-1",
        "cpu",
        f"cpu={LONG}",
        "cpu=1000000000001",
        "h 100=1",
        "cpu=1,cpu=2",
        "\n=1",
        "nosuch=1",
        "cpu=nan",
    ],
    "price": ["cpu=-1", "cpu=nan", "cpu=inf", "cpu=1e400", "cpu=abc", "nosuch=1", "cpu=1e7", "cpu=", "cpu=1,cpu=2"],
    "name": ["nosuch", "\x1b[31mred", "a\nb", ""],
    "choice": ["nosuch", "", "-x"],
    "cores": ["", "1,,2", "3-1", "\u0661", "1.5", "-1", "99999", "0-999999"],
    "identity": ["\x1b[31mred", "a\nb", "", " "],  # a name a command writes, e.g. import --hardware
    "families": ["", "nosuch", "linear,nosuch", ","],
    "outfile": ["/dev/null", "/", "/nonexistent-dir/x.json", "", "a\x00b.json"],
    "outdir": ["/dev/null", "", "a\x00b"],
    "rate": ["0/s", "-5/s", "400/d", "1e309/s", "nan/s", "/s", "400/s/s", "1e-20/s", "1e300/s", "1e19/s", *_NUMBERS],
    "slo": ["-5s", "0", "0s", "1e309s", "60S", "8760h", "25h", *_NUMBERS],
    # 1e9/s: a schedule of 3e9 requests (it used all 24 GiB); 1e-300/s and 0.1/s over 2 s: none due in the window
    "rates": ["0/s", "-5/s", "50,,100/s", "a/s", "1e309/s", "1e9/s", "1e-300/s", "0.1/s", "50,1e9/s", *_NUMBERS],
    "percentile": ["0", "100", "-5", "101", "99.99.9", "0.99", "0.5", *_NUMBERS],
    "delays": ["-1ms", "1d", "0,,1ms", "abc", "1e309s", "10h", "100ms", "1s,2s", *_NUMBERS],
    "address": ["", "nohost:notaport", "host:99999", "a\nb:1", "ray://", "\x1b[31m:1"],
}

# Known gaps in `perfmodel profile`'s own flags: they belong to the profiler's work on issue 11 (item 8),
# listed here so that this file documents them; they pass (XPASS) once fixed.
# --- the workspace: one good input of each kind, and hostile ones ------------------------------------


def _deep(n: int) -> str:
    return "[" * n + "]" * n


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    import perfmodel
    from perfmodel import console
    from perfmodel.planning.batch import make_plan

    ws = tmp_path_factory.mktemp("fuzz")
    shutil.copy(SHIPPED, ws / "profile.csv")
    small = pd.read_csv(SHIPPED)
    small = small[small["input_size"].isin([64, 96])]
    perfmodel.fit(small, families=["piecewise"]).save(ws / "predictor.json")
    plan = make_plan(images=1000, deadline=60, profiles=[ws / "profile.csv"], input_size=64)
    (ws / "plan.json").write_text(json.dumps(console.clean_for_json(plan.to_dict())))
    for name, text in HOSTILE_TEXT.items():
        (ws / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    for name, change in HOSTILE_PROFILES.items():
        rows = pd.read_csv(SHIPPED, dtype=str, keep_default_na=False)
        column, value = change
        rows.loc[3, column] = value
        rows.to_csv(ws / name, index=False)
    predictor = json.loads((ws / "predictor.json").read_text())
    for name, change in HOSTILE_PREDICTORS.items():
        (ws / name).write_text(json.dumps(change(json.loads(json.dumps(predictor)))))
    good_plan = json.loads((ws / "plan.json").read_text())
    for name, change in HOSTILE_PLANS.items():
        (ws / name).write_text(json.dumps({**good_plan, **change}))
    from run_data import fake_run

    (ws / "run.json").write_text(json.dumps(console.clean_for_json(fake_run(ws / "plan.json"))))
    for name, change in HOSTILE_RUNS.items():
        run = json.loads((ws / "run.json").read_text())
        change(run)
        (ws / name).write_text(json.dumps(run))
    shutil.copy(REPO / "tests" / "data" / "import" / "published_table.csv", ws / "table.csv")
    (ws / "folder").mkdir()
    return ws


HOSTILE_TEXT = {
    "empty.json": "",
    "blank.csv": "\n\n",
    "binary.bin": bytes(range(256)) * 4,
    "latin1.csv": "hardware\xe9\n".encode("latin-1"),
    "deep.json": _deep(100_000),
    "deep70.json": _deep(70),
    "bigint.json": "1" * 5000,
    "nan.json": '{"status": NaN}',
    "infinity.json": '{"a": -Infinity}',
    "hugefloat.json": "[1e400]",
    "dupkeys.json": '{"status": "optimal", "status": "infeasible"}',
    "list.json": "[1, 2]",
    "string.json": '"plan"',
    "notjson.json": "{ not json",
    "nul.csv": SHIPPED.read_text().replace(",64,1,", ",64,4\x002,", 1),
    "short-row.csv": "arrival_s,note\n0,a\n1\n2,c\n",  # a truncated row
    "dupcolumn.csv": SHIPPED.read_text().replace("warmup_ms", "latency_ms", 1),
}
HOSTILE_PROFILES = {  # (column, value) put into one row of the shipped profile
    "tiny-latency.csv": ("latency_ms", "1e-300"),
    "huge-memory.csv": ("memory_mb", "1e300"),
    "huge-batch.csv": ("batch_size", "1e20"),
    "int64-batch.csv": ("batch_size", str(2**63)),
    "negative.csv": ("warmup_ms", "-1"),
    "garbage.csv": ("latency_ms", "42.1x"),
    "spaced.csv": ("batch_size", "4 2"),
    "hex.csv": ("input_size", "0x40"),
    "underscore.csv": ("memory_mb", "1_000"),
    "inf.csv": ("latency_p99_ms", "inf"),
    "unicode.csv": ("batch_size", "٤"),
    "hot.csv": ("temp_c_max", "5000"),
    "percent.csv": ("gpu_util_avg", "250"),
}


def _first_group(change):
    def apply(predictor):
        change(predictor["groups"][0])
        return predictor

    return apply


HOSTILE_PREDICTORS = {
    "negative-batches.json": _first_group(lambda g: g.update(batch_sizes=[-4, 2])),
    "float-batches.json": _first_group(lambda g: g.update(batch_sizes=[1.5, 2])),
    "text-capacity.json": _first_group(lambda g: g.update(memory_capacity_mb="lots")),
    "negative-capacity.json": _first_group(lambda g: g.update(memory_capacity_mb=-1)),
    "huge-coefficient.json": _first_group(
        lambda g: g["quantities"]["latency_ms"]["model"]["fitted"].update(knots_y=[1e300, 1e301])
    ),
    "text-range.json": _first_group(
        lambda g: g["quantities"]["latency_ms"]["report"].update(training_range={"batch_size": "ab"})
    ),
    "no-groups.json": lambda p: {**p, "groups": []},
    "text-version.json": lambda p: {**p, "schema_version": "1"},
    "future-version.json": lambda p: {**p, "schema_version": 99},
    "oom-pairs.json": _first_group(lambda g: g.update(oom_batches=[[64]])),
}
HOSTILE_PLANS = {
    "text-deadline.json": {"deadline_s": "sixty"},
    "zero-deadline.json": {"deadline_s": 0},
    "unknown-status.json": {"status": "maybe"},
    "bool-status.json": {"status": True},
    "text-count.json": {"total_gpus": "3"},
    "fraction-count.json": {"images": 1.5},
    "huge-finish.json": {"assignments": [{"hardware": "cpu", "batch_size": 4, "finish_s": 1e300}]},
    "negative-margin.json": {"margin": -0.1},
    "list-gpus.json": {"gpus_by_type": ["cpu", 3]},
    "assignment-text.json": {"assignments": ["cpu"]},
}


def _worker(key, value):
    return lambda run: run["workers"][0].update({key: value})


HOSTILE_RUNS = {  # a run of `perfmodel run --json` with one field of the wrong kind: each was a traceback
    "run-load-number.json": _worker("load_s", 5),
    "run-batch-text.json": lambda run: run["workers"][0]["batch_s"].update(measured="x"),
    "run-decode-text.json": _worker("decode_s_per_image", "fast"),
    "run-model-number.json": lambda run: run.update(model=3),
    "run-timeline-number.json": _worker("timeline", 7),
    "run-batches-text.json": _worker("timeline", {"load": [0, 1], "batches": "ab"}),
    "run-huge-time.json": _worker("timeline", {"load": [0, 1e300], "batches": []}),
    "run-backwards.json": _worker("timeline", {"load": [0, 1], "batches": [[3, 2]]}),  # drawn as nothing, exit 0
    "run-count-text.json": _worker("batch_size", "8"),
    "run-status-null.json": lambda run: run.update(status=None),
    "run-load-average-text.json": lambda run: run.update(load_avg_1m="high"),
    "run-makespan-text.json": lambda run: run.update(measured_makespan_s="soon"),
}
_ANY = ["missing.csv", "folder", "/dev/null", "line\nbreak.csv", "empty.json", "blank.csv", "binary.bin", "latin1.csv"]
_JSON = [
    "deep.json",
    "deep70.json",
    "bigint.json",
    "nan.json",
    "infinity.json",
    "hugefloat.json",
    "dupkeys.json",
    "list.json",
    "string.json",
    "notjson.json",
    "profile.csv",
]
HOSTILE_FILES = {  # by the kind of file a slot reads: the hostile ones, and good ones of another kind
    "table": [*_ANY, "nul.csv", "dupcolumn.csv", "predictor.json", "deep.json", "bigint.json"],
    "arrivals": [
        *_ANY,
        "nul.csv",
        "profile.csv",
        "predictor.json",
        "bigint.json",
        "short-row.csv",
    ],
    "profile": [*_ANY, "nul.csv", "dupcolumn.csv", *HOSTILE_PROFILES, "predictor.json", "deep.json", "bigint.json"],
    "predictor": [*_ANY, *_JSON, *HOSTILE_PREDICTORS, "plan.json"],
    "plan": [*_ANY, *_JSON, *HOSTILE_PLANS, "predictor.json"],
    "run": [*_ANY, *_JSON, *HOSTILE_RUNS, "plan.json", "predictor.json"],
}


# --- running a command and judging what it did --------------------------------------------------------


@dataclass
class Result:
    code: int
    out: str
    err: str


def invoke(capsys, argv) -> Result:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return Result(code, out, err)


def snapshot(ws: Path) -> dict:
    return {
        p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(ws.rglob("*"))
        if p.is_file()
    }


def assert_refused(result: Result, code: int = 2, mentions: str | None = None) -> str:
    """Exit `code`, and stderr ends in exactly one line 'error: <one sentence>' (warnings and progress
    lines may come before it); no traceback anywhere."""
    assert result.code == code, (result.code, result.err[-500:])
    assert "Traceback" not in result.err and "Traceback" not in result.out
    errors = [line for line in result.err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and result.err.rstrip("\n").endswith(errors[0]), result.err[-500:]
    message = errors[0]
    assert message.rstrip().endswith((".", ")")), message
    if mentions is not None:
        assert mentions in message, message
    return message


@pytest.fixture(autouse=True)
def elsewhere(tmp_path, monkeypatch):
    """Every test runs in an empty directory: a command that wrongly writes into '.' hurts nothing."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def tripwire(monkeypatch):
    """perfmodel profile's sweeps and perfmodel run's execution, replaced: an invalid flag that got this
    far would start a measurement or a Ray cluster."""
    import perfmodel.profile
    import perfmodel.run.cluster

    class Measured(Exception):
        pass

    def trip(*args, **kwargs):
        raise Measured("the sweep started: an invalid value was accepted")

    monkeypatch.setattr(perfmodel.profile, "run_profile", trip)
    monkeypatch.setattr(perfmodel.run.cluster.LocalRay, "start", trip)
    monkeypatch.setattr(perfmodel.run.cluster, "connect", trip)
    return Measured


# --- bad flag values ------------------------------------------------------------------------------------

FLAG_CASES = [
    pytest.param(name, flag, value, id=f"{name} {flag} {value[:12]!r}")
    for name, command in COMMANDS.items()
    for flag, kind in command.flags.items()
    for value in BAD_VALUES[kind]
]


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_valid_call_of_every_entry_is_accepted(ws, capsys, tripwire, name):
    """The control: each entry's own call passes every check (it succeeds, or reaches the tripwire), so
    that a refusal below is the bad value's doing, not the call's."""
    try:
        result = invoke(capsys, COMMANDS[name].argv(ws))
    except tripwire:
        return
    finally:
        shutil.rmtree(ws / "out", ignore_errors=True)
        for written in ("out.csv", "out.json"):
            (ws / written).unlink(missing_ok=True)
    assert result.code == 0, result.err[-500:]


@pytest.mark.parametrize("name, flag, value", FLAG_CASES)
def test_bad_flag_values_are_refused_in_one_sentence(ws, capsys, tripwire, name, flag, value):
    before = snapshot(ws)
    drop = ("--images",) if flag == "--mix" and "%" not in value else ()
    result = invoke(capsys, COMMANDS[name].argv(ws, flag, value, drop=drop))
    assert_refused(result)
    assert snapshot(ws) == before


@pytest.mark.parametrize(
    "flag, value, words",
    [
        ("--deadline", "-5s", "is negative"),
        ("--margin", "-5%", "is negative"),
        ("--load-time", "-1s", "is negative"),
        ("--images", "-5", "is negative"),
        ("--mix", "-64=100", "image side in pixels"),
        ("--deadline", "1e309", "too long"),
        ("--images", "9999999999999999", "too large"),
        ("--images", "1" + "0" * 40, "too large"),
        ("--pool", "cpu=1.5", "whole number of GPUs"),
        ("--price", "nosuch=1,other=2", "nosuch and other, which are not in the pool"),
        ("--price", "nosuch=1", "nosuch, which is not in the pool"),
    ],
)
def test_messages_say_what_is_wrong(ws, capsys, flag, value, words):
    drop = ("--images",) if flag == "--mix" else ()
    extra = ["--pool", "cpu=4"] if flag == "--price" else []
    result = invoke(capsys, COMMANDS["plan"].argv(ws, flag, value, drop=drop) + extra)
    assert_refused(result, mentions=words)


def test_the_largest_image_count_is_a_plain_answer(ws, capsys):
    result = invoke(capsys, COMMANDS["plan"].argv(ws, "--images", "1000000000000") + ["--json"])
    assert result.code == 0, result.err
    assert json.loads(result.out)["images_planned"] == 10**12


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    flag=st.sampled_from(
        [
            "--images",
            "--deadline",
            "--margin",
            "--load-time",
            "--input-size",
            "--pool",
            "--price",
            "--mix",
            "--max-batches",
            "--gap",
            "--confidence",
        ]
    ),
    value=st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
    | st.from_regex(r"-?[0-9]{0,20}(\.[0-9]{0,4})?(e-?[0-9]{1,4})?(ms|s|m|h|%|k|M)?", fullmatch=True),
)
def test_any_flag_value_is_a_plan_or_one_sentence(ws, capsys, flag, value):
    drop = ("--images",) if flag == "--mix" else ()
    result = invoke(capsys, COMMANDS["plan"].argv(ws, flag, value, drop=drop))
    assert result.code in (0, 2, 3), result.err
    if result.code:
        assert_refused(result, result.code)


# --- hostile files ----------------------------------------------------------------------------------------

FILE_SLOTS = [
    (name, option, kind)
    for name, command in COMMANDS.items()
    for option, kind in (
        ({None: command.positional_kind} if command.positional_file else {}) | command.file_options
    ).items()
]


@pytest.mark.parametrize("name, option, kind", FILE_SLOTS, ids=[f"{n} {o or 'positional'}" for n, o, _ in FILE_SLOTS])
def test_hostile_files_are_refused_in_one_sentence(ws, capsys, tripwire, name, option, kind):
    """Every hostile file in every file slot of every command: exit 2, one sentence, nothing written."""
    before = snapshot(ws)
    for hostile in HOSTILE_FILES[kind]:
        path = hostile if hostile.startswith("/") else str(ws / hostile)
        result = invoke(capsys, COMMANDS[name].argv(ws, option, path))
        assert result.code == 2, (hostile, result.code, result.err[-300:])
        message = assert_refused(result)
        assert "\n" not in message
        assert snapshot(ws) == before, hostile
        assert not (ws / "out").exists() and not (ws / "out.json").exists(), hostile


@pytest.mark.parametrize(
    "hostile, words",
    [
        ("deep.json", "nest more than 64 deep"),
        ("bigint.json", "5,000 digits"),
        ("nan.json", "NaN"),
        ("dupkeys.json", "names the key 'status' twice"),
        ("hugefloat.json", "too large for a float"),
        ("text-deadline.json", '"deadline_s" is "sixty"'),
        ("unknown-status.json", "'maybe'"),
    ],
)
def test_hostile_plan_files_are_named(ws, capsys, hostile, words):
    assert_refused(invoke(capsys, ["report", "--plan", ws / hostile, "--out", ws / "out"]), mentions=words)


@pytest.mark.parametrize(
    "hostile, words",
    [
        ("deep.json", "nest more than 64 deep"),
        ("bigint.json", "5,000 digits"),
        ("negative-batches.json", "batch_sizes holds -4"),
        ("text-capacity.json", "memory_capacity_mb is 'lots'"),
        ("text-version.json", 'schema_version "1", which is text'),
        ("huge-coefficient.json", "beyond 1e30"),
    ],
)
def test_hostile_predictors_are_named(ws, capsys, hostile, words):
    assert_refused(invoke(capsys, COMMANDS["plan"].argv(ws, "--predictor", str(ws / hostile))), mentions=words)


@pytest.mark.parametrize(
    "hostile, words",
    [
        ("nul.csv", "NUL byte"),
        ("tiny-latency.csv", "row 4, column 'latency_ms': 1e-300 is outside"),
        ("huge-memory.csv", "row 4, column 'memory_mb'"),
        ("huge-batch.csv", "row 4, column 'batch_size'"),
        ("garbage.csv", "'42.1x' is not a number"),
        ("dupcolumn.csv", "names the column 'latency_ms' twice"),
    ],
)
def test_hostile_profiles_name_file_row_and_column(ws, capsys, hostile, words):
    message = assert_refused(invoke(capsys, COMMANDS["fit"].argv(ws, None, str(ws / hostile))), mentions=words)
    assert hostile in message


# --- outputs never overwrite inputs ------------------------------------------------------------------------


def test_no_command_writes_over_its_input(ws, capsys, tmp_path):
    profile = tmp_path / "p.csv"
    shutil.copy(SHIPPED, profile)
    (tmp_path / "link.csv").symlink_to(profile)
    os.link(profile, tmp_path / "hard.csv")
    (tmp_path / "dir").mkdir()
    shutil.copy(SHIPPED, tmp_path / "dir" / "latency.png")  # an input where report would write a figure
    before = snapshot(tmp_path)
    for argv in (
        ["fit", "p.csv", "--out", "p.csv"],
        ["fit", "p.csv", "--out", "./p.csv"],
        ["fit", "p.csv", "--out", "link.csv"],
        ["fit", "hard.csv", "--out", "p.csv"],
        ["fit", str(profile), "--out", "../" + tmp_path.name + "/p.csv"],
        ["report", "dir/latency.png", "--out", "dir"],
    ):
        assert_refused(invoke(capsys, argv), mentions="is one of this command's inputs")
    assert snapshot(tmp_path) == before


# --- standard output that cannot be written ------------------------------------------------------------------


class FullStdout:
    """A standard output on a full disk."""

    encoding = "utf-8"

    def write(self, text):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        pass

    def isatty(self):
        return False


@pytest.mark.parametrize("name, extra", [("plan", ["--json"]), ("plan", []), ("report", ["--json"])])
def test_a_full_stdout_is_one_sentence_and_exit_1(ws, capsys, monkeypatch, tmp_path, name, extra):
    argv = (
        ["report", "--plan", ws / "plan.json", "--out", tmp_path] if name == "report" else COMMANDS[name].argv(ws)
    ) + extra
    with monkeypatch.context() as patch:
        patch.setattr(sys, "stdout", FullStdout())
        code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert_refused(Result(code, "", err), code=1, mentions="cannot write the output: No space left on device")
    again = invoke(capsys, COMMANDS["plan"].argv(ws) + ["--json"])  # nothing of the failed output is left over
    assert again.code == 0 and json.loads(again.out)["status"] == "optimal"


# --- a few in a real process: the interpreter's exit, a real /dev/full ----------------------------------------


def _perfmodel(*args, stdout=subprocess.PIPE, cwd=None):
    env = repo_env()
    return subprocess.run(
        perfmodel_command(*args),
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.integration
def test_subprocess_plan_json_into_a_full_disk(ws):
    with open("/dev/full", "w") as full:
        done = _perfmodel(*COMMANDS["plan"].argv(ws), "--json", stdout=full)
    assert_refused(Result(done.returncode, "", done.stderr), code=1, mentions="No space left on device")


@pytest.mark.integration
def test_subprocess_bad_inputs(ws, tmp_path):
    profile = tmp_path / "p.csv"
    shutil.copy(SHIPPED, profile)
    before = snapshot(tmp_path)
    for args, words in (
        (["plan", "--images", "1000", "--deadline", "-5s"], "is negative"),
        (["fit", profile, "--out", profile], "is one of this command's inputs"),
        (["report", "--plan", ws / "deep.json", "--out", tmp_path / "r"], "nest more than 64 deep"),
    ):
        done = _perfmodel(*args)
        assert_refused(Result(done.returncode, done.stdout, done.stderr), mentions=words)
    assert snapshot(tmp_path) == before


# --- what a report draws: names as written, run files checked ---------------------------------------------


def test_names_with_mathtext_are_drawn_as_written(tmp_path, capsys):
    """A model named '$\\oops$' made report fail in matplotlib's mathtext parser (ParseFatalException)."""
    import perfmodel

    rows = pd.read_csv(SHIPPED)
    rows = rows[rows["input_size"].isin([64, 96])].assign(model=r"$\oops$", backend=r"$x^$")
    rows.to_csv(tmp_path / "p.csv", index=False)
    perfmodel.fit(rows, families=["piecewise"]).save(tmp_path / "p.json")
    result = invoke(capsys, ["report", tmp_path / "p.csv", "--predictor", tmp_path / "p.json", "--out", tmp_path / "r"])
    assert result.code == 0, result.err[-500:]
    assert r"$\oops$" in (tmp_path / "r" / "report.html").read_text()


@pytest.mark.parametrize(
    "hostile, words",
    [
        ("run-load-number.json", 'worker cpu#0, "load_s" is 5, not an object'),
        ("run-batch-text.json", 'worker cpu#0, "batch_s".measured is "x", not a number'),
        ("run-huge-time.json", "a timeline entry is 1e+300, not a number of seconds within 1e+09"),
        ("run-model-number.json", '"model" is 3'),
    ],
)
def test_hostile_run_files_are_named(ws, capsys, hostile, words):
    assert_refused(invoke(capsys, ["report", "--run", ws / hostile, "--out", ws / "out"]), mentions=words)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--decode-time", "2ms"], "--decode-time"),
        (["--extrapolate"], "--extrapolate"),
    ],
)
def test_flags_that_do_nothing_online_are_refused(ws, capsys, argv, words):
    """Online --decode-time and --extrapolate were accepted and ignored."""
    assert_refused(invoke(capsys, COMMANDS["online"].argv(ws) + argv), mentions=words)


def test_flags_that_do_nothing_in_the_chosen_format_are_refused(ws, capsys):
    message = assert_refused(invoke(capsys, COMMANDS["import"].argv(ws) + ["--batch-size", "8"]))
    assert "--batch-size is for perf-analyzer files only; it does nothing for table" in message
    message = assert_refused(invoke(capsys, COMMANDS["import"].argv(ws) + ["--model-config", "c1"]))
    assert "--model-config is for model-analyzer files only" in message
    message = assert_refused(invoke(capsys, COMMANDS["fit"].argv(ws) + ["--gpu-specs", str(ws / "profile.csv")]))
    assert "add --target-hardware" in message


def test_a_sigterm_after_the_last_point_does_not_ask_for_resume(tmp_path, capsys, monkeypatch):
    """SIGTERM after the last point said 'run again with --resume to measure the rest' with nothing left."""
    import perfmodel.profile
    from perfmodel.commands.common import Terminated
    from perfmodel.profile.config import SweepEvent

    out = tmp_path / "p.csv"

    def swept(config, path, resume=False, on_progress=None):
        shutil.copy(SHIPPED, path)
        on_progress(SweepEvent("point", 2, 2, 32, 2, "ok"))
        raise Terminated()

    monkeypatch.setattr(perfmodel.profile, "run_profile", swept)
    result = invoke(capsys, ["profile", "--model", "tiny", "--out", out, "--batch-sizes", "1,2", "--input-sizes", "32"])
    assert result.code == 143
    assert "every point of the sweep is done" in result.err and "--resume" not in result.err
