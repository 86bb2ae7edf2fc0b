"""One capture, read for the summary: the run's facts, checked, its span, its pause windows, its step columns.

Everything here comes from one run's files alone, so a bad run can only
change its own part of the summary. What is odd becomes a note naming the
file, the key and the value (docs/summary.md, "Sanity rules").

- State: status.json's; `unknown` when it cannot be read; a state that is
  not `succeeded` is said.
- `time_scale`: the manifest's, within 1e-6 to 1e6; otherwise 1, said.
- The span: `started_at` to `ended_at` (either may be unknown).
- Pause windows, in integer microseconds: an open window ends at the run's
  end, or for a run without one at the last time in the capture; a window that
  ends before it starts is left out; a window reaching outside the span is
  clipped to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.capture.columns import MetricsColumns
from harness.capture.reader import RunCapture
from harness.capture.records import STATES
from harness.summary.conditions import RunConditions, read_conditions
from harness.summary.notes import RunNotes, shown
from harness.summary.run_config import RunConfig, resolve_config
from harness.summary.sanity import (
    MAX_EXACT_INT,
    Span,
    compare_problems,
    exact_int,
    is_integer,
    out_of_range_int,
    time_scale_problem,
)
from harness.times import format_time_us, parse_time_us


@dataclass
class RunFrame:
    """One run's facts and step columns, ready for the rows."""

    name: str
    state: str
    experiment: Optional[str]
    seed: Optional[int]
    steps_expected: Optional[int]
    time_scale: float
    config: RunConfig
    span: Span
    first_time_us: Optional[int]  # the earliest time in the capture inside the span (rows count from it)
    windows: list[tuple[int, int]]  # pause windows, closed and clipped, unmerged
    steps: MetricsColumns
    baseline: Optional[str] = None  # the compare block, checked
    baselines: list[str] = field(default_factory=list)
    notes: RunNotes = field(default_factory=RunNotes)
    conditions: Optional[RunConditions] = None  # simulator or real, time scale, heat guard


def read_frame(capture: RunCapture) -> RunFrame:
    """The frame of one capture; never raises for its contents."""
    notes = RunNotes(capture.notes)
    status = capture.status or {}
    experiment = capture.experiment
    manifest = capture.manifest or {}

    state = _state(capture, notes)
    time_scale = _time_scale(capture, manifest, notes)
    config = resolve_config(capture, notes)

    seed = experiment.get("seed")
    if out_of_range_int(seed):
        notes.flag(f"manifest.json experiment.seed {shown(seed)} is beyond 2^53: unknown")
    seed = exact_int(seed)
    steps_expected = _count(status.get("steps_expected"), "status.json steps_expected", notes)
    if steps_expected is None:
        steps_expected = _count(experiment.get("steps"), "manifest.json experiment.steps", notes)
    baseline, baselines, problems = compare_problems(experiment.get("compare"))
    for problem in problems:
        notes.flag(f"manifest.json experiment.{problem}")

    span = _span(status, notes)
    steps = _steps_in_range(capture.steps, notes)
    known = _times_in_span(span, steps.t_rollout_end_us, steps.t_step_end_us,
                           [t for p in capture.pauses for t in (p.start_us, p.end_us)])
    windows = _pause_windows(capture, span, known, notes)
    return RunFrame(
        name=capture.name,
        state=state,
        experiment=experiment.get("name") if isinstance(experiment.get("name"), str) else None,
        seed=seed,
        steps_expected=steps_expected,
        time_scale=time_scale,
        config=config,
        span=span,
        first_time_us=min(known) if known else None,
        windows=windows,
        steps=steps,
        baseline=baseline,
        baselines=baselines,
        notes=notes,
        conditions=read_conditions(capture.manifest, time_scale),
    )


def _state(capture: RunCapture, notes: list[str]) -> str:
    status = capture.status or {}
    state = status.get("state") if capture.status is not None else "unknown"
    if state not in STATES and state != "unknown":
        notes.flag(f"status.json state {shown(state)} is not one the contract knows: read as unknown")
        state = "unknown"
    if isinstance(status.get("run"), str) and status["run"] != capture.name:
        notes.append(f"status.json names the run {status['run']!r}, but its directory is {capture.name!r}")
    if state not in ("succeeded", "unknown"):
        detail = []
        if status.get("exit_code") is not None:
            detail.append(f"exit code {shown(status['exit_code'])}")
        if status.get("error"):
            detail.append(str(status["error"]))
        so_far = " so far" if state == "running" else ""
        notes.append(f"state {state}" + (f" ({'; '.join(detail)})" if detail else "") + f": summarized as captured{so_far}")
    return state


def _time_scale(capture: RunCapture, manifest: dict[str, Any], notes: list[str]) -> float:
    time_scale = manifest.get("time_scale", 1) if capture.manifest is not None else 1
    problem = time_scale_problem(time_scale)
    if problem:
        notes.flag(f"manifest.json time_scale {shown(time_scale)} {problem}: 1 used (durations read as wall seconds)")
        time_scale = 1
    if capture.manifest is None:
        notes.append("without manifest.json: experiment, seed and compare unknown, time_scale taken as 1")
    return time_scale


def _count(value: Any, where: str, notes: list[str]) -> Optional[int]:
    """A count from a capture file: a whole number from 0 to 2^53; a note for one out of that range."""
    if not is_integer(value):
        return None
    if exact_int(value) is None or value < 0:
        notes.flag(f"{where} {shown(value)} is out of range: unknown")
        return None
    return value


def _span(status: dict[str, Any], notes: list[str]) -> Span:
    bounds = []
    for key in ("started_at", "ended_at"):
        value = status.get(key)
        micros = parse_time_us(value)
        if value is not None and micros is None:
            notes.append(f"status.json {key} {shown(value)} is not an RFC 3339 time")
        bounds.append(micros)
    start, end = bounds
    if start is not None and end is not None and end < start:
        notes.flag(f"status.json ended_at {format_time_us(end)} is before started_at {format_time_us(start)}: "
                     "the run's span is unknown")
        return Span(None, None)
    return Span(start, end)


def _times_in_span(span: Span, *columns: list[Optional[int]]) -> list[int]:
    """The times of the columns that lie in the span."""
    low = span.start_us if span.start_us is not None else -math.inf
    high = span.end_us if span.end_us is not None else math.inf
    return [t for column in columns for t in column if t is not None and low <= t <= high]


def _steps_in_range(steps: MetricsColumns, notes: RunNotes) -> MetricsColumns:
    """The step records whose step id is within +-2^53 (a note for each other one)."""
    if not steps.step or (min(steps.step) >= -MAX_EXACT_INT and max(steps.step) <= MAX_EXACT_INT):
        return steps
    bad = [i for i, step in enumerate(steps.step) if exact_int(step) is None]
    for i in bad:
        notes.flag(f"metrics.jsonl line {steps.line[i]}: step {shown(steps.step[i])} is beyond 2^53: skipped")
    return steps.select([i for i in range(len(steps)) if exact_int(steps.step[i]) is not None])


def _pause_windows(capture: RunCapture, span: Span, known: list[int], notes: list[str]) -> list[tuple[int, int]]:
    """The closed, clipped pause windows of the run (docstring rules), in the order logged."""
    windows: list[tuple[int, int]] = []
    for pause in capture.pauses:
        end = pause.end_us
        if end is None:
            if span.end_us is not None:
                end = span.end_us
                notes.append(
                    f"pause window opened at {format_time_us(pause.start_us)} never closed: "
                    f"counted up to the run's end, {format_time_us(end)}"
                )
            elif known:
                end = max(known)
                notes.append(
                    f"pause window opened at {format_time_us(pause.start_us)} is open and the run has no end "
                    f"time: counted up to the last time in the capture, {format_time_us(end)}"
                )
            else:
                notes.append(f"pauses.jsonl line {pause.line}: open window and no time to end it at: left out")
                continue
        if end < pause.start_us:
            notes.append(f"pauses.jsonl line {pause.line}: window ends before it starts: left out")
            continue
        start, clipped_end = span.clip(pause.start_us, end)
        if (start, clipped_end) != (pause.start_us, end) and end > pause.start_us:
            logged = f"{format_time_us(pause.start_us)} to {format_time_us(end)}"
            if clipped_end == start:
                notes.flag(f"pauses.jsonl line {pause.line}: window {logged} lies outside the run "
                             f"({span.text()}): left out")
                continue
            notes.flag(f"pauses.jsonl line {pause.line}: window {logged} reaches outside the run "
                         f"({span.text()}): clipped to it")
        windows.append((start, clipped_end))
    return windows
