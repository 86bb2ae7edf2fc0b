"""The guard of one run, or of anything `harness guard` is pointed at: the sensor opened once, a loop per handle.

    session = GuardSession.open(experiment.guard)    # before the run starts; a named sensor that cannot read raises
    manifest["guard"] = session.facts()              # once: requested, picked, tried, unsupported, guarded
    session.wait_to_start(on_progress=..., cancelled=...)  # the cooled start: its facts join session.facts()
    loop = session.start(handle, pauses_path=..., samples_path=..., on_note=..., on_stop=...)  # None: unguarded
    ...
    loop.stop()                                      # on every exit path: thaws, closes the open window
    session.close()

`guard_until_exit` is the whole of `harness guard --container/--pid`: it
guards a handle until the target exits or the caller says stop.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from harness.fs.files import prepare_directory
from harness.guard.config import GuardConfig
from harness.guard.loop import GuardHooks, GuardLoop, GuardReading, Pausable
from harness.guard.samples import Clock, PauseAware, WallClock, wall_clock_us
from harness.guard.sensors import SensorChoice, open_sensor
from harness.guard.start import CoolingReading, StartFacts, wait_until_cool

if TYPE_CHECKING:
    from harness.engines import RunHandle
    from harness.jsontypes import JSONObject

CLOSE_WAIT_S = 1.0
WAIT_S = 0.25  # how often `guard_until_exit` looks whether the target exited or a stop was asked for


@dataclass
class GuardSession:
    """A guard block with its sensor opened (or none: the run goes unguarded)."""

    config: GuardConfig
    choice: SensorChoice
    start_facts: Optional[StartFacts] = None  # how the run started (`wait_to_start`), for the manifest

    @classmethod
    def open(
        cls,
        config: GuardConfig,
        *,
        thermal_root: Optional[Path] = None,
        clock: Clock = time.monotonic,
        wall_us: WallClock = wall_clock_us,
    ) -> "GuardSession":
        """Open the sensor `config.sensor` names: HarnessError when a named one cannot read here.

        A sensor that models the machine (`sim`) is told the run is idle until `start`: nothing heats it before.
        """
        choice = open_sensor(config, thermal_root=thermal_root, clock=clock, wall_us=wall_us)
        sensor: object = choice.sensor
        if isinstance(sensor, PauseAware):
            sensor.set_paused(True)
        return cls(config, choice)

    @property
    def guarded(self) -> bool:
        return self.choice.sensor is not None

    @property
    def warnings(self) -> list[str]:
        """What to show once before the run (the guard is off, a threshold below pause_at_c)."""
        return list(self.choice.warnings)

    def facts(self) -> JSONObject:
        """For the manifest: whether the run is guarded, what was asked, picked, tried and is unsupported."""
        facts: JSONObject = {"guarded": self.guarded, **self.choice.facts}
        if self.choice.warnings:
            facts["warnings"] = list(self.choice.warnings)
        if self.start_facts is not None:
            facts["start"] = self.start_facts.to_dict()
        return facts

    def wait_to_start(
        self,
        *,
        on_progress: Callable[[CoolingReading], None],
        cancelled: Callable[[], bool],
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> StartFacts:
        """The cooled start (harness.guard.start): wait until every watched temperature is below
        `start_below_c` (or only read them once, without it); how the run started, kept for `facts()`."""
        self.start_facts = wait_until_cool(
            self.choice.sensor, self.config, on_progress=on_progress, cancelled=cancelled, clock=clock, sleep=sleep
        )
        return self.start_facts

    def start(
        self,
        handle: Pausable,
        *,
        pauses_path: Path,
        samples_path: Path,
        on_note: Optional[Callable[[str], None]] = None,
        on_stop: Optional[Callable[[str], None]] = None,
        on_reading: Optional[Callable[[GuardReading], None]] = None,
        append: Optional[Callable[[Path, object], None]] = None,
    ) -> Optional[GuardLoop]:
        """Start guarding `handle` (None when unguarded). The callbacks run in the guard's thread: never block."""
        if self.choice.sensor is None:
            return None
        if isinstance(self.choice.sensor, PauseAware):
            self.choice.sensor.set_paused(False)  # the run runs from now: the simulated machine heats
        loop = GuardLoop(
            handle,
            self.choice.sensor,
            self.config,
            pauses_path=pauses_path,
            samples_path=samples_path,
            hooks=GuardHooks(on_note=on_note, on_stop=on_stop, on_reading=on_reading, append=append),
        )
        return loop.start()

    def close(self) -> None:
        """Close the sensor, waiting CLOSE_WAIT_S at most: a sensor whose read hangs may hang its close too."""
        if self.choice.sensor is not None:
            closing = threading.Thread(target=self.choice.sensor.close, name="sensor-close", daemon=True)
            closing.start()
            closing.join(CLOSE_WAIT_S)


@dataclass
class GuardEnd:
    """How `guard_until_exit` ended: the target's exit, the caller's stop, or the guard's max-pause stop."""

    exit_code: Optional[int]  # the target's, when it exited
    stop_reason: Optional[str]  # on_max_pause: stop fired (the target was stopped)
    reading: GuardReading
    notes: list[str] = field(default_factory=list)


def guard_until_exit(
    handle: RunHandle,
    session: GuardSession,
    record_dir: Path,
    *,
    stopped: threading.Event,
    on_reading: Optional[Callable[[GuardReading], None]] = None,
    on_note: Optional[Callable[[str], None]] = None,
    grace_s: float = 60.0,
) -> GuardEnd:
    """Guard `handle`, recording into `record_dir`, until it exits or `stopped` is set; always thaws on the way out.

    `on_max_pause: stop` stops the target (SIGTERM, then SIGKILL after `grace_s`).
    """
    prepare_directory(record_dir)
    stop_reasons: list[str] = []

    def max_pause_stop(reason: str) -> None:
        stop_reasons.append(reason)
        stopped.set()

    loop = session.start(
        handle,
        pauses_path=record_dir / "pauses.jsonl",
        samples_path=record_dir / "guard.jsonl",
        on_note=on_note,
        on_stop=max_pause_stop,
        on_reading=on_reading,
    )
    assert loop is not None, "guard_until_exit needs a sensor"
    exit_code: Optional[int] = None
    try:
        while exit_code is None and not stopped.is_set():
            exit_code = handle.wait(timeout=WAIT_S)
    finally:
        loop.stop()
    if stop_reasons and exit_code is None:
        handle.stop(grace_s)
        exit_code = handle.wait(timeout=0)
    return GuardEnd(exit_code, stop_reasons[0] if stop_reasons else None, loop.reading, list(loop.notes))
