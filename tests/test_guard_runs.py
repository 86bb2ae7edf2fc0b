"""The heat guard in real runs, on both engines: the file sensor drills a run, the engine says what happened.

Each test runs the real harness (`harness run` in a subprocess, as a user
does) on a stand-in trainer that prints numbered lines, flips the sensor
file, and checks the pause windows against what the engine itself showed
(docker inspect's State.Paused, or the process group's state in /proc),
sampled every few milliseconds by a watcher thread.
"""

from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from harness.capture.reader import read_pauses
from harness.engines import PAUSED, RUNNING
from harness.times import parse_time_us
from support.drills import (
    DRILL_POLL_S,
    FREEZE_REFUSED,
    RefusedFreezes,
    file_guard,
    jsonl,
    ticking,
    ticks_in_log,
    wait_for_ticks,
    wait_state,
    write_temp,
)
from support.lab import Lab
from support.timing import eventually

POLL_S = DRILL_POLL_S
# How late a pause may be recorded after the crossing: one poll, plus a loaded machine's scheduling.
ONE_POLL_SLACK_S = POLL_S + 0.3
# How far the engine's view may trail the record (docker pause/unpause take tens of ms; the watcher samples).
ENGINE_SLACK_S = 1.0


def now_us() -> int:
    return time.time_ns() // 1000


class EngineWatch:
    """Samples the engine's view of a run (paused or not) every few ms, with the wall-clock times around each ask."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.samples: list[tuple[int, int, bool]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = now_us()
            try:
                state = self.handle.describe().state
            except Exception:
                return
            self.samples.append((asked, now_us(), state == PAUSED))
            time.sleep(0.005)

    def stop(self) -> list[tuple[int, int]]:
        """The paused intervals the engine showed, as far as its answers prove: from the answer to the first ask that
        said paused to the ask of the last (an answer can come long after the state it gives on a busy engine)."""
        self._stop.set()
        self._thread.join(10)
        intervals: list[list[int]] = []
        previous = False
        for asked, answered, paused in self.samples:
            if paused and not previous:
                intervals.append([answered, asked])
            elif paused:
                intervals[-1][1] = asked
            previous = paused
        return [(a, b) for a, b in intervals]


def status_row(lab: Lab, run: str) -> list[str]:
    """The cells of `harness status`'s row for `run` (piped: columns two spaces apart; guard is the last)."""
    shown = lab.capture_cli("status")
    assert shown.exit_code == 0, shown.output
    return next(cells for cells in (re.split(r"\s{2,}", line) for line in shown.output.splitlines()) if cells[0] == run)


def test_a_hot_reading_pauses_the_run_within_a_poll_and_the_windows_match_the_engine(lab: Lab, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "60")
    run = ticking(lab, "drill", file_guard(temp))
    harness = lab.spawn("run", run, "-v")  # piped, a line per pause and resume
    try:
        handle = wait_for_ticks(lab, run)
        watch = EngineWatch(handle)
        hot_at = now_us()
        write_temp(temp, "90")
        wait_state(handle, PAUSED)
        row = status_row(lab, run)
        assert row[-1].startswith("PAUSED since ") and row[-1].endswith(", 90.0 C"), row
        time.sleep(1.5)
        cool_at = now_us()
        write_temp(temp, "60")
        wait_state(handle, RUNNING)
        out, _ = harness.communicate(timeout=120)
    finally:
        harness.kill()
    seen = watch.stop()
    assert harness.returncode == 0, out
    assert lab.status(run)["state"] == "succeeded"

    opened, closed = jsonl(lab.captures / run / "pauses.jsonl")
    assert opened["end"] is None and closed["start"] == opened["start"]
    assert opened["reason"] == closed["reason"] == "GPU 90.0 C >= pause_at_c 85 C"
    assert closed["peak_c"] == 90.0
    [window] = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert 0 <= window.start_us - hot_at <= ONE_POLL_SLACK_S * 1e6  # within one poll of the crossing
    assert 0 <= window.end_us - cool_at <= ONE_POLL_SLACK_S * 1e6 + 0.5e6
    # What the engine showed: one paused interval, inside the recorded window and close to its edges.
    [(first_paused, last_paused)] = seen
    assert window.start_us <= first_paused and last_paused <= window.end_us
    assert first_paused - window.start_us <= ENGINE_SLACK_S * 1e6
    assert window.end_us - last_paused <= ENGINE_SLACK_S * 1e6

    ticks = ticks_in_log(lab, run)
    assert [n for _, n in ticks] == list(range(150))  # no line lost (or doubled) across the pause
    inside = [n for stamp, n in ticks if first_paused + 200_000 < stamp < last_paused - 200_000]
    assert inside == []  # frozen: nothing printed
    samples = [line for line in jsonl(lab.captures / run / "guard.jsonl") if "temp_c" in line]  # not the watch line
    assert [s["temp_c"] for s in samples if s["paused"]] and all(s["temp_c"] == 90.0 for s in samples if s["paused"])
    guard = json.loads((lab.captures / run / "manifest.json").read_text())["guard"]
    assert guard.pop("start")["outcome"] == "read"  # no cooled start asked for: the temperatures read once
    assert guard == {
        "guarded": True,
        "requested": f"file:{temp}",
        "picked": "file",
        "path": str(temp),
        "readable": True,
    }
    assert f"{run}: PAUSED by the heat guard: GPU 90.0 C >= pause_at_c 85 C" in out
    assert f"{run}: resumed by the heat guard: 60.0 C; 1 pause, " in out


def test_a_harness_killed_while_the_run_is_frozen_is_thawed_by_recover_which_closes_the_window(
    lab: Lab, tmp_path: Path
) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "60")
    run = ticking(lab, "frozen", file_guard(temp), ticks=100_000)
    harness = lab.spawn("run", run)
    handle = wait_for_ticks(lab, run)
    write_temp(temp, "95")
    wait_state(handle, PAUSED)
    lab.wait_for(lambda: jsonl(lab.captures / run / "pauses.jsonl"), 10, "the open window")
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    time.sleep(0.5)
    assert handle.describe().state == PAUSED, (
        lab.status(run),
        lab.log(run)[-5:],
        lab.engine_lines(handle)[-5:],
    )  # nobody thawed it
    [opened] = jsonl(lab.captures / run / "pauses.jsonl")
    assert opened["end"] is None
    row = status_row(lab, run)
    assert "its harness is gone" in row[1] and row[-1].startswith("PAUSED since ")
    assert row[-1].endswith("95.0 C (left frozen? harness recover thaws it)")

    before = now_us()
    result = lab.capture_cli("recover", "--leave-running")
    after = now_us()
    assert result.exit_code == 0, result.output
    assert f"{run}: interrupted" in result.output and "1 open pause window closed" in result.output
    assert handle.describe().state == RUNNING  # thawed through the engine
    printed = len(lab.engine_lines(handle))
    lab.wait_for(lambda: len(lab.engine_lines(handle)) > printed + 5, 10, "ticks after the thaw")
    opened, closed = jsonl(lab.captures / run / "pauses.jsonl")
    assert closed == {**opened, "end": closed["end"]} and before <= parse_time_us(closed["end"]) <= after
    [window] = read_pauses(lab.captures / run / "pauses.jsonl", [])  # the last line per start is the truth
    assert window.end_us == parse_time_us(closed["end"])
    status = lab.status(run)
    assert any(note.startswith("harness recover closed 1 open pause window at ") for note in status["notes"])
    again = lab.capture_cli("recover")
    assert len(jsonl(lab.captures / run / "pauses.jsonl")) == 2  # a closed window is never closed twice
    assert again.exit_code == 0


def test_on_max_pause_stop_ends_the_run_stopped_with_the_guards_reason(lab: Lab, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "95")
    run = ticking(lab, "too-hot", file_guard(temp, max_pause_s=0.5, on_max_pause="stop"), ticks=100_000)
    result = lab.cli("run", run, "--grace-s", "5")
    assert result.exit_code == 1, result.output
    status = lab.status(run)
    reason = "heat guard: not cooled to resume_at_c within max_pause_s 0.5 s; stopping the run"
    assert status["state"] == "stopped" and status["error"] == reason and status["stop_reason"] == reason
    assert status["exit_code"] == 143  # it was thawed, so it acted on SIGTERM
    assert reason in status["notes"]
    [window] = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert window.end_us - window.start_us >= 500_000  # closed once the run was thawed, after max_pause_s
    assert lab.objects() == []


def test_the_sim_sensor_heats_the_run_into_real_pauses_and_cools_it_out_of_them(lab: Lab) -> None:
    # It heats from when the guard starts on the run (not while the container starts): a pause about every 1.4 s.
    model = {"start_c": 84, "idle_c": 40, "hot_c": 95, "heat_tau_s": 1, "cool_tau_s": 0.5, "throttle_at_c": 200}
    run = ticking(
        lab, "sim", {"sensor": "sim", "poll_s": 0.05, "min_pause_s": 0.3, "record_every_s": 0.2, "sim": model}
    )
    harness = lab.spawn("run", run)
    try:
        handle = wait_for_ticks(lab, run, 1)
        watch = EngineWatch(handle)
        out, _ = harness.communicate(timeout=120)
    finally:
        harness.kill()
    seen = watch.stop()
    assert harness.returncode == 0, out
    windows = read_pauses(lab.captures / run / "pauses.jsonl", [])
    # min_pause_s counts from the freeze, and a window opens just before it and closes after the thaw
    assert len(windows) >= 2 and all(w.end_us - w.start_us >= 300_000 for w in windows), windows
    assert seen  # the engine really froze it (the watcher may start after the first pause)...
    for first, last in seen:  # ...each time inside a recorded window
        assert any(w.start_us <= first and last <= w.end_us for w in windows)
    temps = [s["gpu_c"] for s in jsonl(lab.captures / run / "guard.jsonl") if "gpu_c" in s]  # samples only
    assert max(temps) >= 85 and min(temps[temps.index(max(temps)) :]) <= 78  # heated into a pause, cooled out
    assert json.loads((lab.captures / run / "manifest.json").read_text())["guard"]["picked"] == "sim"


@pytest.mark.integration
def test_a_sim_run_waits_for_its_warm_cpu_side_to_cool_before_it_starts(process_lab: Lab) -> None:
    lab = process_lab
    cpu = {"start_c": 70, "idle_c": 45, "hot_c": 100, "heat_tau_s": 5, "cool_tau_s": 0.5}
    guard = {"sensor": "sim", "poll_s": 0.05, "min_pause_s": 0.3, "start_below_c": 55, "sim": {"cpu": cpu}}
    run = lab.experiment("cooled-sim", steps=1, guard=guard)

    done = lab.cli("run", run)

    assert done.exit_code == 0, done.output
    start = json.loads((lab.captures / run / "manifest.json").read_text())["guard"]["start"]
    assert start["outcome"] == "cool" and start["temps_c"]["sim_cpu"] < 55 <= 70
    assert start["waited_s"] >= 0.5 * math.log((70 - 45) / (55 - 45)) * 0.9  # Newton cooling from 70 to 55
    first = [s for s in jsonl(lab.captures / run / "guard.jsonl") if "zones" in s][0]
    assert first["zones"]["sim_cpu"] < 65  # the run started from where the wait left it (then heats: tau 5 s)


def test_a_named_sensor_that_cannot_read_stops_the_run_before_anything_starts(lab: Lab, tmp_path: Path) -> None:
    run = ticking(lab, "blind", file_guard(tmp_path / "absent"))
    result = lab.cli("run", run)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"error: run {run} not started: guard.sensor file:{tmp_path / 'absent'}: cannot read "
        f"{tmp_path / 'absent'}: No such file or directory"
    ]
    assert not (lab.captures / run).exists() and lab.objects() == []


def test_sensor_none_runs_unguarded_and_says_so_in_the_manifest(lab: Lab) -> None:
    run = lab.experiment("bare", steps=1)
    result = lab.cli("run", run)
    assert result.exit_code == 0, result.output
    manifest = json.loads((lab.captures / run / "manifest.json").read_text())
    start = {"outcome": "unread", "below_c": None, "waited_s": 0.0, "hottest_c": None, "temps_c": {}}
    assert manifest["guard"] == {"guarded": False, "requested": "none", "picked": None, "start": start}
    assert not (lab.captures / run / "pauses.jsonl").exists() and not (lab.captures / run / "guard.jsonl").exists()


def test_sigterm_to_the_harness_thaws_a_frozen_run_so_it_can_shut_down(lab: Lab, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "60")
    run = ticking(lab, "term", file_guard(temp), ticks=100_000)
    harness = lab.spawn("run", run, "--grace-s", "10")
    handle = wait_for_ticks(lab, run)
    write_temp(temp, "95")
    wait_state(handle, PAUSED)
    harness.send_signal(signal.SIGTERM)
    out, _ = harness.communicate(timeout=60)
    assert harness.returncode == 130, out
    status = lab.status(run)
    assert status["state"] == "interrupted" and status["exit_code"] == 143  # thawed first, then it shut down
    assert lab.log(run)[-1].endswith("fake trainer: SIGTERM, shutting down")
    opened, closed = jsonl(lab.captures / run / "pauses.jsonl")
    assert closed["start"] == opened["start"] and closed["end"] is not None


def test_the_time_limit_reached_while_frozen_thaws_and_stops_the_run(lab: Lab, tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "95")  # frozen from the first poll to the end
    run = ticking(lab, "late", file_guard(temp), ticks=100_000)
    result = lab.cli("run", run, "--max-minutes", "0.05", "--grace-s", "5")
    assert result.exit_code == 1, result.output
    status = lab.status(run)
    assert status["state"] == "stopped" and status["error"].startswith("time limit of 0.05 min reached")
    assert status["exit_code"] == 143
    [window] = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert window.end_us is not None and window.end_us - window.start_us >= 2_000_000


def test_a_run_that_has_ended_is_not_paused_and_gets_no_window_and_no_note(lab: Lab, tmp_path: Path) -> None:
    from harness.guard import GuardSession
    from harness.guard.config import GuardConfig

    run = lab.experiment("ended", steps=1)
    done = lab.cli("run", run, "--keep")
    assert done.exit_code == 0, done.output
    [handle] = lab.objects()  # a handle of its own, as `harness guard --container` has: nothing waited on it yet
    [other] = lab.objects()
    assert other.wait(10) == 0
    temp = tmp_path / "temp"
    write_temp(temp, "95")  # hot from the first poll: the guard would pause a live run at once
    session = GuardSession.open(GuardConfig(sensor=f"file:{temp}", poll_s=0.05, min_pause_s=0))
    record = tmp_path / "record"
    record.mkdir()
    loop = session.start(handle, pauses_path=record / "pauses.jsonl", samples_path=record / "guard.jsonl")
    try:
        assert eventually(lambda: not loop._thread.is_alive(), 10)  # it stopped guarding on its own
    finally:
        loop.stop()
        session.close()
    assert jsonl(record / "pauses.jsonl") == []
    assert loop.notes == []
    assert loop.reading.pauses == 0 and loop.reading.paused_s == 0


# --------------------------------------------------------------------------- a pause the engine refuses


def refused_words(lab: Lab, status: dict) -> str:
    """What the engine said when it would not freeze the run (tests/support/drills.py: RefusedFreezes)."""
    if lab.engine == "docker":
        return FREEZE_REFUSED.format(id=status["container"])
    return "PermissionError: [Errno 1] Operation not permitted"


def test_a_pause_the_engine_refuses_twice_stops_the_run_with_the_cause(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused = RefusedFreezes(monkeypatch, refuse={1, 2})  # `docker pause` or the group's SIGSTOP, at once and retried
    temp = tmp_path / "temp"
    write_temp(temp, "95.1")
    run = ticking(lab, "unfrozen", file_guard(temp), ticks=100_000)

    result = lab.cli("run", run, "--grace-s", "5")

    assert result.exit_code == 1, result.output
    status = lab.status(run)
    words = refused_words(lab, status)
    cause = f"heat guard: could not pause it at 95.1 C: {words}"
    assert status["state"] == "stopped" and status["error"] == cause and status["stop_reason"] == cause
    assert status["exit_code"] == 143  # never frozen, so it shut down on SIGTERM
    assert (
        f"heat guard: could not pause it at 95.1 C: {words}; stopping the run (guard.on_pause_failure: stop)"
        in (status["notes"])
    )
    assert refused.asked == 2  # retried once at once, never again: the run was being stopped
    [window] = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert window.failed == words and window.end_us == window.start_us and window.on_pause_failure == "stop"
    assert status_row(lab, run)[3] == "0, 1 failed"
    assert lab.objects() == []


def test_every_output_counts_the_pauses_and_the_failed_one_alike(
    lab: Lab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.summary.guard_figure import figure_text, guard_figure_path
    from harness.summary.publish import report_from_summary, summarize_to_files

    refused = RefusedFreezes(monkeypatch, refuse={2, 3})  # the first pause is made, the second fails, the third is made
    temp = tmp_path / "temp"
    write_temp(temp, "60")
    env, volumes, gate = lab.gate()
    guard = file_guard(temp, on_pause_failure="continue")
    run = lab.experiment(
        "counted",
        scenario="ticks",
        steps=1,
        guard=guard,
        volumes=volumes,
        env={"FAKE_TICKS": "50", "FAKE_TICK_S": "0.02", **env},
    )
    problems: list[BaseException] = []

    def drive() -> None:  # the heat, as the run goes: hot, cool, hot (refused, then made), cool, then let it end
        try:
            lab.wait_for(lambda: lab.objects(), 60, "the run to start")
            [handle] = lab.objects()
            for temperature, state in (("95", PAUSED), ("60", RUNNING)):
                write_temp(temp, temperature)
                wait_state(handle, state, 30)
            write_temp(temp, "95")
            lab.wait_for(lambda: refused.asked >= 4, 30, "the refused pause and the one after it")
            wait_state(handle, PAUSED, 30)
            write_temp(temp, "60")
            wait_state(handle, RUNNING, 30)
        except BaseException as err:  # said by the test below, after the run has ended
            problems.append(err)
        finally:
            gate.touch()

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    result = lab.cli("run", run)
    driver.join(30)
    assert not problems, problems
    assert result.exit_code == 0, result.output  # `continue`: the run went on, and ended as it would have
    windows = read_pauses(lab.captures / run / "pauses.jsonl", [])
    assert [w.failed is not None for w in windows] == [False, True, False]

    shown = status_row(lab, run)[3]
    published = summarize_to_files(lab.captures)
    aggregates = published.document.runs[run].aggregates
    notes = published.document.runs[run].notes
    report = report_from_summary(published.summary_path, capture_dir=lab.captures).report
    title, _ = figure_text(guard_figure_path(published.summary_path.parent, run))
    table_row = next(line for line in report.read_text().splitlines() if line.startswith(f"| {run} |"))

    assert re.fullmatch(r"2 \(\d+ s\), 1 failed", shown), shown
    assert (aggregates.pauses, aggregates.pause_failures) == (2, 1)
    assert "| 2, 1 failed |" in table_row, table_row
    assert title.startswith(f"{run}: 2 heat-guard pauses, 1 pause failed, "), title
    words = refused_words(lab, lab.status(run))
    [failure] = [note for note in notes if "could not pause" in note]
    assert failure.endswith(
        f"the heat guard could not pause the run at 95.0 C: {words}; it went on unpaused (guard.on_pause_failure: "
        "continue)"
    ), failure
    assert f"- **{run}**: " in report.read_text() and "could not pause the run" in report.read_text()
