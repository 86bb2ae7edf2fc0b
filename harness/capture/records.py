"""The typed records of a capture: the run's status and its state machine, pause windows, step rows.

States (the capture contract, docs/architecture.md). The harness writes `running` when it has made the
capture, then exactly one final state:

    running -> succeeded | failed | no_metrics | interrupted | stopped   (the trainer ran)
    running -> not_started                                                 (it never started)

`harness recover` settles a `running` capture whose harness is gone the same
way, from what the engine says. A final state is never rewritten: the one
thing recover may still do to a final capture is save the lines and steps it
lacks (`capture_complete` false: the disk filled up, or the engine went away)
and record how the trainer ended. `run` and `sweep` treat `not_started` as no
capture at all.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, TypeGuard

from harness.times import parse_time_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject


class RunState(str, Enum):
    """A run's state; a `str`, so `status.state == "succeeded"` reads naturally."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    NO_METRICS = "no_metrics"
    INTERRUPTED = "interrupted"
    STOPPED = "stopped"
    NOT_STARTED = "not_started"

    def __str__(self) -> str:
        return self.value

    @property
    def is_final(self) -> bool:
        """True for every state but `running`: the harness that wrote it is done with the run."""
        return self is not RunState.RUNNING


STATES = tuple(state.value for state in RunState)
RERUN_ON_RETRY = (RunState.FAILED, RunState.NO_METRICS, RunState.INTERRUPTED, RunState.STOPPED)

# The keys the contract promises in every status.json.
CONTRACT_KEYS = (
    "run",
    "run_id",
    "state",
    "exit_code",
    "started_at",
    "ended_at",
    "steps_expected",
    "steps_complete",
    "error",
)


@dataclass(frozen=True)
class ProcessIdentity:
    """What proves a pid is still the process a harness started: pid, group, and when it started.

    `start_ticks` is field 22 of /proc/<pid>/stat (clock ticks after boot) and
    `boot_id` the kernel's boot id: a pid reused by another process, or a
    reboot, changes one of them.
    """

    pid: int
    pgid: int
    start_ticks: Optional[int] = None
    boot_id: Optional[str] = None

    def to_dict(self) -> JSONObject:
        return {"pid": self.pid, "pgid": self.pgid, "start_ticks": self.start_ticks, "boot_id": self.boot_id}

    @classmethod
    def from_dict(cls, data: object) -> "ProcessIdentity":
        if not isinstance(data, dict):
            raise ValueError(f"is {_shown(data)}, not an object")
        pid, pgid = data.get("pid"), data.get("pgid")
        if not _is_int(pid) or not _is_int(pgid):
            raise ValueError("needs integer pid and pgid")
        ticks, boot = data.get("start_ticks"), data.get("boot_id")
        return cls(pid, pgid, ticks if _is_int(ticks) else None, boot if isinstance(boot, str) else None)


@dataclass
class RunStatus:
    """status.json: the run's state and how it got there."""

    run: str
    run_id: str
    state: RunState
    exit_code: Optional[int]
    started_at: str
    ended_at: Optional[str]
    steps_expected: int
    steps_complete: int
    error: Optional[str]
    harness_pid: Optional[int] = None
    harness_host: Optional[str] = None
    container: Optional[str] = None  # the engine's id of what runs: a container id, or a process run id
    stop_reason: Optional[str] = None
    steps_usable: bool = False
    notes: list[str] = field(default_factory=list)
    engine: Optional[str] = None  # "docker" or "process"; None in captures older than the field
    process: Optional[JSONObject] = None  # ProcessIdentity of a process-engine run, as status.json holds it
    capture_complete: bool = True  # False: the engine holds lines the capture lacks (`harness recover`)
    attempt: Optional[int] = None  # which start of the run this is (harness.capture.attempts); None before attempts

    def __post_init__(self) -> None:
        self.state = RunState(self.state)

    @property
    def is_final(self) -> bool:
        return self.state.is_final

    def to_dict(self) -> JSONObject:
        data: JSONObject = asdict(self)
        data["state"] = self.state.value
        return data

    @classmethod
    def from_dict(cls, data: object) -> "RunStatus":
        """A status from parsed JSON, checked key by key; ValueError names the first bad key."""
        if not isinstance(data, dict):
            raise ValueError(f"is {_shown(data)}, not a JSON object")
        for key in CONTRACT_KEYS:
            if key not in data:
                raise ValueError(f"has no {key!r}")
        values: dict[str, Any] = {}  # Any: each value is of its field's type, as its check above has made sure
        for spec in fields(cls):
            if spec.name not in data:
                continue
            value = data[spec.name]
            check = _CHECKS[spec.name]
            reason = check(value)
            if reason:
                raise ValueError(f"{spec.name} is {_shown(value)}: {reason}")
            values[spec.name] = value
        values["state"] = RunState(values["state"])
        return cls(**values)

    @classmethod
    def rebuilt(cls, data: object, evidence: Mapping[str, object]) -> tuple["RunStatus", list[str]]:
        """A status from what torn JSON still holds (each field whose value passes its check) and, for the fields it
        lacks, from `evidence` (the caller's values, from the files); and the names of the fields taken from it."""
        kept = {s.name: data[s.name] for s in fields(cls) if isinstance(data, dict) and s.name in data}
        kept = {name: value for name, value in kept.items() if not _CHECKS[name](value)}
        values: dict[str, Any] = {**evidence, **kept}  # Any: the evidence is the caller's, the rest checked above
        return cls(**values), [name for name in evidence if name not in kept]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# A check of one status.json value: None when it is fine, else why not.
Check = Callable[[object], Optional[str]]


def _text(value: object) -> Optional[str]:
    return None if isinstance(value, str) else "not a string"


def _optional(check: Check) -> Check:
    return lambda value: None if value is None else check(value)


def _time(value: object) -> Optional[str]:
    return None if parse_time_us(value) is not None else "not an RFC 3339 time"


def _count(value: object) -> Optional[str]:
    return None if _is_int(value) and value >= 0 else "not a count"


def _integer(value: object) -> Optional[str]:
    return None if _is_int(value) else "not an integer"


def _flag(value: object) -> Optional[str]:
    return None if isinstance(value, bool) else "not true or false"


def _state(value: object) -> Optional[str]:
    return None if value in STATES else f"not a state ({', '.join(STATES)})"


def _notes(value: object) -> Optional[str]:
    return None if isinstance(value, list) and all(isinstance(n, str) for n in value) else "not a list of strings"


def _process(value: object) -> Optional[str]:
    try:
        ProcessIdentity.from_dict(value)
    except ValueError as err:
        return str(err)
    return None


_CHECKS: dict[str, Check] = {
    "run": _text,
    "run_id": _text,
    "state": _state,
    "exit_code": _optional(_integer),
    "started_at": _time,
    "ended_at": _optional(_time),
    "steps_expected": _count,
    "steps_complete": _count,
    "error": _optional(_text),
    "harness_pid": _optional(_integer),
    "harness_host": _optional(_text),
    "container": _optional(_text),
    "stop_reason": _optional(_text),
    "steps_usable": _flag,
    "notes": _notes,
    "engine": _optional(_text),
    "process": _optional(_process),
    "capture_complete": _flag,
    "attempt": _optional(_count),
}


@dataclass(frozen=True)
class PauseWindow:
    """One pause window as logged (pauses.jsonl); times in microseconds, `end_us` None while open."""

    start_us: int
    end_us: Optional[int]
    reason: str
    line: int
    peak_c: Optional[float] = None  # the hottest reading of the window, as the guard recorded it
    failed: Optional[str] = None  # the engine's words when it could not freeze the run (closed at its start)
    on_pause_failure: Optional[str] = None  # what the guard did then: "stop" or "continue"

    @property
    def froze(self) -> bool:
        """Whether the run was frozen in this window: open, or closed after its start, and not a failed freeze (a
        window closed at its own start without `failed` is a run that ended as it was paused: nothing happened)."""
        return self.failed is None and (self.end_us is None or self.end_us > self.start_us)


@dataclass(frozen=True)
class PauseTally:
    """A run's pauses as every output counts them (`tally_pauses`): the windows in which the run was frozen, and
    the pauses the engine could not make."""

    pauses: int
    failed: int

    def failed_text(self) -> str:
        """`1 pause failed`, `2 pauses failed`; "" with none."""
        if not self.failed:
            return ""
        return f"{self.failed} pause{'s' if self.failed != 1 else ''} failed"


def tally_pauses(windows: Iterable[PauseWindow]) -> PauseTally:
    """The one count of a run's pauses (status, the summary, the report and the guard's figure all use it)."""
    pauses = failed = 0
    for window in windows:
        pauses += window.froze
        failed += window.failed is not None
    return PauseTally(pauses, failed)


@dataclass(frozen=True)
class StepRow:
    """One line of metrics.jsonl: a rollout id and its merged Miles keys."""

    step: int
    complete: bool
    t_rollout_end_us: Optional[int]
    t_step_end_us: Optional[int]
    metrics: JSONObject
    line: int
