"""A log read as text with what a power loss left in it taken out: its NUL bytes, and the holes of a sparse file.

A power loss leaves a file's last blocks allocated but never written: NUL
bytes, a sparse gigabyte of them it may be. Nothing a trainer prints is a NUL
byte, so a reader that shows or parses lines (`harness logs`, `parse-log`)
leaves them out and says how many there were; the holes of a sparse file are
skipped without being read (SEEK_DATA), so a terabyte of them costs nothing.
"""

from __future__ import annotations

import errno
import os
from typing import BinaryIO

NUL = b"\0"
READ_BYTES = 1 << 20


class WithoutNuls:
    """`read(n)` of a binary file, its NUL bytes left out and its holes skipped; `nuls`: how many were left out
    (a hole's size counted, though never read)."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.nuls = 0

    def read(self, size: int = -1) -> bytes:
        while True:
            chunk = self.handle.read(size if size > 0 else READ_BYTES)
            if not chunk:
                return b""
            kept = chunk.replace(NUL, b"")
            self.nuls += len(chunk) - len(kept)
            if chunk.endswith(NUL):
                self._skip_hole()
            if kept:
                return kept
            # NUL bytes only: read on (an empty read would say the file ended)

    def _skip_hole(self) -> None:
        """Move past the hole after the position, if the file has one (a pipe, or a file system that cannot say,
        is read as it is)."""
        try:
            here = self.handle.tell()
        except OSError:
            return
        try:
            data = os.lseek(self.handle.fileno(), here, os.SEEK_DATA)
        except OSError as err:
            if err.errno != errno.ENXIO:
                return
            try:  # no data after the position: the rest is a hole
                end = os.fstat(self.handle.fileno()).st_size
                self.nuls += max(0, end - here)
                self.handle.seek(max(here, end))
            except OSError:
                pass
            return
        self.nuls += data - here
        self.handle.seek(data)
