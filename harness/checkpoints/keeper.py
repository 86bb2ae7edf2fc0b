"""The run's checkpoints as they are saved: each verified on disk when the trainer says it saved it, recorded in
checkpoints.jsonl, and `keep` applied once a newer one is complete.

The log pump hands over the trainer's save line (`saved`) and goes on at
once: the check (stat and small reads, milliseconds) and any deletion (a
directory of gigabytes) run on the keeper's own thread, never on the pump's.

checkpoints.jsonl, one line per event, appended and fsynced:

    {"event": "verified", "rollout_id": 9, "iteration": 10, "directory": ".../iter_0000010", "bytes": 123,
     "complete": true, "why": null, "next_rollout_id": 10, "line": 412, "at": "...", "verify_ms": 0.4}
    {"event": "deleted", "iteration": 10, "rollout_id": 9, "directory": ".../iter_0000010", "bytes": 123,
     "why": "older than the 2 newest complete (iter_0000030, iter_0000020); keep: 2", "at": "..."}

At the attempt's end, a checkpoint it wrote without the trainer saying so (the
trainer died in the save: a disk that filled, a kill) is verified too, its line
with `"line": null, "reported": false`: a torn one says it is not complete, and why.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import TYPE_CHECKING, Callable, Optional

from harness.checkpoints.layout import CheckpointSpec, iteration_name, iteration_of
from harness.checkpoints.retention import delete_checkpoint, to_delete
from harness.checkpoints.verify import (
    CheckpointCheck,
    Fingerprint,
    fingerprint,
    iterations_on_disk,
    timed_verify,
    verify_checkpoint,
)
from harness.times import now_rfc3339

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

LEDGER_NAME = "checkpoints.jsonl"
KEEPER_DRAIN_S = 60.0  # at the end, a deletion under way gets this long


class CheckpointKeeper(threading.Thread):
    """Verifies, records and prunes the run's checkpoints off the pump's thread; `record` appends one ledger line
    (the capture's writer: on disk, then forwarded), `note` tells the person."""

    def __init__(
        self,
        spec: CheckpointSpec,
        record: Callable[[JSONObject], None],
        note: Callable[[str], None],
    ) -> None:
        super().__init__(name="checkpoint-keeper", daemon=True)
        self.spec = spec
        self.record = record
        self.note = note
        self.verified: list[CheckpointCheck] = []
        self._queue: queue.Queue[Optional[tuple[str, int]]] = queue.Queue()
        self._lock = threading.Lock()
        self._before: dict[int, Fingerprint] = {}

    def remember_disk(self) -> None:
        """Before the trainer starts: what the directory's checkpoints are on disk, to tell at the end which of them
        this attempt wrote."""
        directory = self.spec.directory
        self._before = {iteration: fingerprint(directory, iteration) for iteration in iterations_on_disk(directory)}

    def unreported(self, after: int) -> list[CheckpointCheck]:
        """Once closed: each checkpoint newer than iteration `after` that this attempt wrote (new since
        `remember_disk`, or changed) but the trainer never said it saved (it died in the save: a disk that filled,
        a kill), verified now and recorded (`"reported": false`); newest first."""
        directory = self.spec.directory
        with self._lock:
            reported = {check.iteration for check in self.verified}
        found = []
        for iteration in iterations_on_disk(directory):
            if iteration <= after or iteration in reported:
                continue
            if self._before.get(iteration) == fingerprint(directory, iteration):
                continue  # an earlier attempt's, untouched by this one
            check, took_ms = timed_verify(directory, iteration, data_state=self.spec.data_state)
            self.record(
                {
                    **check.to_record(),
                    "line": None,
                    "reported": False,
                    "at": now_rfc3339(),
                    "verify_ms": round(took_ms, 3),
                }
            )
            found.append(check)
        return found

    def saved(self, trainer_path: str, line: int) -> None:
        """The trainer printed that it saved `trainer_path` at container.log line `line` (from the pump: returns at
        once)."""
        self._queue.put((trainer_path, line))

    def close(self, timeout_s: float = KEEPER_DRAIN_S) -> None:
        """Check what was handed over, then stop."""
        if self.ident is None:
            return
        self._queue.put(None)
        self.join(timeout_s)

    def newest_complete(self) -> Optional[CheckpointCheck]:
        """The newest checkpoint this attempt verified complete."""
        with self._lock:
            complete = [check for check in self.verified if check.complete]
        return max(complete, key=lambda check: check.iteration) if complete else None

    def run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                self._check(*item)
            except Exception as err:  # a bug or a disk that refuses: said, and the run goes on
                self.note(f"checkpoint check failed ({type(err).__name__}: {err})")

    def _check(self, trainer_path: str, line: int) -> None:
        host = self.spec.host_path(trainer_path)
        iteration = iteration_of(os.path.basename(os.path.normpath(trainer_path)))
        if host is None or iteration is None or os.path.dirname(host) != os.path.normpath(self.spec.directory):
            self.record(
                {
                    "event": "verified",
                    "directory": trainer_path,
                    "complete": False,
                    "why": f"the trainer saved to {trainer_path}, not an iter_NNNNNNN of {self.spec.trainer_directory}",
                    "line": line,
                    "at": now_rfc3339(),
                }
            )
            return
        check, took_ms = timed_verify(self.spec.directory, iteration, data_state=self.spec.data_state)
        self.record({**check.to_record(), "line": line, "at": now_rfc3339(), "verify_ms": round(took_ms, 3)})
        with self._lock:
            self.verified.append(check)
        if not check.complete:
            self.note(f"checkpoint {check.name} is not complete: {check.why}")
            return
        self._prune()

    def _prune(self) -> None:
        """`keep`: the newest `keep` complete checkpoints stay; older ones go (retention's rule)."""
        on_disk = iterations_on_disk(self.spec.directory)
        complete: list[int] = []
        for iteration in on_disk:  # newest first: only as many are checked as it takes to find `keep` complete
            if verify_checkpoint(self.spec.directory, iteration, data_state=self.spec.data_state).complete:
                complete.append(iteration)
                if len(complete) == self.spec.keep:
                    break
        for deletion in to_delete(on_disk, complete, self.spec.keep):
            freed, why_not = delete_checkpoint(self.spec.directory, deletion.iteration)
            self.record(
                {
                    "event": "deleted" if why_not is None else "not_deleted",
                    "iteration": deletion.iteration,
                    "rollout_id": deletion.iteration - 1,
                    "directory": os.path.join(self.spec.directory, iteration_name(deletion.iteration)),
                    "bytes": freed,
                    "why": deletion.why if why_not is None else why_not,
                    "at": now_rfc3339(),
                }
            )
