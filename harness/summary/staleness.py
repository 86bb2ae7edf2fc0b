"""Whether a summary still describes the captures under its root, from the captures' own facts.

A summary records, per run, the attempt it read and that attempt's
`started_at`, and the run's state. The captures are current when each run's
current attempt is the one read, in the state read, and no run was added or
removed; a run still `running` has moved on by definition. A summary written
before runs recorded their attempt is judged by state and by whether any
capture started after the summary was generated (RFC 3339 times of the
files' own, not modification times).

`captures_now` reads what decides it (each run's link and status.json:
cheap); `changes_since` decides. `harness report` summarizes first when
there is a change, so that no report mixes two attempts of a run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from harness.capture.reader import current_attempt, find_runs, read_status
from harness.summary.document import SummaryDocument
from harness.times import parse_time_us

NOT_STARTED = "not_started"  # a start that made no run: summarize skips it, so it is never a change


@dataclass(frozen=True)
class CaptureNow:
    """A run's current capture, as far as staleness goes."""

    attempt: Optional[int]
    started_at: Optional[str]
    state: Optional[str]  # None: status.json unreadable


def captures_now(capture_dir: Path) -> dict[str, CaptureNow]:
    """Each run under `capture_dir`: its current attempt, that attempt's start and state."""
    runs, _ = find_runs(capture_dir)
    out: dict[str, CaptureNow] = {}
    for path in runs:
        directory, attempt = current_attempt(os.fspath(path), path.name)
        status = read_status(Path(directory)).status
        out[path.name] = CaptureNow(
            attempt,
            status.started_at if status is not None else None,
            str(status.state) if status is not None else None,
        )
    return out


def changes_since(document: SummaryDocument, now: Mapping[str, CaptureNow]) -> list[str]:
    """What changed in the captures since `document` was made, one phrase each (none: it is current)."""
    changes: list[str] = []
    skipped = {s.directory for s in document.skipped}
    for run, capture in now.items():
        summarized = document.runs.get(run)
        if summarized is None:
            if run not in skipped and capture.state != NOT_STARTED:
                changes.append(f"{run} is not in it")
            continue
        state = capture.state or "unknown"
        if summarized.attempt is not None and capture.attempt is not None and summarized.attempt != capture.attempt:
            changes.append(
                f"{run}: attempt {capture.attempt} is current, the summary read attempt {summarized.attempt}"
            )
        elif summarized.started_at is not None and capture.started_at != summarized.started_at:
            changes.append(
                f"{run}: its capture started at {capture.started_at}, the summary's at {summarized.started_at}"
            )
        elif summarized.attempt is None and _after(capture.started_at, document.generated_at):
            changes.append(f"{run}: its capture started at {capture.started_at}, after the summary")
        elif state != summarized.state:
            changes.append(f"{run} is {state}, {summarized.state} in the summary")
        elif state == "running":
            changes.append(f"{run} is still running")
    changes += [f"{run}'s capture is gone" for run in document.runs if run not in now]
    return changes


def _after(time: Optional[str], reference: str) -> bool:
    """`time` later than `reference` (both RFC 3339); False when either cannot be read."""
    at, then = parse_time_us(time), parse_time_us(reference)
    return at is not None and then is not None and at > then
