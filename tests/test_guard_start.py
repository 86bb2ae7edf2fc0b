"""The cooled start: a run waits, holding the GPU, until every watched temperature is below guard.start_below_c.

The wait is tried on the `sim` sensor (whose CPU side starts warm and cools
while the run waits), on a file sensor that the test cools, through its time
limit both ways, and through `harness run` (the manifest, the live lines, the
summary's starting temperature).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from harness.errors import ExitCode
from harness.guard.config import GuardConfig, SimSensorConfig
from harness.guard.policy import Reading
from harness.guard.samples import Limit
from harness.guard.sensors import FileSensor, SimSensor
from harness.guard.session import GuardSession
from harness.guard.start import CoolingReading, judge_start, wait_until_cool
from support.drills import write_temp
from support.fakes import FakeClock
from support.lab import Lab
from support.timing import scaled

LIMIT = Limit(85.0, 78.0, "pause_at_c 85 C")


class Idle:
    """A run the guard watches and never needs to freeze."""

    def pause(self) -> None:
        raise AssertionError("not hot enough to pause")

    def resume(self) -> None:
        pass

    def is_paused(self) -> bool:
        return False


def reading(temp: float, name: str = "gpu") -> Reading:
    return Reading(name, name.upper(), temp, LIMIT)


def test_judge_start_waits_for_every_reading_below_and_gives_up_at_the_limit() -> None:
    config = GuardConfig(start_below_c=55, start_timeout_s=60)
    assert judge_start(config, [reading(54.9), reading(40, "soc")], 0) == "start"
    assert judge_start(config, [reading(54.9), reading(55, "soc")], 0) == "wait"  # below: 55 is not
    assert judge_start(config, [], 10) == "wait"  # nothing read is not cool
    assert judge_start(config, [reading(70)], 59.9) == "wait"
    assert judge_start(config, [reading(70)], 60) == "timed_out"
    assert judge_start(GuardConfig(), [reading(99)], 0) == "start"  # no cooled start asked for


def test_a_cooled_start_on_the_sim_sensor_waits_while_its_warm_cpu_side_cools() -> None:
    # The simulated machine starts with its CPU side warm (60 C); idle, it cools toward 45 C with tau 0.3 s.
    cpu = {"start_c": 60, "idle_c": 45, "hot_c": 100, "heat_tau_s": 0.3, "cool_tau_s": 0.3}
    config = GuardConfig(sensor="sim", poll_s=0.05, start_below_c=55, sim=SimSensorConfig(cpu=cpu))
    sensor = SimSensor(config.sim, config=config)
    seen: list[CoolingReading] = []
    began = time.monotonic()
    facts = wait_until_cool(sensor, config, on_progress=seen.append, cancelled=lambda: False)
    waited = time.monotonic() - began

    assert facts.outcome == "cool" and facts.below_c == 55
    assert facts.hottest_c is not None and facts.hottest_c < 55 and set(facts.temps_c) == {"gpu", "sim_cpu"}
    assert 0.1 <= facts.waited_s <= waited  # 0.3 s x ln(15 / 10) = 0.12 s at least
    first, last = seen[0], seen[-1]
    assert first.outcome is None and dict(first.temps)["CPU (sim)"] >= 55
    assert first.describe().startswith("waiting to cool below 55 C: GPU 45.0 C, CPU (sim) ")
    assert first.describe().endswith(" C; waited 0.0 s of 600 s")
    assert last.outcome == "cool" and last.describe().startswith("cooled below 55 C: ")
    time.sleep(0.1)  # the run has not started yet (its container may take seconds to): it goes on cooling
    assert sensor.read().zones[0].temp_c < facts.temps_c["sim_cpu"]


def test_the_simulated_machine_heats_from_when_the_guard_starts_on_the_run_not_from_the_end_of_the_wait(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    config = GuardConfig(sensor="sim", poll_s=0.05, start_below_c=55, record_every_s=60)
    session = GuardSession.open(config, clock=clock, wall_us=clock.wall_us)
    sleep = lambda seconds: setattr(clock, "now", clock.now + seconds)  # noqa: E731
    facts = session.wait_to_start(on_progress=lambda r: None, cancelled=lambda: False, clock=clock, sleep=sleep)
    assert facts.outcome == "cool"
    clock.now += 10 * config.sim.heat_tau_s  # a container slow to start on a loaded machine
    idle = session.choice.sensor.read()
    assert idle.temp_c <= facts.temps_c["gpu"]  # not a degree warmer: nothing ran yet

    loop = session.start(Idle(), pauses_path=tmp_path / "pauses.jsonl", samples_path=tmp_path / "guard.jsonl")
    try:
        clock.now += config.sim.heat_tau_s
        assert session.choice.sensor.read().temp_c > idle.temp_c + 20  # the run runs: it heats
    finally:
        loop.stop()
        session.close()


def test_a_cooled_start_on_a_file_sensor_the_test_cools(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "70")
    config = GuardConfig(sensor=f"file:{temp}", poll_s=0.05, start_below_c=55)

    def cool_down() -> None:
        for celsius in ("65", "58", "54.5"):
            time.sleep(0.15)
            write_temp(temp, celsius)

    cooling = threading.Thread(target=cool_down)
    cooling.start()
    seen: list[CoolingReading] = []
    facts = wait_until_cool(FileSensor(temp), config, on_progress=seen.append, cancelled=lambda: False)
    cooling.join()

    assert (facts.outcome, facts.temps_c) == ("cool", {"gpu": 54.5})
    assert facts.waited_s >= 0.4
    shown = [dict(r.temps)["GPU"] for r in seen]
    assert shown[0] == 70.0 and shown[-1] == 54.5 and 65.0 in shown and 58.0 in shown
    assert [r.outcome for r in seen][-1] == "cool" and all(r.outcome is None for r in seen[:-1])


@pytest.mark.parametrize(
    "on_timeout, outcome, ends", [("start", "timed_out", "starting anyway"), ("refuse", "refused", "not started")]
)
def test_past_its_time_limit_a_cooled_start_starts_anyway_with_a_note_or_refuses(
    tmp_path: Path, on_timeout: str, outcome: str, ends: str
) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "70")
    config = GuardConfig(
        sensor=f"file:{temp}", poll_s=0.05, start_below_c=55, start_timeout_s=0.2, on_start_timeout=on_timeout
    )
    facts = wait_until_cool(FileSensor(temp), config, on_progress=lambda r: None, cancelled=lambda: False)
    assert facts.outcome == outcome and facts.started is (on_timeout == "start")
    assert facts.note is not None
    assert re.fullmatch(rf"not cooled below 55 C: GPU 70\.0 C; waited \d\.\d s of 0\.2 s; {ends}", facts.note)
    assert facts.waited_s >= 0.2
    assert facts.temps_c == {"gpu": 70.0}


def test_a_stop_asked_for_while_it_waits_ends_the_wait(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "70")
    config = GuardConfig(sensor=f"file:{temp}", poll_s=0.05, start_below_c=55)
    asked = time.monotonic() + 0.2
    facts = wait_until_cool(
        FileSensor(temp), config, on_progress=lambda r: None, cancelled=lambda: time.monotonic() > asked
    )
    assert facts.outcome == "interrupted" and not facts.started


def test_without_start_below_c_the_starting_temperatures_are_read_once(tmp_path: Path) -> None:
    temp = tmp_path / "temp"
    write_temp(temp, "81.5")
    seen: list[CoolingReading] = []
    session = GuardSession.open(GuardConfig(sensor=f"file:{temp}", poll_s=0.05))
    facts = session.wait_to_start(on_progress=seen.append, cancelled=lambda: False)
    assert (facts.outcome, facts.temps_c, seen) == ("read", {"gpu": 81.5}, [])
    assert session.facts()["start"] == {
        "outcome": "read",
        "below_c": None,
        "waited_s": 0.0,
        "hottest_c": 81.5,
        "temps_c": {"gpu": 81.5},
    }


def test_with_no_sensor_a_cooled_start_cannot_wait_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    facts = wait_until_cool(None, GuardConfig(start_below_c=50), on_progress=lambda r: None, cancelled=lambda: False)
    assert facts.outcome == "unread" and facts.started
    assert facts.note == (
        "guard.start_below_c 50 C: no sensor reads a temperature here, so the run cannot wait to cool; "
        "starting without waiting"
    )
    refuse = GuardConfig(start_below_c=50, on_start_timeout="refuse")
    facts = wait_until_cool(None, refuse, on_progress=lambda r: None, cancelled=lambda: False)
    assert (
        facts.outcome == "refused"
        and not facts.started
        and facts.note.endswith("on_start_timeout is refuse: not started")
    )


# --------------------------------------------------------------------------- through `harness run`


def file_guarded(lab: Lab, name: str, temp: Path, **guard: object) -> str:
    settings = {"sensor": f"file:{temp}", "poll_s": 0.1, "min_pause_s": 0, "record_every_s": 0.5, **guard}
    return lab.experiment(name, steps=1, guard=settings)


@pytest.mark.integration
def test_a_run_waits_to_cool_says_so_live_and_its_manifest_and_summary_keep_the_start(
    process_lab: Lab, tmp_path: Path
) -> None:
    lab = process_lab
    temp = tmp_path / "temp"
    write_temp(temp, "70")
    run = file_guarded(lab, "cooled", temp, start_below_c=55)

    process = lab.spawn("run", run)
    assert process.stdout is not None
    lines = []
    for line in process.stdout:  # the machine cools once the run is seen waiting for it
        lines.append(line.rstrip("\n"))
        if "waiting to cool" in line:
            time.sleep(0.3)
            write_temp(temp, "52.5")
            break
    lines += process.stdout.read().splitlines()
    assert process.wait(scaled(60)) == 0, "\n".join(lines)
    assert f"{run}: heat guard: waiting to cool below 55 C: GPU 70.0 C; waited 0.0 s of 600 s" in lines
    assert any(line.startswith(f"{run}: heat guard: cooled below 55 C: GPU 52.5 C; waited ") for line in lines)
    manifest = json.loads((lab.captures / run / "manifest.json").read_text())
    start = manifest["guard"]["start"]
    assert (start["outcome"], start["below_c"], start["hottest_c"], start["temps_c"]) == (
        "cool",
        55.0,
        52.5,
        {"gpu": 52.5},
    )
    assert 0 < start["waited_s"] < 600

    summarized = lab.capture_cli("summarize", "--json")
    assert summarized.exit_code == 0, summarized.output
    summary = json.loads((lab.captures / "summary" / "miles-gb10-lab.json").read_text())
    assert summary["runs"][run]["start_temp_c"] == 52.5
    report = lab.capture_cli("report")
    assert report.exit_code == 0, report.output
    text = (lab.captures / "summary" / "report.md").read_text()
    assert "| start (C) |" in text.splitlines()[text.splitlines().index("## Runs") + 2]
    assert "| 52.5 |" in text


@pytest.mark.integration
def test_a_run_that_cannot_cool_in_time_and_must_not_start_warm_is_refused_and_nothing_is_written(
    process_lab: Lab, tmp_path: Path
) -> None:
    lab = process_lab
    temp = tmp_path / "temp"
    write_temp(temp, "70")
    run = file_guarded(lab, "warm", temp, start_below_c=55, start_timeout_s=0.3, on_start_timeout="refuse")

    done = lab.cli("run", run)

    assert done.exit_code == ExitCode.BUSY, done.output
    shown = rf"error: run {run} not started: heat guard: not cooled below 55 C: GPU 70\.0 C; waited \d\.\d s of 0\.3 s; not started"
    assert re.search(shown, done.output), done.output
    assert not (lab.captures / run).exists() and not (lab.captures / ".attempts").exists()
