"""The one reader of captures (the capture contract: docs/architecture.md): tolerant, bounded, never raising on contents.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from harness.capture.records import CONTRACT_KEYS, PauseWindow, RunStatus, StepRow
from harness.fs.bounded import (
    MAX_JSON_BYTES,
    MAX_JSONL_BYTES,
    MAX_STATUS_BYTES,
    NUL,
    READ_CHUNK,
    Unreadable,
    _open_regular,
    iter_lines,
    loads_json,
    read_bounded,
)
from harness.fs.files import PathLike
from harness.fs.paths import outside_root
from harness.times import split_time_prefix

if TYPE_CHECKING:
    from harness.capture.columns import MetricsColumns
    from harness.jsontypes import JSONObject, JSONValue

SUMMARY_DIR_NAME = "summary"
# The board's directories in the capture root (harness.board): TensorBoard's event files, offline W&B runs.
BOARD_DIR_NAMES = ("tensorboard", "wandb")
DECISIONS_DIR_NAME = "decisions"  # the adaptive comparisons' records (harness decide; harness.stats.record)
STATUS_NAME = "status.json"


@dataclass(frozen=True)
class StatusRead:
    """A capture's status as found: typed, or broken with the reason, or absent (both None).

    `torn`: its bytes are what a power loss leaves (empty, NUL bytes where
    the file's blocks were allocated but never written, an object cut short
    or lacking fields: it is written whole and renamed, so nothing else is),
    not a status someone wrote wrong: `recover` rebuilds what it lacks from
    the evidence on disk.
    """

    directory: Path
    status: Optional[RunStatus]
    broken: Optional[str]
    torn: bool = False

    @property
    def run(self) -> str:
        return run_path_of(self.directory).name

    @property
    def absent(self) -> bool:
        return self.status is None and self.broken is None


def read_status(directory: Path) -> StatusRead:
    """The status.json of a capture directory, checked key by key; never raises, never blocks."""
    directory = Path(directory)
    try:
        raw = read_bounded(directory / STATUS_NAME, MAX_STATUS_BYTES)
    except FileNotFoundError:
        return StatusRead(directory, None, None)
    except NotADirectoryError:
        return StatusRead(directory, None, f"{directory.name} is not a directory")
    except Unreadable as err:
        return StatusRead(directory, None, str(err))
    if is_torn(raw):
        return StatusRead(directory, None, f"{STATUS_NAME} is torn ({torn_kind(raw)}: a power loss?)", torn=True)
    try:
        data = loads_json(raw)
    except ValueError as err:
        if cut_short(raw):  # written whole and renamed: only a crash leaves the beginning of one
            return StatusRead(directory, None, f"{STATUS_NAME} is cut short ({err}: a power loss?)", torn=True)
        return StatusRead(directory, None, f"{STATUS_NAME} is not valid JSON ({err})")
    try:
        return StatusRead(directory, RunStatus.from_dict(data), None)
    except ValueError as err:
        # Fields missing (not wrong) are what a power loss leaves of a file written whole: recover rebuilds them.
        lacking = isinstance(data, dict) and any(key not in data for key in CONTRACT_KEYS)
        return StatusRead(
            directory, None, f"{STATUS_NAME} {err}" + (": a power loss?" if lacking else ""), torn=lacking
        )


def cut_short(raw: bytes) -> bool:
    """Whether bytes that are not JSON are the beginning of a JSON object cut off by a crash: closed where they
    stop (an open string, a dangling key or comma, the open brackets), they parse. `{not json` is not."""
    text = raw.decode("utf-8", "ignore").strip()
    if not text.startswith("{"):
        return False
    closers: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
        elif char in "}]" and (not closers or closers.pop() != char):
            return False
    if not closers:
        return False  # whole, and wrong: someone wrote it so
    if in_string:
        text = (text[:-1] if escaped else text) + '"'
    closed = "".join(reversed(closers))
    for stem in (text, text.rstrip("0123456789.+-eEtrufalsn")):
        stem = stem.rstrip().removesuffix(",")
        for ending in ("", "null", ":null"):
            try:
                json.loads(stem + ending + closed)
                return True
            except (ValueError, RecursionError):
                continue
    return False


# --------------------------------------------------------------------------- runs

ATTEMPTS_DIR = ".attempts"  # <root>/.attempts/<run>/<n>/: each attempt of a run (harness.capture.attempts)
_ATTEMPT_NUMBER = re.compile(r"[1-9][0-9]*")  # ASCII digits only: str.isdigit also takes "²" and "٣"
NAME_MAX = 255  # the longest name a directory may have: a longer "number" names no attempt


def attempt_number(name: str) -> Optional[int]:
    """The number an attempt directory's name says (`1`, `1000000000`: any size, no leading zero), None when the
    name is not one (`01`, `abc`, `²`): such a directory is not an attempt of the harness's."""
    if len(name) > NAME_MAX or not _ATTEMPT_NUMBER.fullmatch(name):
        return None
    return int(name)


def run_path_of(directory: Path) -> Path:
    """The run's capture path (`<root>/<run>`) of an attempt's directory, or of the run's own directory."""
    directory = Path(directory)
    if directory.parent.parent.name == ATTEMPTS_DIR:
        return directory.parent.parent.parent / directory.parent.name
    return directory


def is_torn(data: bytes) -> bool:
    """Whether a file's bytes are what a power loss leaves: nothing, or NUL bytes where text was being written."""
    return not data.strip() or NUL in data


def torn_kind(data: bytes) -> str:
    """What a torn file holds, in words."""
    nuls = data.count(NUL)
    if not data:
        return "empty"
    if nuls == len(data):
        return f"{nuls:,} NUL bytes"
    return f"{nuls:,} NUL bytes in it" if nuls else "only blanks"


@dataclass
class RunCapture:
    """What one run directory holds, read tolerantly; `notes` says what was odd."""

    name: str
    status: Optional[JSONObject]  # None: missing or unreadable (state "unknown")
    manifest: Optional[JSONObject]
    args: Optional[JSONObject]  # None: no args.json
    steps: "MetricsColumns"  # metrics.jsonl, one entry per step, as columns
    pauses: list[PauseWindow]
    notes: list[str] = field(default_factory=list)
    directory: Optional[Path] = None  # where container.log is read from, when the summary needs it
    attempt: Optional[int] = None  # the attempt read (0: a capture from before attempts); None: not known

    @property
    def records(self) -> list[StepRow]:
        """The step records as typed rows, sorted by step."""
        return self.steps.rows()

    @property
    def experiment(self) -> JSONObject:
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
    """Whether a name in the capture root can be a run (`summary`, `decisions`, the board's directories and dot-names
    never are)."""
    return (
        not name.startswith(".")
        and name != SUMMARY_DIR_NAME
        and name != DECISIONS_DIR_NAME
        and name not in BOARD_DIR_NAMES
    )


def find_runs(capture_dir: Path) -> tuple[list[Path], list[Skipped]]:
    """Run directories (those with a status.json) sorted by name, and the directories skipped.

    A run's capture is normally a link to its current attempt
    (`.attempts/<run>/<n>`); a link that leads anywhere else (out of the
    capture root, to another run) is never followed, and one whose attempt is
    gone is skipped with the reason.
    """
    runs: list[Path] = []
    skipped: list[Skipped] = []
    capture_dir = Path(capture_dir)
    if not capture_dir.is_dir():
        return runs, skipped
    with os.scandir(capture_dir) as listing:
        entries = sorted(listing, key=lambda entry: natural_key(entry.name))
    for entry in entries:
        if not is_run_name(entry.name):
            continue
        is_link = entry.is_symlink()
        if not is_link and not entry.is_dir(follow_symlinks=False):
            continue
        path = capture_dir / entry.name
        # A directory of its own in the root is inside it; only a link can lead elsewhere (resolving every
        # run's path cost 10,000 runs more than a second).
        why = run_path_problem(capture_dir, path) if is_link else None
        if why is not None:
            skipped.append(Skipped(path.name, why))
            continue
        if os.path.lexists(os.path.join(entry.path, STATUS_NAME)):
            runs.append(path)
        else:
            skipped.append(Skipped(path.name, "no status.json, so not a run"))
    return runs, skipped


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """A sort key that puts `plain-48-s2` before `plain-48-s10`: digit runs compare as numbers."""
    return tuple((1, int(part), "") if part.isdigit() else (0, 0, part) for part in re.split(r"([0-9]+)", name) if part)


def run_path_problem(root: Path, run_path: Path) -> Optional[str]:
    """Why `<root>/<run>` is not read as a run (None: it is its own directory, or a link to one of its attempts,
    and what it leads to lies inside the capture root once every link is resolved)."""
    if run_path.is_symlink():
        why = link_problem(run_path)
        if why is not None:
            return why
    if outside_root(root, run_path) is not None:
        return f"leads out of the capture root (to {os.path.realpath(run_path)}): not read"
    return None


def link_problem(run_path: Path) -> Optional[str]:
    """Why a run's link is not followed (None: it leads to one of its own attempts, which exists)."""
    target = os.readlink(run_path)
    parts = Path(target).parts
    if len(parts) != 3 or parts[:2] != (ATTEMPTS_DIR, run_path.name) or attempt_number(parts[2]) is None:
        return f"a link to {target}, not to one of its attempts ({ATTEMPTS_DIR}/{run_path.name}/N): not read"
    if os.path.islink(run_path.parent / target):
        return f"a link to {target}, which is a link itself, not one of its attempts: not read"
    attempts = run_path.parent / ATTEMPTS_DIR / run_path.name
    if os.path.lexists(attempts) and not os.path.isdir(attempts):
        return f"its attempts ({ATTEMPTS_DIR}/{run_path.name}) are not a directory: not read"
    if not os.path.isdir(run_path.parent / target):
        return (
            f"its current attempt ({target}) is missing (deleted by hand?); `harness history {run_path.name}` lists "
            f"the others and `harness restore {run_path.name} N` makes one current"
        )
    return None


def read_capture(run_dir: PathLike) -> RunCapture:
    """Read one run directory for the summary; never raises for bad contents (see the module rules)."""
    run_dir = run_dir if isinstance(run_dir, Path) else Path(run_dir)  # (Path of a Path parses it again)
    # The files' paths as text: a Path joined five times a run cost the summary of 10,000 runs a fifth of a second.
    directory, attempt = current_attempt(os.fspath(run_dir), run_dir.name)
    notes: list[str] = []
    found = _json_for_summary(os.path.join(directory, STATUS_NAME), notes, required=True, max_bytes=MAX_STATUS_BYTES)
    status = _object_for_summary(found, "status.json is not a JSON object: state unknown", notes)
    if found is None:
        notes.append("state unknown: status.json could not be read")
    manifest = _object_for_summary(
        _json_for_summary(os.path.join(directory, "manifest.json"), notes, required=True),
        "manifest.json is not a JSON object: ignored",
        notes,
    )
    args = _object_for_summary(
        _json_for_summary(os.path.join(directory, "args.json"), notes, required=False),
        "args.json is not a JSON object: ignored",
        notes,
    )
    steps = _metrics_columns(os.path.join(directory, "metrics.jsonl"), notes)
    pauses = read_pauses(os.path.join(directory, "pauses.jsonl"), notes)
    return RunCapture(run_dir.name, status, manifest, args, steps, pauses, notes, Path(directory), attempt)


def current_attempt(run_path: str, run: str) -> tuple[str, Optional[int]]:
    """(the directory to read, its attempt number) of a run's capture path: the link resolved once, so that every
    file is of one attempt even if another is made current meanwhile; a run's own directory is attempt 0."""
    try:
        target = os.readlink(run_path)
    except OSError:  # not a link: a capture from before attempts (or not a run at all)
        return run_path, 0 if os.path.isdir(run_path) else None
    parts = Path(target).parts
    if len(parts) == 3 and parts[:2] == (ATTEMPTS_DIR, run) and parts[2].isdigit():
        return os.path.join(os.path.dirname(run_path), target), int(parts[2])
    return run_path, None


def _object_for_summary(value: JSONValue, not_object: str, notes: list[str]) -> Optional[JSONObject]:
    """The value when it is a JSON object; else None, and `not_object` as a note when it is some other value."""
    if isinstance(value, dict):
        return value
    if value is not None:
        notes.append(not_object)
    return None


def _json_for_summary(
    path: PathLike, notes: list[str], *, required: bool, max_bytes: int = MAX_JSON_BYTES
) -> JSONValue:
    try:
        data = read_bounded(path, max_bytes)
    except FileNotFoundError:
        if required:
            notes.append(f"{os.path.basename(path)} missing")
        return None
    except Unreadable as err:
        notes.append(str(err))
        return None
    try:
        return loads_json(data)
    except ValueError as err:
        notes.append(f"{os.path.basename(path)} is not valid JSON ({err}): ignored")
        return None


def _metrics_columns(path: PathLike, notes: list[str]) -> MetricsColumns:
    from harness.capture.columns import read_metrics_columns  # lazy: it loads mileslog, kept off `harness --help`

    return read_metrics_columns(path, notes)


def _read_metrics(path: Path, notes: list[str]) -> list[StepRow]:
    return _metrics_columns(path, notes).rows()


def read_pauses(path: PathLike, notes: list[str]) -> list[PauseWindow]:
    """Pause windows by start time, the last line per start winning (open, then closed)."""
    from harness.capture.columns import read_pause_windows  # lazy: it loads mileslog, kept off `harness --help`

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
        chunks: list[bytes] = []
        total = 0
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


def first_line_us(path: Path, notes: list[str]) -> Optional[int]:
    """The receive time of a container.log's first stamped line (the run's first line); None without one."""
    lines = None
    try:
        lines = iter_lines(path)
        for number, raw, _ in lines:
            if number == 0:
                break
            if raw is None:
                continue
            stamp_ns, _ = split_time_prefix(raw[:64].decode("ascii", "replace"))
            if stamp_ns is not None:
                return stamp_ns // 1000
    except FileNotFoundError:
        pass
    except Unreadable as err:
        notes.append(str(err))
    finally:
        if lines is not None:
            lines.close()
    return None


def first_stamps_after(path: Path, times_us: Sequence[int], notes: list[str]) -> dict[int, tuple[int, int]]:
    """For each time, (receive time, line number) of the first line of a container.log stamped after it.

    Every line of container.log begins with its receive time (`<RFC3339Nano> `;
    a line without one is passed over). The file is read once, up to the line
    that answers the last of the times; a time that no line follows is absent.
    """
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
