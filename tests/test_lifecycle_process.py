"""The process engine end to end (no Docker): same handle, same capture, pause by SIGSTOP; the GPU lock."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.capture import Capture, RunState, RunStatus, this_host
from harness.cli import app
from harness.engines.process import ProcessEngine
from harness.experiments.store import ExperimentStore
from harness.run.plan import plan_launch
from support.lab import Lab, Output, leftover_of_another_root
from support.timing import eventually, scaled

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
TRAINER = REPO / "tests" / "images" / "fake-trainer" / "trainer.py"


def test_a_process_run_is_captured_like_a_container_run(process_lab: Lab) -> None:
    run = process_lab.experiment("bare", steps=2)
    result = process_lab.cli("run", run)
    assert result.exit_code == 0, result.output
    status = process_lab.status(run)
    assert status["state"] == "succeeded" and status["steps_complete"] == 2
    log = (process_lab.captures / run / "container.log").read_text().splitlines()
    assert log[-1].split(" ", 1)[1] == "training done"
    stamp = log[0].split(" ", 1)[0]
    assert len(stamp) == 30 and stamp.endswith("Z") and stamp[10] == "T"
    rows = [json.loads(line) for line in (process_lab.captures / run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1] and all(r["complete"] for r in rows)
    manifest = json.loads((process_lab.captures / run / "manifest.json").read_text())
    assert manifest["engine"]["engine"] == "process" and manifest["handle"]["pid"] > 0


def test_process_failure_keeps_the_exit_code(process_lab: Lab) -> None:
    run = process_lab.experiment("bare-oom", scenario="oom")
    assert process_lab.cli("run", run).exit_code == 1
    status = process_lab.status(run)
    assert status["state"] == "failed" and status["exit_code"] == 1
    assert "OutOfMemoryError" in status["error"]


def test_process_gpu_set_reaches_cuda_visible_devices(process_lab: Lab) -> None:
    process_lab.experiment("g", gpus=[1, 3])
    process_lab.experiment("n", gpus="none")
    store = ExperimentStore(process_lab.experiments)
    kw = dict(base_args=[], capture_root="c", project_root="/p", environ={})
    assert plan_launch(store.load("g").experiment, **kw).env["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert plan_launch(store.load("n").experiment, **kw).env["CUDA_VISIBLE_DEVICES"] == ""
    assert plan_launch(store.load("g").experiment, **kw).device_requests == ()


def test_pause_freezes_the_whole_process_group_and_resume_thaws_it(process_lab: Lab) -> None:
    process_lab.experiment("frozen", scenario="hang", steps=2)
    store = ExperimentStore(process_lab.experiments, [])
    spec = plan_launch(
        store.load("frozen").experiment,
        base_args=[],
        capture_root=str(process_lab.captures),
        project_root=str(REPO),
        environ={},
    )
    handle = ProcessEngine(process_lab.processes).start(spec, {})
    lines = handle.logs(follow=True)
    pid = handle.facts()["pid"]
    try:
        next(lines)
        handle.pause()
        assert handle.is_paused()
        assert eventually(lambda: process_state(pid) == "T")  # stopped
        handle.resume()
        assert not handle.is_paused()
        assert eventually(lambda: process_state(pid) in ("R", "S"))
        handle.stop(grace_s=5)
        assert handle.wait(5) == 143
    finally:
        handle.kill()
        handle.wait(10)
        handle.remove()


def process_state(pid: str) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_the_gpu_lock_makes_a_second_run_wait(process_lab: Lab) -> None:
    gate_env, _, opened = process_lab.gate()  # the first run ends once the second waits for the GPU
    process_lab.experiment("first", steps=1, gpus=[0], env=gate_env)
    process_lab.experiment("second", steps=1, gpus=[0])
    process_lab.experiment("other-gpu", steps=1, gpus=[1])
    first = process_lab.spawn("run", "first")
    process_lab.wait_for(lambda: (process_lab.captures / "first" / "status.json").exists(), 30, "the first run")
    busy = process_lab.cli("run", "second", "--no-wait")
    assert busy.exit_code == 4 and "the GPU is busy (run first" in busy.stderr
    assert process_lab.cli("run", "other-gpu", "--no-wait").exit_code == 0  # another GPU is free
    second = Output(process_lab.spawn("run", "second"))
    second.wait_for("waiting for the GPU: run first")
    opened.touch()
    out = second.finish()
    first.wait(scaled(60))
    assert "waiting for the GPU: run first" in out
    assert process_lab.status("second")["state"] == "succeeded"
    assert process_lab.status("second")["started_at"] >= process_lab.status("first")["ended_at"]


def test_status_and_logs_show_what_the_captures_hold(process_lab: Lab) -> None:
    process_lab.experiment("shown", steps=2)
    process_lab.experiment("broke", scenario="oom")
    assert process_lab.cli("run", "shown").exit_code == 0
    assert process_lab.cli("run", "broke").exit_code == 1
    with (process_lab.captures / "shown" / "pauses.jsonl").open(
        "w"
    ) as pauses:  # opened, closed, and an overlapping one
        for window in (
            {"start": "2026-01-01T00:00:00Z", "end": None},
            {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:10Z"},
            {"start": "2026-01-01T00:00:05Z", "end": "2026-01-01T00:00:15Z"},
        ):
            pauses.write(json.dumps({**window, "reason": "temp", "peak_c": 88.0}) + "\n")
    table = CliRunner().invoke(app, ["status", "--capture-dir", str(process_lab.captures)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s{2,}", line) for line in table.output.splitlines())}
    assert rows["shown"][:4] == ["succeeded", "2/2", "2 (15 s)", "0"]  # the union, not 10 + 10
    assert rows["broke"][:4] == ["failed", "1/2", "0", "1"]

    logs = CliRunner().invoke(app, ["logs", "shown", "--capture-dir", str(process_lab.captures)])
    assert logs.exit_code == 0
    lines = logs.output.splitlines()
    assert lines[-1] == "training done" and lines[0].startswith("Running entrypoint")
    stamped = CliRunner().invoke(
        app, ["logs", "shown", "--timestamps", "-f", "--capture-dir", str(process_lab.captures)]
    )
    assert stamped.exit_code == 0  # -f on a finished run ends by itself
    assert stamped.output.splitlines()[-1].endswith("Z training done")

    missing = CliRunner().invoke(app, ["logs", "nope", "--capture-dir", str(process_lab.captures)])
    assert missing.exit_code == 5 and "no capture for run 'nope'" in missing.stderr and "broke, shown" in missing.stderr


def test_logs_follow_prints_lines_as_the_run_writes_them(process_lab: Lab) -> None:
    process_lab.experiment("live", scenario="hang")
    harness = process_lab.spawn("run", "live", "--grace-s", "5")
    try:
        deadline = time.monotonic() + scaled(30)
        while not (process_lab.captures / "live" / "container.log").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        follower = subprocess.Popen(
            [sys.executable, "-m", "harness", "logs", "live", "-f", "--capture-dir", str(process_lab.captures)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        seen = []
        while "INFO still generating" not in seen and len(seen) < 500:
            seen.append(follower.stdout.readline().rstrip("\n"))
        assert "INFO still generating" in seen  # printed while the run goes on
        assert process_lab.status("live")["state"] == "running"
        stop = CliRunner().invoke(app, ["stop", "live", "--capture-dir", str(process_lab.captures)])
        assert stop.exit_code == 0, stop.output
        # the normal way a stop goes is said plainly: a warning is for a real problem only
        assert "asked the harness of live" in stop.output and "warning" not in stop.output, stop.output
        rest, _ = follower.communicate(timeout=30)  # ends once the status is final
        assert follower.returncode == 0 and rest.rstrip().endswith("fake trainer: SIGTERM, shutting down")
    finally:
        harness.kill()
        harness.wait()


def test_another_capture_root_s_leftovers_never_fail_a_run_and_are_at_most_one_warning_line(
    process_lab: Lab, tmp_path: Path
) -> None:
    # What a killed suite leaves in the state directory both share: a process run of the same name whose harness,
    # trainer and supervisor are gone and whose capture (elsewhere) still says running; and one still running.
    elsewhere = tmp_path / "elsewhere" / "capture"
    dead = leftover_of_another_root(process_lab.processes, "e6a-base", elsewhere / "e6a-base")
    live = leftover_of_another_root(process_lab.processes, "e6a-base", elsewhere / "e6a-base-s2", alive=True)
    Capture(elsewhere / "e6a-base").directory.mkdir(parents=True)
    Capture(elsewhere / "e6a-base").write_status(
        RunStatus(
            run="e6a-base",
            run_id="e6a-base-elsewhere",
            state=RunState.RUNNING,
            exit_code=None,
            started_at="2026-12-01T10:00:00Z",
            ended_at=None,
            steps_expected=1,
            steps_complete=0,
            error=None,
            harness_pid=dead_pid(),
            harness_host=this_host(),
            container=dead.id,
            engine="process",
        )
    )
    process_lab.experiment("e6a-base", steps=1)
    try:
        done = process_lab.cli("run", "e6a-base")
        assert done.exit_code == 0, done.output
        assert process_lab.status("e6a-base")["state"] == "succeeded"
        about_them = [line for line in done.output.splitlines() if "elsewhere" in line or dead.id in line]
        assert len(about_them) <= 1, done.output
        # Left as they were: that root's business (and its own recover's).
        assert dead.directory.exists() and live.describe().alive
        assert Capture(elsewhere / "e6a-base").read_status().state == RunState.RUNNING
    finally:
        live.kill()
        live.wait(scaled(10))


def dead_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid
