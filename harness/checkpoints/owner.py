"""Whose checkpoints a directory holds, and one attempt at a time writing there.

`.harness-run.json` in the run's checkpoint directory names the run and run id
(the configuration) its checkpoints belong to, and the attempt that began the
lineage; a resume from a directory that names another run id, or none (not
made by the harness), is refused. `.harness-lock` is an flock held while an
attempt runs: two harnesses never write one checkpoint directory, whichever
capture roots they write (one capture root's lock already keeps two
harnesses off one run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, NoReturn, Optional

from harness.checkpoints.layout import LOCK_NAME, MARKER_NAME
from harness.errors import ExitCode, HarnessError
from harness.fs.bounded import Unreadable, loads_json, read_bounded
from harness.fs.filelock import (
    EXCLUSIVE,
    clear_owner,
    is_held,
    open_lock_file,
    read_owner,
    try_lock,
    unlock,
    write_owner,
)
from harness.fs.files import write_json_atomic

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

MAX_MARKER_BYTES = 64 << 10


def read_marker(directory: str) -> tuple[Optional[JSONObject], Optional[str]]:
    """The directory's `.harness-run.json`, or why it cannot be read (both None: there is none)."""
    try:
        data = loads_json(read_bounded(os.path.join(directory, MARKER_NAME), MAX_MARKER_BYTES))
    except FileNotFoundError:
        return None, None
    except (Unreadable, ValueError) as err:
        return None, f"{MARKER_NAME} cannot be read ({err})"
    if not isinstance(data, dict):
        return None, f"{MARKER_NAME} is not a JSON object"
    return data, None


def marker_problem(directory: str, run: str, run_id: str) -> Optional[str]:
    """Why the directory's checkpoints are not this run's (None: the marker names this run and run id)."""
    marker, why = read_marker(directory)
    if why is not None:
        return why
    if marker is None:
        return f"it has no {MARKER_NAME}: the harness did not make it for this run, so what it holds is unknown"
    if marker.get("run_id") != run_id:
        return (
            f"its checkpoints are run id {marker.get('run_id')!s}'s (run {marker.get('run')!s}), and this run is "
            f"{run_id}: another configuration"
        )
    return None


def write_marker(directory: str, facts: Mapping[str, object]) -> None:
    """Say whose checkpoints the directory holds (written whole and renamed)."""
    write_json_atomic(os.path.join(directory, MARKER_NAME), dict(facts), root=directory)


class CheckpointDirLock:
    """The flock of one checkpoint directory, held while an attempt writes there; never waited on."""

    def __init__(self, directory: str, owner: Mapping[str, object]) -> None:
        self.path = Path(directory) / LOCK_NAME
        self.owner = dict(owner)
        self._fd: Optional[int] = None

    def acquire(self, run: str) -> None:
        """Take it now, or one line naming who holds it."""
        fd = open_lock_file(self.path, self.path.parent)
        if not try_lock(fd, EXCLUSIVE):
            os.close(fd)
            self._busy(run)
        write_owner(fd, self.owner)
        self._fd = fd

    def refuse_if_held(self, run: str) -> None:
        """One line naming who holds it, when someone does (before the directory is moved aside)."""
        if is_held(self.path):
            self._busy(run)

    def _busy(self, run: str) -> NoReturn:
        owner = read_owner(self.path)
        who = f"harness pid {owner.get('pid')} on {owner.get('host')}" if owner else "another harness"
        raise HarnessError(
            f"its checkpoint directory {self.path.parent} is in use by {who} (run {run}); two "
            "attempts never write one checkpoint directory at once",
            ExitCode.BUSY,
        )

    def release(self) -> None:
        if self._fd is not None:
            clear_owner(self._fd)
            unlock(self._fd)
            self._fd = None
