"""Clocks a test sets by hand, so a loop's timing is decided by the test and never by how busy the machine is."""

from __future__ import annotations

WALL_EPOCH_US = 1_700_000_000_000_000  # what a FakeClock's wall clock reads at now == 0


class FakeClock:
    """A monotonic clock at `now` seconds (set it), and a wall clock in microseconds that moves with it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def wall_us(self) -> int:
        return WALL_EPOCH_US + int(self.now * 1e6)


class FakeWall:
    """A monotonic clock and a sleep that advances it; `freeze_on_sleep` makes one sleep last longer."""

    def __init__(self) -> None:
        self.t = 100.0
        self.sleeps: list[float] = []
        self.freeze_on_sleep: dict[int, float] = {}

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds + self.freeze_on_sleep.get(len(self.sleeps), 0.0)
