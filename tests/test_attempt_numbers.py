"""Attempt numbers and what a run's attempts directory may hold (issue 35, items 6, 9 and 10).

Numbers are integers of any size and never given twice; a name that is not one is foreign, listed and left
alone; thousands of attempts are summed up, not listed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.capture import Capture, RunAttempts, RunState, RunStatus, find_runs
from harness.cli import app
from harness.run.capture_ops import attempt_rows, capture_rows
from support import brokenroot

runner = CliRunner()


def status(state: str, run: str = "plain", done: int = 2, attempt: int | None = None) -> RunStatus:
    return RunStatus(
        run=run,
        run_id=f"{run}-1",
        state=RunState(state),
        exit_code=0 if state == "succeeded" else 1,
        started_at="2026-12-01T10:00:00Z",
        ended_at=None if state == "running" else "2026-12-01T11:00:00Z",
        steps_expected=2,
        steps_complete=done,
        error=None,
        attempt=attempt,
    )


def start(attempts: RunAttempts, state: str) -> int:
    """An attempt made and ended as `execute` makes and ends one."""
    attempt = attempts.new()
    Capture(attempt.directory, attempts.run).write_status(status("running", attempts.run, 0, attempt.number))
    attempts.started(attempt)
    Capture(attempt.directory, attempts.run).write_status(status(state, attempts.run, attempt=attempt.number))
    if state == "succeeded":
        attempts.succeeded(attempt)
    return attempt.number


def cli(root: Path, *args: str) -> object:
    return runner.invoke(app, [*args, "--capture-dir", str(root)], env={"COLUMNS": "400"})


def recorded(attempts: RunAttempts) -> list[int]:
    return [json.loads(line)["attempt"] for line in attempts.choices_path.read_text().splitlines()]


# --------------------------------------------------------------------------- item 6: numbers of any size


def test_an_attempt_past_nine_digits_is_made_current_listed_and_restored(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    first = attempts.directory / "999999999"
    first.mkdir(parents=True)
    Capture(first, "plain").write_status(status("succeeded", attempt=999_999_999))
    (tmp_path / "plain").symlink_to(".attempts/plain/999999999")

    assert start(attempts, "succeeded") == 1_000_000_000

    assert attempts.current().number == 1_000_000_000
    assert [a.number for a in attempts.all()] == [999_999_999, 1_000_000_000]
    history = cli(tmp_path, "history", "plain")
    assert history.exit_code == 0, history.output
    assert "1000000000 *" in history.output and "999999999 " in history.output
    restored = cli(tmp_path, "restore", "plain", "999999999")
    assert restored.exit_code == 0, restored.output
    assert attempts.current().number == 999_999_999
    assert cli(tmp_path, "restore", "plain", "1000000000").exit_code == 0
    assert start(attempts, "failed") == 1_000_000_001  # the next run starts as any other


def test_a_forty_digit_attempt_is_one_too(tmp_path: Path) -> None:
    big = int("9" * 40)
    attempts = RunAttempts(tmp_path / "plain")
    (attempts.directory / str(big)).mkdir(parents=True)
    Capture(attempts.directory / str(big), "plain").write_status(status("failed"))
    (tmp_path / "plain").symlink_to(f".attempts/plain/{big}")

    assert attempts.current().number == big
    assert start(attempts, "failed") == big + 1
    assert attempts.current().number == big + 1


FOREIGN = ["abc", "01", "0", "\u00b2", "\u0663", "-3", "1e3", " 4", "4 ", "+5"]


def test_names_that_are_not_attempt_numbers_are_foreign_listed_in_one_line_and_left_alone(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    for name in FOREIGN:
        (attempts.directory / name).mkdir()
        Capture(attempts.directory / name, "plain").write_status(status("succeeded"))
    (attempts.directory / "7").write_text("a file where an attempt goes\n")
    (attempts.directory / "8").symlink_to("1")
    os.mkfifo(attempts.directory / "9")

    assert [a.number for a in attempts.all()] == [1]
    history = cli(tmp_path, "history", "plain")
    assert history.exit_code == 0, history.output
    (line,) = [line for line in history.output.splitlines() if "foreign" in line]
    assert line.startswith("warning: plain: .attempts/plain holds 13 foreign entries (")
    assert "not attempts" in line and "left alone" in line
    assert cli(tmp_path, "restore", "plain", "8").exit_code == 5  # a link named 8 is no attempt 8
    assert cli(tmp_path, "status").exit_code == 0
    assert start(attempts, "failed") == 10  # 7, 8 and 9 are taken names, though no attempts
    assert (attempts.directory / "7").read_text() == "a file where an attempt goes\n"


@pytest.mark.parametrize("name", ["\u00b2", "\u0663", "abc", "01", "8"])
def test_a_link_to_a_foreign_name_is_refused_in_one_line(tmp_path: Path, name: str) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    if name == "8":
        (attempts.directory / name).symlink_to("1")
    else:
        (attempts.directory / name).mkdir()
    (tmp_path / "plain").unlink()
    (tmp_path / "plain").symlink_to(f".attempts/plain/{name}")

    assert find_runs(tmp_path)[0] == [] and attempts.current() is None
    shown = cli(tmp_path, "status")
    assert shown.exit_code == 0, shown.output
    assert "not read" in shown.output
    for command in (["history", "plain"], ["logs", "plain"], ["restore", "plain", "1"]):
        result = cli(tmp_path, *command)
        assert result.exit_code not in (1, 70) and "internal error" not in result.output, (command, result.output)


# --------------------------------------------------------------------------- item 9: numbers never reused


def test_the_number_of_a_current_attempt_deleted_by_hand_is_never_given_again(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    start(attempts, "succeeded")
    shutil.rmtree(attempts.directory / "2")

    assert start(attempts, "succeeded") == 3
    assert recorded(attempts) == [1, 1, 2, 3, 3]  # current at its start (none was), and when it succeeded


def test_the_number_of_an_attempt_that_never_became_current_is_never_given_again(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    assert start(attempts, "failed") == 2  # never current: current.jsonl does not name it
    shutil.rmtree(attempts.directory / "2")

    assert start(attempts, "failed") == 3


def test_with_every_attempt_deleted_the_records_still_hold_the_numbers(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    for _ in range(3):
        start(attempts, "failed")
    for number in (1, 2, 3):
        shutil.rmtree(attempts.directory / str(number))
    (tmp_path / "plain").unlink()

    assert start(attempts, "failed") == 4


def test_a_torn_record_is_read_to_its_last_whole_line_and_goes_on_after_it(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    start(attempts, "failed")
    brokenroot.nul(attempts.choices_path)

    assert start(attempts, "succeeded") == 3
    assert recorded(attempts)[-1] == 3


@pytest.mark.parametrize("kind", ["directory", "fifo", "huge"])
@pytest.mark.parametrize("record", ["current.jsonl", "started.jsonl"])
def test_a_record_that_cannot_be_read_refuses_a_new_attempt_in_one_line(tmp_path: Path, kind: str, record: str) -> None:
    from harness.errors import HarnessError

    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    brokenroot.KINDS[kind](attempts.directory / record)

    with pytest.raises(HarnessError, match=f"run plain: .attempts/plain/{record} is (not a regular file|too large)"):
        attempts.new()
    assert [a.number for a in attempts.all()] == [1]


# --------------------------------------------------------------------------- item 10: thousands of attempts


def test_five_thousand_empty_attempts_are_one_clause_in_status_and_one_row_in_history(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    for number in range(2, 5002):
        (attempts.directory / str(number)).mkdir()

    (row,) = capture_rows([Capture(tmp_path / "plain")])
    assert row.state == "succeeded; 5,000 attempts have no status"
    shown = cli(tmp_path, "status")
    assert shown.exit_code == 0 and len(shown.output.splitlines()) < 10, shown.output
    rows = attempt_rows(Capture(tmp_path / "plain"))
    assert [(r.attempt, r.state) for r in rows] == [("1", "succeeded"), ("2-5001", "no status.json (5,000 attempts)")]
    assert start(attempts, "failed") == 5002


def test_many_newer_attempts_with_a_status_are_the_newest_two_and_a_count(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    for _ in range(5):
        start(attempts, "failed")
    start(attempts, "interrupted")

    (row,) = capture_rows([Capture(tmp_path / "plain")])
    assert row.state == (
        "succeeded; a newer attempt interrupted 2/2; a newer attempt failed 2/2; 4 more newer attempts (4 failed)"
    )


def test_attempts_that_are_a_file_are_said_so_and_refuse_a_new_attempt_in_one_line(tmp_path: Path) -> None:
    from harness.errors import HarnessError

    (tmp_path / ".attempts").mkdir()
    (tmp_path / ".attempts" / "plain").write_text("not a directory\n")
    (tmp_path / "plain").symlink_to(".attempts/plain/1")

    shown = cli(tmp_path, "status")
    assert shown.exit_code == 0 and "its attempts (.attempts/plain) are not a directory: not read" in shown.output
    history = cli(tmp_path, "history", "plain")
    assert history.exit_code == 0 and ".attempts/plain is not a directory, so it holds no attempts" in history.output
    with pytest.raises(HarnessError, match="run plain: .attempts/plain is not a directory, so no attempt can be made"):
        RunAttempts(tmp_path / "plain").new()


def test_restoring_an_attempt_without_a_status_says_so(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    (attempts.directory / "2").mkdir()

    restored = cli(tmp_path, "restore", "plain", "2")
    assert restored.exit_code == 2 and "run plain attempt 2: it has no status.json; not restored" in restored.output


def test_a_forty_digit_current_attempt_is_summarized_and_reported_with_its_number(tmp_path: Path) -> None:
    """The summary records the attempt it read (for `report`'s staleness check): a number past 64 bits included."""
    from support.seedcaptures import write_run

    big = int("9" * 40)
    made = write_run(tmp_path / "made", "plain", 1, [0.5, 0.6])
    attempts = RunAttempts(tmp_path / "plain")
    attempts.directory.mkdir(parents=True)
    shutil.move(made, attempts.directory / str(big))
    (tmp_path / "plain").symlink_to(f".attempts/plain/{big}")

    summarized = cli(tmp_path, "summarize")
    assert summarized.exit_code == 0, summarized.output
    document = json.loads((tmp_path / "summary" / "miles-gb10-lab.json").read_text())
    assert document["runs"]["plain"]["attempt"] == big
    reported = cli(tmp_path, "report")
    assert reported.exit_code == 0, reported.output
    assert "summarizing again" not in reported.output  # the recorded attempt reads back as the current one
