"""What a checkpointed attempt will do before its trainer starts, as decided (harness.run.resume decides it,
harness.run.attempt_checkpoints does it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from harness.checkpoints.choose import ResumeChoice
from harness.checkpoints.disk import SizeEstimate
from harness.checkpoints.layout import CheckpointSpec

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject


@dataclass(frozen=True)
class ResumeFrom:
    """A resumed attempt: the attempt whose lineage it continues (the head), the lineage's first, the checkpoint."""

    from_attempt: int
    lineage: int
    choice: ResumeChoice

    def record(self, tracker: JSONObject, trainer_checkpoint: str) -> JSONObject:
        """resume.json as the attempt starts: what it resumes, from where (`trainer_checkpoint`: as the trainer sees
        it), and the tracker made to name it."""
        check = self.choice.check
        return {
            "from_attempt": self.from_attempt,
            "lineage": self.lineage,
            "checkpoint": check.name,
            "iteration": check.iteration,
            "rollout_id": check.rollout_id,
            "next_rollout_id": self.choice.next_rollout_id,
            "directory": check.directory,
            "trainer_checkpoint": trainer_checkpoint,
            "bytes": check.bytes,
            "passed_over": [{"checkpoint": c.name, "why": c.why} for c in self.choice.passed_over],
            "tracker": tracker,
            "verified": None,
            "cause": None,
        }


@dataclass(frozen=True)
class CheckpointStart:
    """A checkpointed attempt's start: its spec, the resume (None: a fresh lineage), the earlier lineage's directory
    to move aside (`--force` over it), the checkpoint size the disk rule used, and what to tell the person."""

    spec: CheckpointSpec
    resume: Optional[ResumeFrom] = None
    move_aside_to: Optional[str] = None
    estimate: Optional[SizeEstimate] = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def facts(self) -> JSONObject:
        """The manifest's `checkpoint` block: where, how often, how many, and the size the disk rule used."""
        return {
            "directory": self.spec.directory,
            "trainer_directory": self.spec.trainer_directory,
            "root": self.spec.root,
            "every": self.spec.every,
            "keep": self.spec.keep,
            "data_state": self.spec.data_state,
            "size_estimate": (
                {"bytes": self.estimate.bytes, "source": self.estimate.source} if self.estimate is not None else None
            ),
            "resume": (
                {
                    "from_attempt": self.resume.from_attempt,
                    "lineage": self.resume.lineage,
                    "checkpoint": self.resume.choice.check.name,
                    "next_rollout_id": self.resume.choice.next_rollout_id,
                }
                if self.resume is not None
                else None
            ),
        }
