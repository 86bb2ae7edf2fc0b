"""A run's resume lineage: which attempt each resumed attempt continues, from which checkpoint, verified or not.

Each resumed attempt writes `resume.json` in its directory when it starts (what
it resumes and from where: the lineage's head then, the checkpoint, the
tracker rewritten) and again when its trainer's lines decide the resume
(verified, or refused with the cause). A fresh attempt has none: it begins a
lineage.

The lineage's head is the newest attempt that counts: a fresh attempt that
started, or a resumed one whose resume was verified (a refused resume ran
nothing of the run's). A resume continues the head; the run's record stitches
the chain back from its current attempt (harness.checkpoints.stitch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.reader import LOG_NAME, read_status
from harness.capture.records import RunState
from harness.checkpoints.watch import ResumeTarget, ResumeWatch
from harness.fs.bounded import Unreadable, iter_lines, loads_json, read_bounded
from harness.fs.files import write_json_atomic

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

RESUME_NAME = "resume.json"
MAX_RESUME_BYTES = 1 << 20
MAX_CHAIN = 10_000  # attempts in one lineage: past this a record loops (hand-edited) and the chain stops
MAX_DECIDING_LINES = 1_000_000  # a resume is decided by its first rollout: far sooner than this in any log


@dataclass(frozen=True)
class ResumeRecord:
    """What an attempt's resume.json says: the attempt it continues, the checkpoint, and the verdict."""

    from_attempt: int
    lineage: int  # the first attempt of the lineage
    iteration: int
    next_rollout_id: int
    verified: Optional[bool]  # None: not decided (the attempt's harness died first)
    cause: Optional[str] = None
    trainer_checkpoint: Optional[str] = None  # the checkpoint as its trainer saw it (to decide it from its log)

    @property
    def counts(self) -> bool:
        """The attempt's steps are the run's: its resume was verified."""
        return self.verified is True


def read_resume(directory: str) -> tuple[Optional[ResumeRecord], Optional[str]]:
    """An attempt's resume record (None: a fresh attempt), or why it cannot be read."""
    try:
        data = loads_json(read_bounded(os.path.join(directory, RESUME_NAME), MAX_RESUME_BYTES))
    except FileNotFoundError:
        return None, None
    except (Unreadable, ValueError) as err:
        return None, f"{RESUME_NAME} cannot be read ({err})"
    if not isinstance(data, dict):
        return None, f"{RESUME_NAME} is not a JSON object"
    numbers = [data.get(key) for key in ("from_attempt", "lineage", "iteration", "next_rollout_id")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
        return None, f"{RESUME_NAME} lacks its numbers (from_attempt, lineage, iteration, next_rollout_id)"
    verified = data.get("verified")
    cause = data.get("cause")
    trainer = data.get("trainer_checkpoint")
    from_attempt, lineage, iteration, next_rollout = (int(str(n)) for n in numbers)
    record = ResumeRecord(
        from_attempt,
        lineage,
        iteration,
        next_rollout,
        verified if isinstance(verified, bool) else None,
        cause if isinstance(cause, str) else None,
        trainer if isinstance(trainer, str) else None,
    )
    return decided_from_log(directory, record), None


def decided_from_log(directory: str, record: ResumeRecord) -> ResumeRecord:
    """A resume its harness died before deciding, decided now from the attempt's container.log (the trainer's own
    lines, by the same watch; read only as far as it takes), once the attempt has ended. Nothing is written."""
    if record.verified is not None or record.trainer_checkpoint is None:
        return record
    status = read_status(Path(directory)).status
    if status is None or not status.is_final:
        return record  # still running, or torn: `harness recover` settles it first
    watch = ResumeWatch(ResumeTarget(record.iteration, record.next_rollout_id, record.trainer_checkpoint))
    try:
        for number, raw, _ in iter_lines(Path(directory) / LOG_NAME):
            if number == 0 or number > MAX_DECIDING_LINES:
                break
            if raw is not None and watch.feed(raw.decode("utf-8", "replace"), number) is not None:
                break
    except (FileNotFoundError, Unreadable):
        pass
    if watch.verdict is None:
        watch.ended()
    return replace(record, verified=watch.verdict == "verified", cause=watch.cause)


def write_resume(directory: str, record: JSONObject, *, root: str) -> None:
    """Write an attempt's resume.json (whole, renamed)."""
    write_json_atomic(os.path.join(directory, RESUME_NAME), record, root=root)


def lineage_head(attempts: RunAttempts) -> Optional[Attempt]:
    """The newest attempt that counts (module doc), None when none does."""
    for attempt in reversed(attempts.all()):
        status = attempt.status_read().status
        if status is None or status.state == RunState.NOT_STARTED:
            continue
        record, _ = read_resume(str(attempt.directory))
        if record is not None and not record.counts:
            continue
        return attempt
    return None


def lineage_of(attempt: Attempt) -> int:
    """The first attempt of `attempt`'s lineage: its own number when it is fresh."""
    record, _ = read_resume(str(attempt.directory))
    return record.lineage if record is not None else attempt.number


@dataclass(frozen=True)
class Link:
    """One attempt of a stitched chain: its steps below `until` are the run's (None: all of them)."""

    attempt: Attempt
    record: Optional[ResumeRecord]  # its resume (None: the lineage's first attempt)
    until: Optional[int]  # the rollout the next attempt continued from


def resume_chain(attempts: RunAttempts, last: Attempt) -> tuple[list[Link], list[str]]:
    """The chain of attempts that `last` continues, oldest first, and notes on what could not be followed."""
    by_number = {attempt.number: attempt for attempt in attempts.all()}
    links: list[Link] = []
    notes: list[str] = []
    current: Optional[Attempt] = last
    until: Optional[int] = None
    while current is not None and len(links) < MAX_CHAIN:
        record, why = read_resume(str(current.directory))
        if why is not None:
            notes.append(f"attempt {current.number}: {why}: read as a fresh start")
        counted = record if record is not None and record.counts else None
        links.append(Link(current, counted, until))
        if counted is None:
            break
        parent = by_number.get(counted.from_attempt)
        if parent is None or parent.number >= current.number:
            notes.append(
                f"attempt {current.number} resumed attempt {counted.from_attempt}, which is not there: its steps "
                f"before rollout {counted.next_rollout_id} are missing"
            )
            break
        until = counted.next_rollout_id if until is None else min(until, counted.next_rollout_id)
        current = parent
    return list(reversed(links)), notes
