"""What the runs of one command share: how to start them, when to stop, where the code came from, who is told.

A `RunContext` is made once by the command (`run`, `sweep`, the demo, a Ray
node's task) and passed down to every run it starts; nothing below it takes
callbacks of its own. Its `Reporter` is the one channel from the core to the
person: the terminal's renderers (harness.cli.progress: one live table for
`run`, `sweep` and the demo, or plain lines), a Ray node's forwarder and the
tests' `RecordingReporter` all implement it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Optional, Protocol

from harness.jsontypes import JSONObject
from harness.run.decide import Mode
from harness.run.provenance import git_facts, harness_facts, nvml_probe

if TYPE_CHECKING:
    from harness.capture import RunStatus
    from harness.capture.writer import Forward
    from harness.engines import Engine
    from harness.engines.spec import LaunchSpec
    from harness.guard import GuardReading
    from harness.guard.start import CoolingReading
    from harness.mileslog.records import StepRecord
    from harness.run.decide import Decision

DEFAULT_GRACE_S = 60.0  # Ray and SGLang need a while to shut down cleanly on SIGTERM


@dataclass(frozen=True)
class RunOptions:
    """How runs start, the same for `run`, `sweep` and the demo.

    `mode`: what an existing capture means (harness.run.decide); `wait_for_gpu`
    covers the capture's lock too (--no-wait); `fail_fast`: a sweep stops at
    the first run that does not succeed; `parallel`: how many runs of a sweep
    go at once when none of them takes a GPU (a GPU run holds its GPU's lock,
    so GPU runs go one per GPU whatever this says).
    """

    mode: Mode = "retry"
    wait_for_gpu: bool = True
    keep: bool = False
    grace_s: float = DEFAULT_GRACE_S
    fail_fast: bool = False
    parallel: int = 1  # runs of a sweep that take no GPU at a time (simulated, or gpus: none)
    resume: bool = False  # continue each run's lineage from its newest complete checkpoint (docs/checkpoints.md)
    auto_resume: Optional[int] = None  # `--auto-resume N`: over the experiment's resume.auto


class StopControl:
    """Requests to end runs early: Ctrl-C/SIGTERM, the time limit, `harness stop`. The first one wins."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # a signal handler asks in the main thread, perhaps while it asks itself
        self.state: Optional[str] = None  # "interrupted" or "stopped"
        self.reason: Optional[str] = None
        self.kill_requested = False
        self._acting = 0  # loops under way that act on a request (a run's supervisor, the Ray driver's)
        self._acting_lock = threading.Lock()  # never taken by a signal handler, which only reads `acting`

    @contextmanager
    def acted_on(self) -> Iterator[None]:
        """While this holds, a loop acts on requests within a moment: a signal asks it to stop gracefully. Outside
        every such loop nothing would look at a request, so the signal ends the command at once (lifecycle)."""
        with self._acting_lock:
            self._acting += 1
        try:
            yield
        finally:
            with self._acting_lock:
                self._acting -= 1

    @property
    def acting(self) -> bool:
        """True while some loop acts on requests (`acted_on`)."""
        return self._acting > 0

    def request(self, state: str, reason: str) -> bool:
        """Ask for a graceful stop; False if one was already asked for."""
        with self._lock:
            if self.state is not None:
                return False
            self.state, self.reason = state, reason
            return True

    def request_kill(self) -> None:
        """Ask for SIGKILL now (a second Ctrl-C)."""
        self.kill_requested = True

    @property
    def requested(self) -> bool:
        """True once any stop was asked for."""
        return self.state is not None


class Reporter(Protocol):
    """What the core tells the person who started the runs; every method may be called from any thread."""

    def note(self, message: str) -> None:
        """A line worth reading: what was chosen, what is being done."""

    def warning(self, message: str) -> None:
        """Something the person should know: a leftover, a missing variable, a wait for the GPU."""

    def decided(self, decision: "Decision") -> None:
        """Whether a run starts, and why (a sweep names the runs it skips)."""

    def started(self, spec: "LaunchSpec") -> None:
        """A run's trainer started."""

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        """A step of `run` was recorded (complete, or incomplete at the end)."""

    def guard(self, run: str, reading: "GuardReading") -> None:
        """The heat guard's latest reading of `run` (paused or not, temperature, pauses so far)."""

    def cooling(self, run: str, reading: "CoolingReading") -> None:
        """Before `run` starts: its cooled start's wait (the temperatures, the time waited; `outcome` once over)."""

    def finished(self, status: "RunStatus") -> None:
        """A run ended; `status` is what its capture says."""


class NullReporter:
    """Tells nobody anything."""

    def note(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        pass

    def decided(self, decision: "Decision") -> None:
        pass

    def started(self, spec: "LaunchSpec") -> None:
        pass

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        pass

    def guard(self, run: str, reading: "GuardReading") -> None:
        pass

    def cooling(self, run: str, reading: "CoolingReading") -> None:
        pass

    def finished(self, status: "RunStatus") -> None:
        pass


class RecordingReporter:
    """Keeps what it is told, in order, as (kind, run or message, detail) tuples: for tests and benchmarks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str, object]] = []

    def _add(self, kind: str, subject: str, detail: object = None) -> None:
        with self._lock:
            self.events.append((kind, subject, detail))

    def note(self, message: str) -> None:
        self._add("note", message)

    def warning(self, message: str) -> None:
        self._add("warning", message)

    def decided(self, decision: "Decision") -> None:
        self._add("decided", decision.run, decision)

    def started(self, spec: "LaunchSpec") -> None:
        self._add("started", spec.run, spec)

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        self._add("step", run, (record, steps_complete))

    def guard(self, run: str, reading: "GuardReading") -> None:
        self._add("guard", run, reading)

    def cooling(self, run: str, reading: "CoolingReading") -> None:
        self._add("cooling", run, reading)

    def finished(self, status: "RunStatus") -> None:
        self._add("finished", status.run, status)

    def of(self, kind: str) -> list[tuple[str, str, object]]:
        """The events of one kind, in order."""
        with self._lock:
            return [event for event in self.events if event[0] == kind]


@dataclass
class RunContext:
    """Everything the runs of one command share.

    `provenance`: the facts a manifest records about the code and the host
    (computed once, on first use, when the command did not give them);
    `forward`: every capture write, once on disk, is also passed on (a run
    that Ray placed streams its capture to the driver); `engine`: one engine
    for every run (default: each spec's own).
    """

    options: RunOptions = field(default_factory=RunOptions)
    reporter: Reporter = field(default_factory=NullReporter)
    stop: StopControl = field(default_factory=StopControl)
    provenance: Optional[JSONObject] = None
    forward: Optional["Forward"] = None
    engine: Optional["Engine"] = None
    _provenance_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def code_facts(self) -> JSONObject:
        """The provenance facts, computed once (git, harness version, NVML) when not given."""
        with self._provenance_lock:
            if self.provenance is None:
                self.provenance = {**harness_facts(), **git_facts(Path.cwd()), "nvml": nvml_probe()}
            return self.provenance
