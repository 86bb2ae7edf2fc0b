"""A run that lived through several attempts, read as one run: its resume lineage stitched (docs/checkpoints.md,
"A stitched run").

The run's current attempt is the lineage's head (a resumed attempt becomes
current once its resume is verified). Back from it, each resumed attempt
names the attempt it continued and the rollout it continued from. The
stitched run takes:

- each step from the attempt whose lineage produced it: attempt k's steps from
  its own resume point up to the next attempt's; the steps an attempt ran past
  the checkpoint the next one resumed from stay in that attempt, noted as redone;
- each attempt's pause windows (an open one closed at its attempt's end), so
  each step's pause-adjusted rollout time is its own attempt's: no rollout
  spans two attempts, and the time between them is no pause;
- the status of the head, its start the first attempt's;
- the manifest and args of the head.

`links` keeps each attempt's part for the lineage's figures: wall and paused
time per attempt, and the down time between them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from harness.capture.attempts import RunAttempts
from harness.capture.columns import MetricsColumns
from harness.capture.reader import RunCapture, current_attempt, read_capture
from harness.capture.records import PauseWindow
from harness.checkpoints.layout import iteration_name
from harness.checkpoints.lineage import Link, read_resume, resume_chain
from harness.times import parse_time_us


@dataclass(frozen=True)
class StitchedPart:
    """One attempt's part of a stitched run."""

    attempt: int
    capture: RunCapture  # the attempt as read
    first: int  # the first rollout it contributes (its resume point; 0 for the lineage's first)
    until: Optional[int]  # one past the last it contributes (None: to its end)
    redone: list[int]  # rollouts it ran at or past `until`: left in the attempt, not the run's
    resumed_from: Optional[str]  # the checkpoint it loaded (None: the lineage's first)

    @property
    def started_us(self) -> Optional[int]:
        return parse_time_us((self.capture.status or {}).get("started_at"))

    @property
    def ended_us(self) -> Optional[int]:
        return parse_time_us((self.capture.status or {}).get("ended_at"))


@dataclass
class Stitched:
    """The run as one capture, and its parts (one per attempt, oldest first)."""

    capture: RunCapture
    parts: list[StitchedPart] = field(default_factory=list)


def read_run(run_dir: Path) -> Stitched:
    """The run's capture: its current attempt, stitched with the attempts it continues when it is a verified
    resume (a run that never resumed reads exactly as `read_capture` reads it)."""
    run_dir = Path(run_dir)
    directory, number = current_attempt(os.fspath(run_dir), run_dir.name)
    record, _ = read_resume(directory) if number else (None, None)
    if record is None or not record.counts:
        return Stitched(read_capture(run_dir))
    attempts = RunAttempts(run_dir)
    head = next((attempt for attempt in attempts.all() if attempt.number == number), None)
    if head is None:
        return Stitched(read_capture(run_dir))
    links, notes = resume_chain(attempts, head)
    parts = [_part(run_dir.name, link) for link in links]
    return Stitched(_stitch(run_dir.name, parts, notes), parts)


def _part(run: str, link: Link) -> StitchedPart:
    capture = read_capture(link.attempt.directory)
    capture.name, capture.attempt = run, link.attempt.number
    first = link.record.next_rollout_id if link.record is not None else 0
    steps = capture.steps.step
    redone = sorted({step for step in steps if link.until is not None and step >= link.until})
    resumed_from = iteration_name(link.record.iteration) if link.record is not None else None
    return StitchedPart(link.attempt.number, capture, first, link.until, redone, resumed_from)


def _stitch(run: str, parts: list[StitchedPart], chain_notes: list[str]) -> RunCapture:
    head = parts[-1].capture
    columns: list[MetricsColumns] = []
    pauses: list[PauseWindow] = []
    notes: list[str] = list(chain_notes)
    for part in parts:
        steps = part.capture.steps
        keep = [
            i for i, step in enumerate(steps.step) if step >= part.first and (part.until is None or step < part.until)
        ]
        columns.append(steps.select(keep))
        pauses += _closed(part)
        notes += [f"attempt {part.attempt}: {note}" for note in part.capture.notes]
        if part.redone:
            notes.append(
                f"rollout{'s' if len(part.redone) > 1 else ''} {_span(part.redone)} of attempt {part.attempt} redone "
                f"after the resume (attempt "
                f"{_next(parts, part)} continued from rollout {part.until}): not counted"
            )
    status = dict(head.status or {})
    first_status = parts[0].capture.status or {}
    if "started_at" in first_status:
        status["started_at"] = first_status["started_at"]
    stitched = _concat(columns)
    status["steps_complete"] = sum(stitched.complete)
    return replace(head, name=run, status=status, steps=stitched, pauses=pauses, notes=notes)


def _closed(part: StitchedPart) -> list[PauseWindow]:
    """The attempt's pause windows, an open one closed at the attempt's end (an attempt before the head has ended)."""
    windows = part.capture.pauses
    if part.until is None:
        return list(windows)  # the head's: the summary's own rules close an open one
    end = part.ended_us
    times = [t for t in (*part.capture.steps.t_step_end_us, *part.capture.steps.t_rollout_end_us) if t is not None]
    close_at = end if end is not None else (max(times) if times else None)
    closed = []
    for window in windows:
        if window.end_us is None and close_at is not None:
            window = replace(window, end_us=max(close_at, window.start_us))
        closed.append(window)
    return closed


def _concat(columns: list[MetricsColumns]) -> MetricsColumns:
    out = MetricsColumns([], [], [], [], [], [])
    for part in columns:
        out.step += part.step
        out.complete += part.complete
        out.t_rollout_end_us += part.t_rollout_end_us
        out.t_step_end_us += part.t_step_end_us
        out.metrics += part.metrics
        out.line += part.line
    order = sorted(range(len(out.step)), key=lambda i: out.step[i])
    return out.select(order)


def _next(parts: list[StitchedPart], part: StitchedPart) -> int:
    later = [p.attempt for p in parts if p.attempt > part.attempt]
    return later[0] if later else part.attempt


def _span(steps: list[int]) -> str:
    """`6 to 7`, `6`, or `6 to 9 (3 of them)` when not every one in between was run."""
    low, high = steps[0], steps[-1]
    if low == high:
        return str(low)
    said = f"{low} to {high}"
    return said if len(steps) == high - low + 1 else f"{said} ({len(steps)} of them)"
