"""Time for the simulated trainer: simulated (`--time-scale 0`) or slept and measured (`X > 0`).

The trainer lets simulated time pass with `advance(seconds)` and reads the
time with `now()`; every duration it reports is a difference of two `now()`
readings, as Miles's timers are.

- `SimulatedClock`: time passes at once; `now()` is the sum of what passed.
- `ScaledClock(X)`: `advance(s)` sleeps X * s wall seconds in ticks of at
  most `tick_s`, and counts each tick as progress for the time it asked to
  sleep, not for the time that went by. A process that is frozen (SIGSTOP,
  `docker pause`) therefore makes no progress while frozen, and needs the
  whole remaining time after it thaws. `now()` is the wall time measured
  since the start divided by X, so a pause shows in every duration that
  spans it, scaled like the rest: the way it shows in a real Miles log.

Both check for a stop request before each tick and raise `Stopped`;
`check_stop()` does it between ticks, for work that takes no simulated time
(a rollout is decided before its time passes).
"""

from __future__ import annotations

import time
from typing import Callable, Optional, Protocol

StopRequest = Callable[[], Optional[int]]  # the signal that asked the run to stop, or None


class Stopped(Exception):
    """A signal asked the run to stop."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


class Clock(Protocol):
    scale: float

    def advance(self, seconds: float) -> None:
        """Let this many simulated seconds pass (raises Stopped when a stop was requested)."""

    def now(self) -> float:
        """Simulated seconds since the clock started."""

    def check_stop(self) -> None:
        """Raise Stopped when a stop was requested."""


def _never() -> Optional[int]:
    return None


class _StopChecked:
    """What both clocks share: the stop request they check."""

    _stop_requested: StopRequest

    def check_stop(self) -> None:
        signum = self._stop_requested()
        if signum is not None:
            raise Stopped(signum)


class SimulatedClock(_StopChecked):
    """`--time-scale 0`: as fast as the CPU goes; durations are simulated seconds."""

    scale = 0.0

    def __init__(self, stop_requested: StopRequest = _never) -> None:
        self._now = 0.0
        self._stop_requested = stop_requested

    def advance(self, seconds: float) -> None:
        self.check_stop()
        if seconds > 0:
            self._now += seconds

    def now(self) -> float:
        return self._now


class ScaledClock(_StopChecked):
    """`--time-scale X > 0`: sleeps X wall seconds per simulated second; durations are wall / X."""

    def __init__(
        self,
        scale: float,
        stop_requested: StopRequest = _never,
        tick_s: float = 0.05,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not scale > 0:
            raise ValueError(f"time scale must be positive, not {scale}")
        self.scale = scale
        self._stop_requested = stop_requested
        self._tick_s = tick_s
        self._sleep = sleep
        self._monotonic = monotonic
        self._start = monotonic()

    def advance(self, seconds: float) -> None:
        wall = seconds * self.scale
        while True:
            self.check_stop()
            if wall <= 1e-9:
                return
            tick = min(self._tick_s, wall)
            self._sleep(tick)
            wall -= tick  # what was asked, not what passed: a frozen tick is one tick

    def now(self) -> float:
        return (self._monotonic() - self._start) / self.scale


def make_clock(scale: float, stop_requested: StopRequest = _never) -> Clock:
    """The clock for a time scale: simulated for 0, slept and measured otherwise."""
    return SimulatedClock(stop_requested) if scale == 0 else ScaledClock(scale, stop_requested)
