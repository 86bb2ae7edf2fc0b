"""A capture's repair after its harness is gone: every file `harness recover` (and `harness run`'s settle) writes.

The settler (harness.run.settle) decides what a capture needs and acts on the
engine; then it makes one call here, `repair_capture`, with what the engine
said and did (`TrainerEnd`). The repair, in this order:

- keeps a status.json a power loss tore beside the one rebuilt from the
  files (`status.json.torn`);
- closes the pause windows the heat guard left open: at the time recover
  thawed the run, else at the time it is known to have run again (its first
  log line after the window's start, else its end);
- appends to container.log the lines the engine has and it lacks (a torn
  last line cut first), re-parses the log and appends the steps
  metrics.jsonl lacks;
- records the truth in status.json (harness.capture.outcome's rule) and
  gives back the space reserve once the capture is complete;
- makes an attempt it settled as `succeeded` its run's current one, as its
  harness would have made it.

Reading a status for recover (`read_status_for_recover`: a torn one rebuilt
from the evidence on disk) is here too, so the settler only reads and decides.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Literal, Optional

from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.files import append_jsonl, cut_torn_tail, write_json_atomic
from harness.capture.layout import Capture, utc_now
from harness.capture.outcome import RunEnd, decide_outcome
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
from harness.capture.records import STATES, RunState, RunStatus
from harness.errors import HarnessError
from harness.fs.bounded import (
    MAX_STATUS_BYTES,
    Unreadable,
    WholeLines,
    iter_jsonl,
    loads_json,
    open_regular,
    read_bounded,
)
from harness.fs.files import open_append, write_whole
from harness.fs.paths import not_regular
from harness.jsontypes import JSONObject, JSONValue
from harness.mileslog import LogParser
from harness.times import format_time_us, parse_time_us

Action = Literal["settle", "complete", "remove", "close", "rebuild", "current", "leave"]
CAPTURE_FILES = ("container.log", "metrics.jsonl", "args.json", "pauses.jsonl")  # what recover reads or appends to
LOG_TAIL_BYTES = 4 * 1024 * 1024
NEVER_CURRENT = "it succeeded, but its harness ended before it could make it current"

# The engine's lines after the capture's last ones (given the whole lines at the end of container.log), masked
# as the log pump masks what it stores.
MoreLines = Callable[[list[str]], Iterable[str]]


@dataclass(frozen=True)
class TrainerEnd:
    """What the engine said and what the settler did to the trainer before the repair (None fields: not known)."""

    object_id: str
    never_started: bool = False  # the engine created it but it never ran (the settler removed it)
    thawed_at: Optional[str] = None  # when the settler thawed it (it was frozen)
    stopped: bool = False  # the settler stopped it
    exited: bool = False  # it has exited, or is gone from the engine
    exit_code: Optional[int] = None
    finished_at: Optional[str] = None
    more_lines: Optional[MoreLines] = None


@dataclass(frozen=True)
class Repair:
    """One capture's repair: what the settler decided (`action`), the status it read, and what the engine did.

    `trainer` is None when no engine object holds the run (never started, or
    removed); `by` names who repairs (in the notes and the attempts' record).
    """

    directory: Path
    run: str
    action: Action
    status: Optional[RunStatus]
    torn: bool = False
    trainer: Optional[TrainerEnd] = None
    by: str = "harness recover"


@dataclass
class Repaired:
    """What the repair did to one capture."""

    status: Optional[RunStatus]
    lines_saved: int = 0
    windows_closed: int = 0  # pause windows the heat guard left open
    closed_at: Optional[str] = None  # when they were closed (the time the run was known to run again)
    closed_when: str = ""  # what that time is
    torn_kept_as: Optional[str] = None  # where a torn status.json was kept, beside the rebuilt one
    made_current: Optional[str] = None  # an attempt it settled as succeeded became current: why, or why not
    skipped: Optional[str] = None  # why nothing was done after all (the capture changed meanwhile)


def repair_capture(job: Repair) -> Repaired:
    """Repair one capture's files as `job.action` needs, under its lock (the caller holds it)."""
    capture = Capture(job.directory, job.run)
    status = job.status
    done = Repaired(status)
    if job.action == "current":
        if not never_made_current(job.directory, status):
            done.skipped = "its capture changed meanwhile; run recover again"
            return done
        done.made_current = succeeded_is_current(job.directory, status, by=job.by)
        return done
    if job.action in ("leave", "remove") or status is None:
        done.made_current = succeeded_is_current(job.directory, status, by=job.by)
        return done
    if job.torn:
        done.torn_kept_as = keep_torn_status(job.directory)
    if job.action == "close":  # a final capture: only the closing line, its status stays as recorded
        _close_windows(capture, status, done, thawed_at=None, note=False)
    elif job.action != "rebuild":  # a torn status that still says how the run ended: only the rest is rebuilt
        _settle_files(capture, status, job, done)
    if job.action != "close":
        capture.write_status(status)
        if status.capture_complete:
            capture.drop_reserve()
    done.made_current = succeeded_is_current(job.directory, status, by=job.by)
    return done


def _settle_files(capture: Capture, status: RunStatus, job: Repair, done: Repaired) -> None:
    """The files and the status of a run that was `running` (or whose capture is incomplete), its trainer ended or
    left as the settler found it."""
    trainer = job.trainer
    gone = harness_gone(status).replace("is gone", "was gone")
    if trainer is None:  # its thing is not there (never started, or removed)
        _settle_without_object(capture, status, gone)
        _close_windows(capture, status, done, thawed_at=None)
        return
    if trainer.never_started:
        status.state, status.ended_at = RunState.NOT_STARTED, utc_now()
        status.error = f"{gone} before its container started"
        status.container = trainer.object_id
        return
    _close_windows(capture, status, done, thawed_at=trainer.thawed_at)  # once it runs again: that ends the freeze
    done.lines_saved = save_remaining_logs(capture, trainer.more_lines) if trainer.more_lines is not None else 0
    parser, steps_complete = rebuild_metrics(capture, include_incomplete=trainer.exited)
    status.steps_complete = steps_complete
    if job.action == "complete":
        status.notes.append(f"harness recover saved {done.lines_saved} more log line(s) at {utc_now()}")
        if trainer.exited:
            status.exit_code = trainer.exit_code if status.exit_code is None else status.exit_code
            status.ended_at = status.ended_at or trainer.finished_at or utc_now()
        status.capture_complete = trainer.exited
    elif not trainer.exited:
        status.state, status.error = RunState.INTERRUPTED, f"{gone}; left running by harness recover"
        status.capture_complete = False
    else:
        _record_exit(status, trainer, parser, gone)
    status.steps_usable = status.steps_usable or (
        status.state != RunState.SUCCEEDED and steps_complete >= status.steps_expected > 0
    )


def _record_exit(status: RunStatus, trainer: TrainerEnd, parser: LogParser, gone: str) -> None:
    """A trainer that exited (on its own, or stopped by the settler): the state by the contract's rule."""
    outcome = decide_outcome(
        RunEnd(
            exit_code=trainer.exit_code,
            steps_complete=status.steps_complete,
            steps_expected=status.steps_expected,
            stop_state="interrupted" if trainer.stopped else None,
            stop_reason=f"{gone}; stopped by harness recover" if trainer.stopped else None,
            failure=parser.failure,
        )
    )
    status.state, status.error, status.steps_usable = outcome.state, outcome.error, outcome.steps_usable
    if not trainer.stopped:
        status.notes.append(f"{gone}; the trainer ended on its own and harness recover recorded it")
    status.exit_code = trainer.exit_code
    status.ended_at = trainer.finished_at or utc_now()
    status.capture_complete = True


def _settle_without_object(capture: Capture, status: RunStatus, gone: str) -> None:
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


def harness_gone(status: RunStatus) -> str:
    """Why a capture that says running has no harness: which harness is gone (or that a power loss left no trace)."""
    if status.harness_pid is None:  # a status rebuilt after a power loss: nothing says which harness it was
        return "the harness and its engine went away (its status.json was torn: a power loss?)"
    return f"its harness (pid {status.harness_pid} on {status.harness_host}) is gone"


# --------------------------------------------------------------------------- pause windows


def _close_windows(
    capture: Capture, status: RunStatus, done: Repaired, *, thawed_at: Optional[str], note: bool = True
) -> None:
    """Close the open pause windows (with a note in the status): when the settler thawed the run, else at the time
    it is known to have run again."""
    if thawed_at is not None:
        end, when = thawed_at, "when recover found it frozen and thawed it (the harness that paused it was gone)"
    else:
        end, when = running_again_at(capture, status)
    closed = close_open_windows(capture.pauses_path, end)
    if closed and note:
        status.notes.append(
            f"harness recover closed {closed} open pause window{'s' if closed != 1 else ''} at {end}, {when}"
        )
    done.windows_closed, done.closed_at, done.closed_when = closed, end, when


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


def has_open_window(directory: Path) -> bool:
    """Whether the capture's pauses.jsonl has a window whose last line is still open."""
    return any(window.end_us is None for window in read_pauses(Path(directory) / "pauses.jsonl", []))


# --------------------------------------------------------------------------- the log and the steps


def log_tail(log_path: Path) -> list[str]:
    """The whole lines at the end of container.log (up to its last 4 MiB): where a reopened log stream resumes."""
    try:
        with open_regular(log_path) as handle:
            handle.seek(0, os.SEEK_END)
            start = max(0, handle.tell() - LOG_TAIL_BYTES)
            handle.seek(start)
            tail = handle.read(LOG_TAIL_BYTES).decode("utf-8", "replace").split("\n")
    except (FileNotFoundError, Unreadable):
        return []
    # The whole tail, not only its last stamp: Docker writes lines slightly out of timestamp order.
    return [line for line in tail[1 if start else 0 :] if line]  # a first line may be cut


def save_remaining_logs(capture: Capture, more_lines: MoreLines) -> int:
    """Append to container.log the lines the engine has that it lacks (a torn last line cut first); how many."""
    cut_torn_tail(capture.log_path)
    tail = log_tail(capture.log_path)
    added = 0
    fd = open_append(capture.log_path, root=capture.root)
    try:
        for line in more_lines(tail):
            write_whole(fd, line.encode("utf-8", "replace") + b"\n")
            added += 1
        os.fsync(fd)
    finally:
        os.close(fd)
    return added


def rebuild_metrics(capture: Capture, *, include_incomplete: bool) -> tuple[LogParser, int]:
    """Re-parse container.log, append the steps metrics.jsonl lacks; the parser and the complete-step count."""
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


def started_by_evidence(capture: Capture) -> bool:
    """Whether the files show the trainer ran: a log line or a saved step (whatever its status says)."""
    try:
        if read_head(capture.log_path, 1 << 16).strip(b"\0\n "):
            return True
    except (FileNotFoundError, Unreadable):
        pass
    return count_complete_steps(capture.metrics_path) > 0 or any(True for _ in iter_jsonl(capture.metrics_path, []))


def odd_files(directory: Path) -> Optional[str]:
    """Why recover must not touch a capture: a file it reads or appends to is not a regular file (None: none)."""
    odd = [why for why in (not_regular(directory / name) for name in CAPTURE_FILES) if why]
    return f"{'; '.join(odd)}: nothing is changed" if odd else None


# --------------------------------------------------------------------------- the status


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
    spec = _object(manifest.get("launch_spec"))
    experiment = _object(manifest.get("experiment"))
    engine_name = _object(manifest.get("engine")).get("engine")
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


def _object(value: JSONValue) -> JSONObject:
    return value if isinstance(value, dict) else {}


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


# --------------------------------------------------------------------------- the current attempt


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


def succeeded_is_current(directory: Path, status: Optional[RunStatus], *, by: str) -> Optional[str]:
    """An attempt settled as succeeded becomes current, as its harness would have made it (the newest that
    succeeded is current); what was done, or why not (None: nothing to do: it did not succeed, is current already,
    or is no attempt)."""
    if status is None or status.state != RunState.SUCCEEDED:
        return None
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
