"""Library errors name Python parameters (`confidence`); the command line shows the flag that sets each."""

from __future__ import annotations

import ast
import json
import re
import warnings
from pathlib import Path

import pytest

import perfmodel
from perfmodel import cli, console, exit_codes


def test_a_parameter_in_backquotes_becomes_its_flag_and_other_text_stays():
    flags = {"confidence": "--confidence", "batch_sizes": "--batch-size"}
    said = console.for_the_command_line("`confidence` is 7; `batch_sizes` too; fit with `perfmodel fit`", flags)
    assert said == "--confidence is 7; --batch-size too; fit with `perfmodel fit`"
    assert console.for_the_command_line("`unknown` stays", flags) == "`unknown` stays"


def test_perfmodel_warnings_name_the_flag_on_the_command_line_and_other_warnings_stay(capsys):
    with console.show_warnings({"margin": "--margin"}):
        warnings.warn("`margin` 50% is large", perfmodel.PerfmodelWarning, stacklevel=1)
        warnings.warn("`margin` is another library's word", UserWarning, stacklevel=1)
    said = capsys.readouterr().err
    assert "warning: --margin 50% is large\n" in said
    assert "warning: `margin` is another library's word (UserWarning from" in said


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
    settings = perfmodel.ImportSettings(model="m", backend="triton", precision="fp32", batch_sizes=(1,))
    with pytest.raises(perfmodel.InputError, match="does not say its hardware, input size: give `hardware`, `input_s"):
        perfmodel.import_profile("perf-analyzer", files[:1], settings)
    argv = [*argv[:2], str(files[0]), "--batch-size", "1", "--model", "m", "--backend", "triton", "--precision", "fp32"]
    assert cli.main([*argv, "--out", str(tmp_path / "p.csv")]) == 2
    said = capsys.readouterr().err
    assert "does not say its hardware, input size: give --hardware, --input-size." in said and "`" not in said


# The modules whose messages name parameters: the whole package but the command line's own modules (CLI_SIDE).
CONVERTED = (
    "perfmodel/units.py",
    "perfmodel/shipped.py",
    "perfmodel/__init__.py",
    "perfmodel/__main__.py",
    "perfmodel/_torchvision.py",
    "perfmodel/_version.py",
    "perfmodel/errors.py",
    "perfmodel/files.py",
    "perfmodel/lazy.py",
    "perfmodel/loading.py",
    "perfmodel/memory.py",
    "perfmodel/models.py",
    "perfmodel/torch_runner.py",
    "perfmodel/importers/__init__.py",
    "perfmodel/importers/common.py",
    "perfmodel/importers/model_analyzer.py",
    "perfmodel/importers/perf_analyzer.py",
    "perfmodel/importers/table.py",
    "perfmodel/profile/__init__.py",
    "perfmodel/profile/config.py",
    "perfmodel/profile/failures.py",
    "perfmodel/profile/grid.py",
    "perfmodel/profile/monitor.py",
    "perfmodel/profile/provenance.py",
    "perfmodel/profile/sweep.py",
    "perfmodel/profile/timing.py",
    "perfmodel/profile/worker.py",
    "perfmodel/profile/backends/__init__.py",
    "perfmodel/profile/backends/torch_sweep.py",
    "perfmodel/fitting/__init__.py",
    "perfmodel/fitting/accuracy.py",
    "perfmodel/fitting/features.py",
    "perfmodel/fitting/folds.py",
    "perfmodel/fitting/gpu_effects.py",
    "perfmodel/fitting/predictor.py",
    "perfmodel/fitting/predictor_arguments.py",
    "perfmodel/fitting/predictor_file.py",
    "perfmodel/fitting/regressors.py",
    "perfmodel/fitting/report.py",
    "perfmodel/fitting/synthetic.py",
    "perfmodel/fitting/transfer.py",
    "perfmodel/fitting/transfer_curves.py",
    "perfmodel/fitting/transfer_guesses.py",
    "perfmodel/fitting/traffic.py",
    "perfmodel/planning/online.py",
    "perfmodel/planning/online_configs.py",
    "perfmodel/planning/online_request.py",
    "perfmodel/planning/online_sources.py",
    "perfmodel/planning/online_text.py",
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
    "perfmodel/planning/__init__.py",
    "perfmodel/planning/makespan.py",
    "perfmodel/planning/sources.py",
    "perfmodel/planning/spread.py",
    "perfmodel/fixed_costs.py",
    "perfmodel/schema.py",
    "perfmodel/run/__init__.py",
    "perfmodel/run/budget.py",
    "perfmodel/run/cluster.py",
    "perfmodel/run/execute.py",
    "perfmodel/run/images.py",
    "perfmodel/run/keeper.py",
    "perfmodel/run/labels.py",
    "perfmodel/run/plan_fields.py",
    "perfmodel/run/planfile.py",
    "perfmodel/run/progress.py",
    "perfmodel/run/raynode.py",
    "perfmodel/run/replan.py",
    "perfmodel/run/result.py",
    "perfmodel/run/shares.py",
    "perfmodel/run/state.py",
    "perfmodel/run/steal.py",
    "perfmodel/run/text.py",
    "perfmodel/run/worker.py",
)
ROOT = Path(__file__).resolve().parent.parent
_ARGV = {"append", "extend", "insert", "add_argument", "Popen", "run", "check_call", "check_output"}
# A whole command named (how to make a file) is no parameter: quoted, or its name and flags in a sentence.
_COMMAND = re.compile(r"`perfmodel [^`]*`|\bperfmodel [a-z_]+(?: --[\w-]+)*")
# The command line's own modules, which name flags: the parser, its commands, what it prints, the exit codes'
# descriptions in its --help.
CLI_SIDE = ("perfmodel/cli.py", "perfmodel/console.py", "perfmodel/exit_codes.py", "perfmodel/commands/")


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


def test_the_scan_covers_the_library():
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "perfmodel").rglob("*.py")}
    left = {m for m in modules - set(CONVERTED) if not m.startswith(CLI_SIDE)}
    assert not left, f"add them to CONVERTED, their messages naming parameters: {sorted(left)}"
    assert set(CONVERTED) <= modules


def _strings(tree: ast.Module) -> set[tuple[int, str]]:
    """(line, text) of every string of a module but its docstrings and argv (a lone flag, an add_argument's
    help): the text it raises, returns, writes in a row or reports as progress."""
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
            skip.add(first.value)  # a docstring
        if isinstance(node, ast.Call) and _called(node) == "add_argument":  # triton_server.py's own flags
            skip |= set(ast.walk(node))
        if isinstance(node, ast.JoinedStr):
            skip |= set(node.values)  # read joined: a quoted command may hold placeholders
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Constant, ast.JoinedStr)) and node not in skip:
            text = _texts(node)[:1]  # the node's own text (a JoinedStr's joined), none for a number
            found |= {(node.lineno, t) for t in text if not re.fullmatch(r"--[\w-]+", t)}
    return found


def test_no_text_of_the_converted_modules_names_a_flag():
    """Beyond what they raise: a row's error, a search's reason, a fit's note reach a person too (a command
    prints them through console.for_the_command_line)."""
    flags = _perfmodel_flags()
    flag = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, flags)) + r")(?![\w-])")
    found = [
        f"{path}:{line}: {text!r}"
        for path in CONVERTED
        for line, text in sorted(_strings(ast.parse((ROOT / path).read_text())))
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


def test_profile_with_torch_names_parameters_and_the_command_line_their_flags(tmp_path, capsys, monkeypatch):
    from perfmodel.profile import ProfileConfig, SweepEvent
    from perfmodel.profile.search import search_batch_sizes
    from perfmodel.torch_runner import TorchOptions

    with pytest.raises(perfmodel.InputError, match="^`compile_mode` max-autotune is a mode of torch.compile: add `c"):
        TorchOptions(compile_mode="max-autotune")
    with pytest.raises(perfmodel.InputError, match="^`fresh_warmup_at` chooses .*: it needs `warmup` fresh-process"):
        ProfileConfig(model="tiny", fresh_warmup_at=(1,), warmup="in-process")
    profile = ["profile", "--model", "tiny", "--out", str(tmp_path / "p.csv")]
    assert cli.main([*profile, "--fresh-warmup-at", "1", "--warmup", "in-process"]) == 2
    said = capsys.readouterr().err
    assert "--fresh-warmup-at chooses where fresh processes measure the warm-up: it needs --warmup" in said
    assert "`" not in said
    # Progress text a command prints: the search's reason, the estimate's assumption.
    reason = search_batch_sizes(lambda b: {"status": "ok", "latency_ms": 9.0}, 1024, 5.0).reason
    assert reason == "a call at batch 1 took 9 ms (over `max_call_ms` 5)"

    def one_search(config, out, resume, on_progress):  # the sweep's first note, then Ctrl-C
        on_progress(SweepEvent("search", input_size=224, message=reason))
        raise KeyboardInterrupt

    monkeypatch.setattr("perfmodel.profile.run_profile", one_search)
    assert cli.main([*profile, "--batch-sizes", "auto"]) == exit_codes.INTERRUPTED
    assert "224 px: a call at batch 1 took 9 ms (over --max-call-ms 5)" in capsys.readouterr().err
    assert cli.main([*profile, "--batch-sizes", "auto", "--max-call-ms", "500", "--estimate"]) == 0
    said = capsys.readouterr().err
    assert "(--max-call-ms: the search stops after a slower one)" in said and "`" not in said
    assert not (tmp_path / "p.csv").exists()


def test_fit_names_parameters_and_the_command_line_their_flags(tmp_path, capsys):
    from perfmodel.schema import load_profile

    frame = load_profile(ROOT / "profiles/reference/dle-tensorflow-resnet50.csv")
    fp16, a100 = frame["precision"] == "fp16", frame["hardware"] == "a100"
    only_a100 = (frame["backend"] == "tensorflow") & a100 & (frame["precision"] == "tf32")
    xla = (frame["backend"] == "tensorflow-xla") & (a100 | (frame["hardware"] == "t4")) & fp16
    frame[only_a100 | xla].to_csv(tmp_path / "p.csv", index=False)
    out = tmp_path / "a100.json"
    assert cli.main(["fit", str(tmp_path / "p.csv"), "--target-hardware", "a100", "--out", str(out)]) == 0
    said = capsys.readouterr().err
    # tensorflow was profiled on the a100 only: not transferred, said in the file with the parameter's name
    assert "name another GPU with --target-hardware, or fit without --target-hardware" in said and "`" not in said
    (skipped,) = perfmodel.Predictor.load(out).provenance["transfer"]["skipped"]
    assert "name another GPU with `target_hardware`, or fit without `target_hardware`" in skipped


def test_run_names_parameters_and_the_command_line_their_flags(tmp_path, capsys, monkeypatch):
    """Without Ray: each refusal comes before anything starts."""
    from run_data import make_images, write_plan

    from perfmodel.run import cluster as clusters
    from perfmodel.run.execute import RunOptions, check_model, prepare_inputs
    from perfmodel.run.planfile import read_run_plan

    def refused(*argv) -> str:
        assert cli.main(["run", *map(str, argv)]) == 2
        said = capsys.readouterr().err
        assert "`" not in said
        return said

    path = write_plan(tmp_path, 40, 0.2)
    plan = read_run_plan(path)
    with pytest.raises(perfmodel.InputError, match="^`address` 'nowhere' is not host:port"):
        clusters.resolve_address("nowhere")
    assert "--address 'nowhere' is not host:port" in refused(path, "--synthetic", "--address", "nowhere")
    # --resume with a file that is not a run's labels
    folder, labels = tmp_path / "images", tmp_path / "labels.csv"
    make_images(folder, 40)
    labels.write_text("path,class\nx.jpg,1\n")
    with pytest.raises(perfmodel.InputError, match="belongs to\\): give another `out`, or move it away"):
        prepare_inputs(plan, RunOptions(images=str(folder), out=str(labels), resume=True))
    said = refused(path, "--images", folder, "--out", labels, "--resume")
    assert "belongs to): give another --out, or move it away." in said
    # --images problems
    with pytest.raises(perfmodel.InputError, match=f"^`images` {tmp_path / 'nowhere'} does not exist: give a folder"):
        prepare_inputs(plan, RunOptions(images=str(tmp_path / "nowhere")))
    assert f"--images {path} is a file, not a folder" in refused(path, "--images", path)
    # a plan needing more CPUs than this machine has: re-plan with a smaller pool (perfmodel plan's flag)
    with pytest.raises(perfmodel.InputError, match=r"re-plan with a smaller `pool` \(e.g. `pool` cpu=2\)"):
        clusters.place(["cpu"] * 3, "cpu", [{"Resources": {"CPU": 2}}])
    monkeypatch.setattr(clusters.os, "cpu_count", lambda: 2)
    three = write_plan(tmp_path, 1000, 0.2, pool={"cpu": 3}, mode="relaxed", name="three.json")
    assert "re-plan with a smaller --pool (e.g. --pool cpu=2)" in refused(three, "--synthetic")
    # RunOptions.model_path is --model; a precision perfmodel run does not execute is perfmodel plan's --precision
    data = json.loads(path.read_text())
    data["model"] = {"name": "mynet", "path": None}
    for row in data["gpus"] + data["assignments"]:
        row["precision"] = "int8"
    path.write_text(json.dumps(data))
    with pytest.raises(perfmodel.InputError, match=r"re-plan with `precision` fp16"):
        read_run_plan(path)
    assert "re-plan with --precision fp16 (or another of them)." in refused(path, "--synthetic")
    for row in data["gpus"] + data["assignments"]:
        row["precision"] = "fp32"
    path.write_text(json.dumps(data))
    with pytest.raises(perfmodel.InputError, match=r"give its TorchScript file \(a .pt\) as `model_path`"):
        check_model(read_run_plan(path), RunOptions(synthetic=True))
    assert "give its TorchScript file (a .pt) as --model." in refused(path, "--synthetic")
