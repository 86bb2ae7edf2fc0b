"""One run's capture directory (capture/gpu/<run>/...): its files, a fresh start, the space reserve.

The layout is a contract (docs/architecture.md, "The capture contract"). `status.json` is the only truth
about whether a run is done; nothing here infers it from other files.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.capture.files import NO_SPACE, prepare_directory, write_json_atomic
from harness.capture.reader import StatusRead, find_runs, is_run_name, read_status, run_path_of, run_path_problem
from harness.capture.records import RunStatus
from harness.errors import ExitCode, HarnessError, did_you_mean
from harness.fs.bounded import Unreadable, read_json_file
from harness.fs.files import open_for_update
from harness.times import now_rfc3339

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

STOP_REQUEST = "stop-request.json"
RESERVE_DIR = ".reserve"
# Disk space kept back so that status.json can be written when the disk is full:
# a chunk is given back each time a status write finds no space.
RESERVE_CHUNKS = 8
RESERVE_CHUNK_BYTES = 64 * 1024


def utc_now() -> str:
    """Now as RFC 3339 UTC with microseconds."""
    return now_rfc3339()


def this_host() -> str:
    return socket.gethostname()


class Capture:
    """One capture directory: a run's (`<root>/<run>`, its current attempt) or one attempt's (`run` names its run)."""

    def __init__(self, directory: Path, run: Optional[str] = None) -> None:
        self.directory = Path(directory)
        self.run = run or self.directory.name
        self.manifest_path = self.directory / "manifest.json"
        self.status_path = self.directory / "status.json"
        self.log_path = self.directory / "container.log"
        self.metrics_path = self.directory / "metrics.jsonl"
        self.args_path = self.directory / "args.json"
        self.pauses_path = self.directory / "pauses.jsonl"
        self.guard_path = self.directory / "guard.jsonl"
        self.stop_request_path = self.directory / STOP_REQUEST
        self.reserve_path = self.directory / RESERVE_DIR

    @property
    def root(self) -> Path:
        """The capture root this capture lies in: every write of it stays inside (harness.fs.files)."""
        return run_path_of(self.directory).parent

    def exists(self) -> bool:
        return os.path.lexists(self.status_path)

    def status_read(self) -> StatusRead:
        """The status as found: typed, broken with the reason, or absent; never raises."""
        return read_status(self.directory)

    def read_status(self) -> Optional[RunStatus]:
        """The run's status, or None when there is no capture; a broken one is a one-line error."""
        found = self.status_read()
        if found.broken:
            raise HarnessError(f"{self.status_path}: unreadable status: {found.broken}")
        return found.status

    def write_status(self, status: RunStatus) -> None:
        """Write status.json; on a full disk, give back reserve chunks until it fits."""
        while True:
            try:
                write_json_atomic(self.status_path, status.to_dict(), root=self.root)
                return
            except OSError as err:
                if err.errno not in NO_SPACE or not self.release_reserve_chunk():
                    raise

    def read_manifest(self) -> Optional[JSONObject]:
        """manifest.json, or None when it is absent or unreadable (torn, not a regular file, too large or deep)."""
        try:
            manifest = read_json_file(self.manifest_path)
        except (OSError, ValueError, Unreadable):
            return None
        return manifest if isinstance(manifest, dict) else None

    # --- the space reserve ------------------------------------------------------------------------

    def make_reserve(self) -> None:
        """Set disk space aside for status.json; no space for it is a one-line error (nothing started yet)."""
        prepare_directory(self.reserve_path, self.root)
        for index in range(RESERVE_CHUNKS):
            path = self.reserve_path / str(index)
            fd = open_for_update(path, root=self.root)
            try:
                _allocate(fd, RESERVE_CHUNK_BYTES)
            except OSError as err:
                os.close(fd)
                self.drop_reserve()
                if err.errno in NO_SPACE:
                    raise HarnessError(
                        f"no space left on device for the capture in {self.directory}; free space and run again",
                        ExitCode.BAD_INPUT,
                    ) from None
                raise
            os.close(fd)

    def release_reserve_chunk(self) -> bool:
        """Give back one chunk of the reserve; False when none is left."""
        try:
            chunks = sorted(self.reserve_path.iterdir())
        except OSError:
            return False
        for chunk in chunks:
            try:
                chunk.unlink()
                return True
            except OSError:
                continue
        return False

    def drop_reserve(self) -> None:
        shutil.rmtree(self.reserve_path, ignore_errors=True)


def _allocate(fd: int, size: int) -> None:
    """Really take the blocks (a sparse file would give nothing back when deleted)."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except OSError as err:
        if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)):
            raise
    os.pwrite(fd, b"\0" * size, 0)
    os.fsync(fd)


def list_captures(capture_root: Path) -> list[Capture]:
    """Every run directory under the capture root that holds a status.json (broken ones too)."""
    runs, _ = find_runs(Path(capture_root))
    return [Capture(path) for path in runs]


def find_capture(capture_root: Path, run: str) -> Capture:
    """The capture of `run`, or a one-line error listing the runs there are."""
    capture = Capture(Path(capture_root) / run)
    if "/" in run or not is_run_name(run) or not capture.exists():
        hint = did_you_mean(run, [c.run for c in list_captures(capture_root)]) or "harness status lists them"
        raise HarnessError(f"no capture for run {run!r} in {capture_root} ({hint})", ExitCode.NOT_FOUND)
    why = run_path_problem(Path(capture_root), capture.directory)
    if why is not None:
        raise HarnessError(f"{capture.directory}: {why}", ExitCode.NOT_FOUND)
    return capture
