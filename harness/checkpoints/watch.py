"""Did the trainer really continue from the chosen checkpoint? Read from its own lines (STYLE 15), decided purely.

A resumed attempt is verified when, before its first rollout completes, the
trainer has printed its load line for the chosen checkpoint's model and its
first rollout id is the checkpoint's `next_rollout_id`. It is refused at the
first sign of the contrary, quoting the line:

- a skip line (`Checkpoint directory ... not found`, `No tracker file ...`,
  `Model checkpoint ... not found`: each then trains from scratch), a failed
  load (`Failed to load model from ...`), the data source's `Checkpoint ...
  does not exist.` (it starts from the first prompt);
- a load of another checkpoint than the chosen one;
- a first rollout without a load line before it (Miles's silent fallback: a
  --load it threw away prints nothing), or with another id than the
  checkpoint's next (slime#1558: the loop restarting at 0);
- an end before any rollout (training-gym#492: a continuation that runs no
  rollout and exits 0).

`ResumeWatch.feed` costs two substring tests on most lines, and is not called
once the attempt is decided.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal, Optional

from harness.checkpoints.layout import MODEL_PART, iteration_name
from harness.lab.milesnames import LOAD_FLAG
from harness.mileslog.checkpoint_lines import read_checkpoint_line, rollout_started

Verdict = Literal["verified", "refused"]


@dataclass(frozen=True)
class ResumeTarget:
    """What a resumed attempt must show: the chosen checkpoint as the trainer sees it, and where it continues."""

    iteration: int
    next_rollout_id: int
    trainer_checkpoint: str  # iter_NNNNNNN as the trainer sees it (/checkpoints/... in a container)

    @property
    def name(self) -> str:
        return iteration_name(self.iteration)


class ResumeWatch:
    """The verdict on a resumed attempt, from its lines in order (pure: no clock, no files)."""

    def __init__(self, target: ResumeTarget) -> None:
        self.target = target
        self.verdict: Optional[Verdict] = None
        self.cause: Optional[str] = None
        self.load_line: Optional[int] = None
        self.first_rollout: Optional[int] = None
        self._model = os.path.normpath(os.path.join(target.trainer_checkpoint, MODEL_PART))

    @property
    def decided(self) -> bool:
        return self.verdict is not None

    def feed(self, line: str, number: int) -> Optional[Verdict]:
        """Read one line; the verdict when this line decides it (None: not yet, or decided before)."""
        if self.verdict is not None:
            return None
        found = read_checkpoint_line(line)
        if found is not None:
            if found.kind in ("skipped", "load_failed"):
                return self._refuse(f"`{found.quoted}` (container.log line {number})")
            if found.kind == "data_missing":
                return self._refuse(
                    f"`{found.quoted}` (container.log line {number}): the data source starts again from the first prompt"
                )
            if found.kind == "loaded_model":
                if os.path.normpath(found.path) != self._model:
                    return self._refuse(f"it loaded {found.path}, not the chosen {self._model}: `{found.quoted}`")
                self.load_line = number
            return None
        rollout = rollout_started(line)
        return self.rollout(rollout) if rollout is not None else None

    def rollout(self, rollout_id: int) -> Optional[Verdict]:
        """The first rollout under way (a line, or a step record): verified or refused now."""
        if self.verdict is not None:
            return None
        self.first_rollout = rollout_id
        if self.load_line is None:
            return self._refuse(
                f"it printed no load line and its first rollout is {rollout_id} (a {LOAD_FLAG} Miles threw away trains "
                "from scratch without a word)"
            )
        if rollout_id != self.target.next_rollout_id:
            return self._refuse(
                f"it loaded it (container.log line {self.load_line}) but its first rollout is {rollout_id}, not "
                f"{self.target.next_rollout_id} (the rollout loop did not continue: slime#1558)"
            )
        self.verdict = "verified"
        return self.verdict

    def ended(self) -> Optional[Verdict]:
        """The trainer ended: without a first rollout, the resume is refused."""
        if self.verdict is not None:
            return None
        loaded = f"it loaded it (container.log line {self.load_line}) but " if self.load_line is not None else ""
        return self._refuse(f"{loaded}it ended before running any rollout (a continuation with nothing to run)")

    def _refuse(self, why: str) -> Verdict:
        self.verdict = "refused"
        self.cause = f"the trainer did not resume from {self.target.name}: {why}"
        return self.verdict
