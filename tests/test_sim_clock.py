"""The simulator's clocks: simulated time, and scaled wall time where a frozen process makes no progress."""

from __future__ import annotations

import pytest

from harness.sim.clock import ScaledClock, SimulatedClock, Stopped, make_clock
from support.fakes import FakeWall


def scaled(wall: FakeWall, scale: float, stop=lambda: None) -> ScaledClock:
    return ScaledClock(scale, stop, tick_s=0.05, sleep=wall.sleep, monotonic=wall.monotonic)


def test_time_scale_zero_passes_simulated_time_at_once() -> None:
    clock = make_clock(0)
    assert isinstance(clock, SimulatedClock)
    clock.advance(58.0)
    clock.advance(-1.0)  # nothing passes backwards
    assert clock.now() == 58.0


def test_a_scaled_clock_sleeps_x_times_the_simulated_time_in_small_ticks() -> None:
    wall = FakeWall()
    clock = scaled(wall, 0.1)
    clock.advance(10.0)  # 1 s of wall time
    assert len(wall.sleeps) == 20 and max(wall.sleeps) <= 0.05
    assert sum(wall.sleeps) == pytest.approx(1.0)
    assert clock.now() == pytest.approx(10.0)


def test_a_frozen_tick_counts_as_one_tick_and_the_freeze_shows_in_now() -> None:
    wall = FakeWall()
    wall.freeze_on_sleep = {3: 4.0}  # the process was stopped for 4 s during its third tick
    clock = scaled(wall, 0.1)
    clock.advance(10.0)
    assert len(wall.sleeps) == 20  # no progress was made while frozen: every tick is still slept
    assert clock.now() == pytest.approx(10.0 + 4.0 / 0.1)  # the pause, scaled like the rest


def test_a_stop_request_ends_an_advance_between_ticks() -> None:
    wall = FakeWall()
    requests: list[int | None] = [None, None, 15]
    clock = scaled(wall, 1.0, stop=lambda: requests.pop(0) if requests else 15)
    with pytest.raises(Stopped) as stopped:
        clock.advance(60.0)
    assert stopped.value.signum == 15 and len(wall.sleeps) == 2
    with pytest.raises(Stopped):
        SimulatedClock(lambda: 2).advance(1.0)


def test_the_time_scale_must_be_positive_for_a_scaled_clock() -> None:
    with pytest.raises(ValueError):
        ScaledClock(0.0)
