"""`keep`: which checkpoints to delete once a newer one is verified complete (pure), and the deletion (thin).

The rule (docs/checkpoints.md, "Retention"): after a checkpoint is verified
complete, the newest `keep` complete checkpoints stay, and every checkpoint
older than the oldest of them goes (a torn one too: it can never be resumed).
Nothing newer than the newest complete checkpoint is touched (a save may be
under way there), the newest complete checkpoint is never deleted (it is what
a resume needs), and nothing is deleted outside the run's checkpoint
directory: an `iter_` entry that is a link is unlinked, never followed.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from harness.checkpoints.layout import DATA_STATE_DIR, data_state_name, iteration_name
from harness.fs.paths import outside_root


@dataclass(frozen=True)
class Deletion:
    """One checkpoint to delete, and why."""

    iteration: int
    why: str


def to_delete(on_disk: Iterable[int], complete: Iterable[int], keep: int) -> list[Deletion]:
    """The checkpoints `keep` removes (pure): those older than the oldest of the newest `keep` complete ones.

    `on_disk`: every iteration in the directory; `complete`: those verified complete (the newest few are enough).
    The newest complete one is always kept: it is what a resume needs.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1: the newest complete checkpoint is what a resume needs")
    kept = sorted(set(complete), reverse=True)[:keep]
    if not kept:
        return []  # nothing complete: nothing may go
    floor = kept[-1]
    spared = set(kept)
    said = ", ".join(iteration_name(number) for number in kept)
    return [
        Deletion(number, f"older than the {len(kept)} newest complete ({said}); keep: {keep}")
        for number in sorted(set(on_disk))
        if number < floor and number not in spared
    ]


def delete_checkpoint(directory: str, iteration: int) -> tuple[int, Optional[str]]:
    """Delete checkpoint `iteration` of the run's checkpoint `directory` and its data-source state: (bytes freed,
    why it was not deleted). Never follows a link; never touches anything outside `directory`."""
    path = os.path.join(directory, iteration_name(iteration))
    state = os.path.join(directory, DATA_STATE_DIR, data_state_name(iteration - 1))
    freed = 0
    for target in (path, state):
        try:
            found = os.lstat(target)
        except FileNotFoundError:
            continue
        except OSError as err:
            return freed, f"{os.path.basename(target)} cannot be looked at ({err.strerror or err})"
        if stat.S_ISLNK(found.st_mode) or not stat.S_ISDIR(found.st_mode):
            os.unlink(target)  # a link is removed itself: what it points at is not the run's to delete
            freed += found.st_size if stat.S_ISREG(found.st_mode) else 0
            continue
        if outside_root(directory, target) is not None:
            return freed, f"{os.path.basename(target)} leads out of the run's checkpoint directory: left alone"
        freed += _tree_size(target)
        shutil.rmtree(target)
    return freed, None


def _tree_size(path: str) -> int:
    total = 0
    for parent, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                continue
    return total


def kept_after(on_disk: Sequence[int], deletions: Sequence[Deletion]) -> list[int]:
    """The iterations left once `deletions` are made (newest first)."""
    gone = {deletion.iteration for deletion in deletions}
    return sorted((number for number in on_disk if number not in gone), reverse=True)
