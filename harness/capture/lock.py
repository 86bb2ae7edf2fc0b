"""One harness per capture directory at a time: a lock held for the whole run.

A run takes its capture's lock before it decides anything about the capture
(skip, replace, settle a dead harness's leftovers) and keeps it until the
last write, so two runs of one run name never write one capture, and a
capture in use is never moved. `harness recover` takes the same lock, so it
never touches a capture whose harness is alive; a lock that can be taken
proves the harness that held it is gone. Separate from the GPU lock, and
taken before it.

The lock files live beside the captures, in `<capture root>/.locks/<run>.lock`: one
lock per run, whichever of its attempts is being written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Optional

from harness.errors import HarnessError
from harness.fs.filelock import (
    EXCLUSIVE,
    LockWords,
    clear_owner,
    is_held,
    lock_or_wait,
    open_lock_file,
    read_owner,
    try_lock,
    unlock,
    write_owner,
)

LOCKS_DIR = ".locks"


def lock_path(capture_dir: Path) -> Path:
    """The lock file of a capture directory."""
    capture_dir = Path(capture_dir)
    return capture_dir.parent / LOCKS_DIR / f"{capture_dir.name}.lock"


def in_use(capture_dir: Path) -> bool:
    """True while a harness holds the capture's lock (on this machine)."""
    return is_held(lock_path(capture_dir))


def holder(capture_dir: Path) -> str:
    """Who holds a capture's lock, in words."""
    owner = read_owner(lock_path(capture_dir))
    if not owner:
        return "another harness holds it"
    since = f", since {owner['since']}" if owner.get("since") else ""
    return f"harness pid {owner.get('pid')} on {owner.get('host')}{since}"


class CaptureLock:
    """The lock of one capture directory; `acquire` waits, or fails in one line with `wait=False`."""

    def __init__(self, capture_dir: Path, owner: Mapping[str, object]) -> None:
        self.capture_dir = Path(capture_dir)
        self.path = lock_path(self.capture_dir)
        self.owner = owner
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(
        self,
        *,
        wait: bool,
        on_wait: Callable[[str], None] = lambda message: None,
        cancelled: Callable[[], bool] = lambda: False,
        poll_s: float = 0.5,
    ) -> None:
        """Take the lock; busy without `wait`: HarnessError(BUSY) naming the holder."""
        run = self.capture_dir.name
        fd = open_lock_file(self.path, self.capture_dir.parent)
        try:
            lock_or_wait(
                fd,
                EXCLUSIVE,
                LockWords(
                    holder=lambda: holder(self.capture_dir),
                    busy=lambda who: f"run {run} is in use ({who}); without --no-wait this run would wait for it",
                    waiting=lambda who: f"waiting for run {run} to end ({who})",
                    cancelled_message=f"interrupted while waiting for run {run}; nothing was started",
                ),
                wait=wait,
                on_wait=on_wait,
                cancelled=cancelled,
                poll_s=poll_s,
            )
        except HarnessError:
            unlock(fd)
            raise
        self._taken(fd)

    def try_acquire(self) -> bool:
        """Take the lock if it is free; False when a harness holds it."""
        fd = open_lock_file(self.path, self.capture_dir.parent)
        if not try_lock(fd, EXCLUSIVE):
            unlock(fd)
            return False
        self._taken(fd)
        return True

    def _taken(self, fd: int) -> None:
        self._fd = fd
        write_owner(fd, self.owner)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            clear_owner(fd)
            unlock(fd)

    def __enter__(self) -> "CaptureLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
