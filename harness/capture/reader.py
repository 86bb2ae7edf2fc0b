"""The one reader of captures (DESIGN section 4): tolerant, bounded, never raising on contents.

`harness status`, `recover`, `run`'s decisions, the summary and
`scripts/check-capture.py` all read captures here. What is missing,
unreadable or odd becomes a reason (a capture is `broken`) or a note (a
plain sentence naming the file and line), never a traceback or a hang:

- only regular files are opened (a FIFO named status.json would block a
  reader forever; /dev/zero never ends), and never more than a size cap;
- JSON nested deeper than Python's recursion limit, numbers with thousands
  of digits: a reason, not a crash;
- JSONL is read line by line under a line-length cap: a bad line is a note
  naming the file and the line number; the other lines are kept.

Run discovery: a directory of the capture root is a run when it holds a
`status.json` (of any kind: a broken one is still a run, shown with its
reason). `summary/` and dot-names are never runs; other directories without
`status.json` are listed as skipped, with the reason.

Rules of the summary's read (`read_capture`):
- `status.json` present but unreadable: the run is still read, with state
  `unknown` and a note (its steps are data; losing them would hide them).
- `metrics.jsonl` (read as columns by `columns.read_metrics_columns`): one
  record per rollout id; when a step appears twice, the last line wins
  (with a note). Records are sorted by step.
- `pauses.jsonl`: a window is logged when it opens (end null) and again when
  it closes (same start): the last line per start is the truth.
- `container.log` is read only where the summary needs it, and only as far
  as it needs: its first lines for the simulator's time scale
  (`sim_time_scale`), and the receive times of its lines after a pause
  window that was never closed (`first_stamps_after`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, Optional, Sequence

from harness.capture.records import PauseWindow, RunStatus, StepRow

if TYPE_CHECKING:
    from harness.capture.columns import MetricsColumns

SUMMARY_DIR_NAME = "summary"
STATUS_NAME = "status.json"

MAX_STATUS_BYTES = 1 << 20
MAX_JSON_BYTES = 64 << 20  # manifest.json, args.json
MAX_JSONL_BYTES = 1 << 30  # metrics.jsonl of a very long run; lines past the cap are noted, not read
MAX_LINE_BYTES = 16 << 20
READ_CHUNK = 1 << 20
TAIL_BYTES = 64 << 10  # `last_jsonl`: a guard.jsonl of a week's run is never read whole for its last sample


class Unreadable(Exception):
    """A capture file that cannot be read; the message is the reason, naming the file."""


def read_bounded(path: Path, max_bytes: int) -> bytes:
    """The bytes of a regular file of at most `max_bytes`; FileNotFoundError when absent, else Unreadable."""
    fd = _open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > max_bytes:
            raise Unreadable(f"{path.name} is too large ({size:,} bytes; the cap is {max_bytes:,})")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > max_bytes:  # it grew while being read
                raise Unreadable(f"{path.name} is too large (over the cap of {max_bytes:,} bytes)")
            chunks.append(chunk)
    except OSError as err:
        raise Unreadable(f"{path.name} unreadable: {err.strerror or err}") from None
    finally:
        os.close(fd)


def _open_regular(path: Path) -> int:
    """Open for reading without blocking on a FIFO; anything but a regular file is Unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise Unreadable(f"{path.name} unreadable: {err.strerror or err}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise Unreadable(f"{path.name} is not a regular file (it is {_kind(mode)})")
    return fd


def open_regular(path: Path) -> BinaryIO:
    """A regular file opened for reading (never blocking on a FIFO); FileNotFoundError, else Unreadable."""
    fd = _open_regular(path)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def not_regular(path: Path) -> Optional[str]:
    """Why `path` cannot be read or appended to as a capture file (None: a regular file, or absent)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"{path.name} unreadable: {err.strerror or err}"
    return None if stat.S_ISREG(mode) else f"{path.name} is not a regular file (it is {_kind(mode)})"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def loads_json(data: bytes) -> Any:
    """Parsed JSON; ValueError for anything that is not, however deep or long.

    `NaN` and `Infinity` are read (captures written before strict JSON have
    them); the typed records and the summary reject or null them.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def read_json_file(path: Path, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """A parsed JSON file; FileNotFoundError when absent, Unreadable (with the reason) otherwise."""
    data = read_bounded(path, max_bytes)
    try:
        return loads_json(data)
    except ValueError as err:
        raise Unreadable(f"{path.name} is not valid JSON ({err})") from None


def iter_lines(path: Path, *, max_bytes: int = MAX_JSONL_BYTES,
               max_line: int = MAX_LINE_BYTES) -> Iterator[tuple[int, Optional[bytes], bool]]:
    """(line number, bytes or None if over `max_line`, whether the line lacks its newline) of a regular file.

    FileNotFoundError when absent, Unreadable when it cannot be opened; reading
    stops at `max_bytes` (the caller is told by a final (0, None, False)).
    """
    fd = _open_regular(path)
    try:
        number, pending, too_long, total = 0, b"", False, 0
        while True:
            chunk = os.read(fd, READ_CHUNK)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                yield 0, None, False
                return
            pieces = chunk.split(b"\n")
            for piece in pieces[:-1]:
                number += 1
                yield number, None if too_long or len(pending) + len(piece) > max_line else pending + piece, False
                pending, too_long = b"", False
            rest = pieces[-1]
            if too_long or len(pending) + len(rest) > max_line:
                pending, too_long = b"", True
            else:
                pending += rest
        if pending or too_long:
            yield number + 1, None if too_long else pending, True
    except OSError as err:
        raise Unreadable(f"{path.name} unreadable: {err.strerror or err}") from None
    finally:
        os.close(fd)


def iter_jsonl(path: Path, notes: list[str], *, max_bytes: int = MAX_JSONL_BYTES,
               loads: Optional[Callable[[bytes], Any]] = None) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each good line of a JSONL file; a note for each bad one.

    `loads` decodes a line (default `loads_json`; ValueError for a bad line).
    """
    loads = loads or loads_json
    try:
        lines = iter_lines(path, max_bytes=max_bytes)
        for number, raw, torn in lines:
            if number == 0:
                notes.append(f"{path.name}: over {max_bytes:,} bytes: the rest is not read")
                return
            if raw is None:
                notes.append(f"{path.name} line {number}: longer than {MAX_LINE_BYTES:,} bytes: skipped")
                continue
            if not raw.strip():
                continue
            try:
                obj = loads(raw)
            except ValueError as err:
                why = "cut short (the writer stopped mid-line)" if torn else f"not JSON ({err})"
                notes.append(f"{path.name} line {number}: {why}: skipped")
                continue
            if not isinstance(obj, dict):
                notes.append(f"{path.name} line {number}: not a JSON object: skipped")
                continue
            yield number, obj
    except FileNotFoundError:
        return
    except Unreadable as err:
        notes.append(str(err))


def last_jsonl(path: Path, notes: list[str], *, tail_bytes: int = TAIL_BYTES) -> Optional[dict[str, Any]]:
    """The last whole JSON object line of a JSONL file, reading only its last `tail_bytes` (None if none there).

    A torn last line (the writer stopped mid-line) and lines that are not
    JSON objects are passed over for the line before them.
    """
    try:
        fd = _open_regular(path)
    except FileNotFoundError:
        return None
    except Unreadable as err:
        notes.append(str(err))
        return None
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - tail_bytes)
        data = os.pread(fd, size - start, start)
    except OSError as err:
        notes.append(f"{path.name} unreadable: {err.strerror or err}")
        return None
    finally:
        os.close(fd)
    lines = data.split(b"\n")[:-1]  # what follows the last newline is torn (or nothing)
    if start > 0:
        lines = lines[1:]  # the first piece may be the end of a longer line
    for raw in reversed(lines):
        try:
            obj = loads_json(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The objects of a JSONL file; bad lines (a torn last line after a power-off) are skipped."""
    for _, obj in iter_jsonl(Path(path), []):
        yield obj


# --------------------------------------------------------------------------- status


@dataclass(frozen=True)
class StatusRead:
    """A capture's status as found: typed, or broken with the reason, or absent (both None)."""

    directory: Path
    status: Optional[RunStatus]
    broken: Optional[str]

    @property
    def run(self) -> str:
        return self.directory.name

    @property
    def absent(self) -> bool:
        return self.status is None and self.broken is None


def read_status(directory: Path) -> StatusRead:
    """The status.json of a capture directory, checked key by key; never raises, never blocks."""
    directory = Path(directory)
    try:
        data = read_json_file(directory / STATUS_NAME, MAX_STATUS_BYTES)
    except FileNotFoundError:
        return StatusRead(directory, None, None)
    except NotADirectoryError:
        return StatusRead(directory, None, f"{directory.name} is not a directory")
    except Unreadable as err:
        return StatusRead(directory, None, str(err))
    try:
        return StatusRead(directory, RunStatus.from_dict(data), None)
    except ValueError as err:
        return StatusRead(directory, None, f"{STATUS_NAME} {err}")


# --------------------------------------------------------------------------- runs


@dataclass
class RunCapture:
    """What one run directory holds, read tolerantly; `notes` says what was odd."""

    name: str
    status: Optional[dict[str, Any]]  # None: missing or unreadable (state "unknown")
    manifest: Optional[dict[str, Any]]
    args: Optional[dict[str, Any]]  # None: no args.json
    steps: "MetricsColumns"  # metrics.jsonl, one entry per step, as columns
    pauses: list[PauseWindow]
    notes: list[str] = field(default_factory=list)
    directory: Optional[Path] = None  # where container.log is read from, when the summary needs it

    @property
    def records(self) -> list[StepRow]:
        """The step records as typed rows, sorted by step."""
        return self.steps.rows()

    @property
    def experiment(self) -> dict[str, Any]:
        """The resolved experiment from the manifest ({} when unknown)."""
        experiment = (self.manifest or {}).get("experiment")
        return experiment if isinstance(experiment, dict) else {}


@dataclass
class Skipped:
    """A directory of the capture root that is not a run, and why."""

    directory: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"directory": self.directory, "reason": self.reason}


def is_run_name(name: str) -> bool:
    """Whether a name in the capture root can be a run (`summary` and dot-names never are)."""
    return not name.startswith(".") and name != SUMMARY_DIR_NAME


def find_runs(capture_dir: Path) -> tuple[list[Path], list[Skipped]]:
    """Run directories (those with a status.json) sorted by name, and the directories skipped."""
    runs: list[Path] = []
    skipped: list[Skipped] = []
    capture_dir = Path(capture_dir)
    if not capture_dir.is_dir():
        return runs, skipped
    for path in sorted(capture_dir.iterdir()):
        if not is_run_name(path.name) or not path.is_dir():
            continue
        if os.path.lexists(path / STATUS_NAME):
            runs.append(path)
        else:
            skipped.append(Skipped(path.name, "no status.json, so not a run"))
    return runs, skipped


def read_capture(run_dir: Path) -> RunCapture:
    """Read one run directory for the summary; never raises for bad contents (see the module rules)."""
    run_dir = Path(run_dir)
    notes: list[str] = []
    status = _json_for_summary(run_dir / STATUS_NAME, notes, required=True, max_bytes=MAX_STATUS_BYTES)
    if status is not None and not isinstance(status, dict):
        notes.append("status.json is not a JSON object: state unknown")
        status = None
    elif status is None:
        notes.append("state unknown: status.json could not be read")
    manifest = _json_for_summary(run_dir / "manifest.json", notes, required=True)
    if manifest is not None and not isinstance(manifest, dict):
        notes.append("manifest.json is not a JSON object: ignored")
        manifest = None
    args = _json_for_summary(run_dir / "args.json", notes, required=False)
    if args is not None and not isinstance(args, dict):
        notes.append("args.json is not a JSON object: ignored")
        args = None
    from harness.capture.columns import read_metrics_columns

    steps = read_metrics_columns(run_dir / "metrics.jsonl", notes)
    pauses = read_pauses(run_dir / "pauses.jsonl", notes)
    return RunCapture(run_dir.name, status, manifest, args, steps, pauses, notes, run_dir)


def _json_for_summary(path: Path, notes: list[str], *, required: bool, max_bytes: int = MAX_JSON_BYTES) -> Any:
    try:
        data = read_bounded(path, max_bytes)
    except FileNotFoundError:
        if required:
            notes.append(f"{path.name} missing")
        return None
    except Unreadable as err:
        notes.append(str(err))
        return None
    try:
        return loads_json(data)
    except ValueError as err:
        notes.append(f"{path.name} is not valid JSON ({err}): ignored")
        return None


def _read_metrics(path: Path, notes: list[str]) -> list[StepRow]:
    from harness.capture.columns import read_metrics_columns

    return read_metrics_columns(path, notes).rows()


def read_pauses(path: Path, notes: list[str]) -> list[PauseWindow]:
    """Pause windows by start time, the last line per start winning (open, then closed)."""
    from harness.capture.columns import read_pause_windows

    return read_pause_windows(path, notes)


def count_complete_steps(path: Path) -> int:
    """Complete steps in a metrics.jsonl, each rollout id once (the last line per step wins)."""
    return sum(1 for row in _read_metrics(path, []) if row.complete)


# --------------------------------------------------------------------------- container.log

LOG_NAME = "container.log"
LOG_HEAD_BYTES = 64 << 10  # where the simulator's first line is looked for
LOG_HEAD_LINES = 20
# The first line the simulator prints (harness.sim.cli, not imported: the reader stays light):
# `harness sim: the simulated Miles trainer; time scale 0.1: times are measured wall seconds / 0.1, ...`
_SIM_BANNER = re.compile(r"harness sim: the simulated Miles trainer; time scale ([^:\s]+):")


def sim_time_scale(path: Path, notes: list[str]) -> Optional[tuple[str, int]]:
    """(the time scale as printed, line number) from the simulator's first line in a container.log; None if absent.

    Only the first lines are read. The text is the simulator's `%g` of its
    scale (six significant digits); the caller checks it as a number.
    """
    try:
        head = read_head(path, LOG_HEAD_BYTES)
    except FileNotFoundError:
        return None
    except Unreadable as err:
        notes.append(str(err))
        return None
    for number, raw in enumerate(head.split(b"\n")[:LOG_HEAD_LINES], start=1):
        match = _SIM_BANNER.search(raw.decode("utf-8", "replace"))
        if match is not None:
            return match.group(1), number
    return None


def read_head(path: Path, max_bytes: int) -> bytes:
    """The first `max_bytes` of a regular file (all of a shorter one); FileNotFoundError, else Unreadable."""
    fd = _open_regular(path)
    try:
        chunks, total = [], 0
        while total < max_bytes:
            chunk = os.read(fd, min(READ_CHUNK, max_bytes - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    except OSError as err:
        raise Unreadable(f"{path.name} unreadable: {err.strerror or err}") from None
    finally:
        os.close(fd)


# A line within this of an open pause window's start does not show the run running again: the window is
# written just before the run is frozen, and the engine's clock is not the harness's. The summary and
# `recover` both end an open window at the first line after it.
RUNNING_AGAIN_SLACK_US = 1_000_000


def first_stamps_after(path: Path, times_us: Sequence[int], notes: list[str]) -> dict[int, tuple[int, int]]:
    """For each time, (receive time, line number) of the first line of a container.log stamped after it.

    Every line of container.log begins with its receive time (`<RFC3339Nano> `;
    a line without one is passed over). The file is read once, up to the line
    that answers the last of the times; a time that no line follows is absent.
    """
    from harness.times import split_time_prefix

    pending = sorted(set(times_us))
    found: dict[int, tuple[int, int]] = {}
    if not pending:
        return found
    lines = None
    try:
        lines = iter_lines(path)
        for number, raw, _ in lines:
            if number == 0:
                notes.append(f"{path.name}: over {MAX_JSONL_BYTES:,} bytes: the rest is not read")
                break
            if raw is None:
                continue
            stamp_ns, _ = split_time_prefix(raw[:64].decode("ascii", "replace"))
            if stamp_ns is None:
                continue
            stamp = stamp_ns // 1000
            while pending and stamp > pending[0]:
                found[pending.pop(0)] = (stamp, number)
            if not pending:
                break
    except FileNotFoundError:
        pass
    except Unreadable as err:
        notes.append(str(err))
    finally:
        if lines is not None:
            lines.close()
    return found

