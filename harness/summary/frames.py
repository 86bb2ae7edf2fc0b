"""One capture, read for the summary: the run's facts, checked, its span, its pause windows, its step columns.

Everything here comes from one run's files alone, so a bad run can only
change its own part of the summary. What is odd becomes a note naming the
file, the key and the value (docs/summary.md, "Sanity rules").

- State: status.json's; `unknown` when it cannot be read; a state that is
  not `succeeded` is said.
- `time_scale`: the manifest's, within 1e-6 to 1e6; where the manifest has
  none that is, the one the simulator printed in the first line of
  container.log; otherwise unknown (None), said.
- The span: `started_at` to `ended_at` (either may be unknown).
- Pause windows, in integer microseconds: an open window in a finished run
  ends at the first time after it (a line of container.log, a step's end
  time; a frozen run prints nothing), or at the run's end; in a run without an
  end time, at the last time in the capture. A window that ends before it
  starts is left out; a window reaching outside the span is clipped to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from harness.capture.columns import MetricsColumns
from harness.capture.reader import LOG_NAME, RUNNING_AGAIN_SLACK_US, RunCapture, first_stamps_after, sim_time_scale
from harness.capture.records import STATES, PauseTally, PauseWindow, tally_pauses
from harness.guard.samples import PLAUSIBLE_C
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

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue


@dataclass
class RunFrame:
    """One run's facts and step columns, ready for the rows."""

    name: str
    state: str
    experiment: Optional[str]
    seed: Optional[int]
    steps_expected: Optional[int]
    time_scale: Optional[float]  # None: unknown (neither the manifest nor the simulator's first line says)
    config: RunConfig
    span: Span
    first_time_us: Optional[int]  # the earliest time in the capture inside the span (rows count from it)
    windows: list[tuple[int, int]]  # pause windows, closed and clipped, unmerged
    steps: MetricsColumns
    baseline: Optional[str] = None  # the compare block, checked
    baselines: list[str] = field(default_factory=list)
    notes: RunNotes = field(default_factory=RunNotes)
    conditions: Optional[RunConditions] = None  # simulator or real, time scale, heat guard
    start_temp_c: Optional[float] = None  # the hottest watched temperature as it started (manifest guard.start)
    pauses: PauseTally = PauseTally(0, 0)  # the heat guard's pauses, counted as every output counts them
    start_below_c: Optional[float] = None  # the cooled start it waited for (manifest guard.start.below_c)


def read_frame(capture: RunCapture, config: Optional[RunConfig] = None) -> RunFrame:
    """The frame of one capture; never raises for its contents.

    `config`: the run's configuration when the caller has resolved it already (a live board, once per run).
    """
    notes = RunNotes(capture.notes)
    status = capture.status or {}
    experiment = capture.experiment
    manifest = capture.manifest or {}

    state = _state(capture, notes)
    time_scale = _time_scale(capture, manifest, notes)
    config = config if config is not None else resolve_config(capture, notes)

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
    known = _times_in_span(
        span, steps.t_rollout_end_us, steps.t_step_end_us, [t for p in capture.pauses for t in (p.start_us, p.end_us)]
    )
    windows = _pause_windows(capture, span, known, steps, notes)
    notes.extend(failed_pause_note(window) for window in capture.pauses if window.failed is not None)
    name = experiment.get("name")
    return RunFrame(
        name=capture.name,
        state=state,
        experiment=name if isinstance(name, str) else None,
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
        start_temp_c=_start_temp(manifest, notes),
        pauses=tally_pauses(capture.pauses),
        start_below_c=_start_fact(manifest, "below_c", notes),
    )


FAILED_PAUSE_THEN = {
    "stop": "it stopped the run (guard.on_pause_failure: stop)",
    "continue": "it went on unpaused (guard.on_pause_failure: continue)",
}


def failed_pause_note(window: PauseWindow) -> str:
    """`at <time> the heat guard could not pause the run at 95.1 C: <the engine's words>; it stopped the run ...`."""
    at = f" at {window.peak_c:.1f} C" if window.peak_c is not None else f" ({window.reason})" if window.reason else ""
    then = FAILED_PAUSE_THEN.get(window.on_pause_failure or "")
    return f"at {format_time_us(window.start_us)} the heat guard could not pause the run{at}: {window.failed}" + (
        f"; {then}" if then else ""
    )


def _start_temp(manifest: JSONObject, notes: RunNotes) -> Optional[float]:
    """The manifest's `guard.start.hottest_c` (the cooled start's end), when it is a believable temperature."""
    return _start_fact(manifest, "hottest_c", notes)


def _start_fact(manifest: JSONObject, key: str, notes: RunNotes) -> Optional[float]:
    """A temperature of the manifest's `guard.start` (`hottest_c`, `below_c`), when it is a believable one."""
    guard = manifest.get("guard")
    start = guard.get("start") if isinstance(guard, dict) else None
    value = start.get(key) if isinstance(start, dict) else None
    if value is None:
        return None
    low, high = PLAUSIBLE_C
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        notes.flag(f"manifest.json guard.start.{key} {shown(value)} is not a temperature: unknown")
        return None
    return float(value)


def _state(capture: RunCapture, notes: RunNotes) -> str:
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
        notes.append(
            f"state {state}" + (f" ({'; '.join(detail)})" if detail else "") + f": summarized as captured{so_far}"
        )
    return state


def _time_scale(capture: RunCapture, manifest: JSONObject, notes: RunNotes) -> Optional[float]:
    """The manifest's time scale; else the simulator's, from its first line; else None (unknown), said."""
    say = notes.append  # a value out of range is flagged; a missing one is not a value
    if capture.manifest is None:
        notes.append("without manifest.json: experiment, seed and compare unknown")
        why = "no manifest.json"
    elif "time_scale" not in manifest:
        why = "manifest.json has no time_scale"
    else:
        say = notes.flag
        time_scale = manifest["time_scale"]
        problem = time_scale_problem(time_scale)
        if problem is None and isinstance(time_scale, (int, float)):  # no problem: it is a number
            return time_scale
        why = f"manifest.json time_scale {shown(time_scale)} {problem}"
    printed = sim_time_scale(capture.directory / LOG_NAME, notes) if capture.directory is not None else None
    if printed is not None:
        text, line = printed
        scale = _number(text)
        problem = time_scale_problem(scale) if scale is not None else "is not a number"
        if problem is None:
            say(f"{why}: the time scale the simulator printed, {text} ({LOG_NAME} line {line}), is used")
            return scale
        why += f", and the time scale the simulator printed, {text} ({LOG_NAME} line {line}), {problem}"
        say = notes.flag
    say(
        f"{why}: time scale unknown, so no pause overlap and no adjusted rollout time where the run has pause "
        "windows (time_scale 1 written: pause_total_s in wall seconds)"
    )
    return None


def _number(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def _count(value: JSONValue, where: str, notes: RunNotes) -> Optional[int]:
    """A count from a capture file: a whole number from 0 to 2^53; a note for one out of that range."""
    if not is_integer(value):
        return None
    if exact_int(value) is None or value < 0:
        notes.flag(f"{where} {shown(value)} is out of range: unknown")
        return None
    return value


def _span(status: JSONObject, notes: RunNotes) -> Span:
    bounds = []
    for key in ("started_at", "ended_at"):
        value = status.get(key)
        micros = parse_time_us(value)
        if value is not None and micros is None:
            notes.append(f"status.json {key} {shown(value)} is not an RFC 3339 time")
        bounds.append(micros)
    start, end = bounds
    if start is not None and end is not None and end < start:
        notes.flag(
            f"status.json ended_at {format_time_us(end)} is before started_at {format_time_us(start)}: "
            "the run's span is unknown"
        )
        return Span(None, None)
    return Span(start, end)


def _times_in_span(span: Span, *columns: list[Optional[int]]) -> list[int]:
    """The times of the columns that lie in the span."""
    low = span.start_us if span.start_us is not None else -math.inf
    high = span.end_us if span.end_us is not None else math.inf
    return [t for column in columns for t in column if t is not None and low <= t <= high]


def _steps_in_range(steps: MetricsColumns, notes: RunNotes) -> MetricsColumns:
    """The step records whose step id is a rollout id, from 0 to 2^53 (a note for each other one).

    Miles counts rollouts from 0: a step -1 is no rollout, and would count in
    every median and mean (and be the first of `reward_mean_first4`).
    """
    if not steps.step or (min(steps.step) >= 0 and max(steps.step) <= MAX_EXACT_INT):
        return steps
    bad = [i for i, step in enumerate(steps.step) if exact_int(step) is None or step < 0]
    for i in bad:
        why = "is beyond 2^53" if exact_int(steps.step[i]) is None else "is not a rollout id (Miles counts from 0)"
        notes.flag(f"metrics.jsonl line {steps.line[i]}: step {shown(steps.step[i])} {why}: skipped")
    keep = set(range(len(steps))) - set(bad)
    return steps.select(sorted(keep))


def _pause_windows(
    capture: RunCapture, span: Span, known: list[int], steps: MetricsColumns, notes: RunNotes
) -> list[tuple[int, int]]:
    """The closed, clipped pause windows of the run (docstring rules), in the order logged."""
    windows: list[tuple[int, int]] = []
    ends = _open_window_ends(capture, span.end_us, steps, notes) if span.end_us is not None else {}
    for pause in capture.pauses:
        end = pause.end_us
        if end is None:
            if span.end_us is not None:
                end, what = ends[pause.start_us]
                notes.append(
                    f"pause window opened at {format_time_us(pause.start_us)} never closed: a frozen run prints "
                    f"nothing, so it is counted up to {what}, {format_time_us(end)}"
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
                notes.flag(
                    f"pauses.jsonl line {pause.line}: window {logged} lies outside the run ({span.text()}): left out"
                )
                continue
            notes.flag(
                f"pauses.jsonl line {pause.line}: window {logged} reaches outside the run "
                f"({span.text()}): clipped to it"
            )
        windows.append((start, clipped_end))
    return windows


def _open_window_ends(
    capture: RunCapture, end_us: int, steps: MetricsColumns, notes: list[str]
) -> dict[int, tuple[int, str]]:
    """For each open window of a finished run (one that ended at `end_us`), (where it ends, what that time is).

    A frozen run prints nothing, so the window ends at the latest at the first
    time after it that the run printed: a line of container.log, a step's
    t_rollout_end or t_step_end (each the receive time of a line); else at the
    run's end. A time within `RUNNING_AGAIN_SLACK_US` of the window's start does not
    count: the window is written just before the run is frozen, and the
    engine's clock is not the harness's.
    """
    starts = [pause.start_us for pause in capture.pauses if pause.end_us is None]
    if not starts:
        return {}
    after = {start: start + RUNNING_AGAIN_SLACK_US for start in starts}
    logged = (
        first_stamps_after(capture.directory / LOG_NAME, list(after.values()), notes)
        if capture.directory is not None
        else {}
    )
    step_times = sorted(
        (t, step, key)
        for key, column in (("t_rollout_end", steps.t_rollout_end_us), ("t_step_end", steps.t_step_end_us))
        for t, step in zip(column, steps.step)
        if t is not None
    )
    ends: dict[int, tuple[int, str]] = {}
    for start, bound in after.items():
        candidates = [(end_us, "the run's end")]
        if bound in logged:
            stamp, line = logged[bound]
            candidates.append((stamp, f"the next line of {LOG_NAME} (line {line})"))
        later = next(((t, step, key) for t, step, key in step_times if t > bound), None)
        if later is not None:
            candidates.append((later[0], f"step {later[1]}'s {later[2]}"))
        ends[start] = min(candidates, key=lambda candidate: candidate[0])
    return ends
