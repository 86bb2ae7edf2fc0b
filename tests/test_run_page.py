"""`harness status RUN`: one run's page, from its capture alone.

The state and its reason, the notes; every attempt; what changed in
configuration from one attempt to the next; what the heat guard did (pauses,
wall seconds paused, the hottest temperature); the log's last lines, and the
command that prints any attempt's log.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.capture import Capture
from harness.cli import app
from harness.run.run_page import guard_facts
from support.messages import messages

MANIFEST = {
    "run": "plain",
    "run_id": "plain-0a1b2c3d",
    "time_scale": 1,
    "experiment": {"name": "plain", "seed": 1, "steps": 4, "image": "miles-gb10-lab:latest", "guard": {}},
    "trainer_argv": ["python3", "train.py", "--num-rollout", "4"],
    "image": "miles-gb10-lab:latest",
}
STATUS = {
    "run": "plain",
    "run_id": "plain-0a1b2c3d",
    "state": "succeeded",
    "exit_code": 0,
    "started_at": "2026-11-29T07:59:00Z",
    "ended_at": "2026-11-29T08:12:30Z",
    "steps_expected": 4,
    "steps_complete": 4,
    "error": None,
    "notes": ["heat guard: 1 reading missing"],
    "attempt": 1,
}
PAUSES = [  # a window opened and closed (two lines, one start), one opened and closed at once, one left open
    {"start": "2026-11-29T08:00:00Z", "end": None, "reason": "GPU 86.0 C >= pause_at_c 85 C", "peak_c": 86.0},
    {"start": "2026-11-29T08:00:00Z", "end": "2026-11-29T08:00:30Z", "reason": "GPU 86.0 C", "peak_c": 91.5},
    {"start": "2026-11-29T08:05:00Z", "end": "2026-11-29T08:05:10Z", "reason": "GPU 85.2 C", "peak_c": 85.2},
]
SAMPLES = [
    {"t": "2026-11-29T08:00:00Z", "temp_c": 86.0, "reasons": 0, "paused": False},
    {"t": "2026-11-29T08:00:10Z", "temp_c": 95.5, "reasons": 0, "paused": True},
    {"t": "2026-11-29T08:01:00Z", "temp_c": 70.0, "reasons": 0, "paused": False},
]


def attempt(root: Path, number: int, status: dict, manifest: dict, log: list[str], guard: bool = True) -> Path:
    directory = root / ".attempts" / "plain" / str(number)
    directory.mkdir(parents=True)
    (directory / "status.json").write_text(json.dumps(status))
    (directory / "manifest.json").write_text(json.dumps(manifest))
    (directory / "container.log").write_text(
        "".join(f"2026-11-29T08:00:{n:02d}.0Z {line}\n" for n, line in enumerate(log))
    )
    if guard:
        (directory / "pauses.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PAUSES))
        (directory / "guard.jsonl").write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    return directory


@pytest.fixture
def two_attempts(tmp_path: Path) -> Path:
    """A run whose attempt 1 succeeded (current) and whose rerun, attempt 2, with 2 steps, was Ctrl-C'd."""
    root = tmp_path / "capture"
    attempt(root, 1, STATUS, MANIFEST, [f"attempt one line {n}" for n in range(30)])
    rerun_manifest = copy.deepcopy(MANIFEST)
    rerun_manifest["experiment"]["steps"] = 2
    rerun_manifest["trainer_argv"] = ["python3", "train.py", "--num-rollout", "2"]
    rerun = {
        **STATUS,
        "run_id": "plain-99999999",
        "state": "interrupted",
        "exit_code": 143,
        "steps_expected": 2,
        "steps_complete": 1,
        "error": "interrupted by SIGINT",
        "notes": [],
        "attempt": 2,
        "started_at": "2026-11-29T09:00:00Z",
        "ended_at": "2026-11-29T09:00:04Z",
    }
    attempt(root, 2, rerun, rerun_manifest, ["attempt two starts", "attempt two step 0"], guard=False)
    os.symlink(".attempts/plain/1", root / "plain")
    return root


def page(root: Path, run: str = "plain", code: int = 0) -> str:
    result = CliRunner().invoke(app, ["status", run, "--capture-dir", str(root)], env={"COLUMNS": "100"})
    assert result.exit_code == code, result.output
    return result.stdout if code == 0 else result.stderr


def test_the_page_says_the_state_its_reason_the_exit_code_and_the_notes(two_attempts: Path) -> None:
    text = " ".join(page(two_attempts).split())  # read whole, however it was fitted to the width

    assert "plain: attempt 1 of 2 is current" in text
    assert "succeeded, 4/4 steps complete, exit code 0" in text
    assert "attempt 2 (newer): interrupted, 1/2 steps complete (interrupted by SIGINT)" in text
    assert "exit code 130 (trainer 143)" in text  # the newer attempt's, as the shell saw it
    assert "notes (attempt 1) heat guard: 1 reading missing" in text


def test_the_page_lists_every_attempt_and_what_changed_between_them(two_attempts: Path) -> None:
    text = page(two_attempts)

    rows = [line.split() for line in text.splitlines() if line.strip().startswith(("1 *", "2 "))]
    assert [row[:3] for row in rows] == [["1", "*", "succeeded"], ["2", "interrupted", "1/2"]]
    assert "attempt 2 from attempt 1: steps 4 -> 2" in " ".join(text.split())


def test_the_page_says_what_the_guard_did(two_attempts: Path) -> None:
    text = page(two_attempts)

    # two windows of the current attempt: 30 s and 10 s; the hottest reading any sample or window saw
    assert "heat guard (attempt 1): 2 pauses, 40 wall s paused, hottest 95.5 C" in text


def test_the_page_shows_the_newest_attempt_s_log_tail_and_how_to_print_any_attempt_s_log(two_attempts: Path) -> None:
    text = page(two_attempts)
    lines = text.splitlines()

    start = next(i for i, line in enumerate(lines) if line.startswith("log of attempt 2"))
    assert [line.strip() for line in lines[start + 1 : start + 3]] == ["attempt two starts", "attempt two step 0"]
    flat = " ".join(text.split())
    assert f"`harness logs plain --attempt N --capture-dir {two_attempts}` prints the whole log" in flat
    assert "(N: 1 or 2)" in flat


def test_the_log_tail_is_the_last_lines_only(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    attempt(root, 1, STATUS, MANIFEST, [f"line {n}" for n in range(30)])
    os.symlink(".attempts/plain/1", root / "plain")
    text = page(root)

    assert "line 29" in text and "line 20" in text and "line 19" not in text


def test_an_unknown_run_is_one_error_line_that_suggests_the_run(two_attempts: Path) -> None:
    said = messages(page(two_attempts, "plian", code=5))

    assert len(said) == 1 and said[0].startswith("error: ") and "did you mean plain?" in said[0]


def test_the_guard_facts_come_from_the_capture_alone(two_attempts: Path) -> None:
    facts = guard_facts(Capture(two_attempts / ".attempts" / "plain" / "1", "plain"))

    assert (facts.pauses, facts.open_pauses, round(facts.paused_s), facts.hottest_c) == (2, 0, 40, 95.5)
    assert facts.text() == "2 pauses, 40 wall s paused, hottest 95.5 C"


def test_a_pause_the_engine_could_not_make_is_counted_as_failed_not_as_a_pause(two_attempts: Path) -> None:
    directory = two_attempts / ".attempts" / "plain" / "1"
    failed = {"start": "2026-11-29T08:07:00Z", "end": "2026-11-29T08:07:00Z", "reason": "GPU 86.1 C", "peak_c": 86.1}
    with (directory / "pauses.jsonl").open("a") as pauses:
        pauses.write(json.dumps({**failed, "failed": "docker pause: conflict"}) + "\n")
    facts = guard_facts(Capture(directory, "plain"))

    assert (facts.pauses, facts.failed) == (2, 1)
    assert facts.text() == "2 pauses, 40 wall s paused, 1 failed, hottest 95.5 C"


def test_an_unguarded_attempt_says_so(two_attempts: Path) -> None:
    facts = guard_facts(Capture(two_attempts / ".attempts" / "plain" / "2", "plain"))

    assert facts.text() == "no record: unguarded, or it never started"
