"""Reading a child process's stdout line by line, so a test can wait for a line and act at once."""

from __future__ import annotations

import os
import select
import subprocess
import time

from support.timing import scaled


class LineReader:
    """Reads a process's stdout from its file descriptor, so a test can wait for a line and act at once."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.fd = proc.stdout.fileno()
        self.seen: list[str] = []
        self._buffer = b""

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        chunk = os.read(self.fd, 65536) if ready else b""
        *lines, self._buffer = (self._buffer + chunk).split(b"\n")
        self.seen.extend(line.decode() + "\n" for line in lines)
        return bool(chunk)

    def until(self, marker: str, timeout: float) -> None:
        """Wait for the first line containing marker."""
        deadline = time.monotonic() + scaled(timeout)
        checked = 0
        while True:
            if any(marker in line for line in self.seen[checked:]):
                return
            checked = len(self.seen)
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(left):
                raise AssertionError(f"no line with {marker!r} within {timeout} s; got {self.seen[-3:]}")

    def rest(self) -> list[str]:
        """Every line to the end of the stream (call after the process ended)."""
        while self._read(10):
            pass
        return self.seen
