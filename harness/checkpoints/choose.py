"""Which checkpoint a resume starts from (pure but for stat and small reads), and the tracker made to name it.

The FSDP backend loads what the tracker names, and Miles writes the tracker in
place, so a power loss can leave it torn (NUL bytes, empty) or naming a
checkpoint whose save never finished. The harness never trusts it: it takes
the newest checkpoint of the run's directory that verifies complete
(harness.checkpoints.verify), and before the attempt starts it writes the
tracker anew, naming that one, to a temporary file renamed over the old
(`point_tracker`), and records what the tracker held before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.checkpoints.layout import TRACKER_NAME, iteration_name
from harness.checkpoints.verify import CheckpointCheck, TrackerRead, iterations_on_disk, read_tracker, verify_checkpoint
from harness.fs.files import write_text_atomic
from harness.fs.paths import outside_root

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

MAX_PASSED_OVER_SAID = 3  # newer checkpoints that were not complete, named in a note


@dataclass(frozen=True)
class ResumeChoice:
    """The checkpoint a resume starts from, what was passed over, and what the tracker said."""

    check: CheckpointCheck
    tracker: TrackerRead
    passed_over: tuple[CheckpointCheck, ...] = field(default_factory=tuple)

    @property
    def iteration(self) -> int:
        return self.check.iteration

    @property
    def next_rollout_id(self) -> int:
        return self.check.iteration  # meta.json said so: the check verified it

    def passed_over_text(self) -> str:
        """`iter_0000070 (its optimizer/.metadata is missing)`, the newest few; "" with none."""
        said = [f"{check.name} ({check.why})" for check in self.passed_over[:MAX_PASSED_OVER_SAID]]
        more = len(self.passed_over) - MAX_PASSED_OVER_SAID
        return "; ".join(said) + (f"; and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class NoCheckpoint:
    """Why no checkpoint of the directory can be resumed from."""

    why: str


def choose_checkpoint(directory: str, *, data_state: bool, root: str) -> ResumeChoice | NoCheckpoint:
    """The newest complete checkpoint in the run's checkpoint `directory`, or why there is none."""
    leaves = outside_root(root, directory)
    if leaves is not None:
        return NoCheckpoint(f"its checkpoint directory {directory} {leaves}")
    if not os.path.isdir(directory):
        return NoCheckpoint(f"its checkpoint directory {directory} does not exist (no checkpoint was ever saved)")
    passed: list[CheckpointCheck] = []
    for iteration in iterations_on_disk(directory):
        check = verify_checkpoint(directory, iteration, data_state=data_state)
        if check.complete:
            return ResumeChoice(check, read_tracker(directory), tuple(passed))
        passed.append(check)
    if not passed:
        return NoCheckpoint(f"{directory} holds no checkpoint")
    newest = passed[0]
    return NoCheckpoint(
        f"none of its {len(passed)} checkpoint(s) in {directory} is complete (the newest, {newest.name}: {newest.why})"
    )


def point_tracker(directory: str, choice: ResumeChoice) -> JSONObject:
    """Make the tracker name the chosen checkpoint (a temporary file renamed over it) and return the record of it."""
    before = choice.tracker
    write_text_atomic(os.path.join(directory, TRACKER_NAME), str(choice.iteration), root=directory)
    return {
        "tracker": os.path.join(directory, TRACKER_NAME),
        "before": before.said(),
        "after": str(choice.iteration),
        "rewritten": before.iteration != choice.iteration,
        "checkpoint": iteration_name(choice.iteration),
    }
