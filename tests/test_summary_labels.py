"""Units and labels: trainer vs wall seconds in the report, "clean" defined, steps_usable, dropped null or a count."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from typer.testing import CliRunner

from harness.capture.outcome import RunEnd, decide_outcome
from harness.cli import app
from harness.summary.report import render_report
from harness.summary.summarize import summarize
from support.summaries import summary_rewards

DATA = Path(__file__).resolve().parent / "data" / "captures"
LOGS = Path(__file__).resolve().parent / "data" / "logs"
runner = CliRunner()


def run_table(report: str) -> tuple[list[str], dict[str, list[str]]]:
    lines = report.split("## Runs", 1)[1].strip().splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return header, rows


def test_real_runs_say_their_seconds_are_wall_seconds():
    report = render_report(summarize(DATA / "lab"))
    header, _ = run_table(report)
    assert "pauses (s)" in header and "pauses (wall s)" not in header
    assert "Seconds are wall seconds" in report


def test_a_scaled_run_shows_pauses_in_trainer_and_wall_seconds(tmp_path):
    captures = tmp_path / "lab"
    shutil.copytree(DATA / "lab", captures)
    manifest_path = captures / "plain" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["time_scale"] = 0.5
    manifest_path.write_text(json.dumps(manifest))
    document = summarize(captures)
    report = render_report(document)
    header, rows = run_table(report)
    assert "pauses (trainer s)" in header and "pauses (wall s)" in header
    assert "rollout median (trainer s)" in header and "rollout median (s)" not in header
    trainer = document.runs["plain"].aggregates.pause_total_s
    assert trainer == 168.0  # 84 wall seconds of windows (tests/data/captures/README.md) at time scale 0.5
    assert rows["plain"][header.index("pauses (trainer s)")] == "168.0"
    assert rows["plain"][header.index("pauses (wall s)")] == "84.0"
    assert "time scale, which is not 1 for plain" in report


def test_clean_is_defined_before_the_table_that_first_uses_it():
    report = render_report(summarize(DATA / "lab"))
    definition = report.index("A step is *clean* when no heat-guard pause overlaps its rollout")
    first_use = re.search(r"\| clean \|", report).start()
    assert definition < first_use


def test_a_run_that_succeeded_with_every_step_has_usable_steps():
    done = decide_outcome(
        RunEnd(
            exit_code=0,
            steps_complete=12,
            steps_expected=12,
            stop_state=None,
            stop_reason=None,
            failure=None,
            capture_error=None,
        )
    )
    assert done.state == "succeeded" and done.steps_usable is True
    short = decide_outcome(
        RunEnd(
            exit_code=0,
            steps_complete=11,
            steps_expected=12,
            stop_state=None,
            stop_reason=None,
            failure=None,
            capture_error=None,
        )
    )
    assert short.state == "no_metrics" and short.steps_usable is False


def summary_of_log(log: Path, root: Path) -> dict:
    """The summary of a capture made from the log the way the runner writes one."""
    return summary_rewards(log, root)[1]


def dropped_cells(output: str) -> dict[int, tuple[str, str]]:
    """step -> (dropped right, dropped wrong) cells of the parse-log table."""
    cells = {}
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 5 and words[0].isdigit() and words[1] in ("yes", "no"):
            cells[int(words[0])] = (words[3], words[4])
    return cells


def test_parse_log_and_the_summary_agree_dropped_is_null_without_the_filter(tmp_path):
    # Null is right: a run without the filter drops nothing by design, so "dropped" does not apply;
    # 0 would read as "the filter ran and kept every group".
    log = LOGS / "plain-48-both-reward-keys.log"
    document = summary_of_log(log, tmp_path / "plain")
    assert document["filter"] is False
    assert {row["step"]: row["dropped_all_right"] for row in document["steps"]} == {0: None, 1: None, 2: None}
    result = runner.invoke(app, ["parse-log", str(log)])
    assert result.exit_code == 0, result.output
    assert dropped_cells(result.output) == {0: ("-", "-"), 1: ("-", "-"), 2: ("-", "-")}


def test_parse_log_and_the_summary_agree_on_a_filter_runs_counts(tmp_path):
    log = LOGS / "container-log-docker-timestamps.log"
    document = summary_of_log(log, tmp_path / "filter")
    assert document["filter"] is True
    shown = dropped_cells(runner.invoke(app, ["parse-log", str(log)]).output)
    expected = {
        row["step"]: tuple("-" if row[k] is None else str(row[k]) for k in ("dropped_all_right", "dropped_all_wrong"))
        for row in document["steps"]
    }
    assert shown == expected and any(cell != "-" for pair in shown.values() for cell in pair)
