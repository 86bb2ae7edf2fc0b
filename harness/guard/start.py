"""A cooled start: before a run starts, wait until every watched temperature is below `guard.start_below_c`.

On a GB10 a run that starts hot pauses sooner and more, so its pause-free
rollout times are not comparable with a run that started cool. With
`start_below_c` set, the harness holds the GPU and waits, reading the
sensor every `poll_s`, until every temperature read is below it; after
`start_timeout_s` it starts anyway with a note, or refuses
(`on_start_timeout`). Without it the temperatures are still read once, so
every run's manifest says how warm it started.

`judge_start` decides (pure); `wait_until_cool` reads, reports and waits.
The simulated sensor is told the run is idle while the harness waits, so it
cools as a machine does between runs, and stays idle until the guard starts
on the run (GuardSession.start): a container slow to start heats nothing.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Literal, Optional

from harness.guard.config import GuardConfig
from harness.guard.policy import Reading, readings
from harness.guard.reader import READ_WAIT_MIN_S, BoundedReader
from harness.guard.samples import Clock, PauseAware, Sample, Sensor, implausible, without_implausible_zones

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

Verdict = Literal["start", "wait", "timed_out"]
# cool: below start_below_c; timed_out: started anyway (on_start_timeout: start); refused: not started;
# interrupted: a stop was asked for while waiting; read: no start_below_c, the temperatures read once;
# unread: no temperature could be read (unguarded, or the sensor read nothing).
Outcome = Literal["cool", "timed_out", "refused", "interrupted", "read", "unread"]


@dataclass(frozen=True)
class CoolingReading:
    """The wait as live progress shows it: the temperatures now, how long it has waited, and how it ended."""

    below_c: float
    timeout_s: float
    waited_s: float
    temps: tuple[tuple[str, float], ...]  # (label, C) of each temperature read at this poll
    outcome: Optional[Outcome] = None  # None while it waits

    @property
    def hottest(self) -> Optional[tuple[str, float]]:
        """The hottest (label, C) read at this poll."""
        return max(self.temps, key=lambda temp: temp[1]) if self.temps else None

    def describe(self) -> str:
        """`waiting to cool below 50 C: GPU 44.1 C, CPU (sim) 57.3 C; waited 12 s of 600 s` (tenths under 10 s)."""
        shown = ", ".join(f"{label} {temp:.1f} C" for label, temp in self.temps) or "no reading"
        head = {
            None: "waiting to cool",
            "cool": "cooled",
            "timed_out": "not cooled",
            "refused": "not cooled",
            "interrupted": "stopped waiting to cool",
            "read": "read",
            "unread": "could not read",
        }[self.outcome]
        waited = f"{self.waited_s:.1f}" if self.waited_s < 10 else f"{self.waited_s:.0f}"
        return f"{head} below {self.below_c:g} C: {shown}; waited {waited} s of {self.timeout_s:g} s"


@dataclass
class StartFacts:
    """How the run started, for the manifest (`guard.start`) and the summary's starting temperature."""

    outcome: Outcome
    below_c: Optional[float] = None
    waited_s: float = 0.0
    temps_c: dict[str, float] = field(default_factory=dict)  # name -> C at the start
    note: Optional[str] = None  # said once before the run (a timeout it started through)

    @property
    def hottest_c(self) -> Optional[float]:
        return max(self.temps_c.values(), default=None)

    @property
    def started(self) -> bool:
        """Whether the run may start."""
        return self.outcome not in ("refused", "interrupted")

    def to_dict(self) -> JSONObject:
        return {
            "outcome": self.outcome,
            "below_c": self.below_c,
            "waited_s": round(self.waited_s, 3),
            "hottest_c": self.hottest_c,
            "temps_c": dict(self.temps_c),
            **({"note": self.note} if self.note else {}),
        }


def judge_start(config: GuardConfig, read: list[Reading], waited_s: float) -> Verdict:
    """Start once every temperature read is below start_below_c (at least one read); past start_timeout_s, the
    wait is over whatever it reads."""
    below = config.start_below_c
    if below is None or (read and all(reading.temp_c < below for reading in read)):
        return "start"
    return "timed_out" if waited_s >= config.start_timeout_s else "wait"


def wait_until_cool(
    sensor: Optional[Sensor],
    config: GuardConfig,
    *,
    on_progress: Callable[[CoolingReading], None],
    cancelled: Callable[[], bool],
    clock: Clock = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> StartFacts:
    """Read the sensor until the run may start (see the module doc); how it started. Never raises for a sensor."""
    below = config.start_below_c
    if sensor is None:
        if below is None:
            return StartFacts("unread")
        refuse = config.on_start_timeout == "refuse"
        note = f"guard.start_below_c {below:g} C: no sensor reads a temperature here, so the run cannot wait to cool"
        note += "; on_start_timeout is refuse: not started" if refuse else "; starting without waiting"
        return StartFacts("refused" if refuse else "unread", below, note=note)
    reader = BoundedReader(sensor)
    stopping = threading.Event()
    if isinstance(sensor, PauseAware) and below is not None:
        sensor.set_paused(True)  # the run is not running yet: the simulated machine cools while it waits
    started_at = clock()
    try:
        while True:
            sample, _ = reader.read(max(config.poll_s, READ_WAIT_MIN_S), stopping)
            read = readings(config, _believable(sample))
            waited = clock() - started_at
            verdict = judge_start(config, read, waited)
            temps = tuple((reading.label, reading.temp_c) for reading in read)
            temps_c = {r.name: r.temp_c for r in read}
            if below is None:  # no cooled start: the temperatures as the run starts, read once
                return StartFacts("read" if read else "unread", temps_c=temps_c)
            facts = StartFacts("cool", below, waited, temps_c)
            if verdict == "start":
                on_progress(CoolingReading(below, config.start_timeout_s, waited, temps, "cool"))
                return facts
            if verdict == "timed_out":
                refuse = config.on_start_timeout == "refuse"
                facts.outcome = "refused" if refuse else "timed_out"
                progress = CoolingReading(below, config.start_timeout_s, waited, temps, facts.outcome)
                facts.note = f"{progress.describe()}; " + ("not started" if refuse else "starting anyway")
                on_progress(progress)
                return facts
            on_progress(CoolingReading(below, config.start_timeout_s, waited, temps))
            if _wait(config.poll_s, cancelled, clock, sleep):
                facts.outcome = "interrupted"
                on_progress(CoolingReading(below, config.start_timeout_s, clock() - started_at, temps, "interrupted"))
                return facts
    finally:
        stopping.set()


CANCEL_CHECK_S = 0.1  # how often a wait between readings looks whether a stop was asked for


def _wait(seconds: float, cancelled: Callable[[], bool], clock: Clock, sleep: Callable[[float], None]) -> bool:
    """Sleep `seconds`, looking for a stop; True when one was asked for."""
    until = clock() + seconds
    while True:
        if cancelled():
            return True
        left = until - clock()
        if left <= 0:
            return False
        sleep(min(left, CANCEL_CHECK_S))


def _believable(sample: Optional[Sample]) -> Optional[Sample]:
    """The sample without readings that cannot be true (as the guard loop reads them)."""
    if sample is None or implausible(sample) is not None:
        return None
    return without_implausible_zones(sample)[0]
