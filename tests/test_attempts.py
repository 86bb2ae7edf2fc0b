"""Attempts: every start of a run has its own directory; `<root>/<run>` links to the current one; nothing is lost."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.capture import Capture, RunAttempts, RunState, RunStatus, find_runs, read_status
from harness.capture.attempts import all_attempts
from harness.errors import HarnessError


def status(state: str, run: str = "plain", steps: int = 12, done: int = 12) -> RunStatus:
    return RunStatus(
        run=run,
        run_id=f"{run}-1",
        state=RunState(state),
        exit_code=0 if state == "succeeded" else 1,
        started_at="2026-12-01T10:00:00Z",
        ended_at="2026-12-01T11:00:00Z",
        steps_expected=steps,
        steps_complete=done,
        error=None,
    )


def start(attempts: RunAttempts, state: str, done: int = 12) -> int:
    """An attempt made and ended as `execute` makes and ends one: current at its start unless one succeeded."""
    attempt = attempts.new()
    Capture(attempt.directory, attempts.run).write_status(status("running", attempts.run, done=0))
    attempts.started(attempt)
    Capture(attempt.directory, attempts.run).write_status(status(state, attempts.run, done=done))
    if state == "succeeded":
        attempts.succeeded(attempt)
    return attempt.number


def test_a_first_attempt_is_current_from_its_start(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    attempt = attempts.new()
    Capture(attempt.directory, "plain").write_status(status("running", done=0))
    attempts.started(attempt)

    assert os.readlink(tmp_path / "plain") == ".attempts/plain/1"
    assert read_status(tmp_path / "plain").status.state == RunState.RUNNING  # through the link
    assert [path.name for path in find_runs(tmp_path)[0]] == ["plain"]


def test_an_interrupted_rerun_leaves_the_succeeded_attempt_current(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    start(attempts, "interrupted", done=2)

    assert attempts.current().number == 1
    assert read_status(tmp_path / "plain").status.steps_complete == 12
    assert [a.number for a in attempts.newer_than_current()] == [2]
    assert [a.number for a in attempts.all()] == [1, 2]  # nothing lost


def test_a_newer_attempt_becomes_current_when_it_succeeds(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    start(attempts, "failed", done=3)
    start(attempts, "succeeded")

    assert attempts.current().number == 3
    choices = [json.loads(line) for line in attempts.choices_path.read_text().splitlines()]
    assert [(c["attempt"], c["why"]) for c in choices] == [
        (1, "no attempt of the run had succeeded"),
        (1, "it succeeded"),
        (3, "it succeeded"),
    ]


def test_without_a_success_the_newest_attempt_is_current(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "failed", done=1)
    start(attempts, "interrupted", done=2)

    assert attempts.current().number == 2


def test_restore_makes_any_attempt_current_and_records_why(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    start(attempts, "succeeded")
    attempts.make_current(attempts.find(1), by="harness restore, by someone", why="the first one is the one")

    assert attempts.current().number == 1
    last = json.loads(attempts.choices_path.read_text().splitlines()[-1])
    assert last["by"] == "harness restore, by someone" and last["why"] == "the first one is the one"
    with pytest.raises(HarnessError, match="run plain has no attempt 7 \\(attempts: 1, 2\\)"):
        attempts.find(7)


def test_a_capture_from_before_attempts_is_read_as_it_is_and_moved_in_place_when_started_again(
    tmp_path: Path,
) -> None:
    legacy = Capture(tmp_path / "plain")
    legacy.directory.mkdir()
    legacy.write_status(status("succeeded"))
    (legacy.directory / "container.log").write_text("a line\n")
    attempts = RunAttempts(tmp_path / "plain")

    assert [(a.number, a.legacy) for a in attempts.all()] == [(0, True)]
    assert attempts.current().legacy

    start(attempts, "interrupted", done=1)

    assert os.readlink(tmp_path / "plain") == ".attempts/plain/1"  # the old capture, kept and current
    assert (tmp_path / ".attempts" / "plain" / "1" / "container.log").read_text() == "a line\n"
    assert [a.number for a in attempts.all()] == [1, 2]


def test_an_empty_run_directory_is_no_capture_but_a_full_one_without_status_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    assert RunAttempts(tmp_path / "plain").new().number == 1  # the empty directory held nothing

    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    with pytest.raises(HarnessError, match="without status.json, so not a capture; move it aside"):
        RunAttempts(tmp_path / "other").new()
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine\n"


def test_a_link_out_of_the_run_attempts_is_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    Capture(elsewhere).directory.mkdir()
    Capture(elsewhere).write_status(status("succeeded"))
    root = tmp_path / "capture"
    root.mkdir()
    (root / "plain").symlink_to(elsewhere)

    runs, skipped = find_runs(root)

    assert runs == []
    assert [(s.directory, s.reason.split(":")[0]) for s in skipped] == [
        ("plain", f"a link to {elsewhere}, not to one of its attempts (.attempts/plain/N)")
    ]


def test_a_current_attempt_deleted_by_hand_is_said_and_the_others_still_listed(tmp_path: Path) -> None:
    attempts = RunAttempts(tmp_path / "plain")
    start(attempts, "succeeded")
    start(attempts, "succeeded")
    import shutil

    shutil.rmtree(attempts.directory / "2")

    runs, skipped = find_runs(tmp_path)
    assert runs == [] and "its current attempt (.attempts/plain/2) is missing" in skipped[0].reason
    assert attempts.current() is None and [a.number for a in attempts.all()] == [1]
    assert [(a.run, a.number) for a in all_attempts(tmp_path)] == [("plain", 1)]


def test_history_says_which_way_a_setting_differs_from_the_current_attempt(tmp_path: Path) -> None:
    from harness.run.capture_ops import attempt_rows

    attempts = RunAttempts(tmp_path / "plain")
    for below in (55.0, None, 50.0):  # the demo's cooled start, then a run without one (current), then another
        number = start(attempts, "succeeded" if below is None else "failed")
        manifest = {
            "experiment": {"name": "plain", "guard": {"start_below_c": below}},
            "trainer_argv": [],
            "image": "i",
        }
        (attempts.find(number).directory / "manifest.json").write_text(json.dumps(manifest))

    rows = attempt_rows(Capture(tmp_path / "plain"))

    assert [(row.attempt, row.current) for row in rows] == [("1", False), ("2", True), ("3", False)]
    assert rows[0].differs == "guard.start_below_c 55 here, unset in attempt 2 (current)"
    assert rows[1].differs == "-"
    assert rows[2].differs == "guard.start_below_c 50 here, unset in attempt 2 (current)"
