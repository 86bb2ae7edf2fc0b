"""metrics.jsonl as columns: the reader's fast path for the summary and the export.

The same file, rules and notes as every other read of step rows (one record
per rollout id, the last line per step winning, sorted by step; a bad line is
a note naming the file and the line), through the reader's bounded line
iterator. Only faster:

- a line is decoded by orjson; a line orjson refuses (NaN or Infinity from
  captures older than strict JSON, numbers beyond a double, nesting past
  1,024 levels, lone surrogates) goes to the reader's own `loads_json`, which
  has the last word, so what is read does not depend on the decoder;
- the times of all lines are parsed as one column (`harness.times.parse_times_us`);
- the steps stay columns (lists side by side), so the summary takes the keys
  it needs as columns instead of walking a record per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import orjson

from harness.capture.reader import iter_jsonl, loads_json
from harness.capture.records import StepRow
from harness.times import parse_times_us

_TIME_KEYS = ("t_rollout_end", "t_step_end")


def loads_line(data: bytes) -> Any:
    """One JSONL line: orjson where it can, else the reader's `loads_json` (ValueError for what is not JSON)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return loads_json(data)


@dataclass
class MetricsColumns:
    """The step records of one metrics.jsonl as columns, sorted by step, one entry per step."""

    step: list[int]
    complete: list[bool]
    t_rollout_end_us: list[Optional[int]]
    t_step_end_us: list[Optional[int]]
    metrics: list[dict[str, Any]]
    line: list[int]

    def __len__(self) -> int:
        return len(self.step)

    def keys(self) -> set[str]:
        """Every metric key logged in any step."""
        return set().union(*self.metrics)

    def column(self, key: str, missing: Any = None) -> list[Any]:
        """The values of one metric key, step by step; `missing` where a step did not log it."""
        return [metrics.get(key, missing) for metrics in self.metrics]

    def rows(self) -> list[StepRow]:
        """The same records as typed rows (one object per step)."""
        return [StepRow(*values) for values in zip(self.step, self.complete, self.t_rollout_end_us,
                                                      self.t_step_end_us, self.metrics, self.line)]


def read_metrics_columns(path: Path, notes: list[str]) -> MetricsColumns:
    """metrics.jsonl as columns; never raises for its contents (what is odd is a note naming the line)."""
    name = Path(path).name
    bad_lines: list[str] = []
    objects: list[tuple[int, dict, int]] = []  # (line number, object, bad-line notes said before it)
    for number, obj in iter_jsonl(Path(path), bad_lines, loads=loads_line):
        objects.append((number, obj, len(bad_lines)))
    times = {key: parse_times_us([obj.get(key) for _, obj, _ in objects]) for key in _TIME_KEYS}

    index_of: dict[int, int] = {}  # step -> its position in the lists below (the last line wins)
    steps: list[int] = []
    completes: list[bool] = []
    ends: list[Optional[int]] = []
    step_ends: list[Optional[int]] = []
    metrics_of: list[dict[str, Any]] = []
    lines: list[int] = []
    non_finite: dict[str, list[int]] = {}  # "key (nan)" -> steps: the parser wrote null where the log said nan/inf
    said = 0
    for i, (number, obj, bad_before) in enumerate(objects):
        if bad_before > said:
            notes.extend(bad_lines[said:bad_before])
            said = bad_before
        step = obj.get("step")
        if type(step) is not int:  # bool is a subclass of int, not this type
            notes.append(f"{name} line {number}: no integer step: skipped")
            continue
        metrics = obj.get("metrics")
        if type(metrics) is not dict:
            notes.append(f"{name} line {number}: step {step} has no metrics object: read as empty")
            metrics = {}
        end, step_end = times["t_rollout_end"][i], times["t_step_end"][i]
        for key, parsed in (("t_rollout_end", end), ("t_step_end", step_end)):
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
            ends.append(end)
            step_ends.append(step_end)
            metrics_of.append(metrics)
            lines.append(number)
        else:
            notes.append(f"{name}: step {step} on lines {lines[at]} and {number}: the last is used")
            completes[at], ends[at], step_ends[at], metrics_of[at], lines[at] = complete, end, step_end, metrics, number
    notes.extend(bad_lines[said:])
    for what, marked_steps in non_finite.items():
        shown = ", ".join(str(s) for s in marked_steps[:10])
        if len(marked_steps) > 10:
            shown += f" and {len(marked_steps) - 10} more"
        notes.append(f"{name}: {what} in the log at step {shown}: read as null")

    order = sorted(range(len(steps)), key=steps.__getitem__)
    if order != list(range(len(steps))):
        steps, completes, ends, step_ends, metrics_of, lines = (
            [column[i] for i in order] for column in (steps, completes, ends, step_ends, metrics_of, lines))
    return MetricsColumns(steps, completes, ends, step_ends, metrics_of, lines)
