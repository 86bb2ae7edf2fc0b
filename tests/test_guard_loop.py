"""The guard loop against a real process group (SIGSTOP/SIGCONT), with the file sensor.

Thread tests poll fast and wait on what /proc shows; the synchronous ones
call `poll()` with an injected clock and never sleep.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from harness.engines.process import ProcessRun
from harness.guard import Action, GuardHooks, GuardLoop
from harness.guard.config import GuardConfig, SimSensorConfig
from harness.guard.samples import Sample
from harness.guard.sensors import FileSensor, SimSensor, SysfsSensor
from harness.times import format_time_us, parse_time_us
from support.drills import RefusedFreezes, jsonl, write_temp
from support.fakes import FakeClock
from support.guard import frozen, running, synchronous
from support.timing import eventually


class Lines:
    """Reads the ticker's output in a thread: (monotonic receive time, number)."""

    def __init__(self, handle: ProcessRun) -> None:
        self.got: list[tuple[float, int]] = []
        self._thread = threading.Thread(target=self._read, args=(handle,), daemon=True)
        self._thread.start()

    def _read(self, handle: ProcessRun) -> None:
        for line in handle.log_lines():
            self.got.append((time.monotonic(), int(line.split(" ", 1)[1])))

    def join(self) -> None:
        self._thread.join(10)


def loop_for(handle, sensor, tmp_path: Path, **config) -> GuardLoop:
    settings = {"sensor": "file:x", "poll_s": 0.05, "min_pause_s": 0.0, "record_every_s": 60.0, **config}
    return GuardLoop(
        handle,
        sensor,
        GuardConfig(**settings),
        pauses_path=tmp_path / "pauses.jsonl",
        samples_path=tmp_path / "guard.jsonl",
    )


@pytest.mark.integration
def test_a_hot_reading_freezes_the_group_within_a_poll_and_a_cool_one_thaws_it(
    ticker: ProcessRun, tmp_path: Path
) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "60")
    pgid = int(ticker.id)
    lines = Lines(ticker)
    with loop_for(ticker, FileSensor(temp), tmp_path) as guard:
        assert eventually(lambda: guard.reading.temp_c == 60.0)
        write_temp(temp, "91.5")
        assert eventually(lambda: frozen(pgid) and guard.reading.paused, timeout_s=2.0)
        assert guard.reading.pauses == 1
        assert guard.reading.reason == "GPU 91.5 C >= pause_at_c 85 C"
        [opened] = jsonl(tmp_path / "pauses.jsonl")
        assert opened == {"start": opened["start"], "end": None, "reason": guard.reading.reason, "peak_c": 91.5}
        assert guard.reading.paused_since == opened["start"]
        time.sleep(0.3)  # frozen: the counter must not move
        frozen_from = time.monotonic()
        time.sleep(0.3)
        frozen_until = time.monotonic()
        write_temp(temp, "77")
        assert eventually(lambda: running(pgid), timeout_s=2.0)
        assert eventually(lambda: not guard.reading.paused)
        time.sleep(0.1)
    ticker.stop(grace_s=5)
    lines.join()

    numbers = [n for _, n in lines.got]
    assert numbers == list(range(len(numbers)))  # no line lost across the pause
    assert not [n for t, n in lines.got if frozen_from <= t <= frozen_until]
    assert [n for t, n in lines.got if t < frozen_from] and [n for t, n in lines.got if t > frozen_until]
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert closed["start"] == opened["start"] and closed["peak_c"] == 91.5
    assert parse_time_us(closed["end"]) - parse_time_us(closed["start"]) >= 600_000
    watch, *samples = jsonl(tmp_path / "guard.jsonl")
    assert set(watch) == {"t", "watch"}
    assert all(set(s) == {"t", "temp_c", "reasons", "power_w", "paused", "gpu_c", "zones"} for s in samples)
    assert all(s["gpu_c"] == s["temp_c"] and s["zones"] == {} for s in samples)  # the file sensor: a GPU alone
    assert [s["temp_c"] for s in samples if s["paused"]][0] == 91.5
    assert samples[-1]["paused"] is False
    assert all(parse_time_us(s["t"]) is not None for s in samples)
    assert guard.reading.paused_s >= 0.6


@pytest.mark.integration
def test_stopping_the_guard_thaws_a_frozen_group_and_closes_the_window(ticker: ProcessRun, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "99")
    pgid = int(ticker.id)
    guard = loop_for(ticker, FileSensor(temp), tmp_path).start()
    assert eventually(lambda: frozen(pgid))
    guard.stop()
    assert running(pgid) and not ticker.is_paused() and not guard.reading.paused
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert closed["start"] == opened["start"] and closed["end"] is not None
    guard.stop()  # twice is harmless
    assert len(jsonl(tmp_path / "pauses.jsonl")) == 2


@pytest.mark.integration
def test_stop_thaws_a_group_someone_else_froze(ticker: ProcessRun, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "50")
    guard = loop_for(ticker, FileSensor(temp), tmp_path).start()
    assert eventually(lambda: guard.reading.temp_c == 50.0)  # frozen after its first reading: not found frozen
    ticker.pause()
    assert eventually(lambda: frozen(int(ticker.id)))
    time.sleep(0.1)
    assert frozen(int(ticker.id))  # someone else's freeze, left to them while the guard runs
    guard.stop()
    assert running(int(ticker.id))
    assert jsonl(tmp_path / "pauses.jsonl") == []  # not the guard's window to record


@pytest.mark.integration
def test_max_pause_stop_thaws_then_asks_the_runner_to_stop(ticker: ProcessRun, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "95")
    asked: list[str] = []
    guard = GuardLoop(
        ticker,
        FileSensor(temp),
        GuardConfig(poll_s=0.05, min_pause_s=0.0, max_pause_s=0.3, on_max_pause="stop"),
        pauses_path=tmp_path / "pauses.jsonl",
        samples_path=tmp_path / "guard.jsonl",
        hooks=GuardHooks(on_stop=asked.append),
    ).start()
    assert eventually(lambda: bool(asked), timeout_s=5.0)
    assert asked == ["not cooled to resume_at_c within max_pause_s 0.3 s; stopping the run"]
    assert running(int(ticker.id))
    assert guard.reading.stop_reason == asked[0] and not guard.reading.paused
    guard._thread.join(2)
    assert not guard._thread.is_alive()  # nothing more to guard: the runner stops the run
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert parse_time_us(closed["end"]) - parse_time_us(opened["start"]) >= 300_000
    guard.stop()


@pytest.mark.integration
def test_samples_are_downsampled_while_cool_and_all_kept_while_hot_or_paused(
    ticker: ProcessRun, tmp_path: Path
) -> None:
    temp = tmp_path / "temp"
    clock = FakeClock()
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock)
    script = [50] * 25 + [80, 81, 86, 84, 79, 77] + [50] * 25  # one poll a second, record_every_s 10
    for second, reading in enumerate(script):
        clock.now = float(second)
        write_temp(temp, str(reading))
        guard.poll()
    guard.stop()
    watch, *samples = jsonl(tmp_path / "guard.jsonl")
    assert watch["watch"] == {"sensor": "file", "pause_at_c": 85.0, "resume_at_c": 78.0, "zones": []}
    times = [(parse_time_us(s["t"]) - FakeClock().wall_us()) // 1_000_000 for s in samples]
    assert times == [0, 10, 20, 25, 26, 27, 28, 29, 30, 40, 50]
    assert [s["paused"] for s in samples][3:9] == [False, False, True, True, True, False]


@pytest.mark.integration
def test_a_freeze_the_engine_refuses_once_is_retried_at_once_and_the_run_is_paused(
    ticker: ProcessRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = RefusedFreezes(monkeypatch, refuse={1})  # the group's first SIGSTOP fails (EPERM), the retry does not
    temp = tmp_path / "temp"
    write_temp(temp, "90")
    clock, notes = FakeClock(), []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    assert guard.poll().action is Action.PAUSE
    assert refused.asked == 2 and frozen(int(ticker.id)) and guard.reading.paused
    assert guard.reading.pauses == 1 and guard.reading.pause_failures == 0
    assert notes == [
        "the first freeze failed (PermissionError: [Errno 1] Operation not permitted); the retry froze the run"
    ]
    guard.stop()
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert "failed" not in closed and closed["end"] is not None  # a pause like any other (the fake clock stood still)


@pytest.mark.integration
def test_a_freeze_refused_twice_is_recorded_and_stops_the_run_by_default(
    ticker: ProcessRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = RefusedFreezes(monkeypatch, refuse={1, 2})
    temp = tmp_path / "temp"
    write_temp(temp, "95.1")
    clock, notes, asked = FakeClock(), [], []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    guard._on_stop = asked.append
    decision = guard.poll()
    assert refused.asked == 2 and running(int(ticker.id))  # retried at once, then given up: the run was never frozen
    why = "could not pause it at 95.1 C: PermissionError: [Errno 1] Operation not permitted"
    assert decision.action is Action.STOP and decision.reason == why
    assert asked == [why] and notes == [why + "; stopping the run (guard.on_pause_failure: stop)"]
    assert guard.reading.pauses == 0 and guard.reading.pause_failures == 1 and guard.reading.stop_reason == why
    clock.now = 1.0
    assert guard.poll().action is Action.NONE and refused.asked == 2  # the policy stopped: no second try
    guard.stop()
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert opened["end"] is None and closed["end"] == closed["start"] == opened["start"]
    assert closed["failed"] == "PermissionError: [Errno 1] Operation not permitted"
    assert closed["on_pause_failure"] == "stop" and closed["peak_c"] == 95.1


@pytest.mark.integration
def test_on_pause_failure_continue_records_each_failure_and_tries_again_at_the_next_hot_poll(
    ticker: ProcessRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = RefusedFreezes(monkeypatch, refuse={1, 2, 3, 4})  # two hot polls fail, the third freezes it
    temp = tmp_path / "temp"
    write_temp(temp, "90")
    clock, notes = FakeClock(), []
    guard = synchronous(ticker, FileSensor(temp, clock.wall_us), tmp_path, clock, notes, on_pause_failure="continue")
    for second in range(3):
        clock.now = float(second)
        guard.poll()
    assert refused.asked == 5 and frozen(int(ticker.id)) and guard.reading.paused
    assert guard.reading.pauses == 1 and guard.reading.pause_failures == 2
    assert notes == [
        "could not pause it at 90.0 C: PermissionError: [Errno 1] Operation not permitted; the run goes on unpaused "
        "(guard.on_pause_failure: continue) and the next hot poll tries again"
    ]  # said once, recorded each time
    guard.stop()
    windows = jsonl(tmp_path / "pauses.jsonl")
    failed = [w for w in windows if "failed" in w]
    assert len(failed) == 2 and all(w["on_pause_failure"] == "continue" and w["end"] == w["start"] for w in failed)
    assert windows[-1]["end"] is not None and "failed" not in windows[-1]  # the third poll's pause, closed by stop()


@pytest.mark.integration
def test_a_sensor_that_raises_counts_as_a_missing_reading(ticker: ProcessRun, tmp_path: Path) -> None:
    class Broken:
        name = "broken"

        def __init__(self) -> None:
            self.calls = 0

        def read(self) -> Optional[Sample]:
            self.calls += 1
            if self.calls == 1:
                return Sample(0, temp_c=82.0)
            raise OSError("bus error")

    clock, notes = FakeClock(), []
    guard = synchronous(ticker, Broken(), tmp_path, clock, notes, missing_polls=2)
    decisions = []
    for second in range(4):
        clock.now = float(second)
        decisions.append(guard.poll().action)
    assert decisions == [Action.NONE, Action.NONE, Action.PAUSE, Action.NONE]  # 82 C was hot: pause_if_hot
    assert notes == [
        "sensor broken raised OSError: bus error",
        "no temperature reading for 2 polls (last 82.0 C); pausing the run",
    ]
    assert guard.reading.temp_c is None and guard.reading.paused
    guard.stop()
    assert not ticker.is_paused()


@pytest.mark.integration
def test_the_sim_sensor_heats_while_running_and_cools_while_the_loop_holds_the_run(
    ticker: ProcessRun, tmp_path: Path
) -> None:
    clock = FakeClock()
    cool_cpu = {"start_c": 40, "idle_c": 40, "hot_c": 60}  # the GPU alone decides here (the CPU side: below)
    model = SimSensorConfig(start_c=60, idle_c=40, hot_c=95, heat_tau_s=30, cool_tau_s=15, cpu=cool_cpu)
    guard = synchronous(ticker, SimSensor(model, clock, clock.wall_us), tmp_path, clock, min_pause_s=10.0, poll_s=1.0)
    actions = []
    for second in range(200):
        clock.now = float(second)
        decision = guard.poll()
        if decision.action is not Action.NONE:
            actions.append((second, decision.action))
    guard.stop()
    assert [a for _, a in actions][:4] == [Action.PAUSE, Action.RESUME, Action.PAUSE, Action.RESUME]
    first_pause, first_resume = actions[0][0], actions[1][0]
    assert 30 <= first_pause <= 40  # 60 -> 85 toward 95 with tau 30 s: about 34 s
    assert first_resume - first_pause == 10  # cools below 78 within min_pause_s, so min_pause_s decides
    peaks = [w["peak_c"] for w in jsonl(tmp_path / "pauses.jsonl") if w["end"] is not None]
    assert all(85 <= p < 87 for p in peaks)


@pytest.mark.integration
def test_records_that_cannot_be_written_never_stop_a_pause(ticker: ProcessRun, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    clock, notes = FakeClock(), []
    guard = GuardLoop(
        ticker,
        FileSensor(temp, clock.wall_us),
        GuardConfig(min_pause_s=0.0),
        pauses_path=tmp_path / "gone" / "pauses.jsonl",
        samples_path=tmp_path / "gone" / "guard.jsonl",
        clock=clock,
        wall_us=clock.wall_us,
        hooks=GuardHooks(on_note=notes.append),
    )
    write_temp(temp, "90")
    assert guard.poll().action is Action.PAUSE
    assert eventually(lambda: frozen(int(ticker.id)))
    clock.now = 1.0
    write_temp(temp, "70")
    assert guard.poll().action is Action.RESUME
    assert eventually(lambda: running(int(ticker.id)))
    guard.stop()
    assert notes == [  # the sample first: it is written before the guard acts on it
        f"could not write {tmp_path / 'gone' / 'guard.jsonl'}: No such file or directory",
        f"could not write {tmp_path / 'gone' / 'pauses.jsonl'}: No such file or directory",
    ]


class Sticky:
    """A handle whose thaw fails while `broken` (an engine that went away); it stays frozen until one works."""

    def __init__(self, knows: bool = True) -> None:
        self.frozen = False
        self.broken = True
        self.knows = knows  # False: is_paused cannot answer either
        self.resumes = 0

    def pause(self) -> None:
        self.frozen = True

    def resume(self) -> None:
        self.resumes += 1
        if self.broken:
            raise ConnectionError("engine gone")
        self.frozen = False

    def is_paused(self) -> bool:
        if not self.knows:
            raise ConnectionError("engine gone")
        return self.frozen


def test_a_thaw_that_fails_keeps_the_window_open_and_is_retried_at_the_next_poll(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    clock, notes = FakeClock(), []
    handle = Sticky()
    guard = synchronous(handle, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    write_temp(temp, "90")
    assert guard.poll().action is Action.PAUSE and handle.frozen
    write_temp(temp, "60")
    clock.now = 1.0
    assert guard.poll().action is Action.RESUME
    assert handle.frozen and guard.reading.paused  # the record says what is true: still frozen
    [opened] = jsonl(tmp_path / "pauses.jsonl")
    assert opened["end"] is None
    handle.broken = False
    clock.now = 2.0
    assert guard.poll().action is Action.RESUME  # retried
    assert not handle.frozen and not guard.reading.paused and guard.reading.pauses == 1
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert closed["start"] == opened["start"] and closed["end"] == format_time_us(clock.wall_us())
    assert notes == ["could not resume the run (cooled to 60.0 C): ConnectionError: engine gone"]
    guard.stop()
    assert len(jsonl(tmp_path / "pauses.jsonl")) == 2


@pytest.mark.parametrize(
    ("thaw", "resumes", "note"),
    [
        (
            False,
            0,
            "the run may still be frozen: its pause window stays open until `harness recover` thaws it and "
            "closes the window",
        ),
        (True, 1, "could not resume the run (guard stopped): ConnectionError: engine gone"),
    ],
    ids=["without-thaw", "thaw-fails"],
)
def test_stop_leaves_the_window_open_while_the_run_may_still_be_frozen(
    tmp_path: Path, thaw: bool, resumes: int, note: str
) -> None:
    temp = tmp_path / "temp"
    clock, notes = FakeClock(), []
    handle = Sticky(knows=False)  # an engine gone: it can neither thaw nor say whether it is frozen
    guard = synchronous(handle, FileSensor(temp, clock.wall_us), tmp_path, clock, notes)
    write_temp(temp, "90")
    guard.poll()
    guard.stop(thaw=thaw)
    assert handle.resumes == resumes and handle.frozen
    [opened] = jsonl(tmp_path / "pauses.jsonl")
    assert opened["end"] is None
    assert notes[-1] == note


def test_a_max_pause_stop_whose_thaw_failed_is_thawed_and_closed_by_stop(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    clock, asked = FakeClock(), []
    handle = Sticky()
    guard = GuardLoop(
        handle,
        FileSensor(temp, clock.wall_us),
        GuardConfig(min_pause_s=0.0, max_pause_s=5.0, on_max_pause="stop"),
        pauses_path=tmp_path / "pauses.jsonl",
        samples_path=tmp_path / "guard.jsonl",
        clock=clock,
        wall_us=clock.wall_us,
        hooks=GuardHooks(on_stop=asked.append),
    )
    write_temp(temp, "95")
    guard.poll()
    clock.now = 6.0
    assert guard.poll().action is Action.STOP and asked and handle.frozen
    handle.broken = False
    clock.now = 7.0
    guard.stop()
    assert not handle.frozen
    opened, closed = jsonl(tmp_path / "pauses.jsonl")
    assert closed["end"] == format_time_us(clock.wall_us()) and closed["peak_c"] == 95.0


class Frozen:
    """A handle that only remembers whether it is frozen (no process: the synchronous tests need none)."""

    def __init__(self, on_pause: Optional[object] = None) -> None:
        self.paused = False
        self.on_pause = on_pause

    def pause(self) -> None:
        if callable(self.on_pause):
            self.on_pause()
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def is_paused(self) -> bool:
        return self.paused


def test_the_sample_that_pauses_the_run_is_on_disk_before_the_freeze(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    seen: list[list[dict]] = []
    handle = Frozen(on_pause=lambda: seen.append(jsonl(tmp_path / "guard.jsonl")))
    clock = FakeClock()
    guard = synchronous(handle, FileSensor(temp, clock.wall_us), tmp_path, clock)
    write_temp(temp, "60")
    guard.poll()
    clock.now = 1.0
    write_temp(temp, "91.5")
    assert guard.poll().action is Action.PAUSE and handle.paused
    (at_freeze,) = seen
    assert at_freeze[-1]["temp_c"] == 91.5 and at_freeze[-1]["paused"] is True  # what this poll decided


def zone_tree(root: Path, celsius: float) -> Path:
    """A thermal tree with one `soc` zone (critical trip point 104.5 C); its temp file."""
    zone = root / "thermal_zone3"
    zone.mkdir(parents=True, exist_ok=True)
    (zone / "type").write_text("soc\n")
    (zone / "trip_point_0_type").write_text("critical\n")
    (zone / "trip_point_0_temp").write_text("104500\n")
    write_temp(zone / "temp", str(int(celsius * 1000)))
    return zone / "temp"


def test_a_zone_past_its_trip_point_s_margin_pauses_the_run_and_the_records_say_which(tmp_path: Path) -> None:
    temp = zone_tree(tmp_path / "thermal", 70.0)
    clock = FakeClock()
    config = GuardConfig(sensor="sysfs", min_pause_s=0.0, record_every_s=10.0)
    handle = Frozen()
    guard = GuardLoop(
        handle,
        SysfsSensor(tmp_path / "thermal", clock.wall_us, config),
        config,
        pauses_path=tmp_path / "pauses.jsonl",
        samples_path=tmp_path / "guard.jsonl",
        clock=clock,
        wall_us=clock.wall_us,
    )
    assert guard.poll().action is Action.NONE
    clock.now = 1.0
    write_temp(temp, "90000")  # above pause_at_c 85, below the zone's own pause point 94.5
    assert guard.poll().action is Action.NONE
    clock.now = 2.0
    write_temp(temp, "95000")
    assert guard.poll().action is Action.PAUSE and handle.paused
    assert guard.reading.reason == "thermal_zone3 (soc) 95.0 C >= 94.5 C, 10 C below its critical point 104.5 C"
    assert guard.reading.temps == (("thermal_zone3 (soc)", 95.0),) and guard.reading.temp_c == 95.0
    clock.now = 3.0
    write_temp(temp, "87000")
    assert guard.poll().action is Action.RESUME and not handle.paused  # 87 C <= 94.5 - (85 - 78)
    watch, *samples = jsonl(tmp_path / "guard.jsonl")
    assert watch["watch"]["zones"] == [
        {
            "name": "thermal_zone3",
            "label": "thermal_zone3 (soc)",
            "pause_at_c": 94.5,
            "resume_at_c": 87.5,
            "basis": "94.5 C, 10 C below its critical point 104.5 C",
            "trip_c": 104.5,
            "trip_type": "critical",
        }
    ]
    assert [(s["gpu_c"], s["zones"], s["temp_c"]) for s in samples] == [
        (None, {"thermal_zone3": 70.0}, 70.0),
        (None, {"thermal_zone3": 90.0}, 90.0),
        (None, {"thermal_zone3": 95.0}, 95.0),
        (None, {"thermal_zone3": 87.0}, 87.0),
    ]
    [window] = [w for w in jsonl(tmp_path / "pauses.jsonl") if w["end"] is not None]
    assert window["reason"] == guard.reading.reason or window["reason"].startswith("thermal_zone3 (soc) 95.0 C")


def test_the_sim_cpu_side_pauses_a_run_the_gpu_alone_would_not_have(tmp_path: Path) -> None:
    clock = FakeClock()
    model = SimSensorConfig(cpu={"start_c": 80, "idle_c": 45, "hot_c": 100, "heat_tau_s": 10, "cool_tau_s": 150})
    handle = Frozen()
    guard = synchronous(handle, SimSensor(model, clock, clock.wall_us), tmp_path, clock, poll_s=1.0)
    decision = None
    for second in range(60):
        clock.now = float(second)
        decision = guard.poll()
        if decision.action is Action.PAUSE:
            break
    assert decision is not None and decision.action is Action.PAUSE
    assert decision.reason.startswith("CPU (sim) ") and "10 C below its critical point 105 C" in decision.reason
    gpu = [s["gpu_c"] for s in jsonl(tmp_path / "guard.jsonl") if "gpu_c" in s][-1]
    assert gpu < 85  # the GPU read cool


@pytest.mark.integration
def test_max_pause_s_is_a_limit_the_thaw_comes_at_it_not_at_the_poll_after(tmp_path: Path) -> None:
    # A pause capped at 2 s used to run 2.21 s, one poll over; here a poll every 1 s and a 0.5 s cap.
    temp = tmp_path / "temp"
    write_temp(temp, "95")
    handle = Frozen()
    with loop_for(handle, FileSensor(temp), tmp_path, poll_s=1.0, max_pause_s=0.5) as guard:
        assert eventually(lambda: len(jsonl(tmp_path / "pauses.jsonl")) >= 2, timeout_s=5.0)
        assert guard.reading.pauses >= 1
    opened, closed, *_ = jsonl(tmp_path / "pauses.jsonl")
    held_s = (parse_time_us(closed["end"]) - parse_time_us(closed["start"])) / 1e6
    assert 0.5 <= held_s < 0.5 + 0.3  # the next poll would have made it 1.0 s


@pytest.mark.integration
def test_a_sigstop_that_stops_nothing_is_a_freeze_the_engine_refuses(
    ticker: ProcessRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    from harness.errors import HarnessError

    real_killpg = os.killpg
    monkeypatch.setattr(
        os, "killpg", lambda pgid, signum: None if signum == signal.SIGSTOP else real_killpg(pgid, signum)
    )
    with pytest.raises(HarnessError, match=r"^SIGSTOP sent, but the process was not stopped within 2 s$"):
        ticker.pause()  # as `docker pause` says when it cannot freeze: never a silent "frozen"
    assert running(int(ticker.id))
