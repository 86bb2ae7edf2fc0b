"""The figures and the report: produced, and saying what they mean (read back from the SVG as XML)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.summary.document import SummaryDocument
from harness.summary.figures import REWARD_LABEL, ROLLOUT_LABEL, STEP_LABEL, render_figures
from harness.summary.publish import Published
from harness.summary.report import render_report, write_report
from harness.summary.summarize import summarize

DATA = Path(__file__).resolve().parent / "data" / "captures"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def lab_published(tmp_path_factory) -> tuple[Path, Published]:
    """A copy of the lab captures, published once (the JSON and every figure): a test that publishes again, or
    changes anything, copies it first."""
    import shutil

    from harness.summary.publish import summarize_to_files

    captures = tmp_path_factory.mktemp("published") / "gpu"
    shutil.copytree(DATA / "lab", captures)
    return captures, summarize_to_files(captures)


@pytest.fixture(scope="module")
def lab_drawn(lab_published) -> tuple[SummaryDocument, dict[str, bytes]]:
    """The lab captures' summary and its comparison figures (name: SVG), as published, for the tests that read them.

    The guard's figures are left out: they are `render_guard_figures`', not `render_figures`'."""
    _, published = lab_published
    figures = {p.name: p.read_bytes() for p in published.figures if not p.name.startswith("guard-")}
    return published.document, figures


@pytest.fixture(scope="module")
def lab_figures(lab_drawn) -> tuple[SummaryDocument, dict[str, ET.Element]]:
    document, drawn = lab_drawn
    return document, {name: ET.fromstring(svg) for name, svg in drawn.items()}


def group(root: ET.Element, gid: str) -> ET.Element:
    found = [g for g in root.iter(f"{SVG}g") if g.get("id") == gid]
    assert len(found) == 1, f"no single series {gid!r}"
    return found[0]


def text_of(element: ET.Element) -> str:
    return " ".join(t.text or "" for t in element.iter(f"{SVG}text"))


def markers(element: ET.Element) -> int:
    return len(list(element.iter(f"{SVG}use")))


def test_both_figures_are_written_for_the_comparison_and_one_for_the_condition_with_seeds(lab_figures):
    _, roots = lab_figures
    # plain-48 has two seeds (plain-48, plain-48-s2): its reward across seeds; no other condition has a spread
    assert sorted(roots) == [
        "reward-e2b-dapo-filter.svg",
        "rollout-time-e2b-dapo-filter.svg",
        "seeds-reward-plain-48.svg",
    ]


def test_rollout_figure_title_caption_axes_and_series(lab_figures):
    _, roots = lab_figures
    root = roots["rollout-time-e2b-dapo-filter.svg"]
    title = "Steps that needed one batch of prompts took 1.2x the rollout time without the filter, two batches 2.1x"
    assert root.find(f"{SVG}title").text == title
    assert text_of(group(root, "title")) == title
    caption = text_of(group(root, "caption"))
    assert "Rollout seconds per step with the pause time taken out, 4 steps with seed 1" in caption
    assert "a step that dropped more than 16 groups needed a second batch" in caption
    assert "median 58.0 s" in caption
    everything = text_of(root)
    assert STEP_LABEL in everything and ROLLOUT_LABEL in everything and "(s)" in ROLLOUT_LABEL
    assert markers(group(root, "rollout-batches-1")) == 2  # steps 0 and 3
    assert markers(group(root, "rollout-batches-2")) == 2  # steps 1 and 2
    assert markers(group(root, "rollout-baseline")) == 4  # plain, 4 steps
    group(root, "rollout-baseline-median")
    assert "e2b-dapo-filter: one batch (2 steps, 1.2x)" in everything  # the legend


def test_reward_figure_title_band_and_series(lab_figures):
    _, roots = lab_figures
    root = roots["reward-e2b-dapo-filter.svg"]
    assert root.find(f"{SVG}title").text == "The mean reward before the filter read higher than every baseline run"
    caption = text_of(group(root, "caption"))
    assert "Mean reward per step over every finished answer, 4 steps with seed 1" in caption
    assert "4 baseline runs" in caption and "higher in 3 of 4 steps" in caption
    assert REWARD_LABEL in text_of(root)
    assert markers(group(root, "reward-run")) == 4
    assert markers(group(root, "reward-baseline")) == 4
    band = group(root, "reward-band")
    assert list(band.iter(f"{SVG}path"))  # the filled polygon


def test_incomplete_steps_are_drawn_apart(tmp_path):
    document = summarize(DATA / "edge")
    paths = {p.name: ET.parse(p).getroot() for p in render_figures(document, tmp_path).drawn}
    root = paths["rollout-time-old-filter.svg"]
    assert markers(group(root, "rollout-incomplete")) == 1
    assert markers(group(root, "rollout-batches-1")) == 1 and markers(group(root, "rollout-batches-2")) == 1
    reward = paths["reward-old-filter.svg"]
    # its baseline tiny-plain ran on the simulator (time scale 0.01): what the figure shows is marked
    assert reward.find(f"{SVG}title").text.startswith("SIMULATED: No comparable reward: old-filter")
    assert not [g for g in reward.iter(f"{SVG}g") if g.get("id") == "reward-run"]


def test_figures_are_deterministic(lab_drawn, tmp_path):
    document, first = lab_drawn
    second = {p.name: p.read_bytes() for p in render_figures(document, tmp_path).drawn}
    assert list(first.items()) == list(second.items())


def test_report_has_the_tables_the_verdict_and_the_figures(lab_drawn, tmp_path):
    document, drawn = lab_drawn
    for name, svg in drawn.items():  # the report links the figures beside it
        (tmp_path / name).write_bytes(svg)
    text = write_report(document, tmp_path).read_text()
    assert (
        "| e2b-dapo-filter | stopped | on | 32 | 48 | 8 | 4 of 4 | 1 | 80.0 | 150.0 | 0.705 | 0.705 | printed | 10.8 "
        "| - | 5 | 110.5 |" in text  # 5 heat-guard pauses (one left open), 110.5 trainer s paused
    )
    assert "| e2b-dapo-filter | 0.705 | 0.705 | printed |" in text  # each reward figure says where it came from
    assert "| 1 | 2 | 69.1 | 1.19x |" in text and "| 2 | 2 | 120.0 | 2.07x |" in text
    assert "| e2b-dapo-filter | 16 | 16.5 | 36 | 69 | 16 |" in text
    assert "**Verdict.** 0.705 with the filter against 0.655 for plain" in text
    assert "](rollout-time-e2b-dapo-filter.svg)" in text and "](reward-e2b-dapo-filter.svg)" in text


def test_report_without_comparisons_says_so():
    document = summarize(DATA / "lab")
    document.comparisons = []
    assert "no comparisons or figures" in render_report(document)


def test_figures_are_drawn_again_only_when_what_they_show_changes(lab_published, tmp_path):
    import shutil

    from harness.summary.publish import summarize_to_files

    published, first = lab_published
    captures = tmp_path / "gpu"
    shutil.copytree(published, captures)  # the summary and its figures too, as first drew them
    first_figures = [captures / p.relative_to(published) for p in first.figures]
    guard = sorted(p.name for p in first_figures if p.name.startswith("guard-"))
    compared = [p for p in first_figures if not p.name.startswith("guard-")]
    assert len(compared) == 3 and first.figures_unchanged == []  # the comparison's two, plain-48's across seeds
    assert guard == ["guard-e2b-dapo-filter.svg", "guard-plain.svg"]  # the runs with a guard record
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in first_figures}

    again = summarize_to_files(captures)
    assert again.figures == [] and sorted(again.figures_unchanged) == sorted(first_figures)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in first_figures} == before

    shutil.copytree(captures / "e6a-base", captures / "unrelated")  # a run no comparison names, no guard record
    assert summarize_to_files(captures).figures == []

    metrics = captures / "plain" / "metrics.jsonl"  # the baseline: what both figures show (not the guard's)
    metrics.write_text(metrics.read_text().replace('"rollout/raw_reward": 0.60', '"rollout/raw_reward": 0.61', 1))
    redrawn = summarize_to_files(captures)
    assert sorted(p.name for p in redrawn.figures) == ["reward-e2b-dapo-filter.svg", "rollout-time-e2b-dapo-filter.svg"]
    assert all(p.read_bytes() != before[p][0] for p in redrawn.figures)  # plain-48's across seeds is not plain

    samples = captures / "plain" / "guard.jsonl"  # the guard's record: its figure alone
    samples.write_text(samples.read_text().replace("70.0", "70.5", 1))
    assert [p.name for p in summarize_to_files(captures).figures] == ["guard-plain.svg"]


@pytest.mark.integration
def test_up_to_date_figures_do_not_load_matplotlib(lab_published, tmp_path):
    import shutil
    import subprocess
    import sys

    published, first = lab_published
    # the comparison's two figures, plain-48's across seeds, and the guard figures of the two runs with a guard record
    assert (len(first.figures), len(first.figures_unchanged)) == (5, 0)
    captures = tmp_path / "gpu"
    shutil.copytree(published, captures)  # as first published: the summary, and every figure up to date
    gone = captures / "summary" / "reward-e2b-dapo-filter.svg"
    probe = (
        "import sys; from harness.summary.publish import summarize_to_files\n"
        "def publish():\n"
        f"    p = summarize_to_files({str(captures)!r})\n"
        "    print(len(p.figures), len(p.figures_unchanged), 'matplotlib' in sys.modules)\n"
        f"publish(); __import__('os').unlink({str(gone)!r}); publish()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    # then, one figure gone, the same process draws it and loads matplotlib to do so: the probe sees a load
    assert [line.split() for line in done.stdout.splitlines()] == [["0", "5", "False"], ["1", "4", "True"]], done.stderr


# --- across seeds, and simulated captures ---------------------------------------------------------


@pytest.fixture(scope="module")
def seed_figures(tmp_path_factory) -> tuple[object, dict[str, ET.Element], Path]:
    from support.seedcaptures import write_three_conditions

    root = tmp_path_factory.mktemp("seeds")
    document = summarize(write_three_conditions(root / "captures", simulated=True, time_scale=0.01))
    out = root / "summary"
    paths = render_figures(document, out).drawn
    return document, {p.name: ET.parse(p).getroot() for p in paths}, out


def test_a_condition_s_reward_across_seeds_shows_the_mean_the_band_and_each_seed(seed_figures):
    document, roots, _ = seed_figures
    root = roots["seeds-reward-e2b-dapo-filter.svg"]
    spread = document.conditions["e2b-dapo-filter"].reward_mean

    title = root.find(f"{SVG}title").text
    assert title == (
        f"SIMULATED: The mean reward before the filter of e2b-dapo-filter over 4 seeds: {spread.mean:.3f} "
        f"(seeds {spread.min:.3f} to {spread.max:.3f}, SD {spread.sd:.3f})"
    )
    assert markers(group(root, "seeds-mean")) == 6  # one point per step
    assert list(group(root, "seeds-band").iter(f"{SVG}path"))
    for run in document.conditions["e2b-dapo-filter"].runs:
        group(root, f"seeds-seed-{run}")
    assert "the mean over the 4 seeds of e2b-dapo-filter" in text_of(group(root, "caption"))


def test_an_across_seed_comparison_shows_each_seed_as_a_dot_and_the_difference_with_its_interval(seed_figures):
    document, roots, _ = seed_figures
    root = roots["seeds-e2b-dapo-filter-vs-plain.svg"]
    block = document.comparisons[0].across_seeds[0]

    assert root.find(f"{SVG}title").text == (
        f"SIMULATED: With 4 seeds of e2b-dapo-filter and 3 of plain, e2b-dapo-filter read {block.difference:+.3f} "
        f"against them, and the 95% interval ({block.interval_low:+.3f} to {block.interval_high:+.3f}) excludes 0"
    )
    assert markers(group(root, "seeds-dots-e2b-dapo-filter")) == 4 and markers(group(root, "seeds-dots-plain")) == 3
    assert markers(group(root, "seeds-difference")) == 1
    group(root, "seeds-interval")
    assert "9,999 resamples" in text_of(group(root, "caption"))
    pool = roots["seeds-e2b-dapo-filter-vs-baselines.svg"]
    assert markers(group(pool, "seeds-dots-plain-48")) == 5


def test_every_figure_of_simulated_captures_says_so_and_none_of_real_ones_does(seed_figures, tmp_path):
    from support.seedcaptures import write_three_conditions

    _, roots, _ = seed_figures
    assert len(roots) == 4 * 2 + 3 + 2  # four filter runs' two figures, three conditions, two across seeds
    assert all(root.find(f"{SVG}title").text.startswith("SIMULATED: ") for root in roots.values())
    assert all(text_of(group(root, "title")).startswith("SIMULATED: ") for root in roots.values())

    real = render_figures(summarize(write_three_conditions(tmp_path / "real")), tmp_path / "out").drawn
    assert len(real) == len(roots)
    assert not any("SIMULATED" in ET.parse(p).getroot().find(f"{SVG}title").text for p in real)


def test_the_report_s_title_and_its_across_seeds_section(seed_figures):
    document, _, out = seed_figures
    text = write_report(document, out).read_text()
    block = document.comparisons[0].across_seeds[0]

    assert text.startswith(
        "# miles-gb10-lab: summary (SIMULATED)\n\n**SIMULATED.** Every run here ran on the simulated"
    )
    section = text[text.index("## Across seeds") : text.index("## e2b-dapo-filter against plain")]
    condition = document.conditions["e2b-dapo-filter"].reward_mean
    assert f"| e2b-dapo-filter (simulated) | 4 | 6 | {condition.mean:.3f} (SD {condition.sd:.3f}) |" in section
    assert (
        f"| e2b-dapo-filter against plain | 4 and 3 | {block.difference:+.3f} | "
        f"{block.interval_low:+.3f} to {block.interval_high:+.3f} | yes | {block.welch_p:.3f} |" in section
    )
    assert f"**e2b-dapo-filter against plain.** {block.verdict}" in section
    assert "](seeds-e2b-dapo-filter-vs-plain.svg)" in section and "](seeds-reward-plain-48.svg)" in section
    assert "Too few seeds" not in section


def test_the_report_says_plainly_when_the_seeds_are_too_few(tmp_path):
    document = summarize(DATA / "lab")  # one seed of the filter: nothing across seeds can be concluded
    text = render_report(document)

    assert "# miles-gb10-lab: summary\n" in text  # real captures: no mark
    section = text[text.index("## Across seeds") :]
    assert "**Too few seeds to conclude anything** for e2b-dapo-filter against plain (1 and 1 seeds)" in section
    assert "No interval across seeds: e2b-dapo-filter and plain have one seed each" in section


LONG = (
    "Rollout seconds per step with the pause time taken out, for e2b-dapo-filter against plain over 4 complete "
    "steps; each step marked by the batches of prompts it needed; the baseline's median dashed."
)


@pytest.mark.parametrize(
    "text",
    [
        LONG,
        "short",
        LONG.replace(" ", "  ", 3) + "\n" + LONG.upper(),  # doubled spaces and a line of the author's own
        "a" * 300 + " " + LONG,  # a word wider than the figure keeps a line of its own
        "$x^2$ in " + LONG,  # mathtext is measured as mathtext
    ],
)
@pytest.mark.parametrize("x, align, size", [(0.01, "left", 8.5), (0.5, "center", 11.5), (0.9, "right", 9.0)])
def test_titles_and_captions_break_where_matplotlib_s_wrap_breaks_them(text, x, align, size):
    import io

    import matplotlib
    from matplotlib.figure import Figure

    from harness.summary.svg import fit_to_width

    def svg_text(wrap: bool) -> bytes:
        figure = Figure(figsize=(9.0, 5.6))
        shown = figure.text(x, 0.5, text, fontsize=size, ha=align, wrap=wrap)
        if not wrap:
            fit_to_width(shown)
        out = io.BytesIO()
        with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "test"}):
            figure.savefig(out, format="svg", metadata={"Date": None})
        return out.getvalue()

    assert svg_text(wrap=False) == svg_text(wrap=True)
    lines = fit_to_width(Figure(figsize=(9.0, 5.6)).text(x, 0.5, text, fontsize=size, ha=align)).get_text()
    assert lines.count("\n") > text.count("\n") or text == "short"  # the long ones did break
