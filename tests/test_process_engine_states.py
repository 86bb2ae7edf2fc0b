"""What the process engine says of a run from its directory, whatever moment it looks.

The supervisor's last acts are: the trainer ends, exit.json is written, the
supervisor exits. A harness that looks in between must never take the run for
one whose end was lost: that is the one case `wait` fails a run for ("the
trainer and its supervisor are gone and no end was recorded").
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.engines import EXITED, GONE
from harness.engines.process import SupervisedRun
from harness.errors import HarnessError


def ended_run(directory: Path) -> SupervisedRun:
    """A run whose trainer and supervisor have both ended (their pids are of processes that are gone)."""
    gone = _dead_pid()
    directory.mkdir()
    (directory / "run.json").write_text(json.dumps({"id": directory.name, "labels": {}, "command": ["true"]}))
    state = {"pid": gone, "pgid": gone, "start_ticks": 1, "boot_id": None, "shim_pid": gone, "shim_start_ticks": 1}
    (directory / "state.json").write_text(json.dumps({**state, "started_at": "2026-12-01T10:00:00Z"}))
    return SupervisedRun(directory)


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_an_end_recorded_while_the_harness_looks_is_an_end_not_a_lost_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = ended_run(tmp_path / "e6a-base-0a1b2c3d")

    def supervisor_records_the_end_then_exits(started: dict) -> bool:
        # Between the harness's first look at exit.json and its look at the supervisor.
        (run.directory / "exit.json").write_text(json.dumps({"exit_code": 0, "finished_at": "2026-12-01T10:05:00Z"}))
        return False

    monkeypatch.setattr(SupervisedRun, "_supervisor_alive", staticmethod(supervisor_records_the_end_then_exits))
    described = run.describe()
    assert (described.state, described.exit_code) == (EXITED, 0)
    (run.directory / "exit.json").unlink()
    assert run.wait(timeout=5) == 0


def test_a_run_whose_supervisor_died_without_recording_the_end_is_gone(tmp_path: Path) -> None:
    run = ended_run(tmp_path / "e6a-base-0a1b2c3d")
    assert run.describe().state == GONE
    with pytest.raises(HarnessError, match="the trainer and its supervisor are gone and no end was recorded"):
        run.wait(timeout=5)
