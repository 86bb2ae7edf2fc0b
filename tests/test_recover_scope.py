"""`harness recover` and `stop`: what they act on with --capture-dir, and how they name what they did."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from harness.cli import app
from runlab import process_lab  # noqa: F401 - a fixture


def test_recover_with_a_capture_dir_leaves_other_captures_objects_alone_and_names_a_process(process_lab: Any,
                                                                                           tmp_path: Path) -> None:
    lab = process_lab
    run = lab.experiment("bare", scenario="hang")
    harness = lab.spawn("run", run)
    lab.wait_for(lambda: lab.metrics(run), what="the first step")
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = CliRunner().invoke(app, ["recover", "--grace-s", "2", "--capture-dir", str(elsewhere)], env=lab.env)
    assert other.exit_code == 0, other.output
    assert other.output.splitlines() == [
        "nothing to recover: no run has lost its harness",
        f"1 engine object of a capture outside {elsewhere} left alone",
    ]
    assert lab.status(run)["state"] == "running"  # untouched
    ours = lab.capture_cli("recover", "--grace-s", "2")
    assert ours.exit_code == 0, ours.output
    assert "bare: interrupted" in ours.output and ours.output.rstrip().endswith("process removed")
    assert "container" not in ours.output


def test_stop_of_a_run_that_has_no_error_says_no_none(process_lab: Any) -> None:
    lab = process_lab
    run = lab.experiment("plain", steps=1)
    assert lab.cli("run", run).exit_code == 0
    lab.wait_for(lambda: lab.status(run)["state"] == "succeeded", what="the run to end")
    from harness.capture import Capture
    from harness.cli.captures import stop_line

    status = Capture(lab.captures / run).read_status()
    assert stop_line(run, status) == "plain: succeeded"
