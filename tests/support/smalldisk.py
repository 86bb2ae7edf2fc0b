"""A small file system of a test's own: a tmpfs mounted on a directory, to fill (root only; skipped elsewhere with the
reason, as CI runs the suite as root)."""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

PAGE = 4096  # tmpfs counts its space in pages: every file of a few bytes takes one


class SmallDisk:
    """A tmpfs mounted at `path`."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def resize(self, size: str) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)

    def free(self) -> int:
        """The bytes still free on it."""
        found = os.statvfs(self.path)
        return found.f_bavail * found.f_frsize

    def fill(self, leave: int, name: str = "filler") -> None:
        """Write a file that leaves `leave` bytes free (another writer filling the disk)."""
        with open(self.path / name, "wb") as filler:
            filler.write(b"\0" * max(0, self.free() - leave))
            filler.flush()
            os.fsync(filler.fileno())


@contextmanager
def small_disk_at(path: Path, size: str) -> Iterator[SmallDisk]:
    """A tmpfs of `size` (mount's words: 1m, 4m) at `path`, unmounted after."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root: run the suite as root (CI does)")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield SmallDisk(path)
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)
