"""The guard against what goes wrong under it: a sensor that blocks, readings that cannot be true, a target
found frozen, a thaw of a run that has already ended.

The loop is driven with `poll()` and an injected clock where it can be; the
target is a real process group (SIGSTOP/SIGCONT).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest

from harness.capture.reader import read_pauses
from harness.engines.process import ProcessRun
from harness.errors import HarnessError
from harness.guard import Action, GuardLoop
from harness.guard.config import GuardConfig
from harness.guard.samples import Sample
from harness.guard.sensors import FileSensor, open_sensor
from support.drills import file_guard, jsonl, ticking, wait_for_ticks, wait_state, write_temp
from support.fakes import FakeClock
from support.guard import frozen, guard_command, running, synchronous
from support.timing import eventually, wait_until


class Blocking:
    """A sensor that reads `temps` in turn and then blocks (a FIFO, a wedged NVML call) until released."""

    name = "blocking"

    def __init__(self, *temps: float) -> None:
        self.temps = list(temps)
        self.calls = 0
        self.release = threading.Event()

    def read(self) -> Optional[Sample]:
        self.calls += 1
        if self.temps:
            return Sample(0, temp_c=self.temps.pop(0))
        self.release.wait(30)
        return Sample(0, temp_c=50.0)

    def facts(self) -> dict:
        return {}

    def close(self) -> None:
        pass


@pytest.mark.integration
def test_a_blocked_read_is_a_missing_reading_and_max_pause_still_acts(ticker: ProcessRun, tmp_path: Path) -> None:
    clock, notes = FakeClock(), []
    sensor = Blocking(95.0)
    guard = synchronous(ticker, sensor, tmp_path, clock, notes, poll_s=0.2, max_pause_s=3.0, missing_polls=2)
    try:
        assert guard.poll().action is Action.PAUSE
        assert eventually(lambda: frozen(int(ticker.id)))
        actions = []
        for second in (1.0, 2.0, 3.5):
            clock.now = second
            started = time.monotonic()
            actions.append(guard.poll().action)
            assert time.monotonic() - started < 1.0  # bounded by poll_s, never by the sensor
        assert actions == [Action.NONE, Action.NONE, Action.RESUME]  # max_pause_s, from the clock
        assert eventually(lambda: running(int(ticker.id)))
        assert sensor.calls == 2  # a read still running is never joined by a second one
        assert notes[0].startswith("sensor blocking: no answer within 0.2 s")
        assert "no temperature reading for 2 polls (last 95.0 C)" in notes[1]
    finally:
        sensor.release.set()
        guard.stop()


@pytest.mark.integration
def test_stop_is_prompt_and_thaws_while_the_sensor_is_blocked(ticker: ProcessRun, tmp_path: Path) -> None:
    sensor = Blocking(95.0)
    guard = GuardLoop(
        ticker,
        sensor,
        GuardConfig(poll_s=0.05, min_pause_s=0.0),
        pauses_path=tmp_path / "pauses.jsonl",
        samples_path=tmp_path / "guard.jsonl",
    ).start()
    try:
        assert eventually(lambda: frozen(int(ticker.id)))
        assert eventually(lambda: sensor.calls == 2)  # now blocked
        time.sleep(0.3)
        started = time.monotonic()
        guard.stop()
        assert time.monotonic() - started < 1.5
        assert running(int(ticker.id))
        opened, closed = jsonl(tmp_path / "pauses.jsonl")
        assert closed["start"] == opened["start"] and closed["end"] is not None
    finally:
        sensor.release.set()


def test_the_file_sensor_never_blocks_on_a_fifo_and_reads_only_regular_files(tmp_path: Path) -> None:
    path = tmp_path / "temp"
    sensor = FileSensor(path)
    write_temp(path, "70")
    assert sensor.read() is not None
    path.unlink()
    os.mkfifo(path)  # nobody writes it: opening it blocking would wait forever
    started = time.monotonic()
    assert sensor.read() is None
    assert time.monotonic() - started < 0.5
    assert sensor.problem == f"{path} is not a regular file"
    path.unlink()
    path.write_text("71 0x20 " + "9" * 100_000)  # only the head is read
    got = sensor.read()
    assert got is not None and (got.temp_c, got.reasons) == (71.0, 0x20)


@pytest.mark.parametrize("make", ["fifo", "device"])
def test_a_file_sensor_that_is_not_a_regular_file_is_a_one_line_error(tmp_path: Path, make: str) -> None:
    path = tmp_path / "fifo"
    if make == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    with pytest.raises(HarnessError) as err:
        open_sensor(GuardConfig(sensor=f"file:{path}"))
    assert err.value.message == f"guard.sensor file:{path}: {path} is not a regular file"


@pytest.mark.integration
@pytest.mark.parametrize(
    ("text", "note"),
    [
        (
            "-40",
            "sensor file: an implausible reading (-40.0 C; a temperature is believed between 5 and 150 C) "
            "counts as a missing reading",
        ),
        (
            "0",
            "sensor file: an implausible reading (0.0 C; a temperature is believed between 5 and 150 C) "
            "counts as a missing reading",
        ),
        (
            "200",
            "sensor file: an implausible reading (200.0 C; a temperature is believed between 5 and 150 C) "
            "counts as a missing reading",
        ),
        ("60 -1", "sensor file: an implausible reading (clock-event reasons -1) counts as a missing reading"),
        (
            "60 0x10000000000000000",
            "sensor file: an implausible reading (clock-event reasons 0x10000000000000000) counts as a missing reading",
        ),
    ],
)
def test_an_implausible_reading_never_resumes_a_hot_run(
    ticker: ProcessRun, tmp_path: Path, text: str, note: str
) -> None:
    temp = tmp_path / "temp"
    clock, notes = FakeClock(), []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes, max_pause_s=600.0)
    write_temp(temp, "95")
    assert guard.poll().action is Action.PAUSE
    write_temp(temp, text)
    for second in range(1, 6):
        clock.now = float(second)
        assert guard.poll().action is Action.NONE
    assert guard.reading.paused and eventually(lambda: frozen(int(ticker.id)))  # SIGSTOP takes hold as each runs
    assert notes[0] == note and notes.count(note) == 1
    assert guard.reading.temp_c is None
    guard.stop()


@pytest.mark.integration
def test_the_implausible_note_is_said_once_whatever_the_values(ticker: ProcessRun, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    clock, notes = FakeClock(), []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes, missing_polls=99)
    for second, text in enumerate(["-40", "-41", "-42", "0", "60"]):
        clock.now = float(second)
        write_temp(temp, text)
        guard.poll()
    guard.stop()
    assert len([n for n in notes if "implausible" in n]) == 1


@pytest.mark.integration
def test_a_guard_that_finds_its_target_frozen_and_the_gpu_cool_thaws_it_at_once(
    ticker: ProcessRun, tmp_path: Path
) -> None:
    ticker.pause()
    assert eventually(lambda: frozen(int(ticker.id)))
    temp = tmp_path / "temp"
    write_temp(temp, "50")
    clock, notes = FakeClock(), []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    guard.poll()
    assert eventually(lambda: running(int(ticker.id)))
    assert notes == ["found the run frozen with the GPU cool (50.0 C): thawed it"]
    assert jsonl(tmp_path / "pauses.jsonl") == []
    clock.now = 1.0
    guard.poll()
    guard.stop()
    assert notes == ["found the run frozen with the GPU cool (50.0 C): thawed it"]


@pytest.mark.integration
def test_a_guard_that_finds_its_target_frozen_while_hot_keeps_it_frozen_then_thaws_it(
    ticker: ProcessRun, tmp_path: Path
) -> None:
    ticker.pause()
    assert eventually(lambda: frozen(int(ticker.id)))
    temp = tmp_path / "temp"
    write_temp(temp, "95")
    clock, notes = FakeClock(), []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    assert guard.poll().action is Action.PAUSE
    assert frozen(int(ticker.id)) and guard.reading.paused
    write_temp(temp, "60")
    clock.now = 1.0
    assert guard.poll().action is Action.RESUME
    assert eventually(lambda: running(int(ticker.id)))
    guard.stop()


class EndedWhilePaused:
    """A docker run that ended while frozen: a thaw fails with `is not paused`, and it is not paused."""

    def __init__(self) -> None:
        self.frozen = False

    def pause(self) -> None:
        self.frozen = True

    def resume(self) -> None:
        self.frozen = False  # it ended meanwhile: nothing to thaw
        raise RuntimeError("500 Server Error: Container abc is not paused")

    def is_paused(self) -> bool:
        return self.frozen


def test_a_thaw_of_a_run_that_is_not_paused_any_more_is_no_problem(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    clock, notes = FakeClock(), []
    handle = EndedWhilePaused()
    guard = synchronous(handle, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    write_temp(temp, "95")
    assert guard.poll().action is Action.PAUSE
    clock.now = 1.0
    guard.stop()
    assert notes == []
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert closed["end"] is not None and not guard.reading.paused


# --------------------------------------------------------------------------- harness guard --pid


@pytest.mark.integration
def test_guard_pid_ends_promptly_on_sigterm_while_its_sensor_is_blocked(tmp_path: Path) -> None:
    import signal
    import subprocess

    target = subprocess.Popen(["sh", "-c", "sleep 120 & wait"], start_new_session=True)
    temp, record = tmp_path / "temp", tmp_path / "record"
    write_temp(temp, "95")
    harness = guard_command(
        "--pid",
        str(target.pid),
        "--sensor",
        f"file:{temp}",
        "--poll-s",
        "0.1",
        "--min-pause-s",
        "0",
        "--record",
        str(record),
    )
    try:
        wait_until(lambda: frozen(target.pid))
        temp.unlink()
        os.mkfifo(temp)  # nobody writes it
        time.sleep(0.5)
        started = time.monotonic()
        harness.send_signal(signal.SIGTERM)
        out, err = harness.communicate(timeout=20)
        assert time.monotonic() - started < 3.0
        assert harness.returncode == 0, err
        assert running(target.pid)  # thawed on the way out
        assert f"heat guard: sensor file: {temp} is not a regular file" in err
    finally:
        harness.kill()
        os.killpg(target.pid, signal.SIGCONT)
        os.killpg(target.pid, signal.SIGKILL)
        target.wait(10)


@pytest.mark.integration
def test_guard_pid_refuses_a_fifo_sensor_in_one_line(tmp_path: Path) -> None:
    import subprocess

    fifo = tmp_path / "temp"
    os.mkfifo(fifo)
    target = subprocess.Popen(["sleep", "60"])
    try:
        harness = guard_command("--pid", str(target.pid), "--sensor", f"file:{fifo}", "--record", str(tmp_path / "r"))
        out, err = harness.communicate(timeout=20)
    finally:
        target.kill()
        target.wait()
    assert harness.returncode != 0
    assert err.strip().splitlines() == [f"error: guard.sensor file:{fifo}: {fifo} is not a regular file"]


@pytest.mark.integration
def test_guard_pid_thaws_a_target_it_finds_frozen_while_cool(tmp_path: Path) -> None:
    import signal
    import subprocess

    target = subprocess.Popen(["sleep", "60"])
    os.kill(target.pid, signal.SIGSTOP)
    temp, record = tmp_path / "temp", tmp_path / "record"
    write_temp(temp, "50")
    harness = guard_command(
        "--pid", str(target.pid), "--sensor", f"file:{temp}", "--poll-s", "0.2", "--record", str(record)
    )
    try:
        wait_until(lambda: _states(target.pid) == ["S"], timeout_s=5.0)  # long before the guard ends
        harness.send_signal(signal.SIGINT)
        out, err = harness.communicate(timeout=20)
    finally:
        harness.kill()
        target.kill()
        target.wait()
    assert "heat guard: found the run frozen with the GPU cool (50.0 C): thawed it" in err


def _states(pid: int) -> list[str]:
    try:
        return [Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]]
    except OSError:
        return []


# --------------------------------------------------------------------------- a run under a sensor that blocks


def test_a_run_whose_sensor_blocks_while_paused_is_thawed_by_max_pause_and_stops_promptly(
    lab: Any, tmp_path: Path
) -> None:
    from harness.engines import PAUSED, RUNNING

    temp = tmp_path / "temp"
    write_temp(temp, "60")
    run = ticking(lab, "blocked", file_guard(temp, poll_s=0.2, min_pause_s=1, max_pause_s=3), ticks=100_000)
    harness = lab.spawn("run", run)
    try:
        handle = wait_for_ticks(lab, run)
        write_temp(temp, "95")
        wait_state(handle, PAUSED)
        paused_at = time.monotonic()
        temp.unlink()
        os.mkfifo(temp)  # nobody writes it: a read would block for ever
        wait_state(handle, RUNNING, timeout_s=10)
        assert time.monotonic() - paused_at < 5.0  # max_pause_s 3, from the clock
        started = time.monotonic()
        stopped = lab.capture_cli("stop", run, "--timeout-s", "30")
        assert stopped.exit_code == 0, stopped.output
        assert time.monotonic() - started < 10.0
        harness.communicate(timeout=30)
    finally:
        harness.kill()
    status = lab.status(run)
    assert status["state"] == "stopped"
    assert f"heat guard: sensor file: {temp} is not a regular file" in status["notes"]
    windows = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert windows and all(w.end_us is not None for w in windows)
    assert windows[0].end_us - windows[0].start_us < 4_500_000
