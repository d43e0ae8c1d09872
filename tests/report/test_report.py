"""`perfmodel report` as a user runs it: files written, figures valid and inline, bad input one line."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import pandas as pd
import pytest
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from report_data import FakePredictor, gpu_like_profile, plan_json, write_gpu_like

from perfmodel.profile import run_profile
from perfmodel.schema import write_profile

PROFILE_FIGURES = ("latency.png", "throughput.png", "memory.png", "warmup.png")


def embedded_pngs(page: str) -> list[bytes]:
    return [base64.b64decode(data) for data in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def check_page(out, figures) -> str:
    """Every figure is a readable PNG file, and the page carries each one inline and nothing from outside."""
    page = (out / "report.html").read_text(encoding="utf-8")
    inline = embedded_pngs(page)
    for name in figures:
        path = out / name
        with Image.open(path) as image:
            image.verify()
        with Image.open(path) as image:
            assert image.format == "PNG" and min(image.size) > 300
        assert path.read_bytes() in inline, f"{name} is not embedded in the page"
    assert len(inline) == len(figures)
    text = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)
    assert not re.search(r"https?:|//[a-z]|<script|<link|<iframe|@import|url\(", text, re.IGNORECASE)
    assert not re.search(r'(src|href)="(?!data:image/png;base64,|#)', page)
    return page


@pytest.fixture
def tiny_profile(tmp_path, tiny_config):
    out = tmp_path / "tiny.csv"
    run_profile(tiny_config(batch_sizes=(1, 2, 4), input_sizes=(32, 48)), out)
    return out


def test_report_of_a_measured_profile(tmp_path, capsys, tiny_profile):
    out = tmp_path / "report" / "nested"  # created, parents too
    code, stdout, stderr = run_cli(capsys, "report", tiny_profile, "--out", out)
    assert code == 0, stderr
    page = check_page(out, PROFILE_FIGURES)
    assert "Key numbers" in page and "Provenance" in page
    assert "tiny" in page and "load average" in page and "created at" in page
    assert f"wrote {out / 'report.html'} and 4 figure(s)" in stderr


def test_overlay_of_two_profiles_and_json_output(tmp_path, capsys):
    h100 = write_gpu_like(tmp_path / "h100.csv")
    a100 = write_gpu_like(tmp_path / "a100.csv", hardware="a100", capacity_mb=40_960, speed=0.45)
    out = tmp_path / "cmp"
    code, stdout, stderr = run_cli(capsys, "report", h100, a100, "--out", out, "--json")
    assert code == 0, stderr
    written = json.loads(stdout)
    assert sorted(p.rsplit("/", 1)[1] for p in written["figures"]) == sorted(PROFILE_FIGURES)
    page = check_page(out, PROFILE_FIGURES)
    # one row per (hardware, input size) in the key numbers, each with its own largest batch and OOM
    assert re.search(r"<td>h100</td><td>224</td>.*?<td>1,024</td><td>2,048</td>", page)
    assert re.search(r"<td>a100</td><td>320</td>.*?<td>256</td><td>512</td>", page)


def test_curves_are_grouped_by_what_differs():
    import pandas as pd

    from perfmodel.report.groups import layout

    df = pd.concat([gpu_like_profile(), gpu_like_profile(hardware="a100"), gpu_like_profile(precision="fp32")])
    lay = layout(df.assign(source="x.csv"))
    assert lay.common == "resnet50, torch"
    assert {s.group for s in lay.series} == {"h100 fp16", "a100 fp16", "h100 fp32"}
    assert len({s.colour for s in lay.series}) == 3 and len({s.marker for s in lay.series}) == 2
    assert {s.smallest_oom for s in lay.series if s.input_size == 224} == {2048}


def test_predictor_curves_and_error_report(tmp_path):
    from perfmodel.report import make_sections
    from perfmodel.report.content import Table

    profile = gpu_like_profile().assign(source="h100.csv")
    sections = make_sections(profile, [FakePredictor()], None)
    predictor = next(s for s in sections if s.title.startswith("Predictor"))
    assert [f.name for f in predictor.figures] == ["fit-h100-resnet50-torch-fp16.png"]
    table = next(i for i in predictor.items if isinstance(i, Table))
    rows = {row[0]: row[1:] for row in table.rows}
    assert table.headers[1:] == ("median latency (ms)", "warm-up (ms)", "memory (MiB)", "largest batch")
    assert rows["cross-validated error, mean %"][:2] == ("1.2", "8")
    assert rows["extrapolating: to 2x the batch: worst error %"][0] == "5.5"
    assert rows["why no model"][2] == "not measured" and rows["largest ok (px → batch)"][3] == "224 → 1,024; 320 → 512"
    assert not any("_" in row[0] or "›" in row[0] for row in table.rows)  # no raw keys on the page


def test_plan_timeline(tmp_path, capsys):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_json()))
    out = tmp_path / "r"
    code, _, stderr = run_cli(capsys, "report", "--plan", plan, "--out", out)
    assert code == 0, stderr
    page = check_page(out, ("plan-timeline.png",))
    assert "3 x h100, 224 px, batch 256" in page and "a100, 320 px, batch 64" in page


def test_plan_without_optional_keys_and_an_infeasible_plan(tmp_path, capsys):
    bare = {"status": "feasible", "assignments": [{"hardware": "h100", "batch_size": 64, "finish_s": 12.5}]}
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    code, _, stderr = run_cli(capsys, "report", "--plan", tmp_path / "bare.json", "--out", tmp_path / "a")
    assert code == 0, stderr
    check_page(tmp_path / "a", ("plan-timeline.png",))

    infeasible = {"status": "infeasible", "reason": "1,000,000 images need 12 more h100", "deadline_s": 60}
    (tmp_path / "no.json").write_text(json.dumps(infeasible))
    code, _, stderr = run_cli(capsys, "report", "--plan", tmp_path / "no.json", "--out", tmp_path / "b")
    assert code == 0, stderr
    page = check_page(tmp_path / "b", ())
    assert "No plan meets the deadline: 1,000,000 images need 12 more h100" in page


def _bad_inputs(tmp_path):
    good = write_gpu_like(tmp_path / "good.csv")
    (tmp_path / "no-columns.csv").write_text("hardware,model\ncpu,tiny\n")
    (tmp_path / "not-json.json").write_text("{ not json")
    (tmp_path / "not-a-plan.json").write_text(json.dumps({"format": "perfmodel-predictor"}))
    (tmp_path / "no-assignments.json").write_text(json.dumps({"status": "optimal"}))
    bad_finish = plan_json()
    bad_finish["assignments"][1]["finish_s"] = -3
    (tmp_path / "bad-finish.json").write_text(json.dumps(bad_finish))
    (tmp_path / "a-file").write_text("")
    return [
        ([tmp_path / "missing.csv"], "missing.csv does not exist"),
        ([good, tmp_path / "no-columns.csv"], "lacks the required columns"),
        ([good, "--plan", tmp_path / "not-json.json"], "is not a plan: it is not JSON"),
        ([good, "--plan", tmp_path / "not-a-plan.json"], "is JSON but not a plan"),
        (["--plan", tmp_path / "no-assignments.json"], 'no "assignments" list'),
        (["--plan", tmp_path / "bad-finish.json"], 'assignment 2: "finish_s" is -3'),
        (["--plan", tmp_path / "missing.json"], "missing.json does not exist"),
        ([], "nothing to report"),
    ]


@pytest.mark.parametrize("case", range(8))
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, case):
    args, words = _bad_inputs(tmp_path)[case]
    out = tmp_path / "out"
    code, stdout, stderr = run_cli(capsys, "report", *args, "--out", out)
    assert code == 2, stderr
    assert words in stderr and len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    assert not out.exists()


def test_bad_predictor_file_is_one_line_exit_2(tmp_path, capsys):
    try:
        from perfmodel.fitting import Predictor  # noqa: F401
    except ImportError:
        pytest.skip("needs perfmodel.fitting")
    (tmp_path / "plan-as-predictor.json").write_text(json.dumps(plan_json()))
    for path, words in (
        (tmp_path / "missing.json", "missing.json does not exist"),
        (tmp_path / "plan-as-predictor.json", "not a perfmodel predictor"),
    ):
        code, _, stderr = run_cli(capsys, "report", "--predictor", path, "--out", tmp_path / "out")
        assert code == 2 and words in stderr and len(stderr.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()


def test_out_is_a_file(tmp_path, capsys):
    (tmp_path / "a-file").write_text("keep me")
    code, _, stderr = run_cli(capsys, "report", write_gpu_like(tmp_path / "p.csv"), "--out", tmp_path / "a-file")
    assert code == 2 and "is a file" in stderr and (tmp_path / "a-file").read_text() == "keep me"


def test_batch_labels_never_touch():
    from perfmodel.report import style

    fig, axes = style.new_figure(width=3.5, height=2.5)
    ax = axes[0, 0]
    ax.plot([1, 16384], [1, 2])
    style.batch_axis(ax, [1, 16384])
    style._thin_batch_labels(fig)
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
    assert 2 <= len(boxes) < 15
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:]))
    style.plt.close(fig)


@pytest.mark.integration
def test_import_perfmodel_does_not_import_matplotlib():
    code = "import sys, perfmodel, perfmodel.cli; assert 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# No subnormal floats: torch (imported by other tests) switches them off process-wide (flush-to-zero).
_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**6),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=False),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)
_assignment = st.dictionaries(
    st.sampled_from(
        [
            "hardware",
            "batch_size",
            "finish_s",
            "count",
            "load_s",
            "warmup_s",
            "latency_s",
            "batches",
            "input_size",
            "option",
        ]
    ),
    _values,
    max_size=10,
)
_plan = st.fixed_dictionaries(
    {"status": st.sampled_from(["optimal", "feasible"]), "assignments": st.lists(_assignment, max_size=3)},
    optional={
        k: _values
        for k in ("mode", "deadline_s", "usable_s", "margin", "makespan_s", "total_gpus", "images", "images_planned")
    },
)


@settings(max_examples=200, deadline=None)
@given(plan=_plan)
def test_any_plan_json_is_read_or_refused_in_one_sentence(tmp_path_factory, plan):
    from perfmodel.errors import InputError
    from perfmodel.report import plan_figures, tables
    from perfmodel.report.inputs import read_plan

    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps(plan))
    try:
        checked = read_plan(path)
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(path))
        return
    for a in checked["assignments"]:  # what the timeline draws from an accepted plan
        assert all(width > 0 and start >= 0 for start, width, _ in plan_figures._segments(a))
        assert plan_figures.assignment_label(a)
    assert plan_figures._title(checked).startswith("Plan: ")
    assert (
        tables.plan_summary(checked).rows and tables.plan_assignments(checked) is not None or not checked["assignments"]
    )


_seconds = st.floats(0, 1e6, allow_subnormal=False)
_good_assignment = st.fixed_dictionaries(
    {"hardware": st.text(min_size=1, max_size=5), "batch_size": st.integers(1, 2**20), "finish_s": _seconds},
    optional={
        "count": st.integers(1, 10**6),
        "load_s": _seconds,
        "warmup_s": _seconds,
        "latency_s": _seconds,
        "batches": st.integers(1, 10**4),
        "input_size": st.integers(1, 65536),
        "option": st.text(max_size=5),
    },
)
_good_plan = st.fixed_dictionaries(
    {"status": st.sampled_from(["optimal", "feasible"]), "assignments": st.lists(_good_assignment, max_size=3)},
    optional={
        "mode": st.text(max_size=5),
        "deadline_s": st.floats(1e-3, 1e6, allow_subnormal=False),
        "usable_s": _seconds,
        "margin": st.floats(0, 0.99, allow_subnormal=False),
        "makespan_s": _seconds,  # not the totals: they must be the assignments' (drawn they are not)
    },
)


@settings(max_examples=15, deadline=None)
@given(plan=_good_plan)
def test_any_accepted_plan_draws(tmp_path_factory, plan):
    from hypothesis import assume

    from perfmodel.errors import InputError
    from perfmodel.report.inputs import read_plan
    from perfmodel.report.plan_figures import timeline_figure

    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(json.dumps(plan))
    try:
        checked = read_plan(path)
    except InputError:
        assume(False)
    figure = timeline_figure(checked)
    assert (figure is None) == (not checked["assignments"])
    assert figure is None or figure.png.startswith(b"\x89PNG")


# --- figures and tables a person can read (issue 11, item 14) ------------------------------------------


@pytest.fixture
def drawn(monkeypatch):
    """Every figure the report draws, as (figure, renderer), laid out as it was saved."""
    from perfmodel.report import style

    figures = []
    original = style.to_png

    def keep(fig):
        figures.append((fig, fig.canvas.get_renderer()))  # the renderer outlives the figure's closing
        return original(fig)

    monkeypatch.setattr(style, "to_png", keep)
    return figures


def _labels_in_view(ax) -> list[str]:
    lo, hi = ax.get_ylim()
    return [t.get_text() for t, y in zip(ax.get_yticklabels(), ax.get_yticks()) if lo <= y <= hi and t.get_text()]


def test_warmup_ratio_axis_is_labelled_within_a_decade(drawn):
    from perfmodel.report import make_sections

    profile = gpu_like_profile(sizes=(224,), batches=(1, 2, 4, 8)).assign(source="a.csv")
    profile["warmup_ms"] = profile["latency_ms"] * [1.7, 1.3, 0.95, 0.85]  # ratios 0.85-1.7, as measured on CPUs
    make_sections(profile)
    ratio_axes = [ax for fig, _ in drawn for ax in fig.axes if "slower" in ax.get_title()]
    assert ratio_axes
    labels = _labels_in_view(ratio_axes[0])
    assert len(labels) >= 4 and any(float(x) > 1.5 for x in labels) and any(float(x) < 1 for x in labels), labels


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_plan_timeline_title_never_runs_into_the_legend(drawn):
    from perfmodel.report.plan_figures import timeline_figure

    plan = plan_json()
    for a in plan["assignments"]:
        a["hardware"], a["option"] = "NVIDIA-H100-80GB-HBM3-with-a-long-name", "triton fp16 grpc async c16 (predicted)"
    plan.update(mode="relaxed mode with a long name", images=987_654_321, images_planned=123_456_789)
    timeline_figure(plan)
    fig, renderer = drawn[-1]
    title = fig._suptitle.get_window_extent(renderer)
    legend = fig.legends[0].get_window_extent(renderer)
    ticks = [t.get_window_extent(renderer) for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert not _overlaps(title, legend) and not any(_overlaps(t, legend) for t in ticks)
    page = fig.get_window_extent(renderer)
    assert title.x1 <= page.x1 and title.x0 >= page.x0


def _min_width_px(table) -> float:
    """A browser's narrowest layout of the table: per column its longest word (cells wrap at spaces), at
    ~8 px a character in the page's 0.88 rem font, plus the cells' padding (2 x 0.6 rem)."""
    columns = zip(table.headers, *table.rows)
    return sum(max(len(word) for cell in column for word in str(cell).split() or [""]) * 8 + 19 for column in columns)


def test_plan_assignments_table_fits_a_1400_px_page():
    from perfmodel.report import tables

    plan = plan_json()
    for a in plan["assignments"]:
        a["hardware"], a["option"] = "NVIDIA-H100-80GB-HBM3", "triton fp16 grpc async c16 (predicted)"
    table = tables.plan_assignments(plan)
    assert _min_width_px(table) <= 1250  # the page's content column (max-width 1250 px) inside 1400 px
    assert not any("_" in h for h in table.headers)


def lost_node_run() -> dict:
    """A run file of two workers where cpu#1's node was lost at 0.5 s after one of its three batches; cpu#0
    re-ran the other two after its own two (as `perfmodel run --json` writes it, times made up)."""

    def worker(name, batches, given, status):
        pair = {"predicted": 0.1, "measured": 0.1}
        return {
            "worker": name,
            "status": status,
            "input_size": 32,
            "batch_size": 8,
            "batches_done": len(batches),
            "batches_given": given,
            "images_done": 8 * len(batches),
            **{k: dict(pair) for k in ("load_s", "warmup_s", "batch_s", "finish_s")},
            "timeline": {"load": [0.0, 0.1], "batches": batches},
        }

    return {
        "format": "perfmodel-run",
        "schema_version": 1,
        "status": "complete",
        "model": {"name": "tiny $x$"},
        "predicted_makespan_s": 0.6,
        "measured_makespan_s": 1.1,
        "error_rel": 0.83,
        "deadline_s": 1.0,
        "later_than_planned_s": 0.5,
        "lost_workers": [{"worker": "cpu#1", "lost_at_s": 0.5, "batches_done": 1, "batches_put_back": 2}],
        "rerun_batches": [
            {"owner": "cpu#1", "batch": 1, "images": 8, "worker": "cpu#0", "end_s": 0.9},
            {"owner": "cpu#1", "batch": 2, "images": 8, "worker": "cpu#0", "end_s": 1.1},
        ],
        "workers": [
            worker("cpu#0", [[0.1, 0.3], [0.3, 0.5], [0.5, 0.9], [0.9, 1.1]], 2, "done"),
            worker("cpu#1", [[0.1, 0.3]], 3, "lost"),
        ],
    }


def test_a_lost_node_is_marked_on_the_timeline_and_re_run_batches_apart():
    from matplotlib.collections import PolyCollection

    from perfmodel.report.run_figures import RERUN, draw_timeline, run_table

    fig, caption = draw_timeline(lost_node_run())
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert texts == ["node lost 0.5 s"] and "hatched" in caption
    lost_line = [line for line in ax.lines if list(line.get_xdata()) == [0.5, 0.5]]
    assert lost_line and min(lost_line[0].get_ydata()) > 0.5  # on cpu#1's row (the second), not cpu#0's
    reruns = [c for c in ax.collections if isinstance(c, PolyCollection) and c.get_hatch() == "//"]
    assert len(reruns) == 1 and len(reruns[0].get_paths()) == 2  # cpu#0's two re-run batches
    assert matplotlib_colour(reruns[0].get_facecolor()[0]) == RERUN
    assert any("re-run" in t.get_text() for t in fig.legends[0].get_texts())
    rows = {row[0]: row[3] for row in run_table(lost_node_run()).rows}
    assert rows == {"cpu#0": "2 of 2 (+2 re-run)", "cpu#1": "1 of 3 (lost at 0.5 s)"}


def matplotlib_colour(rgba) -> str:
    from matplotlib.colors import to_hex

    return to_hex(rgba)


def test_report_of_a_run_with_a_lost_node_and_of_one_without_its_keys(tmp_path, capsys):
    run = lost_node_run()
    (tmp_path / "lost.json").write_text(json.dumps(run))
    code, _, stderr = run_cli(capsys, "report", "--run", tmp_path / "lost.json", "--out", tmp_path / "a")
    assert code == 0, stderr
    page = check_page(tmp_path / "a", ["run-timeline.png"])
    assert "(+2 re-run)" in page and "lost at 0.5 s" in page and "Lost with their node: cpu#1" in page
    older = {k: v for k, v in run.items() if k not in ("lost_workers", "rerun_batches", "later_than_planned_s")}
    (tmp_path / "older.json").write_text(json.dumps(older))
    code, _, stderr = run_cli(capsys, "report", "--run", tmp_path / "older.json", "--out", tmp_path / "b")
    assert code == 0, stderr
    assert "re-run" not in check_page(tmp_path / "b", ["run-timeline.png"])


@pytest.mark.parametrize(
    "key, value, named",
    [
        ("lost_workers", 3, '"lost_workers"'),
        ("lost_workers", [{"lost_at_s": 1.0}], '"lost_workers"'),
        ("lost_workers", [{"worker": "cpu#1", "lost_at_s": "soon"}], '"lost_at_s"'),
        ("rerun_batches", [{"worker": "cpu#0", "end_s": [1]}], '"end_s"'),
    ],
)
def test_bad_lost_node_keys_are_one_line_exit_2(tmp_path, capsys, key, value, named):
    (tmp_path / "run.json").write_text(json.dumps({**lost_node_run(), key: value}))
    code, stdout, stderr = run_cli(capsys, "report", "--run", tmp_path / "run.json", "--out", tmp_path / "out")
    assert code == 2 and named in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert not (tmp_path / "out").exists()


def published_like_profile(groups: int, p99: bool = True):
    """Published curves: many (hardware, model) groups, a mean latency and often no p99, no memory or warm-up."""
    frames = []
    for g in range(groups):
        frame = gpu_like_profile(hardware=f"gpu{g}", sizes=(128,), batches=(1, 2, 4, 8, 16, 32), speed=1 + g / 10)
        frame["latency_p99_ms"] = frame["latency_p99_ms"] if p99 else float("nan")
        frame[["warmup_ms", "memory_mb", "device_memory_mb"]] = float("nan")
        frames.append(frame.assign(latency_basis="mean"))
    return pd.concat(frames, ignore_index=True).assign(source="published.csv")


def test_a_profile_without_p99_draws_its_latency_and_says_what_it_is(tmp_path, capsys):
    write_profile(published_like_profile(3, p99=False), tmp_path / "published.csv")
    code, _, stderr = run_cli(capsys, "report", tmp_path / "published.csv", "--out", tmp_path / "out")
    assert code == 0, stderr  # it was 'ValueError: Data cannot be log-scaled' for 6 of the shipped published files
    page = check_page(tmp_path / "out", ["latency.png", "throughput.png"])
    assert "Mean time of one call" in page and "gives no 99th percentile" in page and "shaded" not in page


def test_a_long_legend_is_never_cut_off_and_repeated_colours_are_said(drawn):
    from perfmodel.report import make_sections

    sections = make_sections(published_like_profile(24))
    assert any("need 24 colours and have 10" in n for s in sections for n in s.notes)
    for fig, renderer in drawn:
        page, legend = fig.get_window_extent(renderer), fig.legends[0].get_window_extent(renderer)
        assert page.y0 <= legend.y0 and legend.y1 <= page.y1 and legend.x1 <= page.x1, fig.axes[0].get_title()


def test_table_numbers_are_written_out_and_nested_values_read_as_words():
    from perfmodel.report import tables
    from perfmodel.report.style import number

    assert [number(v) for v in (2.02e-05, 9.09e-19, 0.000439, -3e-05)] == ["0.0000202", "0", "0.000439", "-0.00003"]
    report = {
        "memory_mb": {
            "training_range": {"batch_size": [1.0, 32.0]},
            "cv_errors_pct": [0.0, -1.5],
            "extrapolation": {"batch_2x": {"mape": 2.02e-05, "errors_pct": [0.0, 0.0]}},
            "measured": [[64, 1, 32]],
        }
    }
    cells = {row[0]: row[1] for row in tables.error_report("Error report", report).rows}
    assert cells["extrapolating: to 2x the batch: mean error %"] == "0.0000202"  # was 2.02e-05
    assert "fitted on (smallest, largest): batch sizes" in cells and "measured (px → smallest → largest batch)" in cells
    assert not any("pct" in measure for measure in cells)
    plan = {**plan_json(), "load_time": {"cpu": {"s": 1.9299300000000001, "source": "profile load_ms"}}}
    plan["makespan_model"] = {"drift": {"level cpu": {"rel_sd": 0.1, "corr_s": None}}}
    summary = {row[0]: row[1] for row in tables.plan_summary(plan).rows}
    assert summary["model load time"] == "cpu → (s: 1.93, source: profile load_ms)"
    assert summary["makespan model"] == "drift → (level cpu: (rel sd: 0.1, corr s: -))"


def test_the_run_table_gives_the_load_average_as_numbers():
    from perfmodel.report.run_figures import run_table

    note = run_table({**lost_node_run(), "load_avg_1m": [1.17578125, 1.54931640625]}).note
    assert "load average (1 min) 1.18 at the start, 1.55 at the end" in note  # was [1.17578125, 1.54931640625]
    assert "load average" not in run_table({**lost_node_run(), "load_avg_1m": None}).note  # was 'None'


def test_run_timeline_title_names_the_hardware_and_never_runs_into_the_legend(drawn):
    from perfmodel.report.run_figures import run_timeline

    run = {**lost_node_run(), "model": {"name": "resnet50-with-a-rather-long-name"}}
    for w in run["workers"]:
        w["hardware"] = "cpu"
    run_timeline(run)
    fig, renderer = drawn[-1]
    titles = [t for t in (fig._suptitle, fig.axes[0].title) if t is not None and t.get_text()]
    assert [t.get_text() for t in titles] == [
        "Run of resnet50-with-a-rather-long-name on cpu: complete, makespan +83.0% against the plan"
    ]
    legend = fig.legends[0].get_window_extent(renderer)
    assert not _overlaps(titles[0].get_window_extent(renderer), legend)


def test_plan_timeline_title_names_the_model_and_counts_one_gpu(drawn):
    from perfmodel.report.plan_figures import timeline_figure

    plan = {**plan_json(), "model": {"name": "resnet50", "path": None}, "total_gpus": 1, "mode": "soft"}
    timeline_figure(plan)
    fig, _ = drawn[-1]
    assert fig._suptitle.get_text().startswith("Plan for resnet50: soft mode, optimal\n1 GPU, ")  # was '1 GPUs'


def test_warm_up_measured_at_two_batches_is_not_joined_across_the_others(drawn):
    import numpy as np

    from perfmodel.report import make_sections

    profile = gpu_like_profile(sizes=(224,), batches=(1, 2, 4, 8, 16, 32, 64, 128, 256)).assign(source="a.csv")
    profile.loc[~profile["batch_size"].isin([1, 256]), "warmup_ms"] = float("nan")  # as the H200 profile has it
    make_sections(profile)
    fig = next(fig for fig, _ in drawn if fig.axes[0].get_title() == "First call vs steady state")
    warmup, steady = fig.axes[0].lines[:2]
    assert np.isnan(warmup.get_xdata()).sum() == 1  # a break between 1 and 256: no line through the gap
    assert list(steady.get_xdata()) == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # was [1, 256]
    assert np.isnan(fig.axes[1].lines[0].get_ydata()).sum() == 1


def test_log_axis_labels_just_over_a_decade_never_touch():
    from perfmodel.report import style

    fig, axes = style.new_figure(width=6, height=3.3)  # a panel of the predictor figure
    ax = axes[0, 0]
    ax.plot([1, 2], [1100, 12000])  # the H200 predictor's warm-up panel: 8,000 9,000 10,000 overlapped
    style.plain_log_y(ax)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    lo, hi = ax.get_ylim()
    shown = [t for t, y in zip(ax.get_yticklabels(), ax.get_yticks()) if lo <= y <= hi and t.get_text()]
    boxes = sorted((t.get_window_extent(renderer) for t in shown), key=lambda b: b.y0)
    assert len(boxes) >= 4 and all(a.y1 < b.y0 for a, b in zip(boxes, boxes[1:])), [t.get_text() for t in shown]


def test_every_log_axis_says_so(drawn):
    from perfmodel.report import make_sections

    make_sections(gpu_like_profile().assign(source="h100.csv"), [FakePredictor()], None)
    axes = [ax for fig, _ in drawn for ax in fig.axes if ax.get_yscale() == "log"]
    assert len(axes) >= 6  # latency, warm-up (2), the predictor's median, p99 and warm-up
    assert all("log scale" in ax.get_ylabel() for ax in axes), [ax.get_ylabel() for ax in axes]


def test_a_fitted_curve_is_dashed_past_where_its_own_quantity_was_measured(drawn):
    from perfmodel.report import make_sections

    profile = gpu_like_profile(sizes=(224,)).assign(source="h100.csv")
    profile.loc[profile["batch_size"] > 256, "warmup_ms"] = float("nan")  # warm-up measured up to 256 only
    make_sections(profile, [FakePredictor()], None)
    fig = next(fig for fig, _ in drawn if fig._suptitle is not None and "Fitted" in fig._suptitle.get_text())
    latency, warmup = fig.axes[0], fig.axes[2]
    assert max(latency.lines[0].get_xdata()) == 1024  # latency measured up to 1,024: solid to there
    assert max(warmup.lines[0].get_xdata()) == 256  # was solid to 1,024 too
    assert warmup.lines[1].get_linestyle() == "--" and min(warmup.lines[1].get_xdata()) == 256


def test_without_a_profile_the_fitted_region_tells_where_the_curve_is_dashed(drawn):
    from report_data import FakeGroup

    from perfmodel.report.predictor_figures import predictor_figure

    group = FakeGroup(input_sizes=(224,))
    group.report["warmup_ms"]["measured"] = [[224.0, 1.0, 256.0]]  # as perfmodel fit writes it
    group.report["latency_ms"]["measured"] = [[224.0, 1.0, 1024.0]]
    predictor_figure(group, None)
    fig, _ = drawn[-1]
    assert max(fig.axes[0].lines[0].get_xdata()) == 1024 and max(fig.axes[2].lines[0].get_xdata()) == 256


@pytest.mark.parametrize(
    "batches, scale", [((1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), "log"), ((1, 2, 4), "linear")]
)
def test_memory_is_on_a_log_axis_where_it_spans_decades(drawn, batches, scale):
    from perfmodel.report import make_sections

    make_sections(gpu_like_profile(batches=batches).assign(source="h100.csv"), [FakePredictor()], None)
    memory = [ax for fig, _ in drawn for ax in fig.axes if ax.get_ylabel().startswith("peak memory")]
    assert len(memory) == 2  # the profile's figure and the predictor's panel (its measured points)
    assert all(ax.get_yscale() == scale for ax in memory)  # 345 MiB to 81,000 MiB lay flat on a linear axis
    assert all(("log scale" in ax.get_ylabel()) == (scale == "log") for ax in memory)
    assert scale == "log" or all(ax.get_ylim()[0] == 0 for ax in memory)


def test_an_infeasible_plan_says_why_no_plan():
    from perfmodel.report import tables

    plan = {"status": "infeasible", "reason": "the pool finishes at most 640 of the 100,000 images"}
    rows = dict(tables.plan_summary(plan).rows)
    assert rows["why no plan"] == plan["reason"] and "why no model" not in rows  # a predictor's word, was shown


def test_the_plan_table_gives_the_margin_in_percent():
    from perfmodel.report import tables

    rows = dict(tables.plan_summary({**plan_json(), "margin": 0.41445312500000003}).rows)
    assert rows["safety margin"] == "41.4%"  # was 0.414, where the timeline's legend says 41%


def test_a_fitted_region_with_nan_is_ignored_not_a_crash(drawn):
    from report_data import FakeGroup

    from perfmodel.report.predictor_figures import predictor_figure

    group = FakeGroup(input_sizes=(224,))
    group.report["warmup_ms"]["measured"] = [[float("nan"), 1.0, 256.0]]  # JSON allows NaN
    assert predictor_figure(group, None).png.startswith(b"\x89PNG")


def test_a_fitted_curve_stops_at_twice_the_largest_batch_measured_at_its_size(drawn):
    from perfmodel.report import make_sections

    profile = gpu_like_profile().assign(source="h100.csv")
    profile = profile[(profile["input_size"] == 224) | (profile["batch_size"] <= 64)]  # 320 px: up to 64 only
    make_sections(profile, [FakePredictor()], None)
    fig = next(fig for fig, _ in drawn if fig._suptitle is not None and "Fitted" in fig._suptitle.get_text())
    ends = sorted(max(line.get_xdata()) for line in fig.axes[0].lines if line.get_linestyle() == "--")
    assert ends == [128, 2047]  # 2x per size as perfmodel plan (320 px went to 2,048); 224 px: short of its OOM


# --- the third fuzzing round (issue 41): run and plan files drawn as given -----------------------------


@pytest.mark.parametrize(
    "change, says",
    [
        (dict(schema_version=99), "has run schema_version 99, but this perfmodel reads version 1"),
        (dict(schema_version="1"), 'has the run schema_version "1", which is text'),
        (dict(measured_makespan_s=-5), '"measured_makespan_s" is -5, not a number of seconds within 1e+09, at least 0'),
        (dict(deadline_probability=7), '"deadline_probability" is 7, not a probability from 0 to 1'),
        (dict(error_rel=-3), '"error_rel" is -3, not a number, at least -1'),
    ],
)
def test_an_edited_run_file_is_refused_not_drawn(tmp_path, capsys, change, says):
    """M16, U7: a run of schema 99, a makespan of -5 s and a deadline probability of 7 were drawn (exit 0)."""
    (tmp_path / "run.json").write_text(json.dumps({**lost_node_run(), **change}))
    code, _, stderr = run_cli(capsys, "report", "--run", tmp_path / "run.json", "--out", tmp_path / "out")
    assert code == 2 and says in stderr and stderr.count("\n") == 1, stderr


def test_a_run_of_more_workers_than_drawn_says_how_many_are_drawn():
    """M16: a run of 1,000 workers drew 40 of them without a word."""
    from perfmodel.report.build import run_section

    run = lost_node_run()
    run["workers"] = [dict(run["workers"][0], worker=f"cpu#{i}") for i in range(1000)]
    run["lost_workers"] = run["rerun_batches"] = []
    assert run_section(run).notes == ("The run's timeline draws the first 40 of its 1,000 workers; the table has all.",)
    assert run_section(lost_node_run()).notes == ()


def test_the_run_timeline_says_each_worker_starts_when_its_own_model_is_loaded():
    """U8: the caption said every worker starts once all have loaded; run/execute.py submits each worker's
    batches with its load, so that it starts when its own load ends (docs/run.md, The clock)."""
    from perfmodel.report.run_figures import draw_timeline

    fig, caption = draw_timeline(lost_node_run())
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "each worker starts its batches as soon as its own model has loaded" in caption
    assert "once all have loaded" not in caption and not any("every worker loading" in t for t in legend)


@pytest.mark.parametrize(
    "quantiles, says",
    [
        ({"p50": 10.0, "p95": 1.0}, '"makespan_quantiles_s" has p95 1 s below p50 10 s'),
        ({"p50": "x"}, '"makespan_quantiles_s" gives \'p50\' the value "x", not a number of seconds'),
        ({"median": 1.0}, "\"makespan_quantiles_s\" names the quantile 'median'"),
    ],
)
def test_a_plan_with_edited_quantiles_is_refused_not_drawn(tmp_path, capsys, quantiles, says):
    """U7: quantiles p50 10 > p95 1 were drawn as given."""
    (tmp_path / "plan.json").write_text(json.dumps({**plan_json(), "makespan_quantiles_s": quantiles}))
    code, _, stderr = run_cli(capsys, "report", "--plan", tmp_path / "plan.json", "--out", tmp_path / "out")
    assert code == 2 and says in stderr and stderr.count("\n") == 1, stderr
