"""`harness report` never mixes two attempts of a run: a capture newer than the summary is summarized first.

What decides it is the captures' own facts (each run's current attempt, its
status.json's start and state) against what the summary recorded, not file
modification times; the guard figures are drawn from the attempt the summary
read.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.summary.guard_figure import guard_fingerprint, render_guard_figures
from harness.summary.publish import default_summary_path, summarize_to_files
from harness.summary.serialize import load_summary
from harness.summary.staleness import captures_now, changes_since
from support.seedcaptures import write_run


def as_attempts(root: Path, run: str, numbers: list[int], current: int) -> None:
    """Turn `<root>/<run>` (a run's own directory) into attempts `numbers`, copies of it, with `current` linked."""
    attempts = root / ".attempts" / run
    attempts.mkdir(parents=True)
    for number in numbers:
        shutil.copytree(root / run, attempts / str(number))
        status = json.loads((attempts / str(number) / "status.json").read_text())
        status["started_at"] = f"2027-01-2{number}T00:00:00.000000Z"  # after the other runs' start
        (attempts / str(number) / "status.json").write_text(json.dumps(status))
    shutil.rmtree(root / run)
    os.symlink(Path(".attempts") / run / str(current), root / run)


def make_current(root: Path, run: str, number: int) -> None:
    (root / run).unlink()
    os.symlink(Path(".attempts") / run / str(number), root / run)


def guard_record(directory: Path, temp_c: float) -> None:
    (directory / "guard.jsonl").write_text(
        json.dumps({"t": "2027-01-15T00:00:10.000000Z", "temp_c": temp_c, "reasons": [], "power_w": 40.0}) + "\n"
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    captures = tmp_path / "captures"
    write_run(captures, "plain", 1, [0.60, 0.62])
    write_run(captures, "plain", 2, [0.64, 0.61])
    as_attempts(captures, "plain", [1, 2], current=2)
    guard_record(captures / ".attempts" / "plain" / "1", 50.0)
    guard_record(captures / ".attempts" / "plain" / "2", 80.0)
    return captures


def test_the_summary_records_the_attempt_it_read(root: Path) -> None:
    document = summarize_to_files(root, figures=False).document
    assert document.runs["plain"].attempt == 2 and document.runs["plain"].started_at == "2027-01-22T00:00:00.000000Z"
    assert document.runs["plain-s2"].attempt == 0  # a capture from before attempts


def test_nothing_changed_is_no_change(root: Path) -> None:
    document = summarize_to_files(root, figures=False).document
    assert changes_since(document, captures_now(root)) == []


def test_a_restore_a_new_run_a_removed_run_and_a_running_run_are_each_a_change(root: Path) -> None:
    document = summarize_to_files(root, figures=False).document
    make_current(root, "plain", 1)
    write_run(root, "plain", 3, [0.6], state="running")
    shutil.rmtree(root / "plain-s2")

    assert changes_since(document, captures_now(root)) == [
        "plain: attempt 1 is current, the summary read attempt 2",
        "plain-s3 is not in it",
        "plain-s2's capture is gone",
    ]
    running = summarize_to_files(root, figures=False).document
    assert changes_since(running, captures_now(root)) == ["plain-s3 is still running"]


def test_a_summary_from_before_attempts_were_recorded_is_judged_by_the_captures_start_times(root: Path) -> None:
    document = summarize_to_files(root, figures=False).document
    for run in document.runs.values():
        run.attempt = run.started_at = None
    document.generated_at = "2027-01-21T12:00:00.000000Z"  # after attempt 1 started, before attempt 2
    assert changes_since(document, captures_now(root)) == [
        "plain: its capture started at 2027-01-22T00:00:00.000000Z, after the summary"
    ]


def test_report_after_a_restore_summarizes_first_and_says_so(root: Path) -> None:
    summarize_to_files(root)  # of attempt 2, its guard figure too
    make_current(root, "plain", 1)

    result = CliRunner().invoke(app, ["report", "--capture-dir", str(root)])

    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "the captures changed since" in said and "plain: attempt 1 is current, the summary read attempt 2" in said
    assert "summarized them again first" in said
    summary = default_summary_path(root)
    assert load_summary(summary).runs["plain"].attempt == 1
    figure = (summary.parent / "guard-plain.svg").read_text()
    assert guard_fingerprint(root / ".attempts" / "plain" / "1", "plain") in figure  # the figure of attempt 1 too


def test_the_guard_figure_is_of_the_attempt_the_summary_read(root: Path, tmp_path: Path) -> None:
    """Should the current attempt change between the summary and its figures, they are still of the same attempt."""
    make_current(root, "plain", 1)

    render_guard_figures(root, ["plain"], tmp_path / "out", {"plain": 2})

    figure = (tmp_path / "out" / "guard-plain.svg").read_text()
    assert guard_fingerprint(root / ".attempts" / "plain" / "2", "plain") in figure


def test_an_unchanged_capture_root_is_not_summarized_again(root: Path) -> None:
    summary = summarize_to_files(root).summary_path
    before = summary.read_bytes()
    result = CliRunner().invoke(app, ["report", "--capture-dir", str(root)])
    assert result.exit_code == 0, result.output
    assert "the captures changed" not in result.output and summary.read_bytes() == before


@pytest.mark.integration
def test_a_force_rerun_and_a_restore_of_simulated_runs_give_a_report_of_one_attempt(tmp_path: Path) -> None:
    captures = tmp_path / "capture"
    env = {
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "HARNESS_EXPERIMENT": "",
        "COLUMNS": "200",
    }

    def harness(*args: str):
        result = CliRunner().invoke(app, list(args), env=env)
        assert result.exit_code == 0, result.output
        return result

    def sim(*args: str):
        base = ["run", "plain", "--sim", "--sim-engine", "process", "--set", "steps=1", "--capture-dir", str(captures)]
        return harness(*base, *args)

    sim("--time-scale", "0.002")
    sim("--time-scale", "0.001", "--force")  # attempt 2, current
    harness("summarize", "--capture-dir", str(captures))
    harness("restore", "plain", "1", "--capture-dir", str(captures))

    reported = harness("report", "--capture-dir", str(captures))

    said = " ".join(reported.output.split())
    assert "plain: attempt 1 is current, the summary read attempt 2" in said
    summary = default_summary_path(captures)
    run = json.loads(summary.read_text())["runs"]["plain"]
    assert (run["attempt"], run["time_scale"]) == (1, 0.002)
    report = (summary.parent / "report.md").read_text()
    assert re.search(r"time scale, which is not 1 for plain", report)
    figure = summary.parent / "guard-plain.svg"
    assert figure.exists() and guard_fingerprint(captures / ".attempts" / "plain" / "1", "plain") in figure.read_text()
