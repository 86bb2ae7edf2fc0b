"""report.md shows text from outside (experiment and run names, notes, a published summary's strings) as written,
in every section: one rule (`markdown_text`) for every table cell and every line, so no name makes HTML, a control
sequence, a new line or a table cell of its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.summary.publish import report_from_summary, summarize_to_files
from harness.summary.report import markdown_text, render_report
from harness.summary.serialize import load_summary
from support.seedcaptures import write_run

pytestmark = pytest.mark.filterwarnings("ignore:Glyph:UserWarning")  # matplotlib has no glyph for ESC or CR

HOSTILE = "<img src=x onerror=alert(1)>\x1b[31m\r\t|x*y_"
SHOWN = markdown_text(HOSTILE)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A filter condition and a baseline condition of two seeds each, both named HOSTILE (experiment and run), the
    baseline's experiment under two configurations (a note quoting it), every section of the report there."""
    root = tmp_path_factory.mktemp("hostile") / "captures"
    baseline = f"base{HOSTILE}"
    for seed, rewards in {1: [0.60, 0.63], 2: [0.66, 0.61]}.items():
        write_run(root, baseline, seed, rewards, name=f"{baseline}-s{seed}")
    write_run(root, baseline, 3, [0.6, 0.6], name=f"{baseline}-other", extra_args="--lr 9")  # another configuration
    compare = {"baseline": f"{baseline}-s1", "baselines": [f"{baseline}-s1", f"{baseline}-s2"]}
    for seed, rewards in {1: [0.66, 0.70], 2: [0.64, 0.69]}.items():
        write_run(root, HOSTILE, seed, rewards, name=f"f{HOSTILE}-s{seed}", filter_on=True, compare=compare)
    (root / f"skip{HOSTILE}").mkdir()  # not a run: a note of the Notes section
    published = summarize_to_files(root)
    text = report_from_summary(published.summary_path, capture_dir=root).report.read_text()  # type: ignore[union-attr]
    return text


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## ", text, flags=re.M)
    return {part.split("\n", 1)[0]: part for part in parts[1:]}


def cells(line: str) -> int:
    """The cells of a table row: its `|` not escaped by a backslash, less the outer two."""
    return len(re.findall(r"(?<!\\)\|", line)) - 1


def test_no_html_no_control_character_and_no_line_break_from_a_name(report: str) -> None:
    assert "<" not in report and ">" not in report.replace("&gt;", "")
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]", report)
    text = re.sub(r"\]\([^)\s]*\)", "]()", report)  # a figure's file name, URL-quoted, aside
    assert "onerror" in text and not re.search(r"(?<!&lt;img src=x )onerror", text)
    assert all(re.fullmatch(r"[A-Za-z0-9._%~-]*", target) for target in re.findall(r"\]\(([^)]*)\)", report))


def test_every_table_row_has_its_header_s_cells(report: str) -> None:
    tables = 0
    lines = report.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            tables += 1
            width = cells(line)
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                assert cells(row) == width, row
    assert tables >= 6


def test_the_name_is_shown_as_written_in_every_section(report: str) -> None:
    found = sections(report)
    with_names = [
        "Runs",
        "Dropped groups per step (filter runs)",
        "Kept groups that taught nothing (runs without the filter)",
        "Across seeds",
        "Notes",
    ]
    for title in with_names:
        assert SHOWN in found[title], title
    comparison = next(title for title in found if title.startswith("f"))
    assert SHOWN in comparison  # the comparison's heading: run against baseline
    across = found["Across seeds"]
    assert f"| {SHOWN} |" in across  # the conditions' table
    assert f": the runs of base{SHOWN} ran under 2 configurations" in across  # a condition's note
    assert (
        f"**{SHOWN} against base{SHOWN}@" in across
    )  # the verdict's heading (the baseline: one of two configurations)


def test_a_published_summary_s_own_strings_are_escaped_too(tmp_path: Path, report: str) -> None:
    root = tmp_path / "captures"
    write_run(root, "plain", 1, [0.6])
    published = summarize_to_files(root, figures=False)
    document = load_summary(published.summary_path)
    document.generated_at = HOSTILE
    document.harness_version = HOSTILE
    document.runs["plain"].state = HOSTILE
    document.runs["plain"].reward_source = HOSTILE
    text = render_report(document)
    assert "<" not in text and "\x1b" not in text and "\r" not in text and "\t" not in text
    assert text.count(SHOWN) >= 4


def test_a_name_never_takes_a_figure_out_of_the_summary_directory_or_onto_another_s_file(tmp_path: Path) -> None:
    root = tmp_path / "captures"
    for i, name in enumerate(["x/../../../evil", "x_.._.._.._evil"]):  # the second: the first with `/` as `_`
        for seed in (1, 2):
            write_run(root, name, seed, [0.6, 0.6 + seed / 100], name=f"r{i}-{seed}")
    published = summarize_to_files(root)

    outside = [p for p in tmp_path.rglob("*.svg") if p.parent != root / "summary"]
    assert outside == [] and len(published.figures) == 2
    assert all(p.parent == root / "summary" for p in published.figures)
    text = report_from_summary(published.summary_path).report.read_text()  # type: ignore[union-attr]
    for path in published.figures:
        assert f"]({path.name})" in text  # the report links the file that was written
