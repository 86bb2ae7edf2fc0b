"""Reading what Miles prints: line reader, step merger, argument dump, failures.

Miles (and slime) print their metrics as Python dict reprs on log lines; each
module's docstring describes the shapes it reads. Entry points:

- `LogParser`: `feed(line)` one line at a time (the runner's live path) or
  `feed_stream(binary_stream)`; each returns the steps completed by what it
  read; `finish()` flushes the open steps as incomplete; `result()` gives the
  whole `ParsedLog`.
- `parse_lines(lines)` / `parse_file(path_or_binary_stream)`: batch, same result.
- `StepRecord.to_json()`: the per-step shape of `harness parse-log --json`;
  `to_json(include_derived=False)` is a metrics.jsonl line.
- `derive_step_values(metrics)`: dropped and zero-variance groups by kind.
- `keys`: the Miles rules (metric names, which reward, the step-time
  fallback, when the filter is on) that progress, `parse-log` and the
  summary share.
"""

from harness.mileslog import keys
from harness.mileslog.derive import derive_step_values
from harness.mileslog.parser import LogParser, parse_file, parse_lines
from harness.mileslog.pyrepr import ReprError, parse_dict_repr, parse_repr
from harness.mileslog.records import EvalRecord, ParsedLog, StepRecord

__all__ = [
    "EvalRecord",
    "LogParser",
    "ParsedLog",
    "ReprError",
    "StepRecord",
    "derive_step_values",
    "keys",
    "parse_dict_repr",
    "parse_file",
    "parse_lines",
    "parse_repr",
]
