"""One run per GPU: advisory file locks per Docker host and GPU set.

A run on all GPUs holds the host's `all` lock exclusively; a run on listed
GPUs holds `all` shared and each listed GPU exclusively, so two runs on
different GPUs share a host and a run on all GPUs waits for both. The kernel
drops the locks when the harness dies, however it dies.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from harness.errors import ExitCode, HarnessError

DEFAULT_LOCK_DIR = Path("/tmp/miles-gb10-lab-locks")


def lock_dir() -> Path:
    """Where the lock files live (HARNESS_LOCK_DIR, else a directory under /tmp shared by all users)."""
    return Path(os.environ.get("HARNESS_LOCK_DIR") or DEFAULT_LOCK_DIR)


def docker_host_key() -> str:
    """A short, file-name-safe key for the Docker host the runs go to."""
    host = os.environ.get("DOCKER_HOST") or "local"
    return hashlib.sha256(host.encode()).hexdigest()[:10]


class GpuLock:
    """The locks of one run's GPU set; `acquire` waits (or fails at once with `wait=False`)."""

    def __init__(self, gpus: Union[str, Sequence[int]], owner: dict, directory: Optional[Path] = None,
                 host_key: Optional[str] = None) -> None:
        self.directory = directory or lock_dir()
        self.owner = owner
        key = host_key or docker_host_key()
        self._plan: list[tuple[Path, int]] = []
        if gpus == "all":
            self._plan = [(self.directory / f"{key}-all.lock", fcntl.LOCK_EX)]
        elif gpus != "none":
            self._plan = [(self.directory / f"{key}-all.lock", fcntl.LOCK_SH)]
            self._plan += [(self.directory / f"{key}-gpu{i}.lock", fcntl.LOCK_EX) for i in sorted(gpus)]
        self._held: list[tuple[int, int]] = []

    def acquire(self, *, wait: bool, on_wait: Callable[[str], None] = lambda message: None,
                cancelled: Callable[[], bool] = lambda: False, poll_s: float = 2.0) -> None:
        """Take every lock of the set, in a fixed order (no deadlock between runs); Ctrl-C ends the wait."""
        self.directory.mkdir(parents=True, exist_ok=True)
        told = False
        for path, mode in self._plan:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            while True:
                try:
                    fcntl.flock(fd, mode | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = _holder(path)
                    if not wait:
                        os.close(fd)
                        self.release()
                        raise HarnessError(f"the GPU is busy ({holder}); without --no-wait this run would wait",
                                           ExitCode.BUSY) from None
                    if not told:
                        on_wait(f"waiting for the GPU: {holder}")
                        told = True
                    if cancelled():
                        os.close(fd)
                        self.release()
                        raise HarnessError("interrupted while waiting for the GPU; nothing was started",
                                           ExitCode.INTERRUPTED)
                    time.sleep(poll_s)
            self._held.append((fd, mode))
            if mode == fcntl.LOCK_EX:
                os.ftruncate(fd, 0)
                os.pwrite(fd, json.dumps(self.owner, allow_nan=False).encode(), 0)

    def release(self) -> None:
        for fd, mode in reversed(self._held):
            try:
                if mode == fcntl.LOCK_EX:
                    os.ftruncate(fd, 0)  # no stale owner for the next waiter to report
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._held = []

    def __enter__(self) -> "GpuLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(path: Path) -> str:
    """Who holds a lock, as the holder wrote it (best effort: a shared holder writes nothing)."""
    try:
        owner = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        owner = {}
    if owner.get("run"):
        return f"run {owner['run']} (harness pid {owner.get('pid')} on {owner.get('host')}) holds it"
    return "another run holds it"
