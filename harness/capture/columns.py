"""The capture's JSONL files as columns: the reader's fast path for the summary and the export.

The same files, rules and notes as a line-by-line read (metrics.jsonl: one
record per rollout id, the last line per step winning, sorted by step;
pauses.jsonl: the last line per window start winning; a bad line is a note
naming the file and the line), through the reader's bounded line iterator.
Only faster:

- a file as the harness writes it (every line a JSON object, ending on a
  newline) is read at once and decoded line by line by orjson in one pass;
- otherwise a line is decoded by orjson; a line orjson refuses (NaN or Infinity from
  captures older than strict JSON, numbers beyond a double, nesting past
  1,024 levels, lone surrogates) goes to the reader's own `loads_json`, which
  has the last word, so what is read does not depend on the decoder;
- the times of all lines are parsed as one column (`harness.times.parse_times_us`);
- a file whose every line is as the harness writes it is taken in a few
  passes over whole columns; any odd line sends the file through the
  line-by-line rules, which say what is odd;
- the steps stay columns (lists side by side), so the summary takes the keys
  it needs as columns instead of walking a record per step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence, TypeGuard, TypeVar, overload

import orjson

from harness.capture.records import PauseWindow, StepRow
from harness.fs.bounded import (
    MAX_LINE_BYTES,
    Unreadable,
    iter_jsonl,
    loads_json,
    orjson_reads_as_json,
    read_bounded,
)
from harness.fs.files import PathLike
from harness.mileslog.keys import finite_number
from harness.times import parse_times_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

WHOLE_FILE_BYTES = 256 << 20  # a file up to this size is read at once; a larger one line by line


def loads_line(data: bytes) -> JSONValue:
    """One JSONL line by the reader's one rule, `loads_json` (orjson where it reads as the standard reader would;
    ValueError for what is not JSON)."""
    return loads_json(data)


Missing = TypeVar("Missing")


@dataclass
class MetricsColumns:
    """The step records of one metrics.jsonl as columns, sorted by step, one entry per step."""

    step: list[int]
    complete: list[bool]
    t_rollout_end_us: list[Optional[int]]
    t_step_end_us: list[Optional[int]]
    metrics: list[JSONObject]
    line: list[int]

    def __len__(self) -> int:
        return len(self.step)

    def keys(self) -> set[str]:
        """Every metric key logged in any step."""
        return set().union(*self.metrics)

    @overload
    def column(self, key: str) -> list[JSONValue]: ...
    @overload
    def column(self, key: str, missing: Missing) -> list[JSONValue | Missing]: ...
    def column(self, key: str, missing: Optional[Missing] = None) -> list[JSONValue | Missing]:
        """The values of one metric key, step by step; `missing` where a step did not log it."""
        return [metrics.get(key, missing) for metrics in self.metrics]

    @overload
    def columns(self, keys: Sequence[str]) -> list[list[JSONValue]]: ...
    @overload
    def columns(self, keys: Sequence[str], missing: Missing) -> list[list[JSONValue | Missing]]: ...
    def columns(self, keys: Sequence[str], missing: Optional[Missing] = None) -> list[list[JSONValue | Missing]]:
        """`column` for several keys, in one pass over the steps."""
        if not self.metrics or not keys:
            return [[] for _ in keys]
        logged = self.keys()
        present = [key for key in keys if key in logged]
        found: dict[str, list[JSONValue | Missing]] = {}
        if present:
            try:  # the usual case: every step logged every key that any step logged
                rows = list(map(itemgetter(*present), self.metrics))
            except KeyError:
                fill = [missing] * len(present)
                rows = [tuple(map(m.get, present, fill)) for m in self.metrics]
            else:
                rows = rows if len(present) > 1 else [(value,) for value in rows]
            found = {key: list(column) for key, column in zip(present, zip(*rows))}
        return [found[key] if key in found else [missing] * len(self) for key in keys]

    def rows(self) -> list[StepRow]:
        """The same records as typed rows (one object per step)."""
        return [
            StepRow(*values)
            for values in zip(
                self.step, self.complete, self.t_rollout_end_us, self.t_step_end_us, self.metrics, self.line
            )
        ]

    def select(self, positions: Sequence[int]) -> "MetricsColumns":
        """The records at `positions`, in that order."""
        return MetricsColumns(
            [self.step[i] for i in positions],
            [self.complete[i] for i in positions],
            [self.t_rollout_end_us[i] for i in positions],
            [self.t_step_end_us[i] for i in positions],
            [self.metrics[i] for i in positions],
            [self.line[i] for i in positions],
        )


@dataclass
class _Lines:
    """The good lines of a JSONL file, and where its bad-line notes fall among them."""

    numbers: list[int]
    objects: list[JSONObject]
    bad_notes: list[str]
    bad_before: list[int]  # for each good line: how many bad-line notes come before it

    def clean(self) -> bool:
        return not self.bad_notes

    def notes_until(self, said: int, i: int, notes: list[str]) -> int:
        """Say the bad-line notes that come before good line `i`; returns how many are said."""
        before = self.bad_before[i]
        if before > said:
            notes.extend(self.bad_notes[said:before])
        return max(said, before)


def _read_lines(path: PathLike) -> _Lines:
    """The good lines of a JSONL file: the whole file at once when it is as the harness writes it, else line by line."""
    whole = _read_whole(path)
    return whole if whole is not None else _read_line_by_line(path)


def _read_whole(path: PathLike) -> Optional[_Lines]:
    """Every line of a file that ends on a newline and whose every line is a JSON object orjson reads; else None.

    A file that is absent is empty. Anything else (too large to take at once,
    not a regular file, a blank, long, torn or bad line) is for the line-by-line
    read, which says what it found.
    """
    try:
        data = read_bounded(path, WHOLE_FILE_BYTES)
    except FileNotFoundError:
        return _Lines([], [], [], [])
    except Unreadable:
        return None
    if not data.endswith(b"\n"):
        return None if data else _Lines([], [], [], [])
    lines = data.split(b"\n")
    lines.pop()  # after the last newline
    if max(map(len, lines)) > MAX_LINE_BYTES or not min(map(len, lines)) or not orjson_reads_as_json(data):
        return None
    try:
        objects = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:
        return None
    if set(map(type, objects)) != {dict}:
        return None
    return _Lines(list(range(1, len(objects) + 1)), objects, [], [0] * len(objects))


def _read_line_by_line(path: PathLike) -> _Lines:
    numbers: list[int] = []
    objects: list[JSONObject] = []
    bad_notes: list[str] = []
    bad_before: list[int] = []
    for number, obj in iter_jsonl(Path(path), bad_notes, loads=loads_line):
        numbers.append(number)
        objects.append(obj)
        bad_before.append(len(bad_notes))
    return _Lines(numbers, objects, bad_notes, bad_before)


def _parse_two_columns(
    first: list[JSONValue], second: list[JSONValue]
) -> tuple[list[Optional[int]], list[Optional[int]]]:
    """`parse_times_us` of two columns, in one call (a call costs as much as many values)."""
    parsed = parse_times_us(first + second)
    return parsed[: len(first)], parsed[len(first) :]


def read_metrics_columns(path: PathLike, notes: list[str]) -> MetricsColumns:
    """metrics.jsonl as columns; never raises for its contents (what is odd is a note naming the line)."""
    lines = _read_lines(path)
    objects = lines.objects
    raw_ends = [obj.get("t_rollout_end") for obj in objects]
    raw_step_ends = [obj.get("t_step_end") for obj in objects]
    ends, step_ends = _parse_two_columns(raw_ends, raw_step_ends)
    steps = [obj.get("step") for obj in objects]
    metrics = [obj.get("metrics") for obj in objects]
    complete = [obj.get("complete") for obj in objects]
    if (  # as the harness writes it
        lines.clean()
        and _ints(steps)
        and _objects(metrics)
        and _bools(complete)
        and len(set(steps)) == len(steps)
        and all(p is not None or r is None for p, r in zip(ends, raw_ends))
        and all(p is not None or r is None for p, r in zip(step_ends, raw_step_ends))
        and not any("non_finite" in obj for obj in objects)
    ):
        columns = MetricsColumns(steps, complete, ends, step_ends, metrics, lines.numbers)
        order = sorted(range(len(steps)), key=steps.__getitem__)
        return columns if order == list(range(len(steps))) else columns.select(order)
    return _metrics_line_by_line(Path(path).name, lines, ends, step_ends, notes)


def _ints(values: list[JSONValue]) -> TypeGuard[list[int]]:
    return set(map(type, values)) <= {int}


def _bools(values: list[JSONValue]) -> TypeGuard[list[bool]]:
    return set(map(type, values)) <= {bool}


def _objects(values: list[JSONValue]) -> TypeGuard[list[JSONObject]]:
    return set(map(type, values)) <= {dict}


def _metrics_line_by_line(
    name: str, lines: _Lines, ends: list[Optional[int]], step_ends: list[Optional[int]], notes: list[str]
) -> MetricsColumns:
    index_of: dict[int, int] = {}  # step -> its position in the lists below (the last line wins)
    steps: list[int] = []
    completes: list[bool] = []
    kept_ends: list[Optional[int]] = []
    kept_step_ends: list[Optional[int]] = []
    metrics_of: list[JSONObject] = []
    numbers: list[int] = []
    non_finite: dict[str, list[int]] = {}  # "key (nan)" -> steps: the parser wrote null where the log said nan/inf
    said = 0
    for i, (number, obj) in enumerate(zip(lines.numbers, lines.objects)):
        said = lines.notes_until(said, i, notes)
        step = obj.get("step")
        if type(step) is not int:  # bool is a subclass of int, not this type
            notes.append(f"{name} line {number}: no integer step: skipped")
            continue
        metrics = obj.get("metrics")
        if type(metrics) is not dict:
            notes.append(f"{name} line {number}: step {step} has no metrics object: read as empty")
            metrics = {}
        for key, parsed in (("t_rollout_end", ends[i]), ("t_step_end", step_ends[i])):
            if parsed is None and obj.get(key) is not None:
                notes.append(f"{name} line {number}: {key} {obj.get(key)!r} is not an RFC 3339 time: ignored")
        complete = obj.get("complete")
        if type(complete) is not bool:
            notes.append(f"{name} line {number}: step {step} has no boolean 'complete': read as incomplete")
            complete = False
        marked = obj.get("non_finite")
        if type(marked) is dict:
            for key, what in marked.items():
                non_finite.setdefault(f"{key} ({what})", []).append(step)
        at = index_of.get(step)
        if at is None:
            index_of[step] = len(steps)
            steps.append(step)
            completes.append(complete)
            kept_ends.append(ends[i])
            kept_step_ends.append(step_ends[i])
            metrics_of.append(metrics)
            numbers.append(number)
        else:
            notes.append(f"{name}: step {step} on lines {numbers[at]} and {number}: the last is used")
            completes[at] = complete
            kept_ends[at] = ends[i]
            kept_step_ends[at] = step_ends[i]
            metrics_of[at] = metrics
            numbers[at] = number
    notes.extend(lines.bad_notes[said:])
    for what, marked_steps in non_finite.items():
        shown = ", ".join(str(s) for s in marked_steps[:10])
        if len(marked_steps) > 10:
            shown += f" and {len(marked_steps) - 10} more"
        notes.append(f"{name}: {what} in the log at step {shown}: read as null")
    columns = MetricsColumns(steps, completes, kept_ends, kept_step_ends, metrics_of, numbers)
    return columns.select(sorted(range(len(steps)), key=steps.__getitem__))


def read_pause_windows(path: PathLike, notes: list[str]) -> list[PauseWindow]:
    """Pause windows by start time, the last line per start winning (open, then closed); notes for bad lines."""
    lines = _read_lines(path)
    if not lines.objects and lines.clean():  # no pause: the common run's file
        return []
    name = os.path.basename(path)
    raw_starts = [obj.get("start") for obj in lines.objects]
    raw_ends = [obj.get("end") for obj in lines.objects]
    starts, ends = _parse_two_columns(raw_starts, raw_ends)
    by_start: dict[int, PauseWindow] = {}
    said = 0
    for i, (number, obj) in enumerate(zip(lines.numbers, lines.objects)):
        said = lines.notes_until(said, i, notes)
        start = starts[i]
        if start is None:
            notes.append(f"{name} line {number}: start {raw_starts[i]!r} is not an RFC 3339 time: skipped")
            continue
        end = ends[i]
        if raw_ends[i] is not None and end is None:
            notes.append(f"{name} line {number}: end {raw_ends[i]!r} is not an RFC 3339 time: read as still open")
        reason, failed, then = obj.get("reason"), obj.get("failed"), obj.get("on_pause_failure")
        by_start[start] = PauseWindow(
            start,
            end,
            reason if isinstance(reason, str) else "",
            number,
            finite_number(obj.get("peak_c")),
            failed if isinstance(failed, str) else None,
            then if isinstance(then, str) else None,
        )
    notes.extend(lines.bad_notes[said:])
    return [by_start[start] for start in sorted(by_start)]
