"""One owner per run and per capture, on a real Docker engine and with the process engine.

Each test is a finding: recover rewriting finished runs, a harness dying
before its container starts, two runs of one run name at once, process runs
that could not be recovered or stopped.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import pytest

from support.lab import Lab, Output, killed
from support.timing import scaled

pytestmark = pytest.mark.integration


def texts(lines: list[str]) -> list[str]:
    return [line.split(" ", 1)[1] for line in lines]


def test_recover_leaves_a_succeeded_kept_run_as_it_is(lab: Lab) -> None:
    run = lab.experiment("ok", steps=1)
    assert lab.cli("run", run, "--keep").exit_code == 0
    before = (lab.captures / run / "status.json").read_bytes()
    result = lab.capture_cli("recover", "--grace-s", "2")
    assert result.exit_code == 0, result.output
    assert (lab.captures / run / "status.json").read_bytes() == before
    assert "ok: left alone: its capture is final (succeeded): never rewritten" in result.output
    assert len(lab.objects()) == 1  # --keep kept it; recover does not remove a kept one


def test_recover_never_touches_the_newer_run_of_a_forced_rerun(lab: Lab) -> None:
    run = lab.experiment("ok", steps=1)
    assert lab.cli("run", run, "--keep").exit_code == 0
    old_id = lab.status(run)["run_id"]
    newer = lab.cli("run", run, "--force", "--keep", "--set", "container.env.ANOTHER_SETTING=changed")
    assert newer.exit_code == 0, newer.output
    assert lab.status(run)["run_id"] != old_id
    before = (lab.captures / run / "status.json").read_bytes()
    result = lab.capture_cli("recover", "--grace-s", "2")
    assert result.exit_code == 0, result.output
    assert (lab.captures / run / "status.json").read_bytes() == before
    # Each kept object belongs to its own attempt now: both captures are final, and both are left alone.
    assert f"{run} attempt 1: left alone: its capture is final (succeeded)" in result.output
    assert f"{run}: left alone: its capture is final (succeeded)" in result.output  # attempt 2, the current one
    assert len(lab.objects()) == 2


def test_a_harness_killed_before_its_container_starts_leaves_a_run_that_never_started(lab: Lab) -> None:
    run = lab.experiment("early", steps=1)
    killed(lab.spawn("run", run, failpoint="before-container"))
    status = lab.status(run)
    assert status["state"] == "running" and status["container"] is None
    shown = lab.capture_cli("status")
    assert "its harness is gone" in shown.output
    result = lab.capture_cli("recover")
    assert result.exit_code == 0, result.output
    assert "early: not_started" in result.output
    status = lab.status(run)
    assert status["state"] == "not_started" and "was gone before its container or process started" in status["error"]
    again = lab.cli("run", run)  # no --retry, no --force: a run that never started is no run
    assert again.exit_code == 0, again.output
    assert lab.status(run)["state"] == "succeeded"
    assert lab.attempts(run) == [(1, "not_started"), (2, "succeeded")]  # kept, and the new one current


def test_stop_settles_a_run_whose_harness_died_before_its_container_started(lab: Lab) -> None:
    run = lab.experiment("early", steps=1)
    killed(lab.spawn("run", run, failpoint="before-container"))
    result = lab.capture_cli("stop", run)
    assert result.exit_code == 0, result.output
    assert "early: not_started" in result.output
    assert lab.status(run)["state"] == "not_started"


def test_run_settles_what_a_dead_harness_left_and_runs_without_force(lab: Lab) -> None:
    run = lab.experiment("early", steps=1)
    killed(lab.spawn("run", run, failpoint="before-container"))
    again = lab.cli("run", run)
    assert again.exit_code == 0, again.output
    assert lab.status(run)["state"] == "succeeded"
    assert lab.attempts(run) == [(1, "not_started"), (2, "succeeded")]


def test_run_refuses_while_a_dead_harness_left_its_trainer_running(lab: Lab) -> None:
    run = lab.experiment("orphan", scenario="hang")
    harness = lab.spawn("run", run)
    lab.wait_for(lambda: lab.metrics(run), what="the first step")
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    again = lab.cli("run", run, "--force")
    assert again.exit_code == 2
    assert "its harness is gone" in again.stderr and "harness recover" in again.stderr
    assert lab.status(run)["state"] == "running"  # nothing changed: recover decides what to do with it


@pytest.mark.parametrize("gpus", ["none", [0]], ids=["no-gpu", "gpu-0"])
def test_two_runs_of_one_run_name_never_share_a_capture(lab: Lab, gpus: Any) -> None:
    if lab.engine == "docker" and gpus != "none":
        pytest.skip("no GPU runtime on this Docker engine; the process engine covers the GPU lock")
    gate_env, gate_volumes, opened = lab.gate()  # the first run ends once the second waits for it
    run = lab.experiment("twice", steps=3, gpus=gpus, env={"FAKE_DELAY_S": "0.3", **gate_env}, volumes=gate_volumes)
    first = lab.spawn("run", run)
    lab.wait_for(lambda: (lab.captures / run / "status.json").exists(), what="the first run's capture")
    busy = lab.cli("run", run, "--no-wait")
    assert busy.exit_code == 4
    assert busy.stderr.count("\n") == 1 and "run twice is in use (harness pid" in busy.stderr
    second = Output(lab.spawn("run", run))
    second.wait_for("waiting for run twice to end")
    opened.touch()
    out_first, _ = first.communicate(timeout=scaled(120))
    out_second = second.finish()
    assert first.returncode == 0, out_first
    assert second.process.returncode == 0, out_second  # what it asked for is there: said, and nothing to do
    assert "waiting for run twice to end" in out_second and "twice: already succeeded at " in out_second
    lines = texts(lab.log(run))
    assert len(lines) == len(set(lines)) or lines.count("training done") == 1
    assert sum(t.startswith("Running entrypoint") for t in lines) == 1 and lines.count("training done") == 1
    assert [(r["step"], r["complete"]) for r in lab.metrics(run)] == [(0, True), (1, True), (2, True)]
    assert lab.status(run)["state"] == "succeeded" and lab.attempts(run) == [(1, "succeeded")]


def test_a_process_run_whose_harness_died_is_recovered_through_its_engine(process_lab: Lab) -> None:
    lab = process_lab
    run = lab.experiment("bare", scenario="hang")
    harness = lab.spawn("run", run)
    lab.wait_for(lambda: lab.metrics(run), what="the first step")
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    pid = lab.status(run)["process"]["pid"]
    time.sleep(0.5)  # the trainer goes on printing without its harness
    os.kill(pid, 0)
    result = lab.capture_cli("stop", run)
    assert result.exit_code == 0, result.output
    status = lab.status(run)
    assert status["state"] == "interrupted" and status["exit_code"] == 143
    assert "stopped by harness recover" in status["error"]
    lab.wait_for(lambda: not os.path.exists(f"/proc/{pid}"), timeout_s=10, what="the trainer to be gone")
    log = texts(lab.log(run))
    assert log[-1] == "fake trainer: SIGTERM, shutting down" and log.count("INFO still generating") > 1
    assert lab.objects() == []


def test_logs_of_a_run_whose_harness_died_continue_from_the_engine(lab: Lab) -> None:
    run = lab.experiment("orphan", scenario="hang")
    killed(lab.spawn("run", run, failpoint="mid-stream:20"))
    captured = lab.log(run)
    (handle,) = lab.objects()
    lab.wait_for(lambda: len(lab.engine_lines(handle)) > len(captured) + 3, what="the trainer to print on")
    result = lab.capture_cli("logs", run, "--timestamps")
    assert result.exit_code == 0, result.output
    shown = result.output.splitlines()
    assert shown[: len(captured)] == captured  # the capture first, then the engine's lines after it, once
    assert len(shown) > len(captured) + 3 and len(shown) == len(set(shown))
    assert shown == lab.engine_lines(handle)[: len(shown)]
