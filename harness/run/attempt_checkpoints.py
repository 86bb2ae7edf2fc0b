"""A checkpointed attempt, around its trainer: what was decided (harness.run.resume) done, and the run's lines
read for its checkpoints and its resume (docs/checkpoints.md).

Before the trainer starts (`before`): the checkpoint directory's lock taken
(two attempts never write one directory), an earlier lineage moved aside
(`--force`), the directory marked as this run's, a stale save-trigger
sentinel removed; for a resume, the tracker made to name the chosen
checkpoint (atomically) and resume.json written, saying so.

While it runs, the log pump hands every line to `line`: a save line goes to
the keeper (verified, recorded in checkpoints.jsonl, `keep` applied, off the
pump's thread); a resumed attempt's lines go to its ResumeWatch until it is
decided. Verified: resume.json says so, and the attempt becomes the run's
current one (not before: a resume that did not happen never shows as the
run). Refused: the trainer is stopped at once (SIGTERM, SIGKILL after
REFUSAL_GRACE_S), none of its steps is recorded, and the attempt ends
`failed` with the cause.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable, Optional

from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.layout import Capture
from harness.capture.writer import CaptureWriter
from harness.checkpoints.choose import ResumeChoice, choose_checkpoint, point_tracker
from harness.checkpoints.keeper import LEDGER_NAME, CheckpointKeeper
from harness.checkpoints.lineage import RESUME_NAME
from harness.checkpoints.owner import CheckpointDirLock, write_marker
from harness.checkpoints.start import CheckpointStart
from harness.checkpoints.verify import CheckpointCheck
from harness.checkpoints.watch import ResumeTarget, ResumeWatch, Verdict
from harness.errors import HarnessError
from harness.fs.files import prepare_directory
from harness.times import now_rfc3339

if TYPE_CHECKING:
    from harness.engines import RunHandle
    from harness.jsontypes import JSONObject
    from harness.run.context import Reporter

REFUSAL_GRACE_S = 5.0  # a trainer that did not resume has done nothing worth a graceful minute


class AttemptCheckpoints:
    """One checkpointed attempt's checkpoints and resume: `before`, then `started`, `line` per line, `admit` per
    step, then `ended`; `refusal` is the cause that ends it `failed`."""

    def __init__(
        self,
        start: CheckpointStart,
        capture: Capture,
        attempt: Attempt,
        writer: CaptureWriter,
        reporter: Reporter,
        owner: JSONObject,
    ) -> None:
        self.run_id = str(owner.get("run_id"))
        self.start = start
        self.spec = start.spec
        self.capture = capture
        self.attempt = attempt
        self.writer = writer
        self.reporter = reporter
        self.lock = CheckpointDirLock(self.spec.directory, owner)
        self.keeper = CheckpointKeeper(
            self.spec, self._record, lambda message: reporter.note(f"{capture.run}: {message}")
        )
        resume = start.resume
        self.watch: Optional[ResumeWatch] = None
        self._resume_record: Optional[JSONObject] = None
        if resume is not None:
            check = resume.choice.check
            self.watch = ResumeWatch(
                ResumeTarget(check.iteration, resume.choice.next_rollout_id, self.spec.trainer_path(check.directory))
            )
        self._stop: Callable[[], None] = lambda: None
        self._unfinished: list[CheckpointCheck] = []

    @property
    def ledger_path(self) -> str:
        return os.path.join(self.capture.directory, LEDGER_NAME)

    # --- before the trainer starts ----------------------------------------------------------------

    def before(self) -> JSONObject:
        """Do what was decided before the trainer starts; the manifest's `checkpoint` block. HarnessError: nothing
        started (the lock is someone else's, the directory cannot be made)."""
        spec = self.spec
        if self.start.move_aside_to is not None:
            self.lock.refuse_if_held(self.capture.run)
            os.rename(spec.directory, self.start.move_aside_to)  # whole: nothing of an earlier lineage is deleted
        prepare_directory(spec.directory, spec.root)
        self.lock.acquire(self.capture.run)
        try:
            self.keeper.remember_disk()
            run, run_id = self.capture.run, self.run_id
            write_marker(
                spec.directory,
                {"run": run, "run_id": run_id, "lineage": self._lineage(), "capture": str(self.capture.root)},
            )
            if os.path.lexists(spec.sentinel):
                os.unlink(spec.sentinel)  # asked of an earlier attempt: it would save at this one's first rollout
            resume = self.start.resume
            if resume is not None:
                tracker = point_tracker(spec.directory, resume.choice)
                self._resume_record = resume.record(tracker, self.spec.trainer_path(resume.choice.check.directory))
                self._write_resume(self._resume_record)  # through the writer: a Ray driver's copy gets it too
        except BaseException:
            self.lock.release()
            raise
        for note in self.start.notes:
            self.reporter.note(note)
        return self.start.facts()

    def _lineage(self) -> int:
        return self.start.resume.lineage if self.start.resume is not None else self.attempt.number

    # --- while it runs ----------------------------------------------------------------------------

    def started(self, handle: RunHandle) -> None:
        """The trainer started: the keeper starts; a refused resume stops `handle`."""
        self.keeper.start()

        def stop() -> None:
            threading.Thread(target=_quietly_stop, args=(handle,), name="resume-refused", daemon=True).start()

        self._stop = stop

    def line(self, text: str, number: int) -> None:
        """One line of the trainer's (from the log pump: cheap for the lines that are neither)."""
        watch = self.watch
        if watch is not None and not watch.decided:
            self._decided(watch.feed(text, number))
        if "[FSDP] Saved" in text:
            found = self._saved_path(text)
            if found is not None:
                self.keeper.saved(found, number)

    def admit(self, step: int) -> bool:
        """Whether a step record is the run's: not while a resume is refused, or undecided (the step decides it)."""
        watch = self.watch
        if watch is None:
            return True
        if not watch.decided:
            self._decided(watch.rollout(step))
        return watch.verdict == "verified"

    def unfinished_save(self) -> Optional[str]:
        """Once ended: the newest checkpoint this attempt began and left incomplete (the trainer died in its save),
        and where a resume continues (None: it left none)."""
        if not self._unfinished:
            return None
        torn = self._unfinished[0]
        choice = choose_checkpoint(self.spec.directory, data_state=self.spec.data_state, root=self.spec.root)
        after = (
            f"{choice.check.name} (complete) is where --resume continues"
            if isinstance(choice, ResumeChoice)
            else f"there is no complete checkpoint to resume from ({choice.why})"
        )
        return f"checkpoint {torn.name} is not complete: {torn.why}; {after}"

    def refusal(self) -> Optional[str]:
        """Why the resume was refused (the attempt ends `failed` with it), None otherwise."""
        return self.watch.cause if self.watch is not None and self.watch.verdict == "refused" else None

    def _saved_path(self, text: str) -> Optional[str]:
        from_line = text.split("[FSDP] Saved checkpoint to ", 1)
        return from_line[1].strip().split(" [repeated", 1)[0] if len(from_line) == 2 else None

    def _decided(self, verdict: Optional[Verdict]) -> None:
        watch = self.watch
        if verdict is None or watch is None or self._resume_record is None:
            return
        record = {**self._resume_record, "verified": verdict == "verified", "decided_at": now_rfc3339()}
        record.update({"load_line": watch.load_line, "first_rollout": watch.first_rollout, "cause": watch.cause})
        self._write_resume(record)
        run = self.capture.run
        if verdict == "verified":
            RunAttempts(self.capture.root / run).started(
                self.attempt, why=f"its resume from {watch.target.name} was verified"
            )
            self.reporter.note(
                f"{run}: resume verified: {watch.target.name} loaded (container.log line {watch.load_line}), first "
                f"rollout {watch.first_rollout}"
            )
            return
        self.reporter.note(f"{run}: {watch.cause}; stopping it")
        self._stop()

    def _write_resume(self, record: JSONObject) -> None:
        self.writer.json(self.attempt.directory / RESUME_NAME, record)

    def _record(self, row: JSONObject) -> None:
        self.writer.jsonl(self.capture.directory / LEDGER_NAME, row)

    # --- after it ended ---------------------------------------------------------------------------

    def ended(self, *, stopped: bool) -> None:
        """The trainer ended and its lines are all read: a resume still undecided is refused (unless the person
        stopped it first: then it stays undecided); the keeper finishes; the lock goes."""
        try:
            watch = self.watch
            if watch is not None and not watch.decided and not stopped:
                self._decided(watch.ended())
            self.keeper.close()
            resume = self.start.resume
            self._unfinished = [
                check
                for check in self.keeper.unreported(resume.choice.iteration if resume is not None else 0)
                if not check.complete
            ]
            if os.path.lexists(self.spec.sentinel):
                os.unlink(self.spec.sentinel)
        finally:
            self.lock.release()


def _quietly_stop(handle: RunHandle) -> None:
    try:
        handle.stop(REFUSAL_GRACE_S)
    except HarnessError:
        pass  # gone already: the supervisor's wait says how it ended
