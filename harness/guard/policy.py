"""The guard's decision: a pure function of (state, sample, now), with hysteresis.

Nothing here reads a sensor, a clock or a handle: `decide` is given the
sample and the time (monotonic seconds) and returns the next state and what
to do, so every path, the max-pause timeout included, is tested instantly.

Rules (docs/guard.md gives the defaults and their reasons):
- pause when the GPU reaches `pause_at_c`, when a watched zone reaches its own
  pause point (`zone_margin_c` below its lowest hot or critical trip point),
  or when a thermal slowdown clock-event bit is set; the reason names the
  temperature that did it;
- resume once every watched temperature's latest reading is at or below its
  resume point with no thermal bit set, and the pause has lasted `min_pause_s`;
- a pause that reaches `max_pause_s` ends as `on_max_pause` says: resume
  (the next poll may pause again if it is still hot) or stop the run;
- a pause the engine could not make (the loop retried the freeze at once) ends
  as `on_pause_failure` says (`pause_failed`): stop the run, or let it go on
  unpaused until the next hot poll tries again;
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
from harness.guard.samples import THERMAL_REASONS, Limit, Sample


class Action(str, enum.Enum):
    """What the loop does after a poll."""

    NONE = "none"
    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"  # thaw, close the window, and ask the runner to stop the run


@dataclass(frozen=True)
class Latest:
    """A watched temperature's latest reading, and the point at or below which it lets a pause end."""

    name: str
    label: str
    temp_c: float
    resume_at_c: float


@dataclass(frozen=True)
class GuardState:
    """What the policy remembers between polls."""

    paused: bool = False
    paused_at: Optional[float] = None  # monotonic seconds when the open pause began
    reason: Optional[str] = None  # why the open pause began
    peak_c: Optional[float] = None  # hottest reading of the open pause
    last_temp_c: Optional[float] = None  # the hottest temperature of the last poll that read one
    last_hot: bool = False  # the last reading was at or above a resume point, or showed a thermal bit
    missing: int = 0  # polls in a row without a temperature
    stopped: bool = False  # on_max_pause: stop fired; the policy does nothing more
    latest: tuple[Latest, ...] = ()  # each watched temperature's latest reading (a zone unread this poll keeps its)


@dataclass(frozen=True)
class Decision:
    """The action, why, the peak of a window it closes, and a note to report once (or None); `failed`: the
    engine's words for a pause it could not make (`pause_failed`)."""

    action: Action = Action.NONE
    reason: Optional[str] = None
    peak_c: Optional[float] = None
    note: Optional[str] = None
    failed: Optional[str] = None


@dataclass(frozen=True)
class Reading:
    """One temperature of this poll with what it is judged against."""

    name: str
    label: str
    temp_c: float
    limit: Limit


GPU = "gpu"
GPU_LABEL = "GPU"


def readings(config: GuardConfig, sample: Optional[Sample]) -> list[Reading]:
    """The temperatures `sample` holds, each with its limit: the GPU's (pause_at_c), then each zone's own."""
    if sample is None:
        return []
    found = []
    if sample.temp_c is not None:
        found.append(Reading(GPU, GPU_LABEL, sample.temp_c, Limit(config.pause_at_c, config.resume_at_c, "")))
    found += [Reading(z.name, z.label, z.temp_c, z.limit) for z in sample.zones if z.temp_c is not None]
    return found


def thermal_reasons(reasons: Optional[int]) -> list[str]:
    """The names of the thermal slowdown bits set in a clock-event reasons mask."""
    if not reasons:
        return []
    return [name for name, bit in THERMAL_REASONS.items() if reasons & bit]


def decide(config: GuardConfig, state: GuardState, sample: Optional[Sample], now: float) -> tuple[GuardState, Decision]:
    """The next state and what to do, given this poll's sample (None: no reading) at monotonic time `now`."""
    if state.stopped:
        return state, Decision()
    read = readings(config, sample)
    hottest = max((reading.temp_c for reading in read), default=None)
    throttling = thermal_reasons(sample.reasons if sample is not None else None)
    state, note = _remember(config, state, read, throttling)

    if not state.paused:
        why = _pause_reason(config, state, read, throttling)
        if why is None:
            return state, Decision(note=note)
        state = replace(state, paused=True, paused_at=now, reason=why, peak_c=state.last_temp_c)
        return state, Decision(Action.PAUSE, why, state.peak_c, note)

    state = replace(state, peak_c=_hotter(state.peak_c, hottest))
    if now - _since(state, now) >= config.max_pause_s:
        return _max_pause_ends(config, state, note)
    cool = bool(read) and not throttling and all(latest.temp_c <= latest.resume_at_c for latest in state.latest)
    if cool and now - _since(state, now) >= config.min_pause_s:
        ended = replace(state, paused=False, paused_at=None, reason=None, peak_c=None)
        return ended, Decision(Action.RESUME, _cooled(state), state.peak_c, note)
    return state, Decision(note=note)


def expire(config: GuardConfig, state: GuardState, now: float) -> tuple[GuardState, Decision]:
    """At `max_pause_deadline`: the pause ends as `on_max_pause` says, without waiting for a reading."""
    if state.stopped or not state.paused or now - _since(state, now) < config.max_pause_s:
        return state, Decision()
    return _max_pause_ends(config, state, None)


def max_pause_deadline(config: GuardConfig, state: GuardState) -> Optional[float]:
    """When (monotonic seconds) the open pause reaches `max_pause_s`; None when there is none."""
    if state.stopped or not state.paused or state.paused_at is None:
        return None
    return state.paused_at + config.max_pause_s


def pause_failed(config: GuardConfig, state: GuardState, error: str) -> tuple[GuardState, Decision]:
    """After a PAUSE the engine refused twice: the run was never frozen; `on_pause_failure` says what follows.

    `stop` stops guarding and asks the runner to stop the run (STOP, its reason
    the run's cause); `continue` lets it run on unpaused, with a note, and the
    next hot poll tries again.
    """
    where = f"at {state.peak_c:.1f} C" if state.peak_c is not None else f"({state.reason})"
    why = f"could not pause it {where}: {error}"
    cleared = replace(state, paused=False, paused_at=None, reason=None, peak_c=None)
    if config.on_pause_failure == "stop":
        note = f"{why}; stopping the run (guard.on_pause_failure: stop)"
        return replace(cleared, stopped=True), Decision(Action.STOP, why, state.peak_c, note, error)
    note = f"{why}; the run goes on unpaused (guard.on_pause_failure: continue) and the next hot poll tries again"
    return cleared, Decision(Action.NONE, None, state.peak_c, note, error)


def _since(state: GuardState, now: float) -> float:
    return state.paused_at if state.paused_at is not None else now


def _max_pause_ends(config: GuardConfig, state: GuardState, note: Optional[str]) -> tuple[GuardState, Decision]:
    ended = replace(state, paused=False, paused_at=None, reason=None, peak_c=None)
    if config.on_max_pause == "stop":
        why = f"not cooled to resume_at_c within max_pause_s {config.max_pause_s:g} s; stopping the run"
        return replace(ended, stopped=True), Decision(Action.STOP, why, state.peak_c, note)
    why = f"max_pause_s {config.max_pause_s:g} s reached; resuming"
    return ended, Decision(Action.RESUME, why, state.peak_c, note)


def _cooled(state: GuardState) -> str:
    if len(state.latest) == 1:
        return f"cooled to {state.latest[0].temp_c:.1f} C"
    return "cooled: " + ", ".join(f"{latest.label} {latest.temp_c:.1f} C" for latest in state.latest)


def is_hot(state: GuardState) -> bool:
    """True while every sample is worth keeping: paused, or the last reading was hot."""
    return state.paused or state.last_hot


def _remember(
    config: GuardConfig, state: GuardState, read: list[Reading], throttling: list[str]
) -> tuple[GuardState, Optional[str]]:
    """Count missing readings (noting the first time they reach `missing_polls` and their return); keep each
    watched temperature's latest reading."""
    if not read:
        missing = state.missing + 1
        note = None
        if missing == config.missing_polls:
            note = f"no temperature reading for {missing} polls ({_last(state)}); {_missing_handling(config, state)}"
        return replace(state, missing=missing, last_hot=state.last_hot or bool(throttling)), note
    hottest = max(reading.temp_c for reading in read)
    note = None
    if state.missing >= config.missing_polls:
        note = f"temperature readings back ({hottest:.1f} C) after {state.missing} missing polls"
    latest = {latest.name: latest for latest in state.latest}
    for reading in read:
        latest[reading.name] = Latest(reading.name, reading.label, reading.temp_c, reading.limit.resume_at_c)
    hot = any(reading.temp_c >= reading.limit.resume_at_c for reading in read) or bool(throttling)
    return replace(state, missing=0, last_temp_c=hottest, last_hot=hot, latest=tuple(latest.values())), note


def _pauses_when_missing(config: GuardConfig, state: GuardState) -> bool:
    return config.on_missing == "pause" or (config.on_missing == "pause_if_hot" and state.last_hot)


def _last(state: GuardState) -> str:
    return "never read" if state.last_temp_c is None else f"last {state.last_temp_c:.1f} C"


def _missing_handling(config: GuardConfig, state: GuardState) -> str:
    if _pauses_when_missing(config, state):
        return "keeping the run paused" if state.paused else "pausing the run"
    return "the run stays paused until a cool reading" if state.paused else "carrying on"


def _pause_reason(config: GuardConfig, state: GuardState, read: list[Reading], throttling: list[str]) -> Optional[str]:
    over = [reading for reading in read if reading.temp_c >= reading.limit.pause_at_c]
    if over:
        worst = max(over, key=lambda reading: reading.temp_c - reading.limit.pause_at_c)  # the GPU first on a tie
        if worst.name == GPU:
            return f"{GPU_LABEL} {worst.temp_c:.1f} C >= pause_at_c {config.pause_at_c:g} C"
        return f"{worst.label} {worst.temp_c:.1f} C >= {worst.limit.basis}"
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
