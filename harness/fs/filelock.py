"""Advisory file locks (flock) that wait politely: the GPU locks and the capture locks share this.

The kernel drops a flock when the process holding it dies, however it dies,
so a lock that can be taken proves its last holder is gone. Lock files are
never deleted (deleting one while another process waits on it would let two
holders in); a holder writes who it is into the file for the next waiter to
report.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from harness.errors import ExitCode, HarnessError
from harness.fs.files import open_for_update, prepare_directory

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

EXCLUSIVE = fcntl.LOCK_EX
SHARED = fcntl.LOCK_SH


def open_lock_file(path: Path, root: Optional[Path] = None) -> int:
    """An fd on the lock file (created 0666 less the umask, like every file the harness writes): a regular file,
    never a link (a shared lock directory must not let anyone point a lock at another file), inside `root`."""
    prepare_directory(path.parent, root)
    return open_for_update(path, root=root)


def try_lock(fd: int, mode: int) -> bool:
    """Take the lock now if it is free."""
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


@dataclass(frozen=True)
class LockWords:
    """What a waiter says about one lock: who holds it (read when needed), and its busy, waiting and cancelled
    lines (`busy` and `waiting` take the holder)."""

    holder: Callable[[], str]
    busy: Callable[[str], str]
    waiting: Callable[[str], str]
    cancelled_message: str


def lock_or_wait(
    fd: int,
    mode: int,
    words: LockWords,
    *,
    wait: bool,
    on_wait: Callable[[str], None],
    cancelled: Callable[[], bool],
    poll_s: float,
) -> None:
    """Take the lock on `fd`; busy without `wait` or cancelled while waiting: HarnessError (fd left open)."""
    told = False
    while not try_lock(fd, mode):
        if not wait:
            raise HarnessError(words.busy(words.holder()), ExitCode.BUSY)
        if not told:
            on_wait(words.waiting(words.holder()))
            told = True
        if cancelled():
            raise HarnessError(words.cancelled_message, ExitCode.INTERRUPTED)
        time.sleep(poll_s)


def write_owner(fd: int, owner: Mapping[str, object]) -> None:
    """Say in the lock file who holds it."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(owner, allow_nan=False).encode(), 0)


def clear_owner(fd: int) -> None:
    """No stale owner for the next waiter to report."""
    os.ftruncate(fd, 0)


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


MAX_OWNER_BYTES = 64 << 10  # who holds a lock: a line of JSON


def read_owner(path: Path) -> JSONObject:
    """Who holds a lock, as the holder wrote it ({} when unknown); read bounded, never blocking on a FIFO."""
    try:
        fd = _open_lock_to_read(path)
    except OSError:
        return {}
    if fd is None:
        return {}
    try:
        data = os.read(fd, MAX_OWNER_BYTES + 1)
        owner = json.loads(data or b"{}") if len(data) <= MAX_OWNER_BYTES else {}
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    return owner if isinstance(owner, dict) else {}


def _open_lock_to_read(path: Path) -> Optional[int]:
    """A read-only fd on the lock file at `path`, or None where there is none: absent, a link (never a lock file the
    harness made), or no regular file (never opened blocking: a FIFO would block its open)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:  # a link: never a lock file the harness made
            return None
        raise
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        os.close(fd)
        raise
    if not regular:
        os.close(fd)
        return None
    return fd


def is_held(path: Path) -> bool:
    """True when some process holds the lock at `path` (probed with a shared lock, released at once); a path that
    is no regular file is no lock anyone holds (and is never waited on: a FIFO would block its open)."""
    fd = _open_lock_to_read(path)
    if fd is None:
        return False
    try:
        if try_lock(fd, SHARED):
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        return True
    finally:
        os.close(fd)
