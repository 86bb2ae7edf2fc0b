"""Find runs whose harness is gone, thaw them, save what they printed, and settle their status.

Only containers carrying the harness's run label are ever touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.capture import Capture, RunStatus, append_jsonl, read_jsonl, this_host, utc_now, write_json_atomic
from harness.engines.logstream import LogPosition, split_lines
from harness.launch import LABEL_CAPTURE_DIR, LABEL_RUN, LABEL_RUN_ID
from harness.runner import DEFAULT_GRACE_S, LABEL_HARNESS_HOST, LABEL_HARNESS_PID


@dataclass(frozen=True)
class Leftover:
    """A labelled container and whether the harness that started it is still alive."""

    container: Any
    run: str
    run_id: str
    capture_dir: Path
    harness_pid: Optional[int]
    harness_host: Optional[str]
    harness_alive: bool
    state: str  # Docker's: running, paused, exited, created...

    def describe(self) -> str:
        owner = f"harness pid {self.harness_pid} on {self.harness_host}"
        alive = "alive" if self.harness_alive else "gone"
        return f"container {self.container.name} of run {self.run} is {self.state} ({owner}: {alive})"


def harness_alive(pid: Optional[int], host: Optional[str]) -> bool:
    """True unless the owning harness is provably gone (same host, and that pid is not a harness)."""
    if pid is None or host is None:
        return False
    if host != this_host():
        return True  # another machine's process: we cannot tell, so leave it be
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return pid != os.getpid() and b"harness" in cmdline


def find_leftovers(client: Any, *, include_owned: bool = False) -> list[Leftover]:
    """Labelled containers whose harness is gone (all labelled ones with `include_owned`)."""
    found = []
    for container in client.containers.list(all=True, filters={"label": LABEL_RUN}):
        labels = container.labels
        pid_text = labels.get(LABEL_HARNESS_PID)
        pid = int(pid_text) if pid_text and pid_text.isdigit() else None
        host = labels.get(LABEL_HARNESS_HOST)
        alive = harness_alive(pid, host)
        if alive and not include_owned:
            continue
        found.append(Leftover(
            container=container, run=labels.get(LABEL_RUN, "?"), run_id=labels.get(LABEL_RUN_ID, "?"),
            capture_dir=Path(labels.get(LABEL_CAPTURE_DIR, "")), harness_pid=pid, harness_host=host,
            harness_alive=alive, state=container.status,
        ))
    return found


def _log_position(log_path: Path) -> LogPosition:
    """Where container.log ends: its last timestamp and the lines that carry it."""
    if not log_path.exists():
        return LogPosition()
    with log_path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 4 * 1024 * 1024))
        tail = handle.read().decode("utf-8", "replace").splitlines()
    if not tail:
        return LogPosition()
    last = tail[-1].split(" ", 1)[0]
    return LogPosition(last, [line for line in tail if line.split(" ", 1)[0] == last])


def save_remaining_logs(client: Any, container_id: str, capture: Capture) -> int:
    """Append to container.log the lines Docker has that it lacks; returns how many."""
    position = _log_position(capture.log_path)
    kwargs: dict[str, Any] = {"stream": True, "follow": False, "timestamps": True}
    if position.since() is not None:
        kwargs["since"] = position.since()
    added = 0
    capture.directory.mkdir(parents=True, exist_ok=True)
    with capture.log_path.open("ab") as log:
        for line in position.new_lines(split_lines(client.api.logs(container_id, **kwargs))):
            log.write(line.encode("utf-8", "replace") + b"\n")
            added += 1
        log.flush()
        os.fsync(log.fileno())
    return added


def rebuild_metrics(capture: Capture, *, include_incomplete: bool) -> int:
    """Re-parse container.log and append the steps metrics.jsonl lacks; returns the complete-step count."""
    from harness.mileslog import LogParser

    parser = LogParser()
    records = []
    if capture.log_path.exists():
        with capture.log_path.open("rb") as handle:
            records.extend(parser.feed_stream(handle))
    if include_incomplete:
        records.extend(parser.finish())
    saved = {(row.get("step"), row.get("complete")) for row in read_jsonl(capture.metrics_path)}
    for record in records:
        if (record.step, record.complete) not in saved and (record.step, True) not in saved:
            append_jsonl(capture.metrics_path, record.to_json(include_derived=False))
    if parser.args is not None and not capture.args_path.exists():
        write_json_atomic(capture.args_path, parser.args)
    return sum(1 for row in read_jsonl(capture.metrics_path) if row.get("complete"))


def recover(client: Any, leftover: Leftover, *, leave_running: bool, keep: bool,
            grace_s: float = DEFAULT_GRACE_S) -> RunStatus:
    """Thaw, save logs and metrics, stop (unless leave_running), mark interrupted, remove (unless kept)."""
    container = leftover.container
    capture = Capture(leftover.capture_dir)
    container.reload()
    if container.status == "paused":
        container.unpause()
    if not leave_running and container.status in ("running", "paused", "restarting"):
        container.stop(timeout=int(grace_s))
    container.reload()
    save_remaining_logs(client, container.id, capture)
    exited = container.status not in ("running", "paused", "restarting")
    steps_complete = rebuild_metrics(capture, include_incomplete=exited)

    status = _read_status_or_new(capture, leftover)
    status.state = "interrupted"
    status.steps_complete = steps_complete
    status.steps_usable = steps_complete >= status.steps_expected > 0
    if exited:
        status.exit_code = int(container.attrs["State"].get("ExitCode", -1))
        status.ended_at = utc_now()
    status.error = (
        f"the harness that ran it (pid {leftover.harness_pid} on {leftover.harness_host}) was gone; "
        + ("left running by harness recover" if leave_running else "stopped by harness recover")
    )
    capture.write_status(status)
    if exited and not keep:
        container.remove(v=True)
    return status


def _read_status_or_new(capture: Capture, leftover: Leftover) -> RunStatus:
    try:
        status = capture.read_status()
    except Exception:
        status = None
    if status is not None:
        return status
    manifest = capture.read_json(capture.manifest_path) if capture.manifest_path.exists() else None
    steps_expected = int(((manifest or {}).get("experiment") or {}).get("steps") or 0)
    return RunStatus(
        run=leftover.run, run_id=leftover.run_id, state="interrupted", exit_code=None,
        started_at=leftover.container.attrs.get("Created", utc_now()), ended_at=None,
        steps_expected=steps_expected, steps_complete=0, error=None,
        harness_pid=leftover.harness_pid, harness_host=leftover.harness_host, container=leftover.container.id,
    )
