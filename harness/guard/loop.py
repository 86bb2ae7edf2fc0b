"""The guard loop: poll a sensor, let the policy decide, pause or resume a handle, keep the records.

It runs in a thread beside the run and writes two files (CONTRACT, fsynced
line by line, so a hard power-off keeps what was written):

- pauses.jsonl: each window `{"start", "end", "reason", "peak_c"}` is
  appended with `end` null *before* the run is paused, and again with its end
  *after* the run is resumed, so a frozen run always has its open window on
  disk and every window covers the whole freeze. The last line per start is
  the truth. A freeze the engine refused (at once and on its retry) closes
  its window at its own start with `"failed"` (the engine's words) and
  `"on_pause_failure"` (what the guard did then: `stop` or `continue`).
- guard.jsonl: samples `{"t", "temp_c", "reasons", "power_w", "paused",
  "gpu_c", "zones"}`, every poll while hot or paused, one every
  `record_every_s` otherwise, each written *before* the poll acts on it; and,
  before the first sample and whenever another zone is watched, a line
  `{"t", "watch"}` with what each temperature is judged against, so the
  guard's figure can be drawn from the capture alone.

A pause never outlasts `max_pause_s`: the loop wakes at the limit itself
(counted from the window's start) rather than at the next poll after it.

`stop()` thaws the handle whatever happened before, and closes the open window.
A window is closed only once the run is known to run again: a thaw that fails
while the run still looks frozen (or cannot be asked) leaves it open, retried
at the next poll, and `harness recover` closes what a stopped guard could not.

The sensor is read off the lock, in a thread of its own, and waited for at
most `poll_s` (READ_WAIT_MIN_S at least): a read that blocks (a FIFO, a wedged
NVML call) is a missing reading, and no second read starts while it hangs, so
the policy's missing-reading rules and `max_pause_s` (from the clock) still
act, and `stop()` is prompt. A reading that cannot be true (sensors.implausible)
is a missing reading too, noted once.

A guard that finds its target frozen at its first reading (its last guard was
killed while the run was paused) thaws it at once when the GPU is cool, and
otherwise keeps it as a pause of its own, thawed once cool.

A run that has ended needs no guard: no window is opened for it, and a pause or
a thaw that fails because it ended stops the guard without a note. Only a run
that ends in the instant between that check and the freeze leaves a window
closed at its own start without `failed` (nothing was paused, and nothing failed).

A freeze the engine refuses while the run goes on is tried again at once; if
that fails too, the pause failed: recorded as above, and `on_pause_failure`
(harness.guard.policy.pause_failed) stops the run or lets it go on.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Protocol, Union

from harness.capture import append_jsonl
from harness.engines import EXITED, GONE
from harness.errors import HarnessError
from harness.guard.config import GuardConfig
from harness.guard.policy import (
    GPU_LABEL,
    Action,
    Decision,
    GuardState,
    decide,
    expire,
    is_hot,
    max_pause_deadline,
    pause_failed,
)
from harness.guard.reader import READ_WAIT_MIN_S, BoundedReader
from harness.guard.records import (
    FailedPauseRecord,
    PauseRecord,
    SampleRecord,
    WatchRecord,
    sample_record,
    watch_record,
)
from harness.guard.samples import (
    Clock,
    PauseAware,
    Sample,
    Sensor,
    WallClock,
    ZoneTemp,
    implausible,
    wall_clock_us,
    without_implausible_zones,
)
from harness.times import format_time_us

ENDED_WAIT_S = 1.0  # after a failed pause or thaw: how long to wait for the engine to say the run ended


class Pausable(Protocol):
    """What the guard pulls: every engine's run handle has these."""

    def pause(self) -> None:
        """Freeze the whole run."""

    def resume(self) -> None:
        """Thaw it."""

    def is_paused(self) -> bool:
        """True while frozen."""


@dataclass(frozen=True)
class GuardReading:
    """The guard as live progress and status show it."""

    temp_c: Optional[float] = None
    paused: bool = False
    paused_since: Optional[str] = None  # RFC 3339 start of the open window
    reason: Optional[str] = None  # why the open window opened
    pauses: int = 0  # windows in which the run was frozen, so far
    pause_failures: int = 0  # pauses the engine could not make (each recorded in pauses.jsonl)
    paused_s: float = 0.0  # seconds spent in closed windows
    stop_reason: Optional[str] = None  # set when on_max_pause: stop fired
    temps: tuple[tuple[str, float], ...] = ()  # (label, C) of each temperature read at the last poll


@dataclass(frozen=True)
class GuardHooks:
    """What the loop calls from its thread, none of which may block: `on_note` gets each problem once, `on_stop`
    the reason of a max-pause stop, `on_reading` the reading after every poll (live progress), and `append`
    writes a record (default: the capture's append_jsonl; a run on a Ray node also streams it to the driver)."""

    on_note: Optional[Callable[[str], None]] = None
    on_stop: Optional[Callable[[str], None]] = None
    on_reading: Optional[Callable[[GuardReading], None]] = None
    append: Optional[Callable[[Path, object], None]] = None


NO_HOOKS = GuardHooks()


class GuardLoop:
    """Guards one handle with one sensor; `start()` runs it in a thread, `stop()` ends it and thaws the run.

    Its `hooks` run in the guard's thread and must not block (GuardHooks).
    """

    def __init__(
        self,
        handle: Pausable,
        sensor: Sensor,
        config: GuardConfig,
        *,
        pauses_path: Path,
        samples_path: Path,
        clock: Clock = time.monotonic,
        wall_us: WallClock = wall_clock_us,
        hooks: GuardHooks = NO_HOOKS,
    ) -> None:
        self.handle = handle
        self.sensor = sensor
        self.config = config
        self.pauses_path = Path(pauses_path)
        self.samples_path = Path(samples_path)
        self.notes: list[str] = []
        self._clock = clock
        self._wall_us = wall_us
        self._on_note = hooks.on_note
        self._on_stop = hooks.on_stop
        self._on_reading = hooks.on_reading
        self._append_record = hooks.append if hooks.append is not None else append_jsonl
        self._reader = BoundedReader(sensor)
        self._noted: set[str] = set()
        self._notes_lock = (
            threading.Lock()
        )  # notes come from the guard's thread (reads are off the main lock) and stop()
        self._looked = False  # whether a first reading has been compared with the target's frozen state
        self._state = GuardState()
        self._window: Optional[PauseRecord] = None  # the open pause window, as written
        self._window_start_us = 0
        self._window_peak_c: Optional[float] = None  # the peak of a window whose thaw failed
        self._window_at = 0.0  # monotonic seconds when the open window's start was stamped
        self._last_recorded: Optional[float] = None
        self._watched: Optional[frozenset[str]] = None  # the zones the last watch line named
        self._reading = GuardReading()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def reading(self) -> GuardReading:
        """The latest temperature and pause state (safe to read from any thread)."""
        return self._reading

    def start(self) -> "GuardLoop":
        """Poll now and then every `poll_s`, in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="heat-guard", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0, *, thaw: bool = True) -> None:
        """End the polling, then thaw the run and close its open window. Safe to call twice.

        `thaw=False` (the engine is gone, so asking it could hang): the run and
        its open window are left as they are, for `harness recover`.
        """
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(max(timeout_s, 2 * self.config.poll_s))
        locked = self._lock.acquire(timeout=timeout_s)
        before = self._reading
        try:
            if thaw:
                self._thaw()
            elif self._window is not None:
                self._note(
                    "the run may still be frozen: its pause window stays open until `harness recover` "
                    "thaws it and closes the window"
                )
        finally:
            if locked:
                self._lock.release()
        if self._reading != before and self._on_reading is not None:
            self._on_reading(self._reading)

    def __enter__(self) -> "GuardLoop":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        due = self._clock()
        tried: Optional[float] = None  # a max-pause deadline acted on whose thaw failed: retried at the next poll
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as err:  # noqa: BLE001 - the guard reports and keeps guarding
                self._note(f"guard poll failed: {type(err).__name__}: {err}")
            if self._state.stopped:
                return
            due += self.config.poll_s
            now = self._clock()
            if due < now:  # a slow poll: skip the missed ones rather than firing them in a burst
                due = now
            while True:  # until the next poll; a max-pause limit that falls before it is acted on at the limit
                deadline = max_pause_deadline(self.config, self._state)
                if deadline is None or deadline >= due or deadline == tried:
                    break
                if self._stop.wait(max(0.0, deadline - self._clock())):
                    return
                if self._expire():
                    tried = deadline
                if self._halted():
                    return
            if self._stop.wait(max(0.0, due - self._clock())):
                return

    def _halted(self) -> bool:
        """Whether the policy stopped guarding (on_max_pause: stop fired)."""
        return self._state.stopped

    def _expire(self) -> bool:
        """At the max-pause limit: end the pause as on_max_pause says, without waiting for a reading. Whether it
        acted (False: the limit is not reached yet, or the guard is stopping)."""
        with self._lock:
            if self._stop.is_set():
                return False
            state, decision = expire(self.config, self._state, self._clock())
            if decision.action is Action.NONE:
                return False
            decision = self._act(state, decision, None, record=False)
        self._after(decision)
        return True

    def poll(self) -> Decision:
        """One poll: read (off the lock, bounded), decide, act, record."""
        if self._stop.is_set() and self._thread is not None:
            return Decision()
        sample = self._read()
        with self._lock:
            if self._stop.is_set() and self._thread is not None:
                return Decision()
            found_frozen = self._first_look(sample)
            now = self._clock()
            state, decision = decide(self.config, self._state, sample, now)
            if found_frozen and sample is not None:  # found frozen at a reading
                state, decision = self._found_frozen(state, decision, sample, now)
            decision = self._act(state, decision, sample, freeze=not found_frozen)
        self._after(decision)
        return decision

    def _act(
        self,
        state: GuardState,
        decision: Decision,
        sample: Optional[Sample],
        *,
        freeze: bool = True,
        record: bool = True,
    ) -> Decision:
        """Record the sample (fsynced, before anything is done about it), then pause or resume; the decision as it
        was carried out (a pause the engine refused becomes `pause_failed`'s). Under the lock."""
        if decision.note:
            self._note(decision.note)
        if record:
            self._record(sample, decision, state)
        if decision.action is Action.PAUSE:
            froze = self._pause(decision, freeze=freeze)
            if froze is True:
                # max_pause_s counts from the window's start, stamped just before the freeze
                state = replace(state, paused_at=self._window_at)
            elif froze is False:
                state = replace(state, paused=False, paused_at=None, reason=None, peak_c=None)
            else:  # the engine refused, twice: the run was never frozen
                state, decision = pause_failed(self.config, state, froze)
                self._void_window(failed=froze)
                if decision.note:
                    self._note(decision.note)
        elif decision.action in (Action.RESUME, Action.STOP):
            thawed = self._resume(decision.peak_c, decision.reason)
            if not thawed and decision.action is Action.RESUME:
                state = replace(self._state, peak_c=decision.peak_c)  # still frozen: resume again next poll
        self._state = state
        # A poll without a reading shows none; acting at the max-pause limit (no poll) keeps the last one shown.
        if sample is not None:
            self._publish(sample.hottest_c, decision, _labelled(sample))
        elif record:
            self._publish(None, decision, ())
        else:
            self._publish(self._reading.temp_c, decision, self._reading.temps)
        return decision

    def _after(self, decision: Decision) -> None:
        """What follows an action, off the lock: the live reading, and a stop's callback (max pause, or a pause
        that failed)."""
        if self._on_reading is not None:
            self._on_reading(self._reading)
        if decision.action is Action.STOP:
            if decision.failed is None:  # a failed pause's note was said as it failed
                self._note(decision.reason or "max_pause_s reached; stopping the run")
            if self._on_stop is not None:
                self._on_stop(decision.reason or "max_pause_s")

    def _read(self) -> Optional[Sample]:
        sample, problem = self._reader.read(max(self.config.poll_s, READ_WAIT_MIN_S), self._stop)
        if problem:
            self._note(problem)
        if sample is None:
            return None
        why = implausible(sample)
        if why is not None:
            self._note(
                f"sensor {self.sensor.name}: an implausible reading ({why}) counts as a missing reading",
                once_as="implausible",
            )
            return None
        sample, zones = without_implausible_zones(sample)
        for zone_why in zones:
            self._note(
                f"sensor {self.sensor.name}: an implausible reading ({zone_why}) counts as a missing reading",
                once_as=f"implausible {zone_why.split(':')[0]}",
            )
        return sample

    def _first_look(self, sample: Optional[Sample]) -> bool:
        """At the first reading: whether the target is frozen, by someone else (a guard killed while it paused)."""
        if self._looked or sample is None or sample.hottest_c is None:
            return False
        self._looked = True
        return self._window is None and not self._state.paused and self._answers_paused() is True

    def _found_frozen(
        self, state: GuardState, decision: Decision, sample: Sample, now: float
    ) -> tuple[GuardState, Decision]:
        """A target found frozen: thawed at once if the GPU is cool, else kept as a pause of ours until it is."""
        temp = sample.hottest_c
        if decision.action is Action.PAUSE:
            return state, decision
        if state.last_hot:
            why = f"found frozen at {temp:.1f} C, above resume_at_c {self.config.resume_at_c:g} C"
            state = replace(state, paused=True, paused_at=now, reason=why, peak_c=temp)
            return state, replace(decision, action=Action.PAUSE, reason=why, peak_c=temp)
        try:
            self.handle.resume()
            self._note(f"found the run frozen with the GPU cool ({temp:.1f} C): thawed it")
        except Exception as err:  # noqa: BLE001 - said, and the guard goes on
            self._note(
                f"found the run frozen with the GPU cool ({temp:.1f} C) but could not thaw it: "
                f"{type(err).__name__}: {err}"
            )
        return state, decision

    def _answers_paused(self) -> Optional[bool]:
        """Whether the target is frozen; None when it cannot be asked."""
        try:
            return bool(self.handle.is_paused())
        except Exception:  # noqa: BLE001 - cannot tell
            return None

    def _pause(self, decision: Decision, *, freeze: bool = True) -> Union[bool, str]:
        """Write the open window, then freeze the run: True when it froze; False when the run has ended (the
        guard stops, without a note); else the engine's words for a freeze it refused twice (the window stays
        open for the caller to close as failed).

        A run that has ended gets no window. `freeze=False`: the run was found
        frozen already; only the window is written.
        """
        if self._ended(wait_s=0):
            self._stop.set()
            return False
        self._window_at = self._clock()
        self._window_start_us = self._wall_us()
        self._window = {
            "start": format_time_us(self._window_start_us),
            "end": None,
            "reason": decision.reason,
            "peak_c": decision.peak_c,
        }
        self._append(self.pauses_path, self._window)
        if not freeze:
            self._tell_sensor(True)
            return True
        refused = self._freeze()
        if refused is not None:
            if self._ended(wait_s=ENDED_WAIT_S):  # e.g. the run just exited: nothing failed
                self._stop.set()
                return self._void_window()
            return refused
        # A signal to a process that has just exited freezes nothing, and raises nothing.
        if not self._still_frozen() and self._ended(wait_s=ENDED_WAIT_S):
            self._stop.set()
            return self._void_window()
        self._tell_sensor(True)
        return True

    def _freeze(self) -> Optional[str]:
        """Freeze the run, retrying at once if the engine refuses; None when it froze, else the engine's words."""
        first: Optional[str] = None
        for _ in range(2):
            try:
                self.handle.pause()
            except Exception as err:  # noqa: BLE001 - a refusal is decided on above, whatever raised it
                if first is None:
                    first = engine_words(err)
                    if self._ended(wait_s=0):
                        return first
                    continue
                return engine_words(err)
            if first is not None:
                self._note(f"the first freeze failed ({first}); the retry froze the run")
            return None
        return first

    def _void_window(self, failed: Optional[str] = None) -> bool:
        """Close the open window at its start: nothing was paused. `failed`: the engine's words, recorded with what
        `on_pause_failure` did. False."""
        if self._window is not None:
            if failed is None:
                self._append(self.pauses_path, {**self._window, "end": self._window["start"]})
            else:
                record: FailedPauseRecord = {
                    **self._window,
                    "end": self._window["start"],
                    "failed": failed,
                    "on_pause_failure": self.config.on_pause_failure,
                }
                self._append(self.pauses_path, record)
            self._window = None
        return False

    def _resume(self, peak_c: Optional[float], why: Optional[str]) -> bool:
        """Thaw the run, then close the open window at the moment it is running again.

        False when the thaw failed and the run still looks frozen (or cannot be
        asked): the window stays open, since the freeze has not ended.
        """
        try:
            self.handle.resume()
        except Exception as err:  # noqa: BLE001 - the run may have exited, or the engine gone away
            if self._answers_paused() is False:  # not frozen (any more): the freeze is over, nothing to say
                if self._ended(wait_s=0):
                    self._stop.set()
            elif self._ended(wait_s=ENDED_WAIT_S):  # its freeze ended with it: close the window, stop guarding
                self._stop.set()
            else:
                self._note(f"could not resume the run ({why}): {type(err).__name__}: {err}")
                if self._still_frozen():
                    self._window_peak_c = peak_c
                    return False
        end_us = self._wall_us()
        self._tell_sensor(False)
        if self._window is not None:
            self._append(self.pauses_path, {**self._window, "end": format_time_us(end_us), "peak_c": peak_c})
            held_s = (end_us - self._window_start_us) / 1e6
            self._reading = replace(self._reading, paused_s=self._reading.paused_s + held_s)
            self._window = None
        return True

    def _ended(self, wait_s: float) -> bool:
        """Whether the engine says the run has exited (now, or within `wait_s`); False when it cannot tell."""
        describe, wait = getattr(self.handle, "describe", None), getattr(self.handle, "wait", None)
        try:
            if describe is not None and describe().state in (EXITED, GONE):
                return True
            return wait is not None and wait(wait_s) is not None
        except Exception:  # noqa: BLE001 - the engine cannot tell: treat the run as still there
            return False

    def _still_frozen(self) -> bool:
        try:
            return self.handle.is_paused()
        except Exception:  # noqa: BLE001 - cannot tell: never record a thaw that may not have happened
            return True

    def _thaw(self) -> None:
        if self._window is not None:  # our own freeze (or a max-pause stop whose thaw failed)
            peak_c = self._state.peak_c if self._state.paused else self._window_peak_c
            if self._resume(peak_c, "guard stopped"):
                self._state = replace(self._state, paused=False, paused_at=None, reason=None, peak_c=None)
                self._publish(self._reading.temp_c, Decision(), self._reading.temps)
            return
        try:
            if self.handle.is_paused():  # never leave a run frozen, whoever froze it
                self.handle.resume()
        except Exception as err:  # noqa: BLE001 - the run may be gone already
            if self._answers_paused() is not False:
                self._note(f"could not check or thaw the run: {type(err).__name__}: {err}")

    def _tell_sensor(self, paused: bool) -> None:
        if isinstance(self.sensor, PauseAware):
            self.sensor.set_paused(paused)

    def _record(self, sample: Optional[Sample], decision: Decision, state: GuardState) -> None:
        """Append this poll's sample when it is due, hot or acted on; `paused` is what the poll decided."""
        now = self._clock()
        due = self._last_recorded is None or now - self._last_recorded >= self.config.record_every_s
        if not (due or is_hot(state) or decision.action is not Action.NONE):
            return
        self._last_recorded = now
        zones = sample.zones if sample is not None else ()
        self._watch(zones)
        now_us = sample.time_us if sample is not None else self._wall_us()
        record = sample_record(sample, paused=state.paused, t=format_time_us(now_us))
        self._append(self.samples_path, record)

    def _watch(self, zones: tuple[ZoneTemp, ...]) -> None:
        """A watch line before the first sample, and again when a zone is watched that the last one did not name."""
        names = frozenset(zone.name for zone in zones)
        if self._watched is not None and names <= self._watched:
            return
        self._watched = names | (self._watched or frozenset())
        record = watch_record(format_time_us(self._wall_us()), self.sensor.name, self.config, zones)
        self._append(self.samples_path, record)

    def _publish(self, temp_c: Optional[float], decision: Decision, temps: tuple[tuple[str, float], ...]) -> None:
        previous = self._reading
        self._reading = GuardReading(
            temps=temps,
            temp_c=temp_c,
            paused=self._state.paused,
            paused_since=self._window["start"] if self._window is not None else None,
            reason=self._state.reason,
            pauses=previous.pauses + int(decision.action is Action.PAUSE and self._state.paused),
            pause_failures=previous.pause_failures + int(decision.failed is not None),
            paused_s=previous.paused_s,
            stop_reason=decision.reason if decision.action is Action.STOP else previous.stop_reason,
        )

    def _append(self, path: Path, record: Union[PauseRecord, FailedPauseRecord, SampleRecord, WatchRecord]) -> None:
        """Append a record; a record that cannot be written is noted, and never stops a pause or a thaw."""
        try:
            self._append_record(path, record)
        except OSError as err:
            self._note(f"could not write {path}: {err.strerror or err}")

    def _note(self, message: str, *, once_as: Optional[str] = None) -> None:
        """Report a problem once (`once_as`: once for all messages of that kind), not every poll."""
        key = once_as or message
        with self._notes_lock:
            if key in self._noted:
                return
            self._noted.add(key)
            self.notes.append(message)
        if self._on_note is not None:
            self._on_note(message)


def _labelled(sample: Sample) -> tuple[tuple[str, float], ...]:
    """(label, C) of each temperature a sample read: the GPU's first, then each zone's."""
    gpu = ((GPU_LABEL, sample.temp_c),) if sample.temp_c is not None else ()
    return gpu + tuple((zone.label, zone.temp_c) for zone in sample.zones if zone.temp_c is not None)


def engine_words(err: BaseException) -> str:
    """What the engine said when it refused: a harness error's own message, else the exception as Python names it."""
    if isinstance(err, HarnessError):
        return err.message
    return f"{type(err).__name__}: {err}"
