"""Looking at and acting on existing captures: status rows, following a log, asking a run to stop."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable, Iterator

from harness.capture import Capture, RunStatus, read_jsonl, utc_now, write_json_atomic
from harness.errors import ExitCode, HarnessError
from harness.times import US_PER_S, parse_time_us

FOLLOW_POLL_S = 0.5


@dataclass(frozen=True)
class CaptureRow:
    """One line of `harness status`, as text."""

    run: str
    state: str
    steps: str
    pauses: str
    exit_code: str
    started: str
    duration: str


def capture_rows(captures: list[Capture]) -> list[CaptureRow]:
    """A row per capture; an unreadable status is shown as such, not skipped."""
    from harness.recover import harness_alive

    rows = []
    for capture in captures:
        try:
            status = capture.read_status()
        except HarnessError as err:
            rows.append(CaptureRow(capture.run, f"unreadable: {err}", "-", "-", "-", "-", "-"))
            continue
        assert status is not None
        state = status.state
        if state == "running" and not harness_alive(status.harness_pid, status.harness_host):
            state = "running? (its harness is gone: harness recover)"
        if status.steps_usable:
            state += " (steps usable)"
        pauses = _pauses(capture, status)
        rows.append(CaptureRow(
            run=capture.run,
            state=state,
            steps=f"{status.steps_complete}/{status.steps_expected}",
            pauses=pauses,
            exit_code="-" if status.exit_code is None else str(status.exit_code),
            started=status.started_at[:19].replace("T", " "),
            duration=_duration(status),
        ))
    return rows


def _pauses(capture: Capture, status: RunStatus) -> str:
    """`N (S s)`: pause windows and the length of their union (an open one ends now, or at the run's end)."""
    from harness.summary.windows import merge_windows, union_length

    windows = {w.get("start"): w for w in read_jsonl(capture.pauses_path)}  # the last line per window wins
    if not windows:
        return "0"
    until = parse_time_us(status.ended_at or utc_now())
    spans = [(parse_time_us(start), parse_time_us(w.get("end")) or until) for start, w in windows.items()]
    total_us = union_length(*merge_windows((s, e) for s, e in spans if s is not None and e is not None))
    return f"{len(windows)} ({total_us / US_PER_S:.0f} s)"


def _duration(status: RunStatus) -> str:
    end = parse_time_us(status.ended_at or utc_now())
    start = parse_time_us(status.started_at)
    seconds = (end - start) // US_PER_S if end is not None and start is not None else 0
    return str(timedelta(seconds=max(0, seconds))) + ("" if status.ended_at else " so far")


def follow_log(capture: Capture, *, follow: bool) -> Iterator[str]:
    """container.log line by line; with `follow`, keep reading until the run's status is final."""
    if not capture.log_path.exists() and not follow:
        return
    while not capture.log_path.exists():
        time.sleep(FOLLOW_POLL_S)
    with capture.log_path.open(encoding="utf-8", errors="replace") as handle:
        pending = ""
        while True:
            chunk = handle.readline()
            if chunk:
                pending += chunk
                if pending.endswith("\n"):
                    yield pending[:-1]
                    pending = ""
                continue
            if not follow:
                break
            status = capture.read_status()
            if status is None or status.state != "running":
                rest = handle.read()  # written between the last read and the status change
                if rest:
                    pending += rest
                    for line in pending.splitlines():
                        yield line
                    pending = ""
                break
            time.sleep(FOLLOW_POLL_S)
        if pending:
            yield pending


def request_stop(capture: Capture, reason: str, *, timeout_s: float, note: Callable[[str], None]) -> RunStatus:
    """Ask the run's harness to stop it; if that harness is gone, recover the container directly."""
    from harness.recover import harness_alive

    status = capture.read_status()
    if status is None or status.state != "running":
        state = status.state if status else "no status"
        raise HarnessError(f"run {capture.run} is not running (it is {state})", ExitCode.NOT_FOUND)
    if not harness_alive(status.harness_pid, status.harness_host):
        return _recover_orphan(capture, note)
    write_json_atomic(capture.stop_request_path, {"reason": reason, "requested_at": utc_now()})
    note(f"asked the harness of {capture.run} (pid {status.harness_pid}) to stop it: {reason}")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = capture.read_status()
        if current is not None and current.state != "running":
            return current
        time.sleep(FOLLOW_POLL_S)
    raise HarnessError(f"run {capture.run} did not stop within {timeout_s:g} s; it may still be shutting down",
                       ExitCode.RUN_FAILED)


def _recover_orphan(capture: Capture, note: Callable[[str], None]) -> RunStatus:
    from harness.engines.docker import connect
    from harness.recover import find_leftovers, recover

    client = connect()
    for leftover in find_leftovers(client):
        if leftover.run == capture.run:
            note(f"the harness of {capture.run} is gone: recovering its container instead")
            return recover(client, leftover, leave_running=False, keep=False)
    raise HarnessError(f"run {capture.run}: its harness is gone and no container of it was found; "
                       "`harness recover` settles leftovers", ExitCode.NOT_FOUND)
