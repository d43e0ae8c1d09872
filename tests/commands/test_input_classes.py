"""One property test per class of input (perfmodel/readers.py), driven through every argument of that class of
every command.

The arguments come from walking perfmodel.cli's parsers; their classes from perfmodel/commands/inputs.py. The
first test fails for an argument without a class, so a new flag is checked by the class tests the day it is
added: every number flag gets non-ASCII digits, separators, NaN and infinity; every text flag control
characters; every output path a folder's name, a symbolic link, a missing folder, its own input; every flag
counts as typed at its default value. Commands run in-process (perfmodel.cli.main), profile's sweeps and
run's Ray cluster replaced by a tripwire: nothing is measured or started. Hostile input *files* are
tests/commands/test_fuzz_cli.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from perfmodel import cli, console, readers
from perfmodel.commands import inputs, profile_config
from perfmodel.commands import plan as plan_command

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "profiles" / "cpu-resnet50-torch.csv"
IMPORTS = REPO / "tests" / "data" / "import"


def parsers() -> dict[str, dict[str, argparse.Action]]:
    """command -> {argument's name in inputs.ARGUMENTS: its action}, for every subcommand of the CLI."""
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {
        command: {inputs.name_of(a): a for a in p._actions if not isinstance(a, argparse._HelpAction)}
        for command, p in sub.choices.items()
    }


PARSERS = parsers()


def of_class(cls: str) -> list[tuple[str, str]]:
    return [(c, name) for c, actions in PARSERS.items() for name in actions if inputs.ARGUMENTS[c].get(name) == cls]


def test_every_argument_of_every_command_has_a_class():
    for command, actions in PARSERS.items():
        assert command in inputs.ARGUMENTS, f"add perfmodel {command} to perfmodel/commands/inputs.py"
        table = inputs.ARGUMENTS[command]
        for name, action in actions.items():
            assert table.get(name) in inputs.CLASSES, (
                f"give {name} of perfmodel {command} a class in commands/inputs.py"
            )
            assert (table[name] == inputs.SWITCH) == isinstance(action, argparse._StoreTrueAction), name
            assert (table[name] == inputs.CHOICE) == bool(action.choices), name
        assert set(table) <= set(actions), f"commands/inputs.py names arguments perfmodel {command} lacks"


# --- the commands, each with a call that reaches every check -----------------------------------------------


@pytest.fixture(scope="module")
def ws(tmp_path_factory) -> Path:
    from perfmodel.planning.batch import make_plan

    ws = tmp_path_factory.mktemp("classes")
    shutil.copy(SHIPPED, ws / "profile.csv")
    shutil.copy(IMPORTS / "published_table.csv", ws / "table.csv")
    shutil.copy(IMPORTS / "perf_analyzer_b8.csv", ws / "pa.csv")
    shutil.copy(IMPORTS / "metrics-model-inference.csv", ws / "ma.csv")
    plan = make_plan(images=100, deadline=60, profiles=[ws / "profile.csv"], input_size=64, confidence="none")
    (ws / "plan.json").write_text(json.dumps(console.clean_for_json(plan.to_dict())))
    (ws / "images").mkdir()
    (ws / "folder").mkdir()
    for name in ("report.html", "config.pbtxt", "a.png"):  # folders where a command writes a file
        (ws / "clash" / name).mkdir(parents=True)
    (ws / "link.csv").symlink_to(ws / "elsewhere.csv")  # dangling: writing it would replace the link
    return ws


_PROFILE = ["profile", "--model", "tiny", "--out", "{ws}/out.csv", "--batch-sizes", "1", "--input-sizes", "32"]
_IMPORT = ["--out", "{ws}/out.csv", "--hardware", "t4", "--model", "resnet50", "--backend", "tf", "--precision", "fp16"]
BASES = {
    "profile": [*_PROFILE, "--drift-probe", "0"],
    "profile triton": [*_PROFILE, "--backend", "triton"],
    "profile rate": [*_PROFILE, "--backend", "triton", "--rate", "50/s"],
    "import": ["import", "table", "{ws}/table.csv", *_IMPORT, "--input-size", "224"],
    "import perf-analyzer": ["import", "perf-analyzer", "{ws}/pa.csv", *_IMPORT, "--input-size", "224"],
    "import model-analyzer": ["import", "model-analyzer", "{ws}/ma.csv", *_IMPORT, "--input-size", "224"],
    "fit": ["fit", "{ws}/profile.csv", "--out", "{ws}/out.json"],
    "fit target": ["fit", "{ws}/profile.csv", "--out", "{ws}/out.json", "--target-hardware", "h100"],
    "plan": ["plan", "--images", "1000", "--deadline", "60s", "--profile", "{ws}/profile.csv", "--input-size", "64"],
    "plan online": [
        *("plan", "--mode", "online", "--rate", "400/s", "--slo", "100ms"),
        *("--profile", "{ws}/profile.csv", "--input-size", "64"),
    ],
    "report": ["report", "{ws}/profile.csv", "--out", "{ws}/report"],
    "run": ["run", "{ws}/plan.json", "--synthetic", "--device", "cpu"],
    "run images": ["run", "{ws}/plan.json", "--images", "{ws}/images", "--device", "cpu", "--out", "{ws}/l.csv"],
}
# A number flag's value around the bad number ({}), where a bare number would be refused for another reason.
TEMPLATES = {
    ("plan", "--deadline"): "{}s",
    ("plan", "--mix"): "64={},96=100",
    ("plan", "--pool"): "cpu={}",
    ("plan", "--price"): "cpu={}",
    ("plan", "--margin"): "{}%",
    ("plan", "--load-time"): "{}s",
    ("plan", "--decode-time"): "{}ms",
    ("plan", "--time-limit"): "{}s",
    ("plan", "--rate"): "{}/s",
    ("plan", "--slo"): "{}ms",
    ("plan", "--max-queue-delay"): "0,{}ms",
    ("profile", "--batch-sizes"): "1,{}",
    ("profile", "--concurrency"): "1,{}",
    ("profile", "--rate"): "50,{}/s",
    ("profile", "--duration"): "{}s",
    ("profile", "--max-queue-delay"): "{}ms",
    ("profile", "--drift-probe"): "{}s",
    ("import", "--batch-size"): "{}",
}
DROPS = {("plan", "--mix"): ("--images", "--input-size")}  # --mix replaces them


def base_for(command: str, name: str) -> str:
    """Which call of BASES reaches the check of `name`: the mode or format it belongs to."""
    dest = PARSERS[command][name].dest
    if command == "profile":
        if dest in ("duration", "max_queue_delay", "triton_config"):
            return "profile rate"
        return "profile triton" if dest in profile_config.TRITON_ONLY else "profile"
    if command == "import":
        return {"--batch-size": "import perf-analyzer", "--model-config": "import model-analyzer"}.get(name, "import")
    if command == "fit":
        return "fit target" if name == "--gpu-specs" else "fit"
    if command == "plan":
        return "plan online" if dest in plan_command.ONLINE_ONLY else "plan"
    if command == "run":
        return "run images" if name == "--decode-threads" else "run"
    return command


def argv(ws: Path, command: str, name: str, value: str | None) -> list[str]:
    """The base call of `name` with `name` set to `value` (replacing its value there; None: a switch), as
    --flag=value, so that a value starting with '-' is a value."""
    tokens = [t.format(ws=ws) for t in BASES[base_for(command, name)]]
    for flag in (name, *DROPS.get((command, name), ())):
        if flag in tokens:
            i = tokens.index(flag)
            del tokens[i : i + 2]
    return tokens + [name if value is None else f"{name}={value}"]


@pytest.fixture(autouse=True)
def elsewhere(tmp_path, monkeypatch):
    """Every test in an empty working directory: what a command wrongly writes into '.' is seen there."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def tripwire(monkeypatch):
    """profile's sweeps and run's Ray cluster, replaced: a bad value that got this far would start them."""
    import perfmodel.profile
    import perfmodel.run.cluster

    class Started(Exception):
        pass

    def trip(*args, **kwargs):
        raise Started("the work started: a bad value was accepted")

    monkeypatch.setattr(perfmodel.profile, "run_profile", trip)
    monkeypatch.setattr(perfmodel.run.cluster.LocalRay, "start", trip)
    monkeypatch.setattr(perfmodel.run.cluster, "connect", trip)
    return Started


def refused(capsys, args: list[str], name: str) -> str:
    """Exit 2 and one sentence naming the argument: the last line of stderr, the only 'error:' one (warnings
    may come before it); no traceback; nothing on stdout."""
    code = cli.main(args)
    out, err = capsys.readouterr()
    lines = err.rstrip("\n").splitlines()
    assert code == 2, (args, code, err[-500:])
    assert "Traceback" not in err and not out, err[-500:]
    errors = [line for line in lines if line.startswith("error: ")]
    assert errors == lines[-1:], err[-500:]
    assert name in errors[0], errors[0]
    return errors[0]


def snapshot(*folders: Path) -> set:
    return {(p, p.is_dir(), p.is_symlink()) for folder in folders for p in folder.rglob("*")}


SLOW_OK = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


# --- numbers: ASCII digits only, finite ----------------------------------------------------------------------

NOT_ASCII_DIGIT = st.characters(categories=["Nd"]).filter(lambda c: not c.isascii())
DIGITS = st.text("0123456789", max_size=3)
BAD_NUMBERS = st.one_of(
    st.builds(lambda a, c, b: a + c + b, DIGITS, NOT_ASCII_DIGIT, DIGITS),  # '١٠٠', '3٣50'
    st.sampled_from(["٠.٩", "３５", "²", "1_0", "0.9_5", "nan", "NaN", "inf", "Infinity", "0x1A", "1e309", "1e999"]),
)


@pytest.mark.parametrize("command, name", of_class(inputs.NUMBER))
@SLOW_OK
@given(bad=BAD_NUMBERS)
def test_every_number_flag_refuses_what_is_no_plain_number(ws, capsys, tripwire, command, name, bad):
    value = TEMPLATES.get((command, name), "{}").format(bad)
    message = refused(capsys, argv(ws, command, name, value), name)
    assert bad in message  # the number's own reader refused it, echoing it as typed


# --- echoed text: printable, not empty, bounded ----------------------------------------------------------------

CONTROL = st.sampled_from(["\x1b[31m", "\n", "\r", "\t", "\x07", "\x00", "\x7f", "\x85", "\u202e", "\u2028", "\ud800"])
PRINTABLE = st.text(st.characters(categories=["L", "N"]), max_size=6)
BAD_TEXT = st.one_of(
    st.builds(lambda a, c, b: a + c + b, PRINTABLE, CONTROL, PRINTABLE),
    st.sampled_from(["", "   ", "a" * (readers.MAX_TEXT + 1)]),
)


@pytest.mark.parametrize("command, name", of_class(inputs.TEXT))
@SLOW_OK
@given(bad=BAD_TEXT)
def test_every_text_flag_refuses_control_characters_and_echoes_none(ws, capsys, tripwire, command, name, bad):
    code = cli.main(argv(ws, command, name, bad))
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err, err[-500:]
    assert all(c.isprintable() for line in (out + err).splitlines() for c in line), repr(err)
    assert err.startswith("error: ") and err.count("\n") == 1 and name in err, err


def test_the_library_reads_text_the_same_way():
    from perfmodel.errors import ProfileFormatError
    from perfmodel.importers import ImportSettings

    with pytest.raises(ProfileFormatError, match=r"source 'a\\x1b\[31mb' holds the control character"):
        ImportSettings(source="a\x1b[31mb")
    assert ImportSettings(source="  NVIDIA README @ 729963d ").source == "NVIDIA README @ 729963d"


# --- output paths --------------------------------------------------------------------------------------------

FOLDER_NAMES = st.from_regex(r"[a-z][a-z0-9_-]{0,8}(/|/\.|/\.\.)", fullmatch=True)
OUTPUT_INPUT = {
    "fit": "{ws}/profile.csv",
    "import": "{ws}/table.csv",
    "plan": "{ws}/profile.csv",
    "run": "{ws}/plan.json",
}


def _bad_files(ws: Path, command: str) -> list[str]:
    mine = [OUTPUT_INPUT[command].format(ws=ws)] if command in OUTPUT_INPUT else []  # profile reads no file
    return [
        "newdir/",  # the case: a file named newdir was written
        f"{ws}/folder",
        f"{ws}/folder/",
        ".",
        "..",
        f"{ws}/missing/x.csv",
        f"{ws}/profile.csv/x.csv",
        f"{ws}/link.csv",
        "/dev/null",
        "",
        *mine,
    ]


@pytest.mark.parametrize("command, name", of_class(inputs.OUTPUT_FILE))
def test_every_output_file_refuses_folders_links_devices_and_inputs(ws, capsys, tmp_path, tripwire, command, name):
    before = snapshot(ws, tmp_path)
    for bad in _bad_files(ws, command):
        refused(capsys, argv(ws, command, name, bad), name)
        assert snapshot(ws, tmp_path) == before, bad  # nothing written, no folder made, the link kept
    assert (ws / "link.csv").is_symlink() and not (ws / "elsewhere.csv").exists()


@pytest.mark.parametrize("command, name", of_class(inputs.OUTPUT_FILE))
@SLOW_OK
@given(folder=FOLDER_NAMES)
def test_no_output_file_is_written_under_a_folders_name(ws, capsys, tmp_path, tripwire, command, name, folder):
    before = snapshot(ws, tmp_path)
    refused(capsys, argv(ws, command, name, folder), name)
    assert snapshot(ws, tmp_path) == before and not os.path.lexists(folder.split("/")[0])


@pytest.mark.parametrize("command, name", of_class(inputs.OUTPUT_FOLDER))
def test_every_output_folder_refuses_files_and_what_it_cannot_write(ws, capsys, tmp_path, tripwire, command, name):
    before = snapshot(ws, tmp_path)
    for bad in (f"{ws}/profile.csv", f"{ws}/profile.csv/sub", "/dev/null", "", f"{ws}/clash"):
        refused(capsys, argv(ws, command, name, bad), name)
        assert snapshot(ws, tmp_path) == before, bad


# --- flags: typed at the default value is still typed --------------------------------------------------------

MINIMAL = {  # what each command requires, no more
    "profile": ["--model", "m", "--out", "o.csv"],
    "import": ["table", "t.csv", "--out", "o.csv"],
    "fit": ["p.csv", "--out", "o.json"],
    "plan": [],
    "report": ["--out", "o"],
    "run": ["p.json", "--synthetic"],
}


# Flags read as they are parsed (argparse types) for which '1' is no valid value.
NOT_ONE = {"pool": "cpu=1", "price": "cpu=1", "confidence": "0.9", "gap": "0"}


def _typed_value(action: argparse.Action) -> str | None:
    """A valid value for the flag: its default where it has one (the case that matters), else one of its
    choices, else '1' (or NOT_ONE's); None for a switch."""
    if isinstance(action, argparse._StoreTrueAction):
        return None
    if action.default not in (None, []):
        return str(action.default)
    return action.choices[0] if action.choices else NOT_ONE.get(action.dest, "1")


@pytest.mark.parametrize("command", list(PARSERS))
def test_every_flag_typed_is_recorded_even_at_its_default_value(command):
    parser = cli.build_parser()
    required = [command, *MINIMAL[command]]
    plain = parser.parse_args(required)
    typed_there = {a.dest for a in PARSERS[command].values() if any(s in required for s in a.option_strings)}
    assert getattr(plain, readers.GIVEN) == typed_there
    for name, action in PARSERS[command].items():
        if not action.option_strings or name in required:
            continue
        base = [t for t in required if t != "--synthetic"] if name == "--images" else required
        value = _typed_value(action)
        args = parser.parse_args([*base, name if value is None else f"{name}={value}"])
        assert readers.given(args, action.dest), (command, name)
        assert getattr(args, readers.GIVEN) - typed_there - {"synthetic"} == {action.dest}, (command, name)


# A valid value for each flag of the other mode whose default is None: typed in the wrong mode, each is refused.
VALID = {
    "images": "1000",
    "mix": "64=1000",
    "deadline": "60s",
    "load_time": "1s",
    "max_batches": "3",
    "gap": "0",
    "confidence": "0.95",
    "decode_time": "1ms",
    "rate": "400/s",
    "slo": "100ms",
    "percentile": "99",
    "request_size": "1",
    "arrivals": "{ws}/profile.csv",
    "triton_config": "{ws}/tc",
    "ray_serve_config": "{ws}/serve.json",
    "max_queue_delay": "0",
}
WRONG_MODE = [("plan online", d) for d in plan_command.BATCH_ONLY] + [("plan", d) for d in plan_command.ONLINE_ONLY]


@pytest.mark.parametrize("base, dest", WRONG_MODE)
def test_a_flag_of_the_other_plan_mode_is_refused_even_at_its_default(ws, capsys, base, dest):
    """--mode online --use p50 (or --time-limit 10s) was silently ignored: it equals the default."""
    default = plan_command.BATCH_ONLY.get(dest, plan_command.ONLINE_ONLY.get(dest))
    name = f"--{dest.replace('_', '-')}"
    value = None if default is False else (default if default is not None else VALID[dest].format(ws=ws))
    tokens = [t.format(ws=ws) for t in BASES[base]] + [name if value is None else f"{name}={value}"]
    assert "not for --mode" in refused(capsys, tokens, name)


# --- the cases of issue 41 and the fuzz's round 3 (M4, M9, M11, M12, U1, U2, U9, U10), each failing without its fix


def test_import_table_refuses_a_throughput_in_arabic_indic_digits(ws, capsys, tmp_path):
    (tmp_path / "t.csv").write_text("batch_size,throughput_ips\n1,\u0661\u0660\u0660\n8,400\n")
    args = ["import", "table", "t.csv", *[t.format(ws=ws) for t in _IMPORT], "--input-size", "224"]
    message = refused(capsys, args, "t.csv, row 1, column 'throughput_ips'")
    assert "is not a number" in message and not (ws / "out.csv").exists()


def test_import_out_newdir_slash_writes_no_file_named_newdir(ws, capsys, tmp_path):
    """M11: `--out newdir/` wrote a regular file `newdir`."""
    message = refused(capsys, argv(ws, "import", "--out", "newdir/"), "--out newdir/ names a directory")
    assert "newdir/out.csv" in message and not os.path.lexists(tmp_path / "newdir")


def test_an_escape_sequence_never_reaches_a_profile(ws, capsys, tmp_path):
    """--source $'a\\x1b[31mb' was accepted and later printed raw; a source cell with one is refused too."""
    message = refused(capsys, argv(ws, "import", "--source", "a\x1b[31mb"), "--source")
    assert "'a\\x1b[31mb' holds the control character '\\x1b'" in message
    (tmp_path / "t.csv").write_text("batch_size,throughput_ips,source\n1,100,a\x1b[31mb\n")
    args = ["import", "table", "t.csv", *[t.format(ws=ws) for t in _IMPORT], "--input-size", "224"]
    assert "column 'source'" in refused(capsys, args, "holds a control character")
    assert not (ws / "out.csv").exists()


def _plan_json(capsys, *extra) -> dict:
    base = ["plan", "--images", "1000", "--deadline", "60s", "--profile", str(SHIPPED), "--input-size", "64"]
    code = cli.main([*base, *extra, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_margin_0_typed_is_the_fixed_rule_and_conflicts_with_confidence(capsys):
    """`plan --margin 0 --use p50` gave the default probability plan: the typed margin was ignored."""
    assert _plan_json(capsys)["confidence"] == {"asked": 0.95, "rule": "probability"}
    fixed = {"asked": None, "rule": "fixed (margin, p50 or p99)"}
    assert _plan_json(capsys, "--margin", "0", "--use", "p50")["confidence"] == fixed
    assert _plan_json(capsys, "--margin=0%")["confidence"] == fixed
    args = ["plan", "--images", "1000", "--deadline", "60s", "--margin", "0", "--confidence", "0.9"]
    assert "not both" in refused(capsys, args, "--confidence")
    from perfmodel.planning.batch import make_plan

    plan = make_plan(1000, 60, profiles=[SHIPPED], input_size=64, margin=0).to_dict()
    assert plan["confidence"] == fixed  # the library: margin given (0 included) is the fixed rule, None is not


def test_confidence_is_read_in_ascii_digits_and_echoed_as_typed(capsys):
    """U1: '٠.٩' and '0.9_5' were 0.9 and 0.95; U2: 0.4999999999 was said to be 0.5."""
    base = ["plan", "--images", "1000", "--deadline", "60s", "--profile", str(SHIPPED), "--input-size", "64"]
    for bad in ("\u0660.\u0669", "0.9_5"):
        assert "is not a number" in refused(capsys, [*base, "--confidence", bad], f"--confidence {bad!r}")
    message = refused(capsys, [*base, "--confidence", "0.4999999999"], "--confidence")
    assert "not 0.4999999999;" in message
    assert readers.plain(0.4999999999) == "0.4999999999" and readers.plain(99.9999999) == "99.9999999"
    assert readers.plain(2**20) == "1,048,576" and readers.plain(0.95) == "0.95"


def test_a_percentile_is_printed_exactly(capsys):
    """M4: --percentile 99.9999999 printed 'for 100% of them'."""
    code = cli.main(
        [
            *("plan", "--mode", "online", "--rate", "20/s", "--slo", "1s", "--percentile", "99.9999999"),
            *("--profile", str(SHIPPED), "--input-size", "64", "--no-simulation"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "for 99.9999999% of them" in out and "100%" not in out


@pytest.mark.parametrize("bad", ["\u0663\u0663\u0665\u0660", "3_350", "nan", "\uff13\uff13\uff15\uff10"])
def test_gpu_specs_cells_are_read_in_ascii_digits(tmp_path, bad):
    """M9: memory_bandwidth_gbs '٣٣٥٠' and '3_350' were read as 3350."""
    import pandas as pd

    from perfmodel.errors import InputError
    from perfmodel.fitting.gpu_specs import DEFAULT_TABLE, load_gpu_specs

    table = pd.read_csv(DEFAULT_TABLE, dtype=str, keep_default_na=False)
    table.loc[0, "memory_bandwidth_gbs"] = bad
    table.to_csv(tmp_path / "specs.csv", index=False)
    with pytest.raises(InputError, match=r"row 1, column 'memory_bandwidth_gbs': .* is not a number"):
        load_gpu_specs(tmp_path / "specs.csv")


@pytest.mark.parametrize("version", ["1", "1.0", 1.0, None, [1]])
def test_a_schema_version_that_is_no_whole_number_says_what_it_is(ws, capsys, tmp_path, version):
    """M12: 'has plan schema_version '1', but this perfmodel reads version 1'."""
    plan = json.loads((ws / "plan.json").read_text())
    (tmp_path / "p.json").write_text(json.dumps({**plan, "schema_version": version}))
    message = refused(capsys, ["report", "--plan", "p.json", "--out", "r"], f"schema_version {json.dumps(version)}")
    assert ("which is text" if isinstance(version, str) else "which is not a whole number") in message
    assert not (tmp_path / "r").exists()


def test_library_switches_refuse_text(tmp_path):
    """U9: make_plan(extrapolate="no") planned with extrapolation allowed: the text was taken as true."""
    from perfmodel.errors import InputError
    from perfmodel.planning.batch import make_plan
    from perfmodel.planning.online import make_online_plan

    for bad in ("no", "false", "", None, 2):
        with pytest.raises(InputError, match=r"`extrapolate` must be True or False"):
            make_plan(1000, 60, profiles=[SHIPPED], input_size=64, extrapolate=bad)
        with pytest.raises(InputError, match=r"`simulate` must be True or False"):
            make_online_plan("20/s", "1s", profiles=[SHIPPED], input_size=64, simulate=bad)
    assert make_plan(1000, 60, profiles=[SHIPPED], input_size=64, extrapolate=0).to_dict()["status"] == "optimal"


def test_a_profiles_folder_in_the_working_directory_is_named(tmp_path, capsys):
    """U10: ./profiles silently replaced the shipped data (and its errors named files never given)."""
    (tmp_path / "profiles").mkdir()
    shutil.copy(SHIPPED, tmp_path / "profiles" / "mine.csv")
    code = cli.main(["plan", "--images", "1000", "--deadline", "60s", "--input-size", "64"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"warning: planning on the 1 file(s) in {tmp_path / 'profiles'}" in err
    (tmp_path / "profiles" / "notes.csv").write_text("a,b\n")
    assert cli.main(["plan", "--images", "1000", "--deadline", "60s", "--input-size", "64"]) == 2
    warning, error = capsys.readouterr().err.strip().splitlines()
    assert "the working directory's profiles folder" in warning and "notes.csv has no measured points" in error


def test_decode_threads_typed_with_random_inputs_is_refused_even_at_1(ws, capsys, tripwire):
    assert "--decode-threads needs --images" in refused(
        capsys, ["run", str(ws / "plan.json"), "--synthetic", "--decode-threads", "1"], "--decode-threads"
    )


@pytest.mark.parametrize("digit", ["\u00b2", "\u0663", "\uff13"])
def test_numbers_inside_text_are_ascii_too(ws, capsys, tripwire, digit):
    """A port or a GPU index in '²' passed str.isdigit() and then failed int(): a traceback for run --address."""
    from perfmodel.errors import InputError
    from perfmodel.torch_runner import check_device

    refused(capsys, ["run", str(ws / "plan.json"), "--synthetic", f"--address=127.0.0.1:80{digit}"], "--address")
    refused(capsys, argv(ws, "profile", "--url", f"127.0.0.1:80{digit}"), "--url")
    with pytest.raises(InputError, match="unknown device"):
        check_device(f"cuda:{digit}")


def test_ray_serve_settings_hold_json_numbers(tmp_path):
    from perfmodel.errors import InputError
    from perfmodel.planning.ray_serve_config import ServeSettings, read_settings, write_settings

    write_settings(tmp_path / "s.json", {"cpu": ServeSettings("cpu", 2, 8, 4, 0.001, 1.0, 0.0)}, "a plan")
    assert read_settings(tmp_path / "s.json")["cpu"].num_replicas == 2
    data = json.loads((tmp_path / "s.json").read_text())
    for bad, words in (("\u0663", "text where a positive whole number belongs"), (2.5, "not a positive whole")):
        data["deployments"]["cpu"]["num_replicas"] = bad
        (tmp_path / "s.json").write_text(json.dumps(data))
        with pytest.raises(InputError, match=f"deployment 'cpu''s num_replicas .*{words}"):
            read_settings(tmp_path / "s.json")


# --- the readers themselves -------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=12))
@example(text="0\x1f")  # str.strip() takes the separators \x1c-\x1f as spaces; float() does not
def test_decimal_reads_exactly_the_plain_ascii_numbers_float_reads(text):
    value = readers.decimal(text)
    if any(not c.isascii() for c in text.strip()) or "_" in text or "x" in text.lower():
        assert value is None
    if value is not None:
        assert value == float(text) or (value != value and float(text) != float(text))


@settings(max_examples=200, deadline=None)
@given(value=st.one_of(st.integers(), st.floats(), st.text(max_size=8), st.booleans(), st.none()))
def test_number_is_finite_or_one_sentence(value):
    from perfmodel.errors import InputError

    try:
        got = readers.number(value, "x")
    except InputError as exc:
        assert str(exc).startswith("x ") and str(exc).endswith(".") and "\n" not in str(exc)
    else:
        assert got == got and abs(got) != float("inf") and not isinstance(value, bool)


def test_whole_numbers_and_versions_say_what_is_wrong():
    from perfmodel.errors import InputError

    assert readers.whole_numbers(" 8,1 ,8", "n") == (8, 1, 8)
    for bad, words in (("0", "not a positive whole number"), ("2e3", "not a positive whole"), ("9" * 30, "too large")):
        with pytest.raises(InputError, match=words):
            readers.whole_number(bad, "n")
    with pytest.raises(InputError, match="is more than 1,048,576"):
        readers.whole_number(2**20 + 1, "n", high=2**20)
    assert readers.version({"schema_version": 2}, "f", "predictor", (1, 2), "fit again") == 2
    assert readers.version({}, "f", "plan", (1,), "h") is None
    with pytest.raises(InputError, match=r"f has the plan schema_version true, which is not a whole number"):
        readers.version({"schema_version": True}, "f", "plan", (1,), "h")
    assert readers.switch(True, "s") is True and readers.switch(0, "s") is False
    assert [readers.names_a_folder(t) for t in ("a/", ".", "a/..", "a/.b", "a.csv")] == [True, True, True, False, False]


def test_gpu_specs_text_is_printable(tmp_path):
    import pandas as pd

    from perfmodel.errors import InputError
    from perfmodel.fitting.gpu_specs import DEFAULT_TABLE, load_gpu_specs

    table = pd.read_csv(DEFAULT_TABLE, dtype=str, keep_default_na=False)
    table.loc[2, "source"] = "https://x\x1b]8;;evil\x07"
    table.to_csv(tmp_path / "specs.csv", index=False)
    with pytest.raises(InputError, match=r"row 3, column 'source' .* holds the control character '\\x1b'"):
        load_gpu_specs(tmp_path / "specs.csv")
