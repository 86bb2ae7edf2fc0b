"""Run captures: the directory layout, atomic JSON, fsynced JSONL, and the run's status.

The layout is a contract (capture/gpu/<run>/...). `status.json` is the only
truth about whether a run is done; nothing here infers it from other files.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator, Optional

from harness.errors import ExitCode, HarnessError
from harness.times import now_rfc3339

STATES = ("running", "succeeded", "failed", "no_metrics", "interrupted", "stopped")
RERUN_ON_RETRY = ("failed", "no_metrics", "interrupted", "stopped")
REPLACED_DIR = ".replaced"
STOP_REQUEST = "stop-request.json"


def utc_now() -> str:
    """Now as RFC 3339 UTC with microseconds."""
    return now_rfc3339()


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as strict JSON, atomically (see `write_text_atomic`)."""
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write to a temporary file, fsync it, rename it over `path`, fsync the directory: all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def append_jsonl(path: Path, record: Any) -> None:
    """Append one whole JSON line and fsync, so a power-off keeps every line written."""
    line = json.dumps(record, allow_nan=False, default=str) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file; a torn last line (power-off) is skipped."""
    if not path.exists():
        return
    with path.open() as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class RunStatus:
    """status.json: the run's state and how it got there."""

    run: str
    run_id: str
    state: str
    exit_code: Optional[int]
    started_at: str
    ended_at: Optional[str]
    steps_expected: int
    steps_complete: int
    error: Optional[str]
    harness_pid: Optional[int] = None
    harness_host: Optional[str] = None
    container: Optional[str] = None
    stop_reason: Optional[str] = None
    steps_usable: bool = False
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunStatus":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


class Capture:
    """One run's capture directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.run = self.directory.name
        self.manifest_path = self.directory / "manifest.json"
        self.status_path = self.directory / "status.json"
        self.log_path = self.directory / "container.log"
        self.metrics_path = self.directory / "metrics.jsonl"
        self.args_path = self.directory / "args.json"
        self.pauses_path = self.directory / "pauses.jsonl"
        self.guard_path = self.directory / "guard.jsonl"
        self.stop_request_path = self.directory / STOP_REQUEST

    def exists(self) -> bool:
        return self.status_path.exists()

    def read_status(self) -> Optional[RunStatus]:
        """The run's status, or None when there is no capture; a corrupt file is an error."""
        if not self.status_path.exists():
            return None
        try:
            return RunStatus.from_dict(json.loads(self.status_path.read_text()))
        except (OSError, ValueError, TypeError) as err:
            raise HarnessError(f"{self.status_path}: unreadable status: {err}") from None

    def write_status(self, status: RunStatus) -> None:
        write_json_atomic(self.status_path, asdict(status))

    def read_json(self, path: Path) -> Optional[dict[str, Any]]:
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as err:
            raise HarnessError(f"{path}: unreadable JSON: {err}") from None

    def start_fresh(self) -> Optional[Path]:
        """Make the directory empty for a new run; an earlier capture is moved aside, never deleted."""
        moved = None
        if self.directory.exists() and any(self.directory.iterdir()):
            status = self.read_status() if self.status_path.exists() else None
            stamp = (status.started_at if status else utc_now()).replace(":", "").replace("-", "")
            target = self.directory.parent / REPLACED_DIR / f"{self.run}-{stamp}"
            suffix = 1
            while target.exists():
                suffix += 1
                target = target.with_name(f"{self.run}-{stamp}-{suffix}")
            target.parent.mkdir(parents=True, exist_ok=True)
            self.directory.rename(target)
            moved = target
        self.directory.mkdir(parents=True, exist_ok=True)
        return moved


def list_captures(capture_root: Path) -> list[Capture]:
    """Every run directory under the capture root that holds a status.json."""
    if not capture_root.is_dir():
        return []
    return [
        Capture(path)
        for path in sorted(capture_root.iterdir())
        if path.is_dir() and not path.name.startswith(".") and (path / "status.json").exists()
    ]


def find_capture(capture_root: Path, run: str) -> Capture:
    """The capture of `run`, or a one-line error listing the runs there are."""
    capture = Capture(capture_root / run)
    if not capture.exists():
        known = ", ".join(c.run for c in list_captures(capture_root)) or "none"
        raise HarnessError(f"no capture for run {run!r} in {capture_root} (runs: {known})", ExitCode.NOT_FOUND)
    return capture


def this_host() -> str:
    return socket.gethostname()
