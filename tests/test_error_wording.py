"""Library errors name Python parameters (`confidence`); the command line shows the flag that sets each."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import perfmodel
from perfmodel import cli


def test_a_parameter_in_backquotes_becomes_its_flag_and_other_text_stays():
    flags = {"confidence": "--confidence", "batch_sizes": "--batch-size"}
    said = cli.for_the_command_line("`confidence` is 7; `batch_sizes` too; fit with `perfmodel fit`", flags)
    assert said == "--confidence is 7; --batch-size too; fit with `perfmodel fit`"
    assert cli.for_the_command_line("`unknown` stays", flags) == "`unknown` stays"


def test_the_library_names_the_parameter_and_the_command_line_the_flag(tmp_path, capsys):
    with pytest.raises(perfmodel.InputError, match="^`latency_from` must be one of"):
        perfmodel.ImportSettings(hardware="a100", model="m", latency_from="median")
    files = [tmp_path / "a.csv", tmp_path / "b.csv"]
    for f in files:
        f.write_text("Concurrency,Inferences/Second\n1,100\n")
    argv = ["import", "perf-analyzer", *map(str, files), "--batch-size", "1,2,4", "--hardware", "a100", "--model", "m"]
    assert cli.main([*argv, "--out", str(tmp_path / "p.csv")]) == 2
    said = capsys.readouterr().err
    assert "--batch-size lists 3 batch sizes for 2 files" in said and "`" not in said


# The modules whose messages name parameters; the later pass of issue 42 extends this to the whole package.
CONVERTED = (
    "perfmodel/units.py",
    "perfmodel/shipped.py",
    "perfmodel/planning/online.py",
    "perfmodel/planning/ray_serve_config.py",
    "perfmodel/planning/slo_drift.py",
    "perfmodel/planning/triton_config.py",
    "perfmodel/profile/affinity.py",
    "perfmodel/profile/lifetime.py",
    "perfmodel/profile/neighbours.py",
    "perfmodel/profile/output.py",
    "perfmodel/profile/search.py",
    "perfmodel/profile/worker_process.py",
    "perfmodel/profile/backends/triton_backend.py",
    "perfmodel/profile/backends/triton_client.py",
    "perfmodel/profile/backends/triton_process.py",
    "perfmodel/profile/backends/triton_rate.py",
    "perfmodel/profile/backends/triton_server.py",
    "perfmodel/profile/backends/triton_stats.py",
    "perfmodel/report/__init__.py",
    "perfmodel/report/build.py",
    "perfmodel/report/content.py",
    "perfmodel/report/groups.py",
    "perfmodel/report/html.py",
    "perfmodel/report/inputs.py",
    "perfmodel/report/plan_figures.py",
    "perfmodel/report/predictor_figures.py",
    "perfmodel/report/profile_figures.py",
    "perfmodel/report/run_figures.py",
    "perfmodel/report/runfile.py",
    "perfmodel/report/style.py",
    "perfmodel/report/tables.py",
    "perfmodel/fitting/train.py",
    "perfmodel/fitting/selection.py",
    "perfmodel/fitting/gpu_specs.py",
    "perfmodel/readers.py",
    "perfmodel/planning/arguments.py",
    "perfmodel/planning/basis.py",
    "perfmodel/planning/batch.py",
    "perfmodel/planning/batch_request.py",
    "perfmodel/planning/batch_search.py",
    "perfmodel/planning/batch_sources.py",
    "perfmodel/planning/batch_text.py",
    "perfmodel/planning/choice.py",
    "perfmodel/planning/context.py",
    "perfmodel/planning/drift.py",
    "perfmodel/planning/makespan.py",
    "perfmodel/planning/sources.py",
    "perfmodel/planning/spread.py",
    "perfmodel/fixed_costs.py",
    "perfmodel/schema.py",
)
ROOT = Path(__file__).resolve().parent.parent
_ARGV = {"append", "extend", "insert", "add_argument", "Popen", "run", "check_call", "check_output"}
_COMMAND = re.compile(r"`perfmodel [^`]*`")  # a whole command quoted (how to make a file) is no parameter


def _perfmodel_flags() -> set[str]:
    flags = set()
    for action in cli.build_parser()._actions:
        for command in getattr(action, "choices", None) or {}:
            flags |= {o for a in action.choices[command]._actions for o in a.option_strings if o.startswith("--")}
    return flags - {"--help", "--version"}


def _texts(node: ast.AST) -> list[str]:
    """The text of each string in `node`, an f-string's pieces joined ('{}' for each placeholder)."""
    out = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in sub.values))
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            out.append(sub.value)
    return out


def _bindings(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """name -> what the scope binds to it: assigned values, loops' iterables, parameters' defaults."""
    bound: dict[str, list[ast.AST]] = {}
    for node in ast.walk(scope):
        pairs = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        elif isinstance(node, ast.arguments):
            positional = [*node.posonlyargs, *node.args]
            pairs = list(zip(positional[len(positional) - len(node.defaults) :], node.defaults))
            pairs += [(a, d) for a, d in zip(node.kwonlyargs, node.kw_defaults) if d is not None]
        for target, value in pairs:
            names = (
                [target.arg]
                if isinstance(target, ast.arg)
                else [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
            )
            for name in names:
                bound.setdefault(name, []).append(value)
    return bound


def _messages(tree: ast.Module) -> set[tuple[int, str]]:
    """(line, text) of every message a module raises or warns, with the text built before the raise in names
    of its function (a parameter's default too) or returned by the module's functions it calls, and of every
    string handed to a call that starts with a flag (a `what` for a reader)."""
    returns: dict[str, list[ast.AST]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            returns.setdefault(node.name, []).extend(
                r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value is not None
            )
    scope_of = {}
    for scope in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        for node in ast.walk(scope):
            scope_of[node] = scope  # the innermost function wins: it is walked after the ones around it
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            said = node.exc
        elif isinstance(node, ast.Call) and _called(node) == "warn":
            said = node
        else:
            continue
        scope = scope_of[node]
        bound = _bindings(scope) if scope is not tree else {}
        seen, todo = set(), [said]
        while todo:
            part = todo.pop()
            found |= {(node.lineno, text) for text in _texts(part)}
            for name in {n.id for n in ast.walk(part) if isinstance(n, ast.Name)} - seen:
                seen.add(name)
                todo += bound.get(name, [])
            for call in {_called(n) for n in ast.walk(part) if isinstance(n, ast.Call)} - seen:
                seen.add(call)
                todo += returns.get(call, [])
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) not in _ARGV:
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, (ast.Constant, ast.JoinedStr)):
                    found |= {(node.lineno, t) for t in _texts(arg) if t.startswith("--")}
    return found


def _called(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def test_no_message_of_the_converted_modules_names_a_flag():
    flags = _perfmodel_flags()
    assert {"--rate", "--out", "--backend", "--max-batch-size"} <= flags  # the scan sees every command's flags
    flag = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w-])")
    found = [
        f"{path}:{line}: {text!r}"
        for path in CONVERTED
        for line, text in sorted(_messages(ast.parse((ROOT / path).read_text())))
        if flag.search(_COMMAND.sub("", text))
    ]
    assert not found, "name the Python parameter in backquotes instead (perfmodel/errors.py):\n" + "\n".join(found)


def test_the_scan_finds_a_flag_in_a_message_built_before_the_raise_or_by_a_function():
    source = """
def check(x, what="--rate"):
    hint = f"give --pool {x}"
    if x:
        raise InputError(f"{what} is wrong; {hint}")
    _name(x, "--price")
    raise InputError(f"`perfmodel run --json` writes it; `rate` too ({self._why()})")


def _why():
    return "--url"
"""
    texts = [t for _, t in _messages(ast.parse(source))]
    assert {"--rate", "give --pool {}", "--price", "--url"} <= set(texts)
    assert _COMMAND.sub("", "`perfmodel run --json` writes it; `rate` too") == " writes it; `rate` too"


def test_plan_online_names_parameters_and_the_command_line_their_flags(capsys):
    from perfmodel.units import parse_prices

    with pytest.raises(perfmodel.InputError, match=r"^give `rate` \(e.g. 400/s\) or `arrivals`"):
        perfmodel.make_online_plan(None, "50ms")
    with pytest.raises(perfmodel.InputError, match="^`prices` for h100: 'cheap' is not a price"):
        parse_prices("h100=cheap")
    assert cli.main(["plan", "--mode", "online", "--slo", "50ms"]) == 2
    said = capsys.readouterr().err
    assert "give --rate (e.g. 400/s) or --arrivals (a file of arrival times)" in said and "`" not in said
    assert cli.main(["plan", "--mode", "online", "--rate", "400/s", "--slo", "50ms", "--price", "h100=cheap"]) == 2
    said = capsys.readouterr().err
    assert "--price for h100: 'cheap' is not a price" in said and "`" not in said


def test_profile_with_triton_names_parameters_and_the_command_line_their_flags(tmp_path, capsys):
    from perfmodel.profile.backends.triton_backend import TritonOptions

    with pytest.raises(perfmodel.InputError, match="^`rates` 0.01/s over `duration_s` 1 s: fewer than one request"):
        TritonOptions(rates=(0.01,), duration_s=1.0)
    profile = ["profile", "--model", "tiny", "--backend", "triton", "--out", str(tmp_path / "p.csv")]
    assert cli.main([*profile, "--rate", "0.01/s", "--duration", "1s"]) == 2
    said = capsys.readouterr().err
    assert "--rate 0.01/s over --duration 1 s: fewer than one request" in said and "`" not in said
    assert cli.main([*profile, "--url", "http://127.0.0.1:8001"]) == 2
    said = capsys.readouterr().err
    assert "--url http://127.0.0.1:8001: give host:port without the scheme" in said and "`" not in said
    assert not (tmp_path / "p.csv").exists()


def test_report_names_parameters_and_the_command_line_their_flags(tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("a file, not a folder")
    with pytest.raises(perfmodel.InputError, match=r"^nothing to report: .* a predictor \(`predictors`\), a `plan`"):
        perfmodel.make_report(out_dir=tmp_path / "r")
    with pytest.raises(perfmodel.InputError, match=f"^`out_dir` {taken} is a file"):
        perfmodel.make_report(plan=tmp_path / "plan.json", out_dir=taken)
    assert cli.main(["report", "--out", str(tmp_path / "r")]) == 2
    said = capsys.readouterr().err
    assert "a predictor (--predictor), a --plan or a --run" in said and "`" not in said
    assert cli.main(["report", "--plan", str(tmp_path / "plan.json"), "--out", str(taken)]) == 2
    said = capsys.readouterr().err
    assert f"--out {taken} is a file" in said and "`" not in said
