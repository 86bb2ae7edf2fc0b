"""Broken files in a run or its attempts (issue 35, item 7; issue 34, item 7): each is its run's one line.

A broken manifest.json never hides a run; a status.json a power loss left cut short or without some fields is
rebuilt by recover from what it still says and the files, the original kept beside it; a log whose tail is a
sparse terabyte of NULs is read in a moment.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.capture import Capture, RunAttempts, read_status
from harness.cli import app
from harness.engines.process import ProcessEngine
from harness.run.capture_ops import capture_rows
from harness.run.settle import carry_out, plan_all
from support import brokenroot
from support.seedcaptures import write_run

runner = CliRunner()


def cli(root: Path, *args: str) -> object:
    return runner.invoke(app, [*args, "--capture-dir", str(root)], env={"COLUMNS": "400"})


# --------------------------------------------------------------------------- item 7: a broken manifest


@pytest.mark.parametrize("kind", ["nul", "torn", "directory", "fifo", "huge", "deep"])
def test_a_broken_manifest_is_that_runs_line_and_every_other_run_shows_as_usual(tmp_path: Path, kind: str) -> None:
    for run in ("current", "older", "good"):
        write_run(tmp_path / "legacy", "plain", 1, [0.5, 0.6], name=run)
    for run in ("current", "older", "good"):
        attempts = RunAttempts(tmp_path / run)
        attempts.directory.mkdir(parents=True)
        shutil.copytree(tmp_path / "legacy" / run, attempts.directory / "1")
        (tmp_path / run).symlink_to(f".attempts/{run}/1")
    shutil.copytree(tmp_path / "legacy" / "older", tmp_path / ".attempts" / "older" / "2")
    (tmp_path / "older").unlink()
    (tmp_path / "older").symlink_to(".attempts/older/2")
    shutil.rmtree(tmp_path / "legacy")
    brokenroot.KINDS[kind](tmp_path / ".attempts" / "current" / "1" / "manifest.json")
    brokenroot.KINDS[kind](tmp_path / ".attempts" / "older" / "1" / "manifest.json")

    shown = cli(tmp_path, "status")
    assert shown.exit_code == 0, shown.output
    for run in ("current", "older", "good"):
        assert any(line.startswith(run) and "succeeded" in line for line in shown.output.splitlines()), shown.output
    for run in ("current", "older"):
        history = cli(tmp_path, "history", run)
        assert history.exit_code == 0, history.output
    older = cli(tmp_path, "history", "older")
    assert "its manifest.json is missing or unreadable" in older.output


# --------------------------------------------------------------------------- issue 34, item 7: a torn status


def lacking_capture(root: Path, state: str, *, keep: tuple[str, ...]) -> Path:
    """A run's attempt whose status.json kept only the keys `keep` (and `run_id`): the rest lost to a power loss."""
    write_run(root / "made", "plain", 1, [0.5, 0.6, 0.7], steps_expected=4, name="plain")
    attempts = RunAttempts(root / "plain")
    attempts.directory.mkdir(parents=True)
    shutil.move(root / "made" / "plain", attempts.directory / "1")
    shutil.rmtree(root / "made")
    (root / "plain").symlink_to(".attempts/plain/1")
    path = attempts.directory / "1" / "status.json"
    data = {**json.loads(path.read_text()), "state": state, "harness_pid": 4242, "harness_host": "elsewhere-or-here"}
    path.write_text(json.dumps({key: data[key] for key in ("run_id", *keep)}))
    return attempts.directory / "1"


def test_a_status_lacking_fields_is_torn_and_recover_settles_it_from_the_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    directory = lacking_capture(tmp_path / "capture", "running", keep=("run", "state", "harness_pid"))
    path = directory / "status.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "harness_host": socket.gethostname()}))
    original = path.read_bytes()

    found = read_status(directory)
    assert found.torn and "has no 'exit_code'" in found.broken
    (row,) = capture_rows([Capture(tmp_path / "capture" / "plain")])
    assert row.state.startswith("torn by a power loss?")
    (plan,) = plan_all(tmp_path / "capture", [ProcessEngine()], [])
    assert plan.action == "settle"

    result = carry_out(plan)

    settled = json.loads(path.read_text())
    assert settled["state"] == "interrupted" and settled["steps_complete"] == 3 and settled["steps_expected"] == 4
    assert settled["run_id"] == "plain-0000" and settled["harness_pid"] == 4242  # what it still said is kept
    assert "rebuilt this status (exit_code, started_at" in settled["notes"][-1]
    assert (directory / "status.json.torn").read_bytes() == original
    assert result.torn_kept_as == "status.json.torn"


def test_a_torn_status_that_still_says_succeeded_keeps_it_and_gets_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    directory = lacking_capture(tmp_path / "capture", "succeeded", keep=("run", "state", "exit_code"))
    (directory / "status.json.torn").write_text("an earlier torn one\n")
    original = (directory / "status.json").read_bytes()

    (plan,) = plan_all(tmp_path / "capture", [ProcessEngine()], [])
    assert plan.action == "rebuild"
    recovered = cli(tmp_path / "capture", "recover")
    assert recovered.exit_code == 0, recovered.output
    assert "plain: succeeded, its status.json rebuilt from its files" in recovered.output

    settled = read_status(directory).status
    assert settled is not None and settled.state == "succeeded" and settled.exit_code == 0
    assert settled.steps_complete == 3 and settled.ended_at is not None
    assert (directory / "status.json.torn").read_text() == "an earlier torn one\n"  # never replaced
    assert (directory / "status.json.torn.2").read_bytes() == original


def test_a_status_cut_short_is_torn_and_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_PROCESS_DIR", str(tmp_path / "processes"))
    directory = lacking_capture(tmp_path / "capture", "running", keep=("run", "state"))
    original = json.dumps({**json.loads((directory / "status.json").read_text()), "more": "x" * 50})
    (directory / "status.json").write_text(original[: len(original) // 2])

    assert read_status(directory).torn
    recovered = cli(tmp_path / "capture", "recover")
    assert recovered.exit_code == 0, recovered.output
    assert read_status(directory).status.state == "interrupted"
    assert (directory / "status.json.torn").read_text() == original[: len(original) // 2]


def test_a_status_with_every_field_but_a_wrong_one_is_broken_not_torn(tmp_path: Path) -> None:
    directory = write_run(tmp_path, "plain", 1, [0.5])
    data = json.loads((directory / "status.json").read_text())
    (directory / "status.json").write_text(json.dumps({**data, "steps_complete": "two"}))

    found = read_status(directory)
    assert found.broken and not found.torn  # someone wrote it wrong: recover leaves it alone, and says so


# --------------------------------------------------------------------------- a sparse terabyte of NULs


def test_logs_and_parse_log_skip_a_sparse_terabyte_of_nuls_at_once(tmp_path: Path) -> None:
    run = write_run(tmp_path, "plain", 1, [0.5])
    log = run / "container.log"
    log.write_bytes(b"2027-01-15T00:00:00.000000000Z first line\n2027-01-15T00:00:01.000000000Z second\x00line\n")
    os.truncate(log, 1 << 40)  # its blocks never written: a hole to the end

    # The one rule for torn lines (harness.fs.bounded.WholeLines): a line holding a NUL byte is torn and skipped.
    shown = runner.invoke(app, ["logs", "plain", "--capture-dir", str(tmp_path)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == ["first line"]
    assert shown.stderr.splitlines() == [
        "container.log line 2: torn (1 NUL bytes: a power loss?): skipped",
        "container.log line 3: torn (1,099,511,627,691 NUL bytes: a power loss?): skipped",
    ]
    parsed = runner.invoke(app, ["parse-log", str(log), "--json"])
    assert parsed.exit_code == 0, parsed.output
    problems = json.loads(parsed.stdout)["problems"]
    assert [problem["line"] for problem in problems] == [2, 3]
    assert all(problem["reason"].startswith("torn (") for problem in problems)


def test_parse_log_reads_a_fifo_no_one_writes_to_as_empty(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "container.log")
    parsed = runner.invoke(app, ["parse-log", str(tmp_path / "container.log"), "--json"])
    assert parsed.exit_code == 0, parsed.output
    assert json.loads(parsed.stdout)["steps"] == []


# --------------------------------------------------------------------------- issue 35, item 8: the newest success


def succeeded_attempts(root: Path, current: int, count: int = 2) -> RunAttempts:
    """`count` attempts of plain that succeeded, `current` the one its link names and its record says was made
    current: the others' harnesses died after their last status, before the link."""
    attempts = RunAttempts(root / "plain")
    attempts.directory.mkdir(parents=True)
    for number in range(1, count + 1):
        directory = write_run(root / "made", "plain", 1, [0.5, 0.6], name=str(number))
        shutil.move(directory, attempts.directory / str(number))
    shutil.rmtree(root / "made")
    attempts.make_current(attempts.find(current), by="harness run", why="it succeeded")
    return attempts


def test_recover_makes_a_success_its_harness_never_made_current_current(tmp_path: Path) -> None:
    attempts = succeeded_attempts(tmp_path, current=1)

    (plan,) = plan_all(tmp_path, [], [])
    assert plan.action == "current" and plan.attempt == 2
    recovered = cli(tmp_path, "recover")

    assert recovered.exit_code == 0, recovered.output
    assert "plain: succeeded (it succeeded, but its harness ended before" in recovered.output
    assert "attempt 2 is current (it succeeded)" in recovered.output
    assert attempts.current().number == 2
    last = json.loads(attempts.choices_path.read_text().splitlines()[-1])
    assert last["attempt"] == 2 and last["by"] == "harness recover"
    assert plan_all(tmp_path, [], []) == []  # once


def test_a_restore_is_never_undone_by_recover(tmp_path: Path) -> None:
    attempts = succeeded_attempts(tmp_path, current=2)
    attempts.make_current(attempts.find(1), by="harness restore, by someone", why="the first one is the lab's")

    assert plan_all(tmp_path, [], []) == []
    assert cli(tmp_path, "recover").exit_code == 0
    assert attempts.current().number == 1


def test_an_older_success_never_replaces_a_newer_one_that_is_current(tmp_path: Path) -> None:
    attempts = succeeded_attempts(tmp_path, current=3, count=3)

    assert plan_all(tmp_path, [], []) == []
    assert attempts.succeeded(attempts.find(2), by="harness recover") is False
    assert attempts.current().number == 3
