"""The runner's writes to a capture, behind one small interface: the local files, and what was written, passed on.

A local run writes its capture and nothing more. A run that Ray placed on
another host writes the host's own copy the same way and passes every write
on (`forward`) to the driver, which applies it to its capture with
`apply_event`: one runner, two destinations, and the driver's capture is
written by the same functions as a local one.

An event is `(kind, file name, payload)`:

    ("status", "status.json", RunStatus.to_dict())
    ("json", "manifest.json" | "args.json", data)
    ("jsonl", "metrics.jsonl" | "pauses.jsonl" | "guard.jsonl", row)
    ("log", "container.log", "<RFC3339Nano> <text>")       # one whole line, already stamped

It is forwarded only once the local write succeeded, so the driver never
holds a line the host's copy lacks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from harness.capture.files import append_jsonl, open_append, write_json_atomic
from harness.capture.layout import Capture
from harness.capture.records import RunStatus
from harness.fs.files import write_whole

# (kind, file name, payload): a payload is whatever the kind's file takes, checked by `EventSink.apply`
# (it may have come over the network).
Event = tuple[str, str, object]
Forward = Callable[[Event], None]

JSON_FILES = frozenset({"manifest.json", "args.json", "resume.json"})  # resume.json: docs/checkpoints.md
JSONL_FILES = frozenset({"metrics.jsonl", "pauses.jsonl", "guard.jsonl", "checkpoints.jsonl"})


class CaptureWriter:
    """Writes one capture's files; each write, once on disk, also goes to `forward` when there is one."""

    def __init__(self, capture: Capture, forward: Optional[Forward] = None) -> None:
        self.capture = capture
        self.forward = forward

    def status(self, status: RunStatus) -> None:
        self.capture.write_status(status)
        self._send("status", self.capture.status_path.name, status.to_dict())

    def json(self, path: Path, data: object) -> None:
        write_json_atomic(path, data, root=self.capture.root)
        self._send("json", Path(path).name, data)

    def jsonl(self, path: Path, row: object) -> None:
        append_jsonl(path, row, root=self.capture.root)
        self._send("jsonl", Path(path).name, row)

    def log_lines(self, lines: list[str]) -> None:
        """Lines the log pump has written to container.log, in order (it writes the bytes itself, for speed)."""
        if self.forward is not None:
            for line in lines:
                self._send("log", self.capture.log_path.name, line)

    def _send(self, kind: str, name: str, payload: object) -> None:
        if self.forward is not None:
            self.forward((kind, name, payload))


class EventSink:
    """Applies forwarded events to a capture on this machine (a Ray driver's copy of a run on another host).

    `on_status` may change a status before it is written (the driver records
    itself as the run's harness). Log lines are appended to an open file and
    fsynced by `flush`, once per batch of events.
    """

    def __init__(self, capture: Capture, on_status: Callable[[RunStatus], RunStatus] = lambda status: status) -> None:
        self.capture = capture
        self.on_status = on_status
        self.lines = 0
        self.last_status: Optional[RunStatus] = None
        self._log_fd: Optional[int] = None

    def apply(self, event: Event) -> None:
        """Write one event (OSError when the disk refuses it; a malformed event is a ValueError)."""
        kind, name, payload = event
        if kind == "status":
            status = self.on_status(RunStatus.from_dict(payload))
            self.capture.write_status(status)
            self.last_status = status
        elif kind == "json" and name in JSON_FILES:
            write_json_atomic(self.capture.directory / name, payload, root=self.capture.root)
        elif kind == "jsonl" and name in JSONL_FILES:
            append_jsonl(self.capture.directory / name, payload, root=self.capture.root)
        elif kind == "log" and isinstance(payload, str):
            if self._log_fd is None:
                self._log_fd = open_append(self.capture.log_path, root=self.capture.root)
            write_whole(self._log_fd, payload.encode("utf-8", "replace") + b"\n")
            self.lines += 1
        else:
            raise ValueError(f"not a capture event: {kind!r} for {name!r}")

    def flush(self) -> None:
        if self._log_fd is not None:
            os.fsync(self._log_fd)

    def close(self) -> None:
        if self._log_fd is not None:
            try:
                os.fsync(self._log_fd)
            finally:
                os.close(self._log_fd)
                self._log_fd = None
