"""How long a run has left: the median pause-adjusted step time so far, times the steps to go (pure).

A step's time is the wall time between its end and the end of the step
before (the run's start, for the first), less the wall time the heat guard
held the run frozen in between: a pause says nothing about how long the
next step takes. The median, not the mean, so one step that waited on a
slow group does not move the estimate much. No estimate before the first
complete step.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Optional

from harness.times import clock_text


@dataclass
class TimeLeft:
    """The steps of one run as they complete, in wall seconds from any fixed origin (a monotonic clock)."""

    started_s: float
    ends_s: list[float] = field(default_factory=list)
    paused_at_ends_s: list[float] = field(default_factory=list)  # wall s held frozen, in all, at each end

    def step(self, at_s: float, paused_total_s: float) -> None:
        """A step completed at `at_s`, the run having been held frozen `paused_total_s` in all by then."""
        self.ends_s.append(at_s)
        self.paused_at_ends_s.append(paused_total_s)

    def step_times_s(self) -> list[float]:
        """Each complete step's wall time with its pauses taken out."""
        times = []
        last_end, last_paused = self.started_s, 0.0
        for end, paused in zip(self.ends_s, self.paused_at_ends_s):
            times.append(max(0.0, (end - last_end) - (paused - last_paused)))
            last_end, last_paused = end, paused
        return times

    def median_step_s(self) -> Optional[float]:
        """The median pause-adjusted step time, or None before the first complete step."""
        times = self.step_times_s()
        return statistics.median(times) if times else None

    def left_s(self, steps_to_go: int, now_s: Optional[float] = None, paused_total_s: float = 0.0) -> Optional[float]:
        """Seconds to go for `steps_to_go` more steps; the step under way has used some of its time already."""
        median = self.median_step_s()
        if median is None:
            return None
        if steps_to_go <= 0:
            return 0.0
        under_way = 0.0
        if now_s is not None:
            last_end = self.ends_s[-1] if self.ends_s else self.started_s
            last_paused = self.paused_at_ends_s[-1] if self.paused_at_ends_s else 0.0
            under_way = max(0.0, (now_s - last_end) - (paused_total_s - last_paused))
        return max(0.0, steps_to_go * median - min(under_way, median))


def format_left(seconds: Optional[float]) -> str:
    """`~12:05 left` (h:mm:ss over an hour), or `-` with no estimate yet."""
    if seconds is None:
        return "-"
    return f"~{clock_text(seconds)}"
