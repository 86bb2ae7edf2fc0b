"""Is a checkpoint on disk whole? Stat and small reads only: a tensor is never read (docs/checkpoints.md).

A checkpoint after rollout r (`iter_{r+1:07d}`) is complete when:

- its directory is a directory, or a link that stays inside the run's checkpoint directory;
- `meta.json` is a small JSON object naming iteration r+1, rollout r and next rollout r+1;
- each torch.distributed.checkpoint directory (model, optimizer, lr_scheduler) holds its `.metadata`, which
  torch writes last, not empty;
- `rng.pt` is there;
- with `--rollout-global-dataset`, the data source's state `rollout/global_dataset_state_dict_{r}.pt` is there.

Its size is the sum of its files' sizes (stat, never a read): what one checkpoint takes on the disk.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from harness.checkpoints.layout import (
    DATA_STATE_DIR,
    DCP_METADATA,
    META_NAME,
    RNG_NAME,
    STATE_PARTS,
    TRACKER_NAME,
    data_state_name,
    iteration_name,
    iteration_of,
)
from harness.fs.bounded import Unreadable, loads_json, read_bounded
from harness.fs.paths import file_kind, outside_root
from harness.lab.milesnames import ROLLOUT_GLOBAL_DATASET_FLAG

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

MAX_META_BYTES = 64 << 10  # meta.json holds a few numbers
MAX_TRACKER_BYTES = 64  # the tracker holds one number
MAX_ITERATION = 10**12 - 1  # 12 digits: more rollouts than any run makes
MAX_WALK_ENTRIES = 100_000  # a checkpoint holds a few files per rank: past this it is not one


@dataclass(frozen=True)
class CheckpointCheck:
    """What the harness found of one checkpoint: complete or not, and why not."""

    iteration: int
    directory: str  # the host path of iter_NNNNNNN
    bytes: int  # its files' sizes (and the data source's state), as stat gives them
    complete: bool
    why: Optional[str]  # None when complete
    next_rollout_id: Optional[int] = None  # meta.json's, when it could be read

    @property
    def rollout_id(self) -> int:
        """The rollout after which it was saved."""
        return self.iteration - 1

    @property
    def name(self) -> str:
        return iteration_name(self.iteration)

    def to_record(self) -> JSONObject:
        """Its line of checkpoints.jsonl (the harness adds when, and how long the check took)."""
        return {
            "event": "verified",
            "rollout_id": self.rollout_id,
            "iteration": self.iteration,
            "directory": self.directory,
            "bytes": self.bytes,
            "complete": self.complete,
            "why": self.why,
            "next_rollout_id": self.next_rollout_id,
        }


def verify_checkpoint(directory: str, iteration: int, *, data_state: bool) -> CheckpointCheck:
    """Check checkpoint `iteration` of the run's checkpoint `directory` (host path); never raises for what it finds."""
    path = os.path.join(directory, iteration_name(iteration))
    why = _directory_problem(directory, path)
    if why is not None:
        return CheckpointCheck(iteration, path, 0, False, why)
    size, walk_problem = _size(path)
    if data_state:
        state = os.path.join(directory, DATA_STATE_DIR, data_state_name(iteration - 1))
        size += _file_size(state) or 0
    meta, why = _meta(path, iteration)
    next_id = meta.get("next_rollout_id") if meta is not None else None
    next_rollout = next_id if isinstance(next_id, int) and not isinstance(next_id, bool) else None
    for problem in (  # in the order of a save: the first missing is where it stopped
        walk_problem,
        *(_part_problem(path, part) for part in STATE_PARTS),
        _needed_file(path, RNG_NAME, RNG_NAME),
        _data_state_problem(directory, iteration) if data_state else None,
        why,
    ):
        if problem is not None:
            return CheckpointCheck(iteration, path, size, False, problem, next_rollout)
    return CheckpointCheck(iteration, path, size, True, None, next_rollout)


def timed_verify(directory: str, iteration: int, *, data_state: bool) -> tuple[CheckpointCheck, float]:
    """`verify_checkpoint` and the milliseconds it took."""
    started = time.perf_counter()
    check = verify_checkpoint(directory, iteration, data_state=data_state)
    return check, (time.perf_counter() - started) * 1000


def _directory_problem(directory: str, path: str) -> Optional[str]:
    name = os.path.basename(path)
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return f"{name} is not there"
    except OSError as err:
        return f"{name} cannot be looked at ({err.strerror or err})"
    if stat.S_ISLNK(found.st_mode):
        leaves = outside_root(directory, path)
        if leaves is not None:
            return f"{name} is a symbolic link out of the run's checkpoint directory (to {os.path.realpath(path)})"
        if not os.path.isdir(path):
            return f"{name} is a symbolic link to no directory"
        return None
    if not stat.S_ISDIR(found.st_mode):
        return f"{name} is not a directory (it is {file_kind(found.st_mode)})"
    return None


def _meta(path: str, iteration: int) -> tuple[Optional[JSONObject], Optional[str]]:
    """meta.json read, and why it does not name this checkpoint (None: it does)."""
    where = f"{iteration_name(iteration)}/{META_NAME}"
    try:
        data = loads_json(read_bounded(os.path.join(path, META_NAME), MAX_META_BYTES))
    except FileNotFoundError:
        return None, f"{where} is not there (the save did not get that far)"
    except Unreadable as err:
        return None, f"{where}: {err}"
    except ValueError as err:
        return None, f"{where} is not JSON ({err})"
    if not isinstance(data, dict):
        return None, f"{where} is not a JSON object"
    expected = {"iteration": iteration, "rollout_id": iteration - 1, "next_rollout_id": iteration}
    for key, wanted in expected.items():
        value = data.get(key)
        if value != wanted or isinstance(value, bool):
            said = "has none" if key not in data else f"says {_shown(value)}"
            return data, f"{where} names another rollout: {key} should be {wanted}, it {said}"
    return data, None


def _part_problem(path: str, part: str) -> Optional[str]:
    where = f"{os.path.basename(path)}/{part}"
    try:
        found = os.lstat(os.path.join(path, part))
    except FileNotFoundError:
        return f"{where} is not there"
    except OSError as err:
        return f"{where} cannot be looked at ({err.strerror or err})"
    if not stat.S_ISDIR(found.st_mode):
        return f"{where} is not a directory"
    return _needed_file(path, os.path.join(part, DCP_METADATA), f"{part}/{DCP_METADATA}", nonempty=True)


def _needed_file(path: str, relative: str, said: str, *, nonempty: bool = False) -> Optional[str]:
    where = f"{os.path.basename(path)}/{said}"
    try:
        found = os.stat(os.path.join(path, relative))
    except FileNotFoundError:
        return (
            f"{where} is not there (the save did not finish)" if said.endswith(DCP_METADATA) else f"{where} is missing"
        )
    except OSError as err:
        return f"{where} cannot be looked at ({err.strerror or err})"
    if not stat.S_ISREG(found.st_mode):
        return f"{where} is not a regular file"
    if nonempty and found.st_size == 0:
        return f"{where} is empty (the save did not finish)"
    return None


def _data_state_problem(directory: str, iteration: int) -> Optional[str]:
    name = data_state_name(iteration - 1)
    size = _file_size(os.path.join(directory, DATA_STATE_DIR, name))
    if size is None:
        return f"{DATA_STATE_DIR}/{name} (the data source's state, {ROLLOUT_GLOBAL_DATASET_FLAG}) is missing"
    return None


def _file_size(path: str) -> Optional[int]:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_size if stat.S_ISREG(found.st_mode) else None


def _size(path: str) -> tuple[int, Optional[str]]:
    """The sizes of every regular file under `path` (links not followed), and why the walk stopped short."""
    total, seen = 0, 0
    pending = [path]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError as err:
            return total, f"{os.path.basename(path)} cannot be listed ({err.strerror or err})"
        for entry in entries:
            seen += 1
            if seen > MAX_WALK_ENTRIES:
                return total, f"{os.path.basename(path)} holds over {MAX_WALK_ENTRIES:,} entries: not a checkpoint"
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                total += entry.stat(follow_symlinks=False).st_size
    return total, None


Fingerprint = frozenset[tuple[str, int, int, int]]


def fingerprint(directory: str, iteration: int) -> Fingerprint:
    """What checkpoint `iteration` of the run's checkpoint `directory` is on disk, by stat alone (each entry's path,
    inode, mtime and size, and its data-source state's): two differ when anything was written there between."""
    path = os.path.join(directory, iteration_name(iteration))
    state = os.path.join(directory, DATA_STATE_DIR, data_state_name(iteration - 1))
    found: set[tuple[str, int, int, int]] = set()
    pending = [path]
    while pending and len(found) <= MAX_WALK_ENTRIES:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
            top = os.lstat(current)
        except OSError:
            continue
        found.add((current, top.st_ino, top.st_mtime_ns, top.st_size))
        for entry in entries:
            try:
                seen = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.add((entry.path, seen.st_ino, seen.st_mtime_ns, seen.st_size))
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    try:
        seen = os.lstat(state)
        found.add((state, seen.st_ino, seen.st_mtime_ns, seen.st_size))
    except OSError:
        pass
    return frozenset(found)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# --------------------------------------------------------------------------- the tracker and the listing


@dataclass(frozen=True)
class TrackerRead:
    """What the tracker file says: an iteration, or why it names none."""

    iteration: Optional[int]
    problem: Optional[str]
    raw: bytes = b""

    def said(self) -> str:
        """What it held, in words (for the record of a rewrite)."""
        if self.iteration is not None:
            return str(self.iteration)
        return self.problem or "nothing"


def read_tracker(directory: str) -> TrackerRead:
    """latest_checkpointed_iteration.txt: an iteration of at most 12 digits, or why not (absent, NUL bytes a power
    loss left, garbage, a number no run reaches)."""
    path = os.path.join(directory, TRACKER_NAME)
    try:
        raw = read_bounded(path, MAX_TRACKER_BYTES)
    except FileNotFoundError:
        return TrackerRead(None, f"no {TRACKER_NAME}")
    except Unreadable as err:
        return TrackerRead(None, f"{TRACKER_NAME}: {err}")
    text = raw.strip()
    if not text:
        return TrackerRead(None, f"{TRACKER_NAME} is empty (torn by a power loss?)", raw)
    if b"\0" in raw:
        return TrackerRead(None, f"{TRACKER_NAME} holds NUL bytes (torn by a power loss?)", raw)
    if not text.isdigit():
        return TrackerRead(None, f"{TRACKER_NAME} holds {_shown(text.decode('utf-8', 'replace'))}, not a number", raw)
    if len(text) > 12 or int(text) > MAX_ITERATION:
        return TrackerRead(None, f"{TRACKER_NAME} names iteration {text[:20].decode()}..., past any run", raw)
    return TrackerRead(int(text), None, raw)


def iterations_on_disk(directory: str) -> list[int]:
    """The iterations `iter_NNNNNNN` entries name in the run's checkpoint directory, newest first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = (iteration_of(name) for name in names)
    return sorted((number for number in found if number is not None and 0 < number <= MAX_ITERATION), reverse=True)
