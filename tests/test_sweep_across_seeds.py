"""After a sweep, the answer: a sweep of two or more seeds of a condition that has a baseline ends with the
across-seeds line (or, where there is none yet, a pointer that says why and what gives it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.summary.seeds import across_seeds_after_sweep
from harness.summary.summarize import summarize
from support.messages import messages
from support.seedcaptures import write_three_conditions

REPO = Path(__file__).resolve().parent.parent
FILTER_RUNS = ["e2b-dapo-filter", "e2b-dapo-filter-s2", "e2b-dapo-filter-s3", "e2b-dapo-filter-s4"]


def test_the_lines_are_the_summary_s_across_seed_verdicts(tmp_path: Path) -> None:
    root = write_three_conditions(tmp_path / "captures")
    document = summarize(root)

    lines = across_seeds_after_sweep(document, FILTER_RUNS, "plain", f"harness summarize --capture-dir {root}")

    assert [line.split(":")[0] for line in lines] == [
        "across seeds, e2b-dapo-filter against plain",
        "across seeds, e2b-dapo-filter against plain + plain-48 (pooled)",
    ]
    block = document.comparisons[0].across_seeds[0]
    assert lines[0] == f"across seeds, e2b-dapo-filter against plain: {block.verdict}"


def test_without_a_baseline_capture_it_points_to_what_gives_the_answer(tmp_path: Path) -> None:
    import shutil

    root = write_three_conditions(tmp_path / "captures")
    for run in root.iterdir():
        if run.name.startswith("plain"):
            shutil.rmtree(run)
    document = summarize(root)

    (line,) = across_seeds_after_sweep(document, FILTER_RUNS, "plain", f"harness summarize --capture-dir {root}")

    assert line.startswith("across seeds: no capture of the baseline plain under")
    assert f"harness summarize --capture-dir {root}" in line


def test_a_sweep_of_one_seed_or_of_a_condition_without_a_baseline_says_nothing(tmp_path: Path) -> None:
    document = summarize(write_three_conditions(tmp_path / "captures"))
    assert across_seeds_after_sweep(document, FILTER_RUNS[:1], "plain", "harness summarize") == []
    assert across_seeds_after_sweep(document, ["plain", "plain-s2"], None, "harness summarize") == []


def sweep(tmp_path: Path, experiment: str, *seeds: str):
    done = CliRunner().invoke(
        app,
        [
            "sweep",
            experiment,
            "--seeds",
            *seeds,
            "--sim",
            "--sim-engine",
            "process",
            "--time-scale",
            "0.002",
            "--set",
            "steps=2",
            "--parallel",
            "2",
            "--capture-dir",
            str(tmp_path / "capture"),
            "--experiments-dir",
            str(REPO / "experiments"),
        ],
        env={"HARNESS_PROCESS_DIR": str(tmp_path / "processes"), "COLUMNS": "120"},
    )
    assert done.exit_code == 0, done.output
    return messages(done.output)


@pytest.mark.integration
def test_a_sweep_of_seeds_ends_with_the_across_seeds_line(tmp_path: Path) -> None:
    alone = sweep(tmp_path, "e2b-dapo-filter", "1", "2")  # no baseline captured yet: a pointer
    assert alone[-1].startswith("across seeds: no capture of the baseline plain under")
    baseline = sweep(tmp_path, "plain", "1", "2")  # the baseline has no baseline: nothing to add
    assert not any(m.startswith("across seeds") for m in baseline)

    again = sweep(tmp_path, "e2b-dapo-filter", "1", "2")  # both captured now (the filter's runs reused)

    assert again[-1].startswith("across seeds, e2b-dapo-filter against plain: Across 2 seeds each")
