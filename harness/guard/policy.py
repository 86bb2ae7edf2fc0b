"""The guard's decision: a pure function of (state, sample, now), with hysteresis.

Nothing here reads a sensor, a clock or a handle: `decide` is given the
sample and the time (monotonic seconds) and returns the next state and what
to do, so every path, the max-pause timeout included, is tested instantly.

Rules (docs/guard.md gives the defaults and their reasons):
- pause at `pause_at_c`, or when a thermal slowdown clock-event bit is set;
- resume once the temperature is at or below `resume_at_c` with no thermal
  bit set, and the pause has lasted `min_pause_s`;
- a pause that reaches `max_pause_s` ends as `on_max_pause` says: resume
  (the next poll may pause again if it is still hot) or stop the run;
- a temperature missing `missing_polls` polls in a row is reported once and
  handled by `on_missing`: pause, carry on, or (the default) pause if the last
  reading was hot. A pause never ends without a reading that says it is cool,
  except through `max_pause_s`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Optional

from harness.guard.config import GuardConfig
from harness.guard.samples import THERMAL_REASONS, Sample


class Action(str, enum.Enum):
    """What the loop does after a poll."""

    NONE = "none"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"  # thaw, close the window, and ask the runner to stop the run


@dataclass(frozen=True)
class GuardState:
    """What the policy remembers between polls."""

    paused: bool = False
    paused_at: Optional[float] = None  # monotonic seconds when the open pause began
    reason: Optional[str] = None  # why the open pause began
    peak_c: Optional[float] = None  # hottest reading of the open pause
    last_temp_c: Optional[float] = None
    last_hot: bool = False  # the last reading was at or above resume_at_c, or showed a thermal bit
    missing: int = 0  # polls in a row without a temperature
    stopped: bool = False  # on_max_pause: stop fired; the policy does nothing more


@dataclass(frozen=True)
class Decision:
    """The action, why, the peak of a window it closes, and a note to report once (or None)."""

    action: Action = Action.NONE
    reason: Optional[str] = None
    peak_c: Optional[float] = None
    note: Optional[str] = None


def thermal_reasons(reasons: Optional[int]) -> list[str]:
    """The names of the thermal slowdown bits set in a clock-event reasons mask."""
    if not reasons:
        return []
    return [name for name, bit in THERMAL_REASONS.items() if reasons & bit]


def decide(config: GuardConfig, state: GuardState, sample: Optional[Sample], now: float) -> tuple[GuardState, Decision]:
    """The next state and what to do, given this poll's sample (None: no reading) at monotonic time `now`."""
    if state.stopped:
        return state, Decision()
    temp = sample.temp_c if sample is not None else None
    throttling = thermal_reasons(sample.reasons if sample is not None else None)
    state, note = _remember(config, state, temp, throttling)

    if not state.paused:
        why = _pause_reason(config, state, temp, throttling)
        if why is None:
            return state, Decision(note=note)
        state = replace(state, paused=True, paused_at=now, reason=why, peak_c=state.last_temp_c)
        return state, Decision(Action.PAUSE, why, state.peak_c, note)

    state = replace(state, peak_c=_hotter(state.peak_c, temp))
    held_s = now - (state.paused_at if state.paused_at is not None else now)
    if held_s >= config.max_pause_s:
        ended = replace(state, paused=False, paused_at=None, reason=None, peak_c=None)
        if config.on_max_pause == "stop":
            why = f"not cooled to resume_at_c within max_pause_s {config.max_pause_s:g} s; stopping the run"
            return replace(ended, stopped=True), Decision(Action.STOP, why, state.peak_c, note)
        why = f"max_pause_s {config.max_pause_s:g} s reached; resuming"
        return ended, Decision(Action.RESUME, why, state.peak_c, note)
    cool = temp is not None and temp <= config.resume_at_c and not throttling
    if cool and held_s >= config.min_pause_s:
        ended = replace(state, paused=False, paused_at=None, reason=None, peak_c=None)
        return ended, Decision(Action.RESUME, f"cooled to {temp:.1f} C", state.peak_c, note)
    return state, Decision(note=note)


def is_hot(state: GuardState) -> bool:
    """True while every sample is worth keeping: paused, or the last reading was hot."""
    return state.paused or state.last_hot


def _remember(
    config: GuardConfig, state: GuardState, temp: Optional[float], throttling: list[str]
) -> tuple[GuardState, Optional[str]]:
    """Count missing readings (noting the first time they reach `missing_polls` and their return)."""
    if temp is None:
        missing = state.missing + 1
        note = None
        if missing == config.missing_polls:
            note = f"no temperature reading for {missing} polls ({_last(state)}); {_missing_handling(config, state)}"
        return replace(state, missing=missing, last_hot=state.last_hot or bool(throttling)), note
    note = None
    if state.missing >= config.missing_polls:
        note = f"temperature readings back ({temp:.1f} C) after {state.missing} missing polls"
    hot = temp >= config.resume_at_c or bool(throttling)
    return replace(state, missing=0, last_temp_c=temp, last_hot=hot), note


def _pauses_when_missing(config: GuardConfig, state: GuardState) -> bool:
    return config.on_missing == "pause" or (config.on_missing == "pause_if_hot" and state.last_hot)


def _last(state: GuardState) -> str:
    return "never read" if state.last_temp_c is None else f"last {state.last_temp_c:.1f} C"


def _missing_handling(config: GuardConfig, state: GuardState) -> str:
    if _pauses_when_missing(config, state):
        return "keeping the run paused" if state.paused else "pausing the run"
    return "the run stays paused until a cool reading" if state.paused else "carrying on"


def _pause_reason(
    config: GuardConfig, state: GuardState, temp: Optional[float], throttling: list[str]
) -> Optional[str]:
    if temp is not None and temp >= config.pause_at_c:
        return f"temperature {temp:.1f} C >= pause_at_c {config.pause_at_c:g} C"
    if throttling:
        return "clock event " + "+".join(throttling)
    if state.missing >= config.missing_polls and _pauses_when_missing(config, state):
        return f"no temperature reading for {state.missing} polls ({_last(state)})"
    return None


def _hotter(a: Optional[float], b: Optional[float]) -> Optional[float]:
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)
