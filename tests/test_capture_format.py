"""The capture package: typed states, files that follow the umask, one tolerant and bounded reader.

`harness status` and `check-capture` over captures that are broken in every
way a disk, a person or an attacker can break them: one row (one line) each,
with the reason, never a crash and never a hang.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.capture import (
    RunState,
    RunStatus,
    append_jsonl,
    cut_torn_tail,
    read_capture,
    read_status,
    write_json_atomic,
    write_text_atomic,
)
from harness.cli import app

REPO = Path(__file__).resolve().parent.parent


def good_status(run: str, **changes: object) -> dict:
    status = {
        "run": run,
        "run_id": f"{run}-0000",
        "state": "succeeded",
        "exit_code": 0,
        "started_at": "2026-11-30T07:00:00Z",
        "ended_at": "2026-11-30T07:10:00Z",
        "steps_expected": 2,
        "steps_complete": 2,
        "error": None,
    }
    return {**status, **changes}


# --- states -----------------------------------------------------------------------------------------


def test_states_are_an_enum_that_reads_as_text() -> None:
    assert RunState("not_started").is_final and not RunState.RUNNING.is_final
    assert RunState.SUCCEEDED == "succeeded" and f"{RunState.FAILED}" == "failed"
    status = RunStatus.from_dict(good_status("r"))
    assert status.state is RunState.SUCCEEDED and status.is_final
    assert json.loads(json.dumps(status.to_dict()))["state"] == "succeeded"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"state": "finished"}, "state is 'finished': not a state"),
        ({"started_at": 12}, "started_at is 12: not an RFC 3339 time"),
        ({"steps_complete": -1}, "steps_complete is -1: not a count"),
        ({"exit_code": True}, "exit_code is True: not an integer"),
        ({"error": ["a"]}, "error is ['a']: not a string"),
    ],
)
def test_a_status_with_a_wrong_value_names_the_key(change: dict, reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
        RunStatus.from_dict(good_status("r", **change))


# --- files ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_every_file_follows_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        write_json_atomic(tmp_path / "status.json", {"state": "running"})
        write_json_atomic(tmp_path / "status.json", {"state": "succeeded"})  # replaced: still the umask's mode
        write_text_atomic(tmp_path / "report.md", "# hi\n")
        append_jsonl(tmp_path / "metrics.jsonl", {"step": 0})
    finally:
        os.umask(old)
    for name in ("status.json", "report.md", "metrics.jsonl"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name
    assert sorted(os.listdir(tmp_path)) == ["metrics.jsonl", "report.md", "status.json"]  # no temporary left


def test_a_torn_tail_is_cut_back_to_the_last_whole_line(tmp_path: Path) -> None:
    path = tmp_path / "container.log"
    path.write_bytes(b"2026-11-30T00:00:00.1Z a\n2026-11-30T00:00:00.2Z b\n2026-11-")
    assert cut_torn_tail(path) == len(b"2026-11-")
    assert path.read_bytes() == b"2026-11-30T00:00:00.1Z a\n2026-11-30T00:00:00.2Z b\n"
    assert cut_torn_tail(path) == 0
    path.write_bytes(b"no newline at all")
    cut_torn_tail(path)
    assert path.read_bytes() == b""


# --- one reader ---------------------------------------------------------------------------------------


def broken_captures(root: Path) -> dict[str, str]:
    """Capture directories broken in many ways -> the reason `status` must show for each."""
    root.mkdir()
    cases = {
        "as-list": ("[1, 2]", "is [1, 2], not a JSON object"),
        "time-is-number": (json.dumps(good_status("time-is-number", started_at=12)), "started_at is 12"),
        "not-json": ("{not json", "is not valid JSON"),
        "deep": ("[" * 200_000, "nested too deeply"),
        "huge": (" " * (2 << 20) + "{}", "too large"),
        "no-state": (json.dumps({k: v for k, v in good_status("no-state").items() if k != "state"}), "has no 'state'"),
    }
    for name, (text, _) in cases.items():
        (root / name).mkdir()
        (root / name / "status.json").write_text(text)
    reasons = {name: reason for name, (_, reason) in cases.items()}
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "status.json")  # reading it would wait for a writer forever
    reasons["fifo"] = "not a regular file (it is a FIFO)"
    (root / "endless").mkdir()
    (root / "endless" / "status.json").symlink_to("/dev/zero")
    reasons["endless"] = "not a regular file (it is a symbolic link"  # to /dev/zero: a link is never followed
    (root / "folder").mkdir()
    (root / "folder" / "status.json").mkdir()
    reasons["folder"] = "not a regular file (it is a directory)"
    return reasons


@pytest.mark.integration
def test_status_shows_every_broken_capture_as_a_row_with_its_reason(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    reasons = broken_captures(root)
    (root / "[red]marked").mkdir()
    write_json_atomic(
        root / "[red]marked" / "status.json",
        good_status("m", state="not_started", error="[bold red]boom[/] \\[x]", ended_at=None),
    )
    (root / "fine").mkdir()
    write_json_atomic(root / "fine" / "status.json", good_status("fine"))
    done = subprocess.run(
        [sys.executable, "-m", "harness", "status", "--capture-dir", str(root)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert done.returncode == 0, done.stderr
    rows = {
        cells[0]: cells[1]
        for cells in (re.split(r"\s{2,}", line) for line in done.stdout.splitlines())
        if len(cells) > 1
    }  # piped: plain, one line per capture, columns two spaces apart
    for name, reason in reasons.items():
        # A status that lacks a field is what a power loss leaves of one written whole: recover rebuilds it.
        said = "torn by a power loss? (" if name == "no-state" else "broken: "
        assert rows[name].startswith(said) and reason in rows[name], (name, rows.get(name))
    assert rows["[red]marked"] == "not_started ([bold red]boom[/] \\[x])"  # shown as written, not as markup
    assert rows["fine"] == "succeeded"


def test_the_reader_never_raises_and_never_blocks(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    reasons = broken_captures(root)
    for name, reason in reasons.items():
        found = read_status(root / name)
        assert found.status is None and reason in found.broken, name
        capture = read_capture(root / name)  # the summary's read: key by key, so only a bad file is unknown
        if name not in ("time-is-number", "no-state"):
            assert capture.status is None and any("status.json" in note for note in capture.notes), name


def test_jsonl_lines_are_read_under_a_cap_and_bad_ones_named(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    write_json_atomic(run / "status.json", good_status("r"))
    line = {"step": 0, "complete": True, "t_rollout_end": None, "t_step_end": None, "metrics": {}}
    (run / "metrics.jsonl").write_text(
        "\n".join([json.dumps(line), "[" * 100_000, "[1]", json.dumps({**line, "step": 1}), '{"step": 2, "comp'])
    )
    capture = read_capture(run)
    assert [r.step for r in capture.records] == [0, 1]
    assert "metrics.jsonl line 2: not JSON (nested too deeply): skipped" in capture.notes
    assert "metrics.jsonl line 3: not a JSON object: skipped" in capture.notes
    assert "metrics.jsonl line 5: cut short (the writer stopped mid-line): skipped" in capture.notes


@pytest.mark.integration  # scripts/check-capture.py in a process of its own
def test_the_summary_and_check_capture_use_the_one_reader(tmp_path: Path) -> None:
    from harness.capture import reader
    from harness.summary import captures as summary_captures

    assert summary_captures.read_capture is reader.read_capture and summary_captures.find_runs is reader.find_runs
    root = tmp_path / "capture"
    broken_captures(root)
    for name in ("as-list", "fifo", "deep"):
        done = subprocess.run(
            [sys.executable, str(REPO / "scripts" / "check-capture.py"), str(root / name)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert len(done.stderr.splitlines()) == 1 and str(root / name) in done.stderr


@pytest.mark.integration  # scripts/check-capture.py in a process of its own
def test_check_capture_counts_each_complete_step_once(tmp_path: Path) -> None:
    run = tmp_path / "r"
    run.mkdir()
    write_json_atomic(run / "status.json", good_status("r"))
    for step in (0, 1, 1):
        append_jsonl(
            run / "metrics.jsonl",
            {"step": step, "complete": True, "t_rollout_end": None, "t_step_end": None, "metrics": {}},
        )
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "check-capture.py"), str(run), "--complete-steps", "2"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "succeeded, 2 complete steps" in done.stdout


def test_the_summary_skips_a_run_that_never_started(tmp_path: Path) -> None:
    from harness.summary.summarize import summarize

    root = tmp_path / "capture"
    (root / "never").mkdir(parents=True)
    write_json_atomic(
        root / "never" / "status.json",
        good_status("never", state="not_started", error="image 'x' not found", exit_code=None, steps_complete=0),
    )
    document = summarize(root).to_dict()
    assert "never" not in document["runs"]
    assert document["skipped"] == [{"directory": "never", "reason": "not_started: image 'x' not found"}]


def test_status_of_a_running_capture_whose_harness_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    (root / "orphan").mkdir(parents=True)
    write_json_atomic(
        root / "orphan" / "status.json",
        good_status(
            "orphan", state="running", exit_code=None, ended_at=None, harness_pid=1, harness_host=os.uname().nodename
        ),
    )
    result = CliRunner().invoke(app, ["status", "--capture-dir", str(root)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "running? (its harness is gone: harness recover)" in result.output


@pytest.mark.integration
def test_logs_and_recover_never_wait_on_a_fifo(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    (root / "piped").mkdir(parents=True)
    write_json_atomic(
        root / "piped" / "status.json",
        good_status(
            "piped",
            state="running",
            exit_code=None,
            ended_at=None,
            harness_pid=1,
            harness_host=os.uname().nodename,
            engine="process",
        ),
    )
    os.mkfifo(root / "piped" / "container.log")
    env = {**os.environ, "HARNESS_PROCESS_DIR": str(tmp_path / "processes")}
    for args in (["logs", "piped"], ["recover"]):
        done = subprocess.run(
            [sys.executable, "-m", "harness", *args, "--capture-dir", str(root)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert "container.log is not a regular file (it is a FIFO)" in done.stdout + done.stderr, args
    assert json.loads((root / "piped" / "status.json").read_text())["state"] == "running"  # nothing changed
