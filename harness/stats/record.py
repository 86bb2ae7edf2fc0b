"""The record of an adaptive comparison: `<capture root>/decisions/<name>.jsonl`, one line per interim.

The first line is the design (the experiments, the metric, n, K, alpha, B,
the random state, the steps counted); each interim appends one line, fsynced,
with the seeds and values of each experiment, the runs they came from, the
seeds retried and replaced, each comparison's decision, the statistic, the
boundary and the alpha spent so far. This module owns the format both ways,
and its repair.

- **Chained.** Each line carries `check`, a hash of the line before's check
  and of its own content: a line changed by hand (a value, a decision) no
  longer matches and the record is refused, in one line naming the line. A
  record whose decisions differ from what replaying its values gives is
  refused too (`harness.run.adaptive` replays it).
- **Torn.** A line is written whole and fsynced, so what a power loss leaves
  is a last line without its newline (cut short, or NUL bytes where its
  blocks were never written): it is noted and ignored, and `cut_torn_tail`
  moves it aside (`<name>.jsonl.torn`) before the next line is appended. Any
  other line that does not read is an edit.
- **One writer.** `RecordLock` (`<capture root>/decisions/.locks/<name>.lock`):
  a second `harness decide` on the same record waits for the first, or exits
  4 with `--no-wait`, as a second run of one run does.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, TypeVar, Union

from harness.capture.reader import DECISIONS_DIR_NAME  # a capture root's directory, never a run
from harness.errors import HarnessError
from harness.fs.bounded import Unreadable, read_bounded
from harness.fs.filelock import (
    EXCLUSIVE,
    LockWords,
    clear_owner,
    lock_or_wait,
    open_lock_file,
    read_owner,
    unlock,
    write_owner,
)
from harness.fs.files import append_line, fsync_dir, prepare_directory

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from harness.jsontypes import JSONObject, JSONValue

SCHEMA = "miles-gb10-lab-decisions/1"

LOCKS_DIR = ".locks"
TORN_SUFFIX = ".torn"
MAX_RECORD_BYTES = 64 << 20
CHECK_LENGTH = 16
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


_Entry = TypeVar("_Entry", bound="DataclassInstance")


class RecordError(HarnessError):
    """A record that cannot be trusted or used as it is: one line naming the file and why (exit 2)."""


@dataclass(frozen=True)
class Header:
    """The record's first line: the design every interim is made under."""

    name: str
    experiments: list[str]
    against_first: bool
    comparisons: list[str]  # `A vs B`, in the design's order
    metric: str
    per_interim: int
    interims: int
    alpha: float
    permutations: int
    random_state: int
    simulated: bool
    steps: int  # every seed counted completed these steps (the steps every seed of the comparison completed)
    conditions: dict[str, str]  # experiment -> the hash of its configuration without the seed
    created_at: str
    adastop: str  # the package's version that decided
    schema: str = SCHEMA
    kind: str = "design"


@dataclass(frozen=True)
class Swap:
    """A seed that failed twice (or gave no value), and the seed that took its place."""

    experiment: str
    seed: int
    by: int
    why: str


@dataclass(frozen=True)
class Retry:
    """A seed run again once after it failed."""

    experiment: str
    seed: int
    why: str


@dataclass(frozen=True)
class Interim:
    """One interim as recorded."""

    interim: int  # 1 for the first
    seeds: dict[str, list[int]]  # per open experiment, in the order its values are
    runs: dict[str, list[str]]
    attempts: dict[str, list[Optional[int]]]  # the attempt of each run whose capture gave the value
    values: dict[str, list[float]]
    reused: dict[str, list[str]]  # the runs whose succeeded capture was taken as it was (not run again)
    retried: list[Retry]
    replaced: list[Swap]
    decisions: dict[str, str]  # comparison -> larger, smaller, equal or continue
    decided_at: dict[str, Optional[int]]
    statistics: dict[str, Optional[float]]  # the package's statistic, for the comparisons open at this interim
    differences: dict[str, Optional[float]]  # mean of the first minus the second, over their values so far
    boundary: Optional[float]
    alpha_spent: float
    finished: bool
    at: str
    boundary_smaller: Optional[float] = None  # the boundary of the comparator that decides `smaller`
    notes: list[str] = field(default_factory=list)
    kind: str = "interim"


@dataclass(frozen=True)
class TornTail:
    """What a power loss left at the end of the record: ignored."""

    offset: int  # where the whole lines end
    size: int  # bytes after them

    def describe(self, path: Path) -> str:
        return (
            f"{_shown(path)}: a torn last line ({self.size} bytes without its newline: a power loss?) is ignored; "
            "its interim is made again from the same captures"
        )


@dataclass(frozen=True)
class Record:
    """A record as read: its design, its interims in order, and a torn tail if there was one."""

    path: Path
    header: Optional[Header]  # None: no record yet
    interims: list[Interim]
    torn: Optional[TornTail] = None
    last_check: str = ""


def record_path(capture_root: Path, name: str) -> Path:
    """`<capture root>/decisions/<name>.jsonl`."""
    return Path(capture_root) / DECISIONS_DIR_NAME / f"{name}.jsonl"


def check_record_name(name: str) -> str:
    """`name` when it can name a record file; else RecordError."""
    if not _SAFE_NAME.match(name) or ".." in name:
        raise RecordError(
            f"--name {name!r}: a record's name is letters, digits, '.', '_', '-' (starting with a letter or digit, "
            "at most 128)"
        )
    return name


def default_name(experiments: Sequence[str], against_first: bool) -> str:
    """The record's name when none is given: `A-vs-B-vs-C` (`A-against-B-C` with --against-first); a long one
    shortened, with a hash of the whole."""
    joined = (f"{experiments[0]}-against-" + "-".join(experiments[1:])) if against_first else "-vs-".join(experiments)
    if len(joined) <= 100:
        return joined
    digest = hashlib.sha256(joined.encode()).hexdigest()[:8]
    return f"{joined[:90]}-{digest}"


# --------------------------------------------------------------------------- lines


def _canonical(body: Mapping[str, object]) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _check(previous: str, body: Mapping[str, object]) -> str:
    return hashlib.sha256((previous + "\n" + _canonical(body)).encode("utf-8")).hexdigest()[:CHECK_LENGTH]


def encode_line(entry: Union[Header, Interim], previous_check: str) -> tuple[str, str]:
    """(the line, its check): the entry as JSON with `check` last, chained to the line before's."""
    body: dict[str, object] = asdict(entry)
    check = _check(previous_check, body)
    body["check"] = check
    return json.dumps(body, ensure_ascii=False, allow_nan=False), check


def read_record(path: Path) -> Record:
    """The record at `path` (an empty Record when there is none); RecordError when it was edited or is not one.

    A torn last line is left out and said in `Record.torn`."""
    try:
        data = read_bounded(path, MAX_RECORD_BYTES)
    except FileNotFoundError:
        return Record(path, None, [])
    except Unreadable as err:
        raise RecordError(f"{_shown(path)}: {err}") from None
    whole_end = data.rfind(b"\n") + 1
    torn = TornTail(whole_end, len(data) - whole_end) if whole_end < len(data) else None
    lines = data[:whole_end].split(b"\n")[:-1] if whole_end else []
    if not lines:
        return Record(path, None, [], torn)
    previous = ""
    header: Optional[Header] = None
    interims: list[Interim] = []
    for number, raw in enumerate(lines, start=1):
        where = f"{_shown(path)} line {number}"
        try:
            parsed = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise RecordError(f"{where} is not a JSON line: the record was edited or damaged; {_MOVE_ASIDE}") from None
        if not isinstance(parsed, dict):
            raise RecordError(f"{where} is not a JSON object; {_MOVE_ASIDE}")
        check = parsed.pop("check", None)
        if not isinstance(check, str) or check != _safe_check(previous, parsed):
            raise RecordError(
                f"{where} was changed after it was written (its check does not match): the record cannot be "
                f"trusted; {_MOVE_ASIDE}"
            )
        previous = check
        if number == 1:
            header = _header(parsed, where)
        else:
            interim = _interim(parsed, where)
            if interim.interim != number - 1:
                raise RecordError(f"{where} is interim {interim.interim}, not {number - 1}; {_MOVE_ASIDE}")
            interims.append(interim)
    return Record(path, header, interims, torn, previous)


_MOVE_ASIDE = "move it aside to start a new record, or give --name NAME for another"


def _safe_check(previous: str, body: Mapping[str, object]) -> Optional[str]:
    try:
        return _check(previous, body)
    except ValueError:  # NaN in a line written by hand
        return None


def _shown(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def _header(data: JSONObject, where: str) -> Header:
    if data.get("kind") != "design" or data.get("schema") != SCHEMA:
        raise RecordError(f"{where} is not the design of a {SCHEMA} record; {_MOVE_ASIDE}")
    return _build(Header, data, where)


def _interim(data: JSONObject, where: str) -> Interim:
    if data.get("kind") != "interim":
        raise RecordError(f"{where} is not an interim; {_MOVE_ASIDE}")
    from dataclasses import replace

    built = _build(Interim, data, where)
    retried = [_build(Retry, item, f"{where} retried") for item in _list(data.get("retried"), where)]
    replaced = [_build(Swap, item, f"{where} replaced") for item in _list(data.get("replaced"), where)]
    return replace(built, retried=retried, replaced=replaced)


def _list(value: JSONValue, where: str) -> list[JSONObject]:
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise RecordError(f"{where}: not a list of objects; {_MOVE_ASIDE}")
    return [item for item in value if isinstance(item, dict)]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fits(key: str, value: object) -> bool:
    """Whether `value` is what the harness writes under `key` (a record is its data: a hand-made line is refused)."""
    rules: dict[str, Callable[[object], bool]] = {
        "name": lambda v: isinstance(v, str),
        "experiments": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "comparisons": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "against_first": lambda v: isinstance(v, bool),
        "simulated": lambda v: isinstance(v, bool),
        "finished": lambda v: isinstance(v, bool),
        "metric": lambda v: isinstance(v, str),
        "per_interim": _is_int,
        "interims": _is_int,
        "interim": _is_int,
        "permutations": _is_int,
        "random_state": _is_int,
        "steps": _is_int,
        "alpha": _is_number,
        "alpha_spent": _is_number,
        "boundary": lambda v: v is None or _is_number(v),
        "boundary_smaller": lambda v: v is None or _is_number(v),
        "conditions": lambda v: _mapping(v, lambda x: isinstance(x, str)),
        "created_at": lambda v: isinstance(v, str),
        "at": lambda v: isinstance(v, str),
        "adastop": lambda v: isinstance(v, str),
        "schema": lambda v: isinstance(v, str),
        "kind": lambda v: isinstance(v, str),
        "seeds": lambda v: _mapping(v, lambda x: isinstance(x, list) and all(_is_int(s) for s in x)),
        "runs": lambda v: _mapping(v, lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x)),
        "reused": lambda v: _mapping(v, lambda x: isinstance(x, list) and all(isinstance(s, str) for s in x)),
        "attempts": lambda v: _mapping(v, lambda x: isinstance(x, list) and all(s is None or _is_int(s) for s in x)),
        "values": lambda v: _mapping(v, lambda x: isinstance(x, list) and all(_is_number(s) for s in x)),
        "decisions": lambda v: _mapping(v, lambda x: x in ("larger", "smaller", "equal", "continue")),
        "decided_at": lambda v: _mapping(v, lambda x: x is None or _is_int(x)),
        "statistics": lambda v: _mapping(v, lambda x: x is None or _is_number(x)),
        "differences": lambda v: _mapping(v, lambda x: x is None or _is_number(x)),
        "notes": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "retried": lambda v: isinstance(v, list),
        "replaced": lambda v: isinstance(v, list),
        "experiment": lambda v: isinstance(v, str),
        "seed": _is_int,
        "by": _is_int,
        "why": lambda v: isinstance(v, str),
    }
    rule = rules.get(key)
    return rule is not None and rule(value)


def _mapping(value: object, each: Callable[[object], bool]) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and each(v) for k, v in value.items())


def _build(kind: type[_Entry], data: JSONObject, where: str) -> _Entry:
    """An instance of the dataclass `kind` from `data`, each key checked (RecordError naming the first that does
    not fit)."""
    from dataclasses import MISSING, fields

    values: dict[str, object] = {}
    for spec in fields(kind):
        if spec.name not in data:
            if spec.default is MISSING and spec.default_factory is MISSING:
                raise RecordError(f"{where} has no {spec.name!r}; {_MOVE_ASIDE}")
            continue
        value = data[spec.name]
        if not _fits(spec.name, value):
            raise RecordError(
                f"{where}: {spec.name!r} is {str(value)[:60]!r}, not what the harness writes; {_MOVE_ASIDE}"
            )
        values[spec.name] = value
    return kind(**values)


# --------------------------------------------------------------------------- writing


def append_entry(path: Path, entry: Union[Header, Interim], previous_check: str, root: Path) -> str:
    """Append one line (whole, fsynced; the directory made inside `root`); returns its check."""
    prepare_directory(path.parent, root)
    line, check = encode_line(entry, previous_check)
    new = not path.exists()
    append_line(path, line, root=root)
    if new:
        fsync_dir(path.parent)  # the new file itself survives a power loss
    return check


def cut_torn_tail(record: Record, root: Path) -> Optional[str]:
    """Move a torn last line aside (`<name>.jsonl.torn`) and cut the record back to its whole lines; the note
    that says so (None when there was nothing torn)."""
    torn = record.torn
    if torn is None:
        return None
    with open(record.path, "rb") as handle:
        handle.seek(torn.offset)
        tail = handle.read(torn.size)
    aside = record.path.with_name(record.path.name + TORN_SUFFIX)
    append_line(aside, tail.decode("utf-8", "backslashreplace").replace("\x00", "\\x00"), root=root)
    fd = os.open(record.path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        os.ftruncate(fd, torn.offset)
        os.fsync(fd)
    finally:
        os.close(fd)
    return (
        f"{_shown(record.path)}: a torn last line ({torn.size} bytes without its newline: a power loss?) was cut "
        f"off and kept in {aside.name}; its interim was made again"
    )


# --------------------------------------------------------------------------- the lock


class RecordLock:
    """One `harness decide` per record: held from reading the record to its last line."""

    def __init__(self, path: Path, root: Path, owner: Mapping[str, object]) -> None:
        self.path = Path(path)
        self.root = Path(root)
        self.lock_path = self.path.parent / LOCKS_DIR / f"{self.path.stem}.lock"
        self.owner = owner
        self._fd: Optional[int] = None

    def acquire(
        self,
        *,
        wait: bool,
        on_wait: Callable[[str], None] = lambda message: None,
        cancelled: Callable[[], bool] = lambda: False,
        poll_s: float = 0.5,
    ) -> None:
        """Take the lock; held by another `decide` without `wait`: HarnessError(BUSY) naming it."""
        fd = open_lock_file(self.lock_path, self.root)
        shown = _shown(self.path)
        try:
            lock_or_wait(
                fd,
                EXCLUSIVE,
                LockWords(
                    holder=self._holder,
                    busy=lambda who: (
                        f"{shown} is in use by another harness decide ({who}); without --no-wait this one would wait for it"
                    ),
                    waiting=lambda who: f"waiting for another harness decide on {shown} to end ({who})",
                    cancelled_message=f"interrupted while waiting for {shown}; nothing was started",
                ),
                wait=wait,
                on_wait=on_wait,
                cancelled=cancelled,
                poll_s=poll_s,
            )
        except HarnessError:
            unlock(fd)
            raise
        self._fd = fd
        write_owner(fd, self.owner)

    def _holder(self) -> str:
        owner = read_owner(self.lock_path)
        if not owner:
            return "another harness holds it"
        return f"harness pid {owner.get('pid')} on {owner.get('host')}"

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            clear_owner(fd)
            unlock(fd)

    def __enter__(self) -> "RecordLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
