"""`harness guard --pid PID | --container ID ... --record DIR`: guarding anything, not only harness runs.

The harness runs in a subprocess (it installs signal handlers, as a user's
would), the target is a real process group or a real container, and the
file sensor is flipped to drive it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Iterator

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.engines import PAUSED, RUNNING
from harness.engines.process import ProcessEngine
from support.drills import jsonl, write_temp
from support.guard import guard_command
from support.timing import wait_until

FAST = ["--poll-s", "0.05", "--min-pause-s", "0"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen]:
    """A process group (a shell and its sleeping child) that the harness did not start."""
    process = subprocess.Popen(["sh", "-c", "sleep 120 & wait"], start_new_session=True)
    yield process
    try:
        os.killpg(process.pid, signal.SIGCONT)
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(10)


@pytest.mark.integration
def test_guard_pid_pauses_and_resumes_a_process_group_and_thaws_it_on_ctrl_c(
    sleeper: subprocess.Popen, tmp_path: Path
) -> None:
    temp, record = tmp_path / "temp", tmp_path / "record"
    write_temp(temp, "60")
    handle = ProcessEngine(tmp_path / "runs").attach(str(sleeper.pid))
    harness = guard_command("--pid", str(sleeper.pid), "--sensor", f"file:{temp}", *FAST, "--record", str(record))
    try:
        wait_until(lambda: jsonl(record / "guard.jsonl"))
        write_temp(temp, "88")
        wait_until(lambda: handle.describe().state == PAUSED)
        write_temp(temp, "70")
        wait_until(lambda: handle.describe().state == RUNNING)
        write_temp(temp, "91")
        wait_until(lambda: handle.describe().state == PAUSED)
        harness.send_signal(signal.SIGINT)
        out, err = harness.communicate(timeout=30)
    finally:
        harness.kill()
    assert harness.returncode == 0, err
    assert handle.describe().state == RUNNING  # thawed on the way out
    windows = jsonl(record / "pauses.jsonl")
    assert [(w["end"] is None, w["peak_c"]) for w in windows] == [
        (True, 88.0),
        (False, 88.0),
        (True, 91.0),
        (False, 91.0),
    ]
    lines = out.splitlines()
    assert lines[0].startswith(f"guarding process {sleeper.pid} with the file sensor: pause at 85 C, resume at 78 C")
    assert [line.split(" ", 1)[1] for line in lines[1:4]] == [
        f"process {sleeper.pid}: PAUSED by the heat guard: GPU 88.0 C >= pause_at_c 85 C",
        f"process {sleeper.pid}: resumed by the heat guard: 70.0 C; 1 pause, 0 wall s paused",
        f"process {sleeper.pid}: PAUSED by the heat guard: GPU 91.0 C >= pause_at_c 85 C",
    ]
    assert lines[-1].startswith(f"process {sleeper.pid}: left running: guarding ended; ") and "2 pauses" in lines[-1]
    assert err == ""


@pytest.mark.integration
def test_guard_pid_ends_when_the_target_exits(sleeper: subprocess.Popen, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "60")
    harness = guard_command(
        "--pid", str(sleeper.pid), "--sensor", f"file:{temp}", *FAST, "--record", str(tmp_path / "r")
    )
    wait_until(lambda: jsonl(tmp_path / "r" / "guard.jsonl"))
    os.killpg(sleeper.pid, signal.SIGKILL)
    sleeper.wait(10)
    out, err = harness.communicate(timeout=30)
    assert harness.returncode == 0, err
    assert out.splitlines()[-1] == f"process {sleeper.pid}: ended; 60.0 C"


@pytest.mark.integration
def test_guard_stops_a_target_that_does_not_cool_when_asked_to(sleeper: subprocess.Popen, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "95")
    harness = guard_command(
        "--pid",
        str(sleeper.pid),
        "--sensor",
        f"file:{temp}",
        *FAST,
        "--max-pause-s",
        "0.3",
        "--on-max-pause",
        "stop",
        "--grace-s",
        "5",
        "--record",
        str(tmp_path / "r"),
    )
    out, err = harness.communicate(timeout=30)
    assert harness.returncode == 1, err
    assert sleeper.wait(10) == -signal.SIGTERM  # thawed, then stopped
    assert out.splitlines()[-1].startswith(
        f"process {sleeper.pid}: stopped by the heat guard (not cooled to "
        "resume_at_c within max_pause_s 0.3 s; stopping the run)"
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--record", "r"], 2, "give the target: --container ID or --pid PID (one of them)"),
        (["--pid", "1", "--container", "x", "--record", "r"], 2, "give the target: --container ID or --pid PID"),
        (["--pid", "1"], 2, "--record DIR is needed"),
        (["--pid", "999999999", "--record", "r"], 5, "no process run or live process '999999999'"),
        (
            ["--pid", "1", "--record", "r", "--pause-at", "70", "--resume-at", "80"],
            2,
            "--resume-at (80.0) must be below --pause-at (70.0)",
        ),
        (
            ["--pid", "1", "--record", "r", "--sensor", "file:/nonexistent/t"],
            2,
            "guard.sensor file:/nonexistent/t: cannot read /nonexistent/t: No such file or directory",
        ),
        (["--pid", "1", "--record", "r", "--sensor", "none"], 2, "--sensor none: nothing would guard it"),
        (
            ["--pid", "1", "--record", "r", "--on-pause-failure", "ignore"],
            2,
            "--on-pause-failure: Input should be 'stop' or 'continue'",
        ),
    ],
)
def test_guard_errors_are_one_line(
    args: list[str], code: int, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["guard", *args])
    assert result.exit_code == code, result.output
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(f"error: {message}"), result.stderr
    assert not (tmp_path / "r").exists()  # nothing recorded for a guard that never started


@pytest.mark.docker
def test_guard_container_pauses_and_resumes_a_container_and_ends_with_it(tmp_path: Path, busybox_image: str) -> None:
    import docker

    client = docker.from_env()
    container = client.containers.run(busybox_image, ["sleep", "120"], detach=True)
    temp, record = tmp_path / "temp", tmp_path / "record"
    write_temp(temp, "60")
    harness = guard_command("--container", container.name, "--sensor", f"file:{temp}", *FAST, "--record", str(record))
    try:
        wait_until(lambda: jsonl(record / "guard.jsonl"))

        def paused() -> bool:
            return bool(client.api.inspect_container(container.id)["State"]["Paused"])

        write_temp(temp, "90")
        wait_until(paused)
        write_temp(temp, "60")
        wait_until(lambda: not paused())
        container.kill()
        out, err = harness.communicate(timeout=30)
    finally:
        harness.kill()
        container.remove(force=True)
    assert harness.returncode == 0, err
    assert (
        out.splitlines()[-1] == f"container {container.name}: ended (exit code 137); 60.0 C; 1 pause, 0 wall s paused"
    )
    opened, closed = jsonl(record / "pauses.jsonl")
    assert closed["start"] == opened["start"] and closed["end"] is not None


@pytest.mark.docker
def test_guard_a_missing_container_is_one_line() -> None:
    result = CliRunner().invoke(app, ["guard", "--container", "no-such-container-here", "--record", "r"])
    assert result.exit_code == 5
    assert result.stderr.startswith("error: no container 'no-such-container-here' on the Docker engine at ")
