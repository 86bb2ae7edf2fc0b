"""`harness recover` and `stop`: what they act on with --capture-dir, and how they name what they did."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines import listed_engine_names


@pytest.mark.integration
def test_recover_with_a_capture_dir_leaves_other_captures_objects_alone_and_names_a_process(
    process_lab: Any, tmp_path: Path
) -> None:
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


@pytest.mark.integration
def test_stop_of_a_run_that_has_no_error_says_no_none(process_lab: Any) -> None:
    lab = process_lab
    run = lab.experiment("plain", steps=1)
    assert lab.cli("run", run).exit_code == 0
    lab.wait_for(lambda: lab.status(run)["state"] == "succeeded", what="the run to end")
    from harness.capture import Capture
    from harness.cli.captures import stop_line

    status = Capture(lab.captures / run).read_status()
    assert stop_line(run, status) == "plain: succeeded"


def test_a_window_whose_close_line_was_lost_is_not_paused_in_status_and_recover_closes_it(tmp_path: Path) -> None:
    import json

    from harness.capture import Capture, RunState, RunStatus, this_host
    from support.drills import jsonl

    root = tmp_path / "captures"
    capture = Capture(root / "lost")
    capture.directory.mkdir(parents=True)
    capture.write_status(
        RunStatus(
            run="lost",
            run_id="lost-1",
            state=RunState.SUCCEEDED,
            exit_code=0,
            started_at="2026-03-01T12:00:00Z",
            ended_at="2026-03-01T12:10:00Z",
            steps_expected=1,
            steps_complete=1,
            error=None,
            harness_host=this_host(),
            engine="process",
        )
    )
    opened = {"start": "2026-03-01T12:03:04Z", "end": None, "reason": "hot", "peak_c": 88.0}
    (capture.directory / "pauses.jsonl").write_text(json.dumps(opened) + "\n")  # its close line was never written
    (capture.directory / "guard.jsonl").write_text(
        json.dumps({"t": "2026-03-01T12:05:00Z", "temp_c": 70.0, "reasons": 0, "power_w": None, "paused": False}) + "\n"
    )
    (capture.directory / "container.log").write_text(
        "2026-03-01T12:03:00.000000000Z before\n"
        # printed as the window opened, before the freeze took
        # hold: not "running again" (the summary's rule too)
        "2026-03-01T12:03:04.400000000Z in the gap\n"
        "2026-03-01T12:04:30.500000000Z after\n"
        "2026-03-01T12:09:00.000000000Z later\n"
    )
    env = {
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
        "HARNESS_ENGINES": "process",  # the machine's Docker engine may hold other projects' runs
        "COLUMNS": "300",
    }
    shown = CliRunner().invoke(app, ["status", "--capture-dir", str(root)], env=env)
    assert shown.exit_code == 0, shown.output
    assert "PAUSED" not in shown.output and "70.0 C" in shown.output  # nothing of it is frozen: the engine says so
    recovered = CliRunner().invoke(app, ["recover", "--capture-dir", str(root)], env=env)
    assert recovered.exit_code == 0, recovered.output
    assert recovered.output.splitlines() == [
        "lost: closed 1 open pause window at 2026-03-01T12:04:30.500000Z, when its log shows it running again "
        "(the run is not frozen; its status is final and unchanged)"
    ]
    assert jsonl(capture.pauses_path)[-1] == {**opened, "end": "2026-03-01T12:04:30.500000Z"}
    again = CliRunner().invoke(app, ["recover", "--capture-dir", str(root)], env=env)
    assert again.output.splitlines() == ["nothing to recover: no run has lost its harness"]


# --------------------------------------------------------------------------- HARNESS_ENGINES


@pytest.mark.parametrize(
    ("value", "listed"),
    [("", ("docker", "process")), ("process", ("process",)), ("docker, process", ("docker", "process"))],
)
def test_harness_engines_names_the_engines_that_are_listed(value: str, listed: tuple[str, ...]) -> None:
    assert listed_engine_names({"HARNESS_ENGINES": value}) == listed


def test_recover_asks_only_the_engines_harness_engines_names(tmp_path: Path) -> None:
    root = tmp_path / "captures"
    root.mkdir()
    env = {
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",  # an engine that cannot be asked
        "HARNESS_PROCESS_DIR": str(tmp_path / "processes"),
        "HARNESS_LOCK_DIR": str(tmp_path / "locks"),
    }
    every = CliRunner().invoke(app, ["recover", "--capture-dir", str(root)], env=env)
    assert every.exit_code == 0, every.output
    assert "cannot ask the docker engine" in every.stderr
    process_only = CliRunner().invoke(
        app, ["recover", "--capture-dir", str(root)], env={**env, "HARNESS_ENGINES": "process"}
    )
    assert process_only.exit_code == 0, process_only.output
    assert process_only.output.splitlines() == ["nothing to recover: no run has lost its harness"]


def test_an_unknown_engine_in_harness_engines_is_one_line(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        app, ["recover", "--capture-dir", str(tmp_path)], env={"HARNESS_ENGINES": "process,podman"}
    )
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [
        "error: HARNESS_ENGINES=process,podman: unknown engine 'podman' (engines: docker, process)"
    ]
