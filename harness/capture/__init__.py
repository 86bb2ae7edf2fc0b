"""The capture format, both ways (the contract: docs/architecture.md): typed records, atomic writes, one reader.

- records: `RunStatus` with its `RunState` (a str enum; `is_final`), pause
  windows, step rows;
- files: atomic JSON, whole fsynced JSONL lines, torn tails cut back; files
  follow the umask;
- reader: bounded, regular files only, a `broken` reason instead of an
  exception; run discovery; the summary's read of a whole capture;
- layout: one capture directory (its files, the disk-space reserve);
- attempts: every start of a run is an attempt with its own directory; `<root>/<run>` is the current one;
- lock: one harness per capture directory at a time.
"""

from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.files import (
    append_jsonl,
    append_line,
    cut_torn_tail,
    describe_os_error,
    write_json_atomic,
    write_text_atomic,
)
from harness.capture.layout import (
    STOP_REQUEST,
    Capture,
    find_capture,
    list_captures,
    this_host,
    utc_now,
)
from harness.capture.lock import CaptureLock
from harness.capture.reader import RunCapture, Skipped, StatusRead, find_runs, read_capture, read_status
from harness.capture.records import (
    RERUN_ON_RETRY,
    STATES,
    PauseWindow,
    ProcessIdentity,
    RunState,
    RunStatus,
    StepRow,
)
from harness.fs.bounded import read_jsonl

__all__ = [
    "RERUN_ON_RETRY",
    "STATES",
    "STOP_REQUEST",
    "Attempt",
    "Capture",
    "CaptureLock",
    "PauseWindow",
    "ProcessIdentity",
    "RunAttempts",
    "RunCapture",
    "RunState",
    "RunStatus",
    "Skipped",
    "StatusRead",
    "StepRow",
    "append_jsonl",
    "append_line",
    "cut_torn_tail",
    "describe_os_error",
    "find_capture",
    "find_runs",
    "list_captures",
    "read_capture",
    "read_jsonl",
    "read_status",
    "this_host",
    "utc_now",
    "write_json_atomic",
    "write_text_atomic",
]
