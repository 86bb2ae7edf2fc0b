"""One run's page (`harness status RUN`), from its capture alone: what a person asks of a run they trust or doubt.

The current attempt's state, its reason and notes; every attempt, and what
changed in configuration from each to the next; what the heat guard did
(`guard_facts`); the newest attempt's last log lines, and the command that
prints any attempt's log. Computed here as plain text (read with the one
tolerant reader, never raising for a broken file); `harness.cli.captures`
renders it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from harness.capture import Capture, RunStatus
from harness.capture.attempts import Attempt, RunAttempts
from harness.capture.guardlog import read_guard_log
from harness.capture.reader import read_pauses, run_path_of
from harness.capture.records import tally_pauses
from harness.fs.bounded import Unreadable, open_regular
from harness.run.capture_ops import (
    AttemptRow,
    attempt_rows,
    duration_text,
    exit_code_text,
    paused_wall_s,
    state_text,
)
from harness.run.decide import manifest_changes

LOG_TAIL_LINES = 10
LOG_TAIL_BYTES = 64 * 1024  # the end of container.log read for its last lines: a line longer than this is cut


@dataclass(frozen=True)
class GuardFacts:
    """What the heat guard did to one attempt, as its capture records it.

    To show something more the guard records: a field here, read in
    `guard_facts`, and its words in `text` (as the pauses it failed to make).
    """

    recorded: bool  # pauses.jsonl or guard.jsonl is there: the attempt was guarded and started
    pauses: int = 0  # windows in which the run was frozen (capture.records.tally_pauses)
    failed: int = 0  # pauses the engine could not make
    open_pauses: int = 0  # windows with no end: the run is frozen now, or was left frozen
    paused_s: float = 0.0  # wall seconds the windows cover together
    hottest_c: Optional[float] = None  # the hottest reading of any sample or pause window

    def text(self) -> str:
        """`2 pauses, 40 wall s paused, 1 failed, hottest 95.5 C`."""
        if not self.recorded:
            return "no record: unguarded, or it never started"
        parts = [f"{self.pauses} pause{'s' if self.pauses != 1 else ''}"]
        if self.pauses:
            parts.append(f"{self.paused_s:.0f} wall s paused")
        if self.failed:
            parts.append(f"{self.failed} failed")
        if self.open_pauses:
            parts.append(f"{self.open_pauses} not closed")
        if self.hottest_c is not None:
            parts.append(f"hottest {self.hottest_c:.1f} C")
        return ", ".join(parts)


def guard_facts(capture: Capture) -> GuardFacts:
    """The heat guard's record of one attempt: its pause windows (pauses.jsonl) and samples (guard.jsonl)."""
    if not capture.pauses_path.exists() and not capture.guard_path.exists():
        return GuardFacts(recorded=False)
    notes: list[str] = []  # a bad line is left out here; `harness guard plot` and the summary name it
    windows = read_pauses(capture.pauses_path, notes)
    samples = read_guard_log(capture.guard_path, notes).samples
    readings = [w.peak_c for w in windows] + [s.temp_c for s in samples]
    hottest = max((c for c in readings if c is not None), default=None)
    status = capture.status_read().status
    tally = tally_pauses(windows)
    return GuardFacts(
        recorded=True,
        pauses=tally.pauses,
        failed=tally.failed,
        open_pauses=sum(1 for w in windows if w.end_us is None and w.froze),
        paused_s=paused_wall_s(windows, status) if windows and status is not None else 0.0,
        hottest_c=hottest,
    )


@dataclass(frozen=True)
class AttemptFacts:
    """One attempt as the page shows it."""

    number: int
    status: Optional[RunStatus]
    state: str  # the state, and why it may not be what it says
    broken: Optional[str] = None  # why its status.json cannot be read


@dataclass
class RunPage:
    """Everything `harness status RUN` shows, as plain text (the renderer escapes it)."""

    run: str
    current: Optional[AttemptFacts]
    newest: Optional[AttemptFacts]  # the last attempt started, when it is not the current one
    attempts: int
    rows: list[AttemptRow]
    changes: list[tuple[int, int, list[str]]]  # (attempt, the attempt before it, what changed)
    guard: GuardFacts
    log_attempt: Optional[int]
    log_tail: list[str] = field(default_factory=list)


def run_page(capture: Capture) -> RunPage:
    """The page of the run whose capture (its current attempt) is `capture`."""
    attempts = RunAttempts(run_path_of(capture.directory))
    every = attempts.all()
    current = attempts.current()
    newest = every[-1] if every else None
    facts = {attempt.number: _facts(capture, attempt) for attempt in every}
    changes = []
    for before, after in zip(every, every[1:]):
        old = Capture(before.directory, capture.run).read_manifest()
        new = Capture(after.directory, capture.run).read_manifest()
        changes.append((after.number, before.number, manifest_changes(old, new, form="{} -> {}")))
    shown = current or newest
    return RunPage(
        run=capture.run,
        current=facts.get(current.number) if current is not None else None,
        newest=facts.get(newest.number) if newest is not None and newest != current else None,
        attempts=len(every),
        rows=attempt_rows(capture),
        changes=changes,
        guard=guard_facts(Capture(shown.directory, capture.run)) if shown else GuardFacts(recorded=False),
        log_attempt=newest.number if newest is not None else None,
        log_tail=log_tail(Capture(newest.directory, capture.run)) if newest is not None else [],
    )


def _facts(capture: Capture, attempt: Attempt) -> AttemptFacts:
    found = attempt.status_read()
    if found.status is None:
        return AttemptFacts(attempt.number, None, "broken", found.broken or "no status.json")
    return AttemptFacts(attempt.number, found.status, state_text(Capture(attempt.directory, capture.run), found.status))


def summary_line(facts: AttemptFacts) -> str:
    """`interrupted, 1/2 steps complete (interrupted by SIGINT), exit code 130 (trainer 143), ran 0:04`."""
    status = facts.status
    if status is None:
        return f"broken: {facts.broken}"
    reason = f" ({status.error})" if status.error and status.error not in facts.state else ""
    return (
        f"{facts.state}, {status.steps_complete}/{status.steps_expected} steps complete{reason}, "
        f"exit code {exit_code_text(status)}, started {status.started_at[:19].replace('T', ' ')}, "
        f"ran {duration_text(status)}"
    )


def log_tail(capture: Capture, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last `lines` lines of the attempt's container.log, without their receive-time prefixes."""
    try:
        with open_regular(capture.log_path) as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - LOG_TAIL_BYTES))
            data = handle.read(LOG_TAIL_BYTES)
    except (OSError, Unreadable):
        return []
    text = data.decode("utf-8", "replace").splitlines()
    if size > LOG_TAIL_BYTES:
        text = text[1:]  # the first line read is cut at its start
    return [line.split(" ", 1)[-1] for line in text[-lines:]]
