"""One run per GPU: advisory file locks per Docker host and GPU set.

A run on all GPUs holds the host's `all` lock exclusively; a run on listed
GPUs holds `all` shared and each listed GPU exclusively, so two runs on
different GPUs share a host and a run on all GPUs waits for both. The kernel
drops the locks when the harness dies, however it dies. Separate from the
capture lock (harness.capture.lock), which a run takes first.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence, Union

from harness.errors import HarnessError
from harness.fs.filelock import (
    EXCLUSIVE,
    SHARED,
    LockWords,
    clear_owner,
    lock_or_wait,
    open_lock_file,
    read_owner,
    unlock,
    write_owner,
)
from harness.fs.paths import lock_dir


def docker_host_key() -> str:
    """A short, file-name-safe key for the Docker host the runs go to."""
    host = os.environ.get("DOCKER_HOST") or "local"
    return hashlib.sha256(host.encode()).hexdigest()[:10]


class GpuLock:
    """The locks of one run's GPU set; `acquire` waits (or fails at once with `wait=False`)."""

    def __init__(
        self,
        gpus: Union[str, Sequence[int]],
        owner: Mapping[str, object],
        directory: Optional[Path] = None,
        host_key: Optional[str] = None,
    ) -> None:
        self.directory = directory or lock_dir()
        self.owner = owner
        key = host_key or docker_host_key()
        self._plan: list[tuple[Path, int]] = []
        if gpus == "all":
            self._plan = [(self.directory / f"{key}-all.lock", EXCLUSIVE)]
        elif gpus != "none":
            self._plan = [(self.directory / f"{key}-all.lock", SHARED)]
            self._plan += [(self.directory / f"{key}-gpu{i}.lock", EXCLUSIVE) for i in sorted(gpus)]
        self._held: list[tuple[int, int]] = []

    def acquire(
        self,
        *,
        wait: bool,
        on_wait: Callable[[str], None] = lambda message: None,
        cancelled: Callable[[], bool] = lambda: False,
        poll_s: float = 2.0,
    ) -> None:
        """Take every lock of the set, in a fixed order (no deadlock between runs); Ctrl-C ends the wait."""
        for path, mode in self._plan:
            fd = open_lock_file(path)
            try:
                lock_or_wait(
                    fd,
                    mode,
                    LockWords(
                        holder=lambda: _holder(path),
                        busy=lambda holder: f"the GPU is busy ({holder}); without --no-wait this run would wait",
                        waiting=lambda holder: f"waiting for the GPU: {holder}",
                        cancelled_message="interrupted while waiting for the GPU; nothing was started",
                    ),
                    wait=wait,
                    on_wait=on_wait,
                    cancelled=cancelled,
                    poll_s=poll_s,
                )
            except HarnessError:
                os.close(fd)
                self.release()
                raise
            self._held.append((fd, mode))
            if mode == EXCLUSIVE:
                write_owner(fd, self.owner)

    def release(self) -> None:
        for fd, mode in reversed(self._held):
            if mode == EXCLUSIVE:
                clear_owner(fd)
            unlock(fd)
        self._held = []

    def __enter__(self) -> "GpuLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(path: Path) -> str:
    """Who holds a lock, as the holder wrote it (best effort: a shared holder writes nothing)."""
    owner = read_owner(path)
    if owner.get("run"):
        return f"run {owner['run']} (harness pid {owner.get('pid')} on {owner.get('host')}) holds it"
    return "another run holds it"
