"""Settle runs whose harness is gone, through the engines, touching only what each capture owns.

A capture owns an engine object (a container, a process run) when the object
carries the capture's directory and current run id, and is the one the
capture recorded (when it recorded one). Recover acts on a capture only when
no harness holds its lock, and then:

- `running` (its harness died): thaw the object, stop it (unless
  `--leave-running`), save the lines the capture lacks, re-read its steps and
  record the truth: how the trainer ended, or `interrupted` if recover
  stopped it, or `not_started` if it never started;
- final but `capture_complete: false` (the disk filled up, the engine went
  away): save the rest and record how the trainer ended, keeping the state
  and the reason the harness recorded;
- in both: a pause window the heat guard left open (its harness died, or
  its engine went away, while the run was frozen) is closed at the time
  recover found it, once the run is thawed: the closing line is appended
  with the same start (the last line per start is the truth), and a note
  says so;
- a pause window left open although the run is not frozen (its closing
  line could not be written: a full disk) is closed at the time the run is
  known to have run again: its first log line after the window's start, else
  the run's end. A final capture with such a window gets only that line
  (action `close`); its status is not rewritten;
- final: never rewritten. An exited container its harness did not get to
  remove is removed (unless kept with `--keep`);
- a status.json a power loss tore (NUL bytes, empty, cut short, or lacking
  fields): rebuilt from the fields it still has and the evidence on disk (the
  manifest, the log, the saved steps), the original kept beside it
  (`status.json.torn`). One that still says a final state keeps it (action
  `rebuild`); one that says running, or nothing, is settled as above;
- an attempt recover settles as `succeeded` becomes its run's current
  attempt, as its harness would have made it (unless a newer attempt that
  succeeded is current); so does one that succeeded but whose harness died
  before it could make it current (action `current`: its record never names
  it, so a `restore` is never undone).

Everything else (another run id, a capture that is final, no capture at all)
is left alone and said so. Deciding (`plan_recovery`) is pure; `carry_out`
acts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional, Sequence

from harness.capture import (
    STATES,
    Capture,
    RunState,
    RunStatus,
    append_jsonl,
    cut_torn_tail,
    this_host,
    utc_now,
    write_json_atomic,
)
from harness.capture.attempts import Attempt, RunAttempts, all_attempts
from harness.capture.bounded import (
    MAX_STATUS_BYTES,
    Unreadable,
    WholeLines,
    iter_jsonl,
    loads_json,
    open_regular,
    read_bounded,
)
from harness.capture.lock import CaptureLock, holder, in_use
from harness.capture.reader import (
    RUNNING_AGAIN_SLACK_US,
    STATUS_NAME,
    StatusRead,
    attempt_number,
    count_complete_steps,
    first_stamps_after,
    read_head,
    read_pauses,
    read_status,
    run_path_of,
)
from harness.engines import CREATED, EXITED, GONE, PAUSED, Description, Engine, EngineUnavailable, RunHandle
from harness.engines.logstream import LogPosition
from harness.engines.spec import LABEL_CAPTURE_DIR, LABEL_RUN, LABEL_RUN_ID
from harness.errors import ExitCode, HarnessError
from harness.fs.files import open_append, write_whole
from harness.fs.paths import not_regular
from harness.jsontypes import JSONObject, JSONValue
from harness.run.context import DEFAULT_GRACE_S
from harness.run.execute import LABEL_ATTEMPT, LABEL_KEEP, decide_outcome
from harness.secrets import KnownSecrets, secret_values_of
from harness.times import format_time_us, parse_time_us

if TYPE_CHECKING:
    from harness.mileslog import LogParser

Action = Literal["settle", "complete", "remove", "close", "rebuild", "current", "leave"]
CAPTURE_FILES = ("container.log", "metrics.jsonl", "args.json", "pauses.jsonl")  # what recover reads or appends to
LOG_TAIL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class EngineObject:
    """Something an engine runs (or ran) under the harness's labels."""

    engine: str
    handle: RunHandle
    description: Description

    @property
    def id(self) -> str:
        return self.description.id

    @property
    def labels(self) -> dict[str, str]:
        return dict(self.description.labels)

    @property
    def run(self) -> str:
        return self.labels.get(LABEL_RUN, "?")

    @property
    def run_id(self) -> str:
        return self.labels.get(LABEL_RUN_ID, "?")

    @property
    def capture_dir(self) -> Optional[Path]:
        """The run's capture path its labels name (`<root>/<run>`)."""
        directory = self.labels.get(LABEL_CAPTURE_DIR)
        return Path(os.path.abspath(directory)) if directory else None

    @property
    def attempt_dir(self) -> Optional[Path]:
        """The directory of the attempt it belongs to (the run's own directory for a run from before attempts)."""
        run_path = self.capture_dir
        attempt = attempt_number(self.labels.get(LABEL_ATTEMPT, ""))
        if run_path is None or attempt is None:
            return run_path
        return RunAttempts(run_path).directory / str(attempt)

    @property
    def kept(self) -> bool:
        return self.labels.get(LABEL_KEEP) == "1"

    @property
    def kind(self) -> str:
        """What the engine runs: a container, or a process."""
        return "container" if self.engine == "docker" else "process"

    @property
    def name(self) -> str:
        kind = "container" if self.engine == "docker" else "process run"
        return f"{kind} {self.description.name or self.id[:12]}"


@dataclass(frozen=True)
class Plan:
    """What recover does to one capture, and why; `strangers` are objects it leaves alone, with the reason."""

    capture_dir: Path
    action: Action
    reason: str
    status: Optional[RunStatus] = None
    owned: Optional[EngineObject] = None
    strangers: tuple[tuple[EngineObject, str], ...] = ()

    @property
    def run_path(self) -> Path:
        """The run's capture path (`<root>/<run>`), whose lock guards all its attempts."""
        return run_path_of(self.capture_dir)

    @property
    def run(self) -> str:
        return self.run_path.name

    @property
    def attempt(self) -> Optional[int]:
        """The attempt's number (None for a run's own directory, from before attempts)."""
        return attempt_number(self.capture_dir.name) if self.run_path != self.capture_dir else None

    @property
    def label(self) -> str:
        """`RUN`, or `RUN attempt N` for an attempt that is not the run's current one: how recover names what it
        looked at."""
        current = RunAttempts(self.run_path).current()
        if self.attempt is None or (current is not None and current.number == self.attempt):
            return self.run
        return f"{self.run} attempt {self.attempt}"

    def describe(self) -> str:
        """One line for `run`'s warning about leftovers."""
        what = f" ({self.owned.name}, {self.owned.description.state})" if self.owned else ""
        return f"run {self.label}{what}: {self.reason}"


def engine_objects(engines: Sequence[Engine], notes: list[str]) -> list[EngineObject]:
    """Everything the engines hold under the harness's run label; an engine out of reach is a note."""
    found = []
    for engine in engines:
        try:
            for handle in engine.list({LABEL_RUN: None}):
                try:
                    found.append(EngineObject(engine.name, handle, handle.describe()))
                except EngineUnavailable:
                    raise
                except HarnessError as err:
                    if err.exit_code != ExitCode.NOT_FOUND:
                        raise
                    # Removed between the listing and the look (another harness finished with it): not ours to do.
        except EngineUnavailable as err:
            notes.append(f"{engine.name} engine: {err.message}")
    return found


def plan_recovery(
    found: StatusRead,
    holder_now: Optional[str],
    objects: Sequence[EngineObject],
    *,
    here: str,
    other_hosts: bool = False,
    open_window: bool = False,
) -> Optional[Plan]:
    """What to do with one capture (pure); None when there is nothing to do or say.

    `holder_now`: who holds the capture's lock (None: nobody, its harness is gone).
    `open_window`: its pauses.jsonl has a window still open.
    """
    directory = found.directory
    if holder_now is not None:
        if not objects and not (found.status and found.status.state == RunState.RUNNING):
            return None
        return Plan(directory, "leave", f"in use by a live harness ({holder_now})")
    if found.broken is not None:
        return Plan(
            directory,
            "leave",
            f"its status is broken ({found.broken}); nothing is changed",
            strangers=tuple((o, "its capture's status is broken") for o in objects),
        )
    status = found.status
    if status is None:
        if not objects:
            return None
        return Plan(
            directory,
            "leave",
            "no capture names it (no status.json); remove it by hand if it is not needed",
            strangers=tuple((o, f"no capture at {directory}") for o in objects),
        )
    owned, strangers = _owned(status, objects)
    plan = Plan(directory, "leave", "", status, owned, strangers)
    if found.torn and status.is_final:
        return replace(
            plan,
            action="rebuild",
            reason=f"its status.json is torn ({found.broken}) but still says {status.state}: recover rebuilds the "
            "rest from its files",
        )
    if status.state == RunState.RUNNING:
        if status.harness_host not in (None, here) and not other_hosts:
            return replace(
                plan,
                owned=None,
                reason=f"its harness ran on {status.harness_host}, whose lock cannot be "
                "seen from here (--all settles it)",
            )
        gone = _harness_gone(status)
        said = "recover rebuilds its status from its files" if found.torn else "its capture still says running"
        return replace(plan, action="settle", reason=f"{gone}; {said}")
    if not status.capture_complete:
        if owned is None:
            return replace(plan, reason="its capture is incomplete, but the engine no longer has its container")
        return replace(plan, action="complete", reason=f"its capture is incomplete ({status.error})")
    frozen = owned is not None and owned.description.state == PAUSED
    if open_window and not frozen and status.harness_host in (None, here):
        return replace(
            plan, action="close", reason=f"{status.state}, with a pause window left open although the run is not frozen"
        )
    if owned is not None and owned.description.state in (EXITED, GONE) and not owned.kept:
        return replace(
            plan, action="remove", reason=f"{status.state}; its harness recorded the end but did not remove it"
        )
    if not strangers and owned is None:
        return None
    return replace(plan, reason=f"its capture is final ({status.state}): never rewritten")


def _owned(
    status: RunStatus, objects: Sequence[EngineObject]
) -> tuple[Optional[EngineObject], tuple[tuple[EngineObject, str], ...]]:
    owned, strangers = None, []
    for obj in objects:
        if obj.run_id != status.run_id:
            strangers.append((obj, f"it belongs to run id {obj.run_id}; the capture holds {status.run_id}"))
        elif status.container is not None and obj.id != status.container:
            strangers.append((obj, f"the capture records {status.container[:12]}, not this one"))
        elif owned is not None:
            strangers.append((obj, f"{owned.name} is the one the capture owns"))
        else:
            owned = obj
    return owned, tuple(strangers)


def _harness_gone(status: RunStatus) -> str:
    if status.harness_pid is None:  # a status rebuilt after a power loss: nothing says which harness it was
        return "the harness and its engine went away (its status.json was torn: a power loss?)"
    return f"its harness (pid {status.harness_pid} on {status.harness_host}) is gone"


def plan_all(
    capture_root: Optional[Path],
    engines: Sequence[Engine],
    notes: list[str],
    *,
    other_hosts: bool = False,
    outside: Optional[list[EngineObject]] = None,
) -> list[Plan]:
    """A plan per capture that is running without its harness, incomplete, or named by an engine object.

    With `outside` (a list to fill), only the engine objects whose capture-dir
    label points into `capture_root` are planned; the others go into `outside`.
    """
    objects = engine_objects(engines, notes)
    root = Path(os.path.abspath(capture_root)) if capture_root is not None else None
    by_dir: dict[Path, list[EngineObject]] = {}
    for obj in objects:
        if obj.capture_dir is None or obj.attempt_dir is None:
            continue
        if outside is not None and root is not None and not obj.capture_dir.is_relative_to(root):
            outside.append(obj)
            continue
        by_dir.setdefault(obj.attempt_dir, []).append(obj)
    directories = set(by_dir)
    if root is not None:
        directories.update(Path(os.path.abspath(attempt.directory)) for attempt in all_attempts(root))
    plans = []
    for directory in sorted(directories):
        found = read_status_for_recover(directory)
        window = has_open_window(directory)
        if (
            not by_dir.get(directory)
            and found.status is not None
            and found.status.state.is_final
            and found.status.capture_complete
            and not window
            and not found.torn
        ):
            if never_made_current(directory, found.status):
                plans.append(Plan(directory, "current", NEVER_CURRENT, found.status))
            continue
        run_path = run_path_of(directory)
        holder_now = holder(run_path) if in_use(run_path) else None
        plan = plan_recovery(
            found, holder_now, by_dir.get(directory, []), here=this_host(), other_hosts=other_hosts, open_window=window
        )
        if plan is not None:
            plans.append(plan)
    return plans


NEVER_CURRENT = "it succeeded, but its harness ended before it could make it current"


def never_made_current(directory: Path, status: Optional[RunStatus]) -> bool:
    """An attempt that succeeded, was never current (its record never names it: its harness died between its last
    status and the link), and is not outranked by a newer attempt that succeeded and is current."""
    run_path = run_path_of(directory)
    number = attempt_number(directory.name) if run_path != directory else None
    if number is None or status is None or status.state != RunState.SUCCEEDED:
        return False
    attempts = RunAttempts(run_path)
    current = attempts.current()
    if current is None or current.number == number or number in attempts.recorded_current():
        return False
    if current.number > number:
        newer = current.status_read().status
        return newer is None or newer.state != RunState.SUCCEEDED
    return True


def has_open_window(directory: Path) -> bool:
    """Whether the capture's pauses.jsonl has a window whose last line is still open."""
    return any(window.end_us is None for window in read_pauses(Path(directory) / "pauses.jsonl", []))


def read_status_for_recover(directory: Path) -> StatusRead:
    """The capture's status as recover sees it: a status.json torn by a power loss is rebuilt from the fields it still
    has and, for the fields it lacks, from the evidence on disk (the manifest, the log, the saved steps). Without a
    state of its own it is a run whose harness and engine went away (`running`: recover settles it)."""
    found = read_status(directory)
    if not found.torn:
        return found
    capture = Capture(directory, found.run)
    data = _json_left(directory)
    manifest = capture.read_manifest() or {}
    spec = manifest.get("launch_spec")
    spec = spec if isinstance(spec, dict) else {}
    experiment = manifest.get("experiment")
    experiment = experiment if isinstance(experiment, dict) else {}
    engine = manifest.get("engine")
    engine_name = engine.get("engine") if isinstance(engine, dict) else None
    run_id = manifest.get("run_id")
    expected = spec.get("steps_expected", experiment.get("steps"))
    created = manifest.get("created_at")
    said_state = data.get("state") if isinstance(data, dict) else None
    final = said_state in STATES and RunState(said_state).is_final
    status, lacked = RunStatus.rebuilt(
        data,
        {
            "run": found.run,
            "run_id": run_id if isinstance(run_id, str) else f"{found.run}-unknown",
            "state": RunState.RUNNING,
            "exit_code": None,
            "started_at": created if isinstance(created, str) and parse_time_us(created) is not None else utc_now(),
            # A final state was written as the run ended: the torn file's time is that end.
            "ended_at": _modified_at(directory / STATUS_NAME) if final else None,
            "steps_expected": expected if isinstance(expected, int) and not isinstance(expected, bool) else 0,
            "steps_complete": count_complete_steps(capture.metrics_path),
            "error": None,
            "engine": engine_name if isinstance(engine_name, str) else None,
            "attempt": attempt_number(directory.name) if run_path_of(directory) != directory else None,
        },
    )
    status.run = found.run  # the directory's run, whatever the torn file says
    said = f"{', '.join(lacked)} from the manifest and the files" if lacked else "nothing from the files"
    status.notes.append(f"harness recover rebuilt this status ({said}): {found.broken}")
    return StatusRead(directory, status, None, torn=True)


def _json_left(directory: Path) -> JSONValue:
    """What a torn status.json still holds as JSON (None when it holds none)."""
    try:
        return loads_json(read_bounded(directory / STATUS_NAME, MAX_STATUS_BYTES))
    except (FileNotFoundError, Unreadable, ValueError):
        return None


def _modified_at(path: Path) -> str:
    """When a file was last written, as RFC 3339 UTC (now, when it cannot be asked)."""
    try:
        return format_time_us(int(os.stat(path).st_mtime_ns // 1000))
    except OSError:
        return utc_now()


def started_by_evidence(capture: Capture) -> bool:
    """Whether the files show the trainer ran: a log line or a saved step (whatever its status says)."""
    try:
        if read_head(capture.log_path, 1 << 16).strip(b"\0\n "):
            return True
    except (FileNotFoundError, Unreadable):
        pass
    return count_complete_steps(capture.metrics_path) > 0 or any(True for _ in iter_jsonl(capture.metrics_path, []))


# --------------------------------------------------------------------------- acting


@dataclass
class Result:
    """What recover did to one capture."""

    plan: Plan
    status: Optional[RunStatus]
    lines_saved: int = 0
    container: str = "-"  # stopped, left running, removed, kept, gone
    windows_closed: int = 0  # pause windows the heat guard left open
    closed_at: Optional[str] = None  # when they were closed (the time the run was known to run again)
    closed_when: str = ""  # what that time is
    skipped: Optional[str] = None  # why nothing was done after all (its harness came back)
    notes: list[str] = field(default_factory=list)
    torn_kept_as: Optional[str] = None  # where a torn status.json was kept, beside the rebuilt one
    made_current: Optional[str] = None  # an attempt it settled as succeeded became current: why, or why not


def carry_out(
    plan: Plan, *, leave_running: bool = False, keep: bool = False, grace_s: float = DEFAULT_GRACE_S
) -> Result:
    """Act on a plan under the capture's lock (taken here; a harness that holds it wins)."""
    if plan.action == "leave":
        return Result(plan, plan.status, skipped=plan.reason)
    if plan.action == "current":
        return _make_current(plan)
    odd = odd_files(plan.capture_dir)
    if odd:
        return Result(plan, plan.status, skipped=odd)
    lock = CaptureLock(plan.run_path, {"pid": os.getpid(), "host": this_host(), "recover": True, "since": utc_now()})
    if not lock.try_acquire():
        return Result(plan, plan.status, skipped=f"in use by a live harness ({holder(plan.run_path)})")
    try:
        found = read_status_for_recover(plan.capture_dir)  # again, under the lock: it may have changed since
        fresh = plan_recovery(
            found,
            None,
            [plan.owned] if plan.owned else [],
            here=this_host(),
            other_hosts=True,
            open_window=has_open_window(plan.capture_dir),
        )
        if fresh is None or fresh.action != plan.action:
            return Result(plan, found.status, skipped="its capture changed meanwhile; run recover again")
        kept_as = keep_torn_status(plan.capture_dir) if found.torn else None
        result = _act(replace(plan, status=found.status), leave_running=leave_running, keep=keep, grace_s=grace_s)
        result.torn_kept_as = kept_as
        result.made_current = succeeded_is_current(result, by="harness recover")
        return result
    finally:
        lock.release()


def _make_current(plan: Plan) -> Result:
    """An attempt that succeeded and was never current becomes current, under the run's lock, as its harness would
    have made it."""
    lock = CaptureLock(plan.run_path, {"pid": os.getpid(), "host": this_host(), "recover": True, "since": utc_now()})
    if not lock.try_acquire():
        return Result(plan, plan.status, skipped=f"in use by a live harness ({holder(plan.run_path)})")
    try:
        found = read_status(plan.capture_dir)
        if not never_made_current(plan.capture_dir, found.status):
            return Result(plan, found.status, skipped="its capture changed meanwhile; run recover again")
        result = Result(plan, found.status)
        result.made_current = succeeded_is_current(result, by="harness recover")
        return result
    finally:
        lock.release()


def odd_files(directory: Path) -> Optional[str]:
    """Why recover must not touch a capture: a file it reads or appends to is not a regular file (None: none)."""
    odd = [why for why in (not_regular(directory / name) for name in CAPTURE_FILES) if why]
    return f"{'; '.join(odd)}: nothing is changed" if odd else None


def keep_torn_status(directory: Path) -> str:
    """Move a torn status.json aside (status.json.torn, or .torn.2, ... when one is there already); its new name.
    Nothing is lost: the bytes a power loss left stay beside the status rebuilt from the files."""
    status_path = directory / STATUS_NAME
    for number in range(1, 1000):
        name = f"{STATUS_NAME}.torn" + (f".{number}" if number > 1 else "")
        if not os.path.lexists(directory / name):
            os.rename(status_path, directory / name)
            return name
    raise HarnessError(f"{directory}: a thousand torn status files are kept there already; move them aside")


def _act(plan: Plan, *, leave_running: bool, keep: bool, grace_s: float) -> Result:
    capture = Capture(plan.capture_dir, plan.run)
    status = plan.status
    assert status is not None
    obj = plan.owned
    result = Result(plan, status)
    if plan.action == "close":  # a final capture: only the closing line, its status stays as recorded
        _close_windows(capture, status, result, frozen=False, note=False)
        if obj is not None and obj.description.state in (EXITED, GONE) and not obj.kept:
            result.container = _remove(obj.handle, keep)
        return result
    if plan.action == "remove":
        assert obj is not None
        result.container = _remove(obj.handle, keep)
        return result
    if plan.action == "rebuild":  # a torn status that still says how the run ended: only the rest is rebuilt
        return _written(capture, status, result)
    if obj is None:  # settle a running capture whose thing is not there (never started, or removed)
        _settle_without_object(capture, status)
        _close_windows(capture, status, result, frozen=False)
        result.container = "none"
        return _written(capture, status, result)
    handle = obj.handle
    state = handle.describe().state
    if state == CREATED and plan.action == "settle":
        status.state, status.ended_at = RunState.NOT_STARTED, utc_now()
        status.error = f"{_harness_gone(status).replace('is gone', 'was gone')} before its container started"
        status.container = obj.id
        result.container = _remove(handle, False)  # it never ran: nothing in it to keep
        return _written(capture, status, result)
    if state == PAUSED:
        handle.resume()
    _close_windows(capture, status, result, frozen=state == PAUSED)  # once it runs again: that ends the freeze
    stopped = False
    known = known_secrets_of(handle, capture)  # before the stop: a process's environment goes with it
    if state not in (EXITED, GONE, CREATED) and not leave_running:
        handle.stop(grace_s)
        stopped = True
    result.lines_saved = save_remaining_logs(handle, capture, known)
    after = handle.describe()
    exited = after.state in (EXITED, GONE)
    parser, steps_complete = rebuild_metrics(capture, include_incomplete=exited)
    status.steps_complete = steps_complete
    gone = _harness_gone(status).replace("is gone", "was gone")
    if plan.action == "complete":
        status.notes.append(f"harness recover saved {result.lines_saved} more log line(s) at {utc_now()}")
        if exited:
            status.exit_code = after.exit_code if status.exit_code is None else status.exit_code
            status.ended_at = status.ended_at or after.finished_at or utc_now()
        status.capture_complete = exited
    elif not exited:
        status.state, status.error = RunState.INTERRUPTED, f"{gone}; left running by harness recover"
        status.capture_complete = False
    else:
        outcome = decide_outcome(
            exit_code=after.exit_code,
            steps_complete=steps_complete,
            steps_expected=status.steps_expected,
            stop_state="interrupted" if stopped else None,
            stop_reason=f"{gone}; stopped by harness recover" if stopped else None,
            failure=parser.failure,
            capture_error=None,
        )
        status.state, status.error, status.steps_usable = outcome.state, outcome.error, outcome.steps_usable
        if not stopped:
            status.notes.append(f"{gone}; the trainer ended on its own and harness recover recorded it")
        status.exit_code = after.exit_code
        status.ended_at = after.finished_at or utc_now()
        status.capture_complete = True
    status.steps_usable = status.steps_usable or (
        status.state != RunState.SUCCEEDED and steps_complete >= status.steps_expected > 0
    )
    if exited:
        result.container = _remove(handle, keep or obj.kept)
    else:
        result.container = "left running"
    return _written(capture, status, result)


def _settle_without_object(capture: Capture, status: RunStatus) -> None:
    gone = _harness_gone(status).replace("is gone", "was gone")
    if status.container is None and not started_by_evidence(capture):
        status.state, status.error = RunState.NOT_STARTED, f"{gone} before its container or process started"
    elif status.container is None:  # its status never learned it started, but its files show it ran
        _, status.steps_complete = rebuild_metrics(capture, include_incomplete=True)
        status.state = RunState.INTERRUPTED
        status.error = f"{gone}, and the engine no longer has what ran it; the capture keeps what it saved"
    else:
        _, status.steps_complete = rebuild_metrics(capture, include_incomplete=True)
        status.state = RunState.INTERRUPTED
        status.error = f"{gone}, and the engine no longer has {status.container[:12]}; the capture keeps what it saved"
    status.ended_at = status.ended_at or utc_now()


def _close_windows(capture: Capture, status: RunStatus, result: Result, *, frozen: bool, note: bool = True) -> None:
    """Close the open pause windows (with a note in the status): now if recover thawed the run, else at the time it
    is known to have run again."""
    if frozen:
        end, when = utc_now(), "when recover found it frozen and thawed it (the harness that paused it was gone)"
    else:
        end, when = running_again_at(capture, status)
    closed = close_open_windows(capture.pauses_path, end)
    if closed and note:
        status.notes.append(
            f"harness recover closed {closed} open pause window{'s' if closed != 1 else ''} at {end}, {when}"
        )
    result.windows_closed, result.closed_at, result.closed_when = closed, end, when


def running_again_at(capture: Capture, status: RunStatus) -> tuple[str, str]:
    """When a run that is not frozen is known to have run again after its last open window: its first log line
    after the window's start, else its end (or now); and what that time is."""
    starts = [w.start_us for w in read_pauses(capture.pauses_path, []) if w.end_us is None]
    if starts:
        after_us = max(starts) + RUNNING_AGAIN_SLACK_US  # the summary's rule (harness.capture.reader)
        logged = first_stamps_after(capture.log_path, [after_us], [])
        if after_us in logged:
            return format_time_us(logged[after_us][0]), "when its log shows it running again"
    if status.ended_at:
        return status.ended_at, "the run's end (no log line after the window's start)"
    return utc_now(), "when recover found it running (no log line after the window's start)"


def close_open_windows(pauses_path: Path, end: str) -> int:
    """Append a closing line (same start, end `end`) for each window whose last line is still open; how many.

    A torn last line is cut first, so the closing line starts a line of its own.
    """
    if not pauses_path.exists():
        return 0
    cut_torn_tail(pauses_path)
    last: dict[int, JSONObject] = {}
    for _, obj in iter_jsonl(pauses_path, []):
        start = parse_time_us(obj.get("start"))
        if start is not None:
            last[start] = obj
    still_open = [window for _, window in sorted(last.items()) if window.get("end") is None]
    for window in still_open:
        append_jsonl(pauses_path, {**window, "end": end})
    return len(still_open)


def _remove(handle: RunHandle, keep: bool) -> str:
    if keep:
        return "kept"
    handle.remove()
    return "removed"


def _written(capture: Capture, status: RunStatus, result: Result) -> Result:
    capture.write_status(status)
    if status.capture_complete:
        capture.drop_reserve()
    result.status = status
    return result


def succeeded_is_current(result: Result, *, by: str) -> Optional[str]:
    """An attempt settled as succeeded becomes current, as its harness would have made it (the newest that
    succeeded is current); what was done, or why not (None: nothing to do: it did not succeed, is current already,
    or is no attempt)."""
    if result.status is None or result.status.state != RunState.SUCCEEDED or result.skipped is not None:
        return None
    directory = result.plan.capture_dir
    run_path = run_path_of(directory)
    number = attempt_number(directory.name) if run_path != directory else None
    if number is None:
        return None
    attempts = RunAttempts(run_path)
    current = attempts.current()
    if current is not None and current.number == number:
        return None
    try:
        made = attempts.succeeded(
            Attempt(attempts.run, number, directory), by=by, why=f"it succeeded (its harness was gone; settled by {by})"
        )
    except (HarnessError, OSError) as err:
        return f"attempt {number} succeeded, but is not made current: {getattr(err, 'message', None) or err}"
    return f"attempt {number} is current (it succeeded)" if made else None


# --------------------------------------------------------------------------- the capture's files


def log_position(log_path: Path) -> LogPosition:
    """Where container.log ends: the position after its last lines (read from its tail)."""
    try:
        with open_regular(log_path) as handle:
            handle.seek(0, os.SEEK_END)
            start = max(0, handle.tell() - LOG_TAIL_BYTES)
            handle.seek(start)
            tail = handle.read(LOG_TAIL_BYTES).decode("utf-8", "replace").split("\n")
    except (FileNotFoundError, Unreadable):
        return LogPosition()
    # The whole tail, not only its last stamp: Docker writes lines slightly out of timestamp order.
    return LogPosition.after(line for line in tail[1 if start else 0 :] if line)  # a first line may be cut


def known_secrets_of(handle: RunHandle, capture: Capture) -> KnownSecrets:
    """The secrets the trainer of `handle` was given, as far as its engine still holds them (a Docker container's
    environment; a live process's), with the names the capture's manifest lists as secret: masked in the lines
    the harness saves or shows from the engine, as the log pump masked the rest."""
    given = getattr(handle, "given_values", lambda: None)()
    if given is None:
        return KnownSecrets([])
    manifest = capture.read_manifest() or {}
    experiment = manifest.get("experiment")
    container = experiment.get("container") if isinstance(experiment, dict) else None
    listed = container.get("secret_env") if isinstance(container, dict) else None
    env, words = given
    names = [str(name) for name in listed] if isinstance(listed, list) else []
    return KnownSecrets(secret_values_of(env, words, names))


def save_remaining_logs(handle: RunHandle, capture: Capture, known: Optional[KnownSecrets] = None) -> int:
    """Append to container.log the lines the engine has that it lacks (a torn last line cut first), known secrets
    (read from the engine when not given) masked as the log pump masks them."""
    cut_torn_tail(capture.log_path)
    known = known if known is not None else known_secrets_of(handle, capture)
    position = log_position(capture.log_path)
    position.stored = known.mask  # its lines were stored masked
    added = 0
    fd = open_append(capture.log_path, root=capture.root)
    try:
        for line in handle.logs(position, follow=False):
            write_whole(fd, known.mask(line).encode("utf-8", "replace") + b"\n")
            added += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    return added


def rebuild_metrics(capture: Capture, *, include_incomplete: bool) -> tuple["LogParser", int]:
    """Re-parse container.log, append the steps metrics.jsonl lacks; the parser and the complete-step count."""
    from harness.capture import append_jsonl
    from harness.capture.reader import count_complete_steps
    from harness.mileslog import LogParser

    cut_torn_tail(capture.metrics_path)
    parser = LogParser()
    records = []
    try:
        with open_regular(capture.log_path) as handle:
            records.extend(parser.feed_stream(WholeLines(handle)))
    except (FileNotFoundError, Unreadable):
        pass
    if include_incomplete:
        records.extend(parser.finish())
    saved = {(row.get("step"), row.get("complete")) for _, row in iter_jsonl(capture.metrics_path, [])}
    for record in records:
        if (record.step, record.complete) not in saved and (record.step, True) not in saved:
            append_jsonl(capture.metrics_path, record.to_json(include_derived=False), root=capture.root)
            saved.add((record.step, record.complete))
    if parser.args is not None and not capture.args_path.exists():
        write_json_atomic(capture.args_path, parser.args, root=capture.root)
    return parser, count_complete_steps(capture.metrics_path)


def settle_for_run(run_path: Path, engine: Engine, *, grace_s: float = DEFAULT_GRACE_S) -> Optional[str]:
    """For `run`, which holds the run's capture lock: settle each attempt a dead harness left `running`, if nothing
    of it still runs.

    Returns why it cannot (something of it still runs: `harness recover` decides), or None.
    """
    notes: list[str] = []
    objects: Optional[list[EngineObject]] = None
    for attempt in RunAttempts(run_path).all():
        found = read_status_for_recover(attempt.directory)
        if found.status is None or found.status.state != RunState.RUNNING:
            if not found.torn and never_made_current(attempt.directory, found.status):
                succeeded_is_current(
                    Result(Plan(attempt.directory, "current", NEVER_CURRENT), found.status), by="harness run"
                )
            continue
        if objects is None:
            objects = engine_objects([engine], notes)
        directory = Path(os.path.abspath(attempt.directory))
        mine = [o for o in objects if o.attempt_dir == directory]
        plan = plan_recovery(found, None, mine, here=this_host())
        if plan is None or plan.action != "settle":
            if plan is not None:
                return plan.reason
            continue
        odd = odd_files(attempt.directory)
        if odd is not None:
            return f"attempt {attempt.number}: {odd}"
        if plan.owned is not None and plan.owned.description.alive:
            return (
                f"its capture says running, its harness is gone, and its {plan.owned.name} is still "
                f"{plan.owned.description.state}; `harness recover` stops it and saves its log "
                "(`--leave-running` keeps it running)"
            )
        if notes:
            return f"its capture says running and its engine cannot be asked ({'; '.join(notes)})"
        if found.torn:
            keep_torn_status(attempt.directory)
        result = _act(plan, leave_running=False, keep=False, grace_s=grace_s)
        succeeded_is_current(result, by="harness run")
    return None
