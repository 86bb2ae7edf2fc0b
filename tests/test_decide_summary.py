"""The adaptive comparisons where people look: the summary's `decisions` block is the record as written (never
recomputed, a capture changed since only noted), valid against the schema; the report has its section and figure;
a root without records summarizes as before; `decisions` is a reserved name of the capture root."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.stats.adaptive import AdaptiveComparison, Design
from harness.stats.record import Header, Interim, append_entry, record_path
from harness.summary.serialize import dumps_summary
from harness.summary.summarize import summarize, summarize_with_warnings
from support.summaries import summary_schema_validator

DATA = Path(__file__).resolve().parent / "data" / "captures" / "lab"
VALUES = (
    {"plain": [0.61, 0.63, 0.60, 0.62, 0.64], "plain-48": [0.60, 0.62, 0.61, 0.63, 0.59]},
    {"plain": [0.62, 0.60, 0.63, 0.61, 0.62], "plain-48": [0.61, 0.60, 0.64, 0.62, 0.60]},
)


def write_record(root: Path, *, simulated: bool = False, attempt: int = 1) -> Path:
    """A record of plain against plain-48 over two interims, its decisions the comparator's, its runs the lab's."""
    path = record_path(root, "plain-vs-plain-48")
    design = Design(("plain", "plain-48"))
    header = Header(
        name="plain-vs-plain-48",
        experiments=["plain", "plain-48"],
        against_first=False,
        comparisons=["plain vs plain-48"],
        metric="reward",
        per_interim=5,
        interims=5,
        alpha=0.05,
        permutations=10_000,
        random_state=20_210,
        simulated=simulated,
        steps=4,
        conditions={"plain": "a", "plain-48": "b"},
        created_at="2026-12-01T00:00:00Z",
        adastop="0.1.3",
    )
    check = append_entry(path, header, "", root)
    comparison = AdaptiveComparison(design)
    for number, values in enumerate(VALUES, start=1):
        outcome = comparison.interim(values)
        seeds = {name: list(range(5 * number - 4, 5 * number + 1)) for name in values}
        runs = {name: [name if seed == 1 else f"{name}-s{seed}" for seed in seeds[name]] for name in values}
        interim = Interim(
            interim=number,
            seeds=seeds,
            runs=runs,
            attempts={name: [attempt] * 5 for name in values},
            values={name: list(v) for name, v in values.items()},
            reused={name: [] for name in values},
            retried=[],
            replaced=[],
            decisions={"plain vs plain-48": outcome.decisions[0]},
            decided_at={"plain vs plain-48": outcome.decided_at[0]},
            statistics={"plain vs plain-48": outcome.statistics[0]},
            differences={"plain vs plain-48": outcome.differences[0]},
            boundary=outcome.boundary,
            boundary_smaller=outcome.boundary_smaller,
            alpha_spent=outcome.alpha_spent,
            finished=outcome.finished,
            at="2026-12-01T01:00:00Z",
        )
        check = append_entry(path, interim, check, root)
    return path


@pytest.fixture
def copied_lab(tmp_path: Path) -> Path:
    copied = tmp_path / "capture"
    shutil.copytree(DATA, copied, ignore=shutil.ignore_patterns("summary"))
    return copied


def test_the_block_is_the_record_as_written_and_valid_against_the_schema(copied_lab: Path) -> None:
    write_record(copied_lab, attempt=7)  # the lab's captures are attempt 0 (from before attempts)

    summary = summarize_with_warnings(copied_lab)
    document = json.loads(dumps_summary(summary.document))

    summary_schema_validator().validate(document)
    (block,) = document["decisions"]
    assert block["interims"][0]["values"] == VALUES[0] and block["interims"][1]["values"] == VALUES[1]
    (comparison,) = block["comparisons"]
    assert comparison["decision"] == "continue" and comparison["seeds"] == 10
    assert comparison["answer"].startswith("plain vs plain-48: reward undecided after interim 2 of 5 (10 seeds each)")
    assert "p-value" not in json.dumps(block) and "welch" not in json.dumps(block).lower()
    # the captures are not those the record counted: said, and the recorded values stand
    assert any("plain is attempt 0 now, attempt 7 when interim 1 counted it" in note for note in block["notes"])
    assert not any(s.directory == "decisions" for s in summary.document.skipped)


def test_the_report_has_the_adaptive_comparison_and_its_figure_marked_simulated(copied_lab: Path) -> None:
    from harness.summary.publish import report_from_summary, summarize_to_files

    write_record(copied_lab, simulated=True)
    published = summarize_to_files(copied_lab)
    report = report_from_summary(published.summary_path).report
    assert report is not None
    text = report.read_text()

    assert "## Adaptive comparison" in text and "### plain-vs-plain-48 (SIMULATED)" in text
    assert "**plain vs plain-48: reward undecided after interim 2 of 5" in text
    figure = published.summary_path.parent / "decision-plain-vs-plain-48.svg"
    assert "SIMULATED: plain vs plain-48: reward undecided" in figure.read_text()
    assert "decision-values-plain-48" in figure.read_text()


def test_a_root_without_records_summarizes_as_before(copied_lab: Path) -> None:
    assert b'"decisions"' not in dumps_summary(summarize(copied_lab))


def test_an_edited_record_is_left_out_of_the_summary_with_a_warning(copied_lab: Path) -> None:
    path = write_record(copied_lab)
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"plain vs plain-48": "continue"', '"plain vs plain-48": "larger"')
    path.write_text("\n".join(lines) + "\n")

    summary = summarize_with_warnings(copied_lab)

    assert summary.document.decisions == []
    assert any("line 2 was changed after it was written" in warning for warning in summary.warnings)


def test_decisions_is_a_reserved_name() -> None:
    from harness.experiments.naming import check_safe_name

    with pytest.raises(ValueError, match="'decisions' is reserved: it is the adaptive comparisons' records"):
        check_safe_name("decisions")
