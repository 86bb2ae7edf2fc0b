"""Looking at and acting on existing captures: status rows, following a log, asking a run to stop.

All of it reads captures with the one tolerant reader (a broken capture is a
row with its reason, never a crash) and reaches trainers only through the
engines.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from harness.capture import (
    Capture,
    CaptureLock,
    RunState,
    RunStatus,
    find_capture,
    this_host,
    utc_now,
    write_json_atomic,
)
from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.lock import holder, in_use
from harness.capture.reader import is_run_name, read_pauses, run_path_of
from harness.capture.records import PauseWindow, tally_pauses
from harness.checkpoints.layout import iteration_name
from harness.checkpoints.lineage import read_resume
from harness.engines import PAUSED, engine_named, listed_engine_names
from harness.engines.base import RunHandle
from harness.engines.logstream import LogPosition
from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import Unreadable, WholeLines, last_jsonl, open_regular
from harness.run.decide import exit_code_for_state, manifest_changes
from harness.run.settle import carry_out, engine_objects, known_secrets_of, plan_recovery
from harness.summary.windows import merge_windows, union_length
from harness.times import US_PER_S, clock_text, format_time_us, parse_time_us

FOLLOW_POLL_S = 0.5


@dataclass(frozen=True)
class CaptureRow:
    """One line of `harness status`, as plain text (the renderer escapes it)."""

    run: str
    state: str
    steps: str
    pauses: str
    exit_code: str
    started: str
    duration: str
    guard: str = "-"
    host: str = ""  # the Ray node's host name for a run Ray placed (docs/cluster.md), else its harness's host
    placed_by_ray: bool = False


def capture_rows(captures: list[Capture]) -> list[CaptureRow]:
    """A row per run, its current attempt's; a broken one is a row with its reason, not an error."""
    rows = []
    for capture in captures:
        found = capture.status_read()
        newer = _newer_attempts(capture)
        if found.status is None:
            if found.torn:
                state = f"torn by a power loss? ({found.broken}; harness recover rebuilds it from its files)"
            else:
                state = f"broken: {found.broken or 'no status.json'}"
            rows.append(CaptureRow(capture.run, state + newer, "-", "-", "-", "-", "-"))
            continue
        status = found.status
        windows = read_pauses(capture.pauses_path, [])
        rows.append(
            CaptureRow(
                run=capture.run,
                state=state_text(capture, status) + lineage_clause(capture.directory) + newer,
                steps=f"{status.steps_complete}/{status.steps_expected}",
                pauses=_pauses(windows, status),
                exit_code=exit_code_text(status),
                started=status.started_at[:19].replace("T", " "),
                duration=duration_text(status),
                guard=_guard(capture, status, windows),
                host=_host(capture) or status.harness_host or "",
                placed_by_ray=bool(_host(capture)),
            )
        )
    return rows


def lineage_clause(directory: Path) -> str:
    """`; resumed attempt 1 from iter_0000006 at rollout 6`, or its resume's verdict when it was not verified; ""
    for an attempt that resumed nothing (docs/checkpoints.md)."""
    record, why = read_resume(str(directory))
    if why is not None:
        return f"; {why}"
    if record is None:
        return ""
    where = f"attempt {record.from_attempt} from {iteration_name(record.iteration)} at rollout {record.next_rollout_id}"
    if record.verified is True:
        return f"; resumed {where}"
    if record.verified is False:
        return f"; its resume of {where} was refused ({record.cause or 'no cause recorded'})"
    return f"; resuming {where}, not verified yet"


def exit_code_text(status: RunStatus) -> str:
    """The exit code `harness run` gave the run (what the shell saw), and the trainer's where it differs:
    `130 (trainer 143)` for a run Ctrl-C stopped; the trainer's alone for a run without one (`not_started`)."""
    harness = exit_code_for_state(status.state)
    trainer = status.exit_code
    if harness is None:
        return "-" if trainer is None else str(trainer)
    if trainer is None or trainer == harness:
        return str(int(harness))
    return f"{int(harness)} (trainer {trainer})"


def _host(capture: Capture) -> str:
    """The host a run Ray placed ran on (`manifest.ray.hostname`); "" for a local run."""
    ray = (capture.read_manifest() or {}).get("ray")
    hostname = ray.get("hostname") if isinstance(ray, dict) else None
    return hostname if isinstance(hostname, str) else ""


def _newer_attempts(capture: Capture) -> str:
    """`; a newer attempt interrupted 2/12`: the attempts after the current one, which did not become current; the
    newest few said each, the rest counted (5,000 empty attempt directories are one clause, not 5,000)."""
    said: list[str] = []
    no_status: list[int] = []
    broken: list[int] = []
    others: dict[str, int] = {}
    for attempt in reversed(RunAttempts(run_path_of(capture.directory)).newer_than_current()):
        found = attempt.status_read()
        status = found.status
        if status is None:
            (broken if found.broken else no_status).append(attempt.number)
            continue
        state = "running? (its harness is gone)" if harness_gone(capture, status) else status.state.value
        if len(said) < NEWER_SAID:
            said.append(f"a newer attempt {state} {status.steps_complete}/{status.steps_expected}")
        else:
            others[state] = others.get(state, 0) + 1
    if others:
        counted = ", ".join(f"{count:,} {state}" for state, count in sorted(others.items()))
        more = sum(others.values())
        said.append(f"{more:,} more newer attempt{'s' if more != 1 else ''} ({counted})")
    said += [_counted(broken, "has a broken status", "have a broken status")]
    said += [_counted(no_status, "has no status", "have no status")]
    return "".join(f"; {text}" for text in said if text)


NEWER_SAID = 2  # newer attempts said one by one in `status`; the rest are counted by state


def _counted(numbers: list[int], one: str, many: str) -> str:
    """`attempt 7 has no status`, or `5,000 attempts have no status`; "" for none."""
    if not numbers:
        return ""
    return f"attempt {numbers[0]} {one}" if len(numbers) == 1 else f"{len(numbers):,} attempts {many}"


def live_capture(capture: Capture) -> Capture:
    """The attempt of the run that runs now (the newest that says running), else the run's current capture."""
    for attempt in reversed(RunAttempts(run_path_of(capture.directory)).all()):
        status = attempt.status_read().status
        if status is not None and status.state == RunState.RUNNING:
            return Capture(attempt.directory, capture.run)
    return capture


def harness_gone(capture: Capture, status: RunStatus) -> bool:
    """A running capture whose harness (on this machine) no longer holds its run's lock."""
    return (
        status.state == RunState.RUNNING
        and status.harness_host in (None, this_host())
        and not in_use(run_path_of(capture.directory))
    )


def same_attempt(obj_dir: Optional[Path], capture: Capture) -> bool:
    """Whether an engine object's attempt directory is this capture's (a run's path is followed to its attempt)."""
    return obj_dir is not None and os.path.realpath(obj_dir) == os.path.realpath(capture.directory)


def state_text(capture: Capture, status: RunStatus) -> str:
    """The state as `status` shows it: with why it may not be what it says (its harness gone, a capture cut short)."""
    state = status.state.value
    if harness_gone(capture, status):
        state = "running? (its harness is gone: harness recover)"
    elif status.state == RunState.NOT_STARTED:
        state += f" ({status.error})" if status.error else ""
    elif not status.capture_complete:
        state += " (capture incomplete: harness recover)"
    if status.steps_usable and status.state != RunState.SUCCEEDED:  # said where it is news
        state += " (steps usable)"
    return state


def _pauses(windows: list[PauseWindow], status: RunStatus) -> str:
    """`N (S s)`: the pauses (capture.records.tally_pauses) and the length of their union (an open one ends now, or
    at the run's end); `, 1 failed` for each pause the engine could not make."""
    tally = tally_pauses(windows)
    failed = f", {tally.failed} failed" if tally.failed else ""
    if not tally.pauses:
        return "0" + failed
    return f"{tally.pauses} ({paused_wall_s(windows, status):.0f} s){failed}"


def paused_wall_s(windows: list[PauseWindow], status: RunStatus) -> float:
    """Wall seconds the pauses that froze the run cover together (an open one ends now, or at the run's end)."""
    until = parse_time_us(status.ended_at or utc_now())
    spans = [(w.start_us, w.end_us or until) for w in windows if w.froze]
    return union_length(*merge_windows((s, e) for s, e in spans if e is not None)) / US_PER_S


def _guard(capture: Capture, status: RunStatus, windows: list[PauseWindow]) -> str:
    """The heat guard now: `PAUSED since 12:03:04, 88.0 C` while a window is open, else the last temperature.

    Only the tail of guard.jsonl is read. An open window whose harness is gone
    (or whose status is final) is a run left frozen: `harness recover` thaws it.
    An open window of a run its engine says is not frozen (its close line
    could not be written) is no pause: `harness recover` closes it.
    """
    last = last_jsonl(capture.guard_path, [], where=lambda obj: "temp_c" in obj)  # a sample, not a watch line
    temp = last.get("temp_c") if last is not None else None
    if not isinstance(temp, (int, float)) or isinstance(temp, bool):
        temp = None
    open_windows = [window for window in windows if window.end_us is None]
    if open_windows and frozen_now(capture, status) is not False:
        window = open_windows[-1]
        sampled_at = parse_time_us(last.get("t")) if last is not None else None
        if window.peak_c is not None and (temp is None or sampled_at is None or sampled_at < window.start_us):
            temp = window.peak_c  # the reading that opened it, when no later sample was written
        text = f"PAUSED since {format_time_us(window.start_us)[11:19]}" + (
            f", {temp:.1f} C" if temp is not None else ""
        )
        if status.is_final or harness_gone(capture, status):
            text += " (left frozen? harness recover thaws it)"
        return text
    if temp is not None:
        return f"{temp:.1f} C"
    guard = (capture.read_manifest() or {}).get("guard")
    return "off" if isinstance(guard, dict) and guard.get("guarded") is False else "-"


def frozen_now(capture: Capture, status: RunStatus) -> Optional[bool]:
    """Whether the engine holds the capture's run frozen now; None when it cannot be asked (another host, no engine)."""
    if status.harness_host not in (None, this_host()):
        return None
    try:
        if (status.engine or "docker") not in listed_engine_names():
            return None  # HARNESS_ENGINES leaves it out
        engine = engine_named(status.engine or "docker")
    except HarnessError:
        return None
    problems: list[str] = []
    objects = [
        o
        for o in engine_objects([engine], problems)
        if same_attempt(o.attempt_dir, capture) and o.run_id == status.run_id
    ]
    if problems:
        return None
    return any(o.description.state == PAUSED for o in objects)


def duration_text(status: RunStatus) -> str:
    """How long the run ran (`m:ss`, `h:mm:ss`: the harness's one clock), `... so far` while it runs."""
    end = parse_time_us(status.ended_at or utc_now())
    start = parse_time_us(status.started_at)
    seconds = (end - start) // US_PER_S if end is not None and start is not None else 0
    return clock_text(seconds) + ("" if status.ended_at else " so far")


# --------------------------------------------------------------------------- logs


def follow_log(
    capture: Capture, *, follow: bool, on_skipped: Callable[[str], None] = lambda note: None
) -> Iterator[str]:
    """container.log line by line; with `follow`, until the run's status is final or its harness is gone.

    Where the capture stops short (its harness died, the disk filled up, the
    engine went away) and the engine still has the trainer, the rest comes
    from the engine, after the capture's last line. A torn line of the
    capture (harness.fs.bounded.WholeLines) is never shown: `on_skipped`
    is told of each, once the capture's lines are read.
    """
    position = LogPosition()
    yield from _capture_lines(capture, follow, position, on_skipped)
    handle = _engine_handle(capture)
    if handle is not None:
        known = known_secrets_of(handle, capture)  # masked as the log pump masks what it stores
        position.stored = known.mask
        for line in handle.logs(position, follow=follow):
            yield known.mask(line)


def _capture_lines(
    capture: Capture, follow: bool, position: LogPosition, on_skipped: Callable[[str], None]
) -> Iterator[str]:
    if not capture.log_path.exists() and not follow:
        return
    while not capture.log_path.exists():
        if _capture_done(capture):
            return
        time.sleep(FOLLOW_POLL_S)
    try:
        opened = open_regular(capture.log_path)
    except (OSError, Unreadable) as err:
        raise HarnessError(f"run {capture.run}: {err}", ExitCode.BAD_INPUT) from None
    with opened as handle:
        lines = WholeLines(handle, live=True)
        last_look = False
        while True:
            data = lines.read()
            for raw in data.split(b"\n")[:-1]:
                if raw:  # every line the harness writes has its stamp: an empty one is a torn line, blanked
                    line = raw.decode("utf-8", "replace")
                    position.advance(line)
                    yield line
            if data:
                continue
            if last_look:
                break
            if not follow or _capture_done(capture):
                last_look = True  # one more read: lines written between the last read and the status change
                continue
            time.sleep(FOLLOW_POLL_S)
        # The engine, where it still has the trainer, gives a line cut short here whole, after the position.
        for number, why in lines.finish():
            on_skipped(f"{capture.log_path.name} line {number}: {why}")


def _capture_done(capture: Capture) -> bool:
    status = capture.status_read().status
    return status is None or status.is_final or harness_gone(capture, status)


def _engine_handle(capture: Capture) -> Optional[RunHandle]:
    """The engine's handle on the trainer of a capture that stops short of it (None when complete or gone)."""
    found = capture.status_read()
    status = found.status
    if status is None or (status.capture_complete and not harness_gone(capture, status)):
        return None
    try:
        engine = engine_named(status.engine or "docker")
    except HarnessError:
        return None
    objects = [o for o in engine_objects([engine], []) if same_attempt(o.attempt_dir, capture)]
    plan = plan_recovery(found, None, objects, here=this_host(), other_hosts=True)
    return plan.owned.handle if plan is not None and plan.owned is not None else None


# --------------------------------------------------------------------------- stop


def request_stop(
    capture: Capture, reason: str, *, timeout_s: float, note: Callable[[str], None], warn: Callable[[str], None]
) -> RunStatus:
    """Ask the run's harness to stop it (`note`); if that harness is gone, recover the run through its engine (`warn`).

    The attempt that runs now is the one stopped, whichever attempt is current.
    """
    capture = live_capture(capture)
    status = capture.read_status()
    if status is None:
        raise HarnessError(f"run {capture.run} has no status", ExitCode.NOT_FOUND)
    if harness_gone(capture, status) or (status.is_final and not status.capture_complete):
        return _recover_orphan(capture, warn)
    if status.state != RunState.RUNNING:
        raise HarnessError(f"run {capture.run} is not running (it is {status.state})", ExitCode.NOT_FOUND)
    write_json_atomic(capture.stop_request_path, {"reason": reason, "requested_at": utc_now()}, root=capture.root)
    note(f"asked the harness of {capture.run} (pid {status.harness_pid}) to stop it: {reason}")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = capture.status_read().status
        if current is not None and current.is_final:
            return current
        time.sleep(FOLLOW_POLL_S)
    raise HarnessError(
        f"run {capture.run} did not stop within {timeout_s:g} s; it may still be shutting down", ExitCode.RUN_FAILED
    )


def _recover_orphan(capture: Capture, note: Callable[[str], None]) -> RunStatus:
    found = capture.status_read()
    assert found.status is not None
    names = [found.status.engine] if found.status.engine else list(listed_engine_names())
    problems: list[str] = []
    objects = [
        o for o in engine_objects([engine_named(n) for n in names], problems) if same_attempt(o.attempt_dir, capture)
    ]
    plan = plan_recovery(found, None, objects, here=this_host())
    if plan is None or plan.action == "leave":
        why = plan.reason if plan is not None else "there is nothing of it to stop"
        raise HarnessError(
            f"run {capture.run}: {why}" + (f" ({'; '.join(problems)})" if problems else ""), ExitCode.NOT_FOUND
        )
    note(f"the harness of {capture.run} is gone: stopping it through its engine instead")
    result = carry_out(plan)
    if result.skipped:
        raise HarnessError(f"run {capture.run}: {result.skipped}", ExitCode.BUSY)
    assert result.status is not None
    return result.status


# --------------------------------------------------------------------------- attempts


@dataclass(frozen=True)
class AttemptRow:
    """One line of `harness history`, as plain text (the renderer escapes it)."""

    attempt: str
    current: bool
    state: str
    steps: str
    started: str
    duration: str
    differs: str  # what differs in configuration from the current attempt


def find_run(capture_root: Path, run: str) -> Capture:
    """The capture of `run` for `history` and `restore`: it has attempts, even if its current one is gone."""
    run_path = Path(capture_root) / run
    if "/" not in run and is_run_name(run):
        attempts = RunAttempts(run_path)
        listing = attempts.listing()
        if attempts.all() or listing.foreign or listing.problem:
            return Capture(run_path)
    return find_capture(capture_root, run)  # its error lists the runs there are


def attempt_rows(capture: Capture) -> list[AttemptRow]:
    """Every attempt of the run, oldest first: its state, steps, start, duration, and what differs from the
    current attempt's configuration. Attempts in a row that have no status.json (directories a start left
    empty) are one row: `3-5002`."""
    attempts = RunAttempts(run_path_of(capture.directory))
    current = attempts.current()
    current_manifest = Capture(current.directory, capture.run).read_manifest() if current is not None else None
    rows: list[AttemptRow] = []
    empty: list[int] = []  # consecutive attempts without a status, not yet said

    def say_empty() -> None:
        if empty:
            shown = str(empty[0]) if len(empty) == 1 else f"{empty[0]}-{empty[-1]}"
            state = "no status.json" + (f" ({len(empty):,} attempts)" if len(empty) > 1 else "")
            rows.append(AttemptRow(shown, False, state, "-", "-", "-", "-"))
            empty.clear()

    for attempt in attempts.all():
        found = attempt.status_read()
        status = found.status
        is_current = current is not None and attempt.number == current.number
        if found.absent and not is_current:
            if empty and empty[-1] != attempt.number - 1:
                say_empty()
            empty.append(attempt.number)
            continue
        say_empty()
        if is_current:
            differs = "-"
        else:
            changes = manifest_changes(
                Capture(attempt.directory, capture.run).read_manifest(),
                current_manifest,
                f"attempt {current.number} (current)" if current is not None else "the current attempt",
            )
            differs = ", ".join(changes) if changes else "nothing"
        if status is None:
            rows.append(
                AttemptRow(
                    str(attempt.number),
                    is_current,
                    f"broken: {found.broken or 'no status.json'}",
                    "-",
                    "-",
                    "-",
                    differs,
                )
            )
            continue
        state = "running? (its harness is gone: harness recover)" if harness_gone(capture, status) else status.state
        state = f"{state}{lineage_clause(attempt.directory)}"
        rows.append(
            AttemptRow(
                attempt=str(attempt.number),
                current=is_current,
                state=str(state),
                steps=f"{status.steps_complete}/{status.steps_expected}",
                started=status.started_at[:19].replace("T", " "),
                duration=duration_text(status),
                differs=differs,
            )
        )
    say_empty()
    return rows


def restore_attempt(capture: Capture, number: int, reason: str) -> Attempt:
    """Make attempt `number` the run's current capture, recording who chose it and why (under the run's lock)."""
    import getpass

    run_path = run_path_of(capture.directory)
    attempts = RunAttempts(run_path)
    attempt = attempts.find(number)
    owner = {"run": capture.run, "pid": os.getpid(), "host": this_host(), "restore": True, "since": utc_now()}
    lock = CaptureLock(run_path, owner)
    if not lock.try_acquire():
        raise HarnessError(
            f"run {capture.run} is in use ({holder(run_path)}); restore it once that ends", ExitCode.BUSY
        )
    try:
        found = attempt.status_read()
        if found.status is None:
            why = f"its status is broken ({found.broken})" if found.broken else "it has no status.json"
            raise HarnessError(f"run {capture.run} attempt {number}: {why}; not restored")
        if found.status.state == RunState.RUNNING:
            raise HarnessError(f"run {capture.run} attempt {number} says running; `harness recover` settles it first")
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = f"uid {os.getuid()}"
        attempts.make_current(attempt, by=f"harness restore, by {user} on {this_host()}", why=reason)
    finally:
        lock.release()
    return attempt
