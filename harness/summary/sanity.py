"""The summary's sanity rules: which values are taken as numbers, and the ranges that make sense.

Pure checks; the callers turn a refusal into a note naming the file, the key
and the value (docs/summary.md, "Sanity rules"):

- numbers are finite: NaN and infinities are not numbers (the parser already
  writes a NaN that Miles printed as null); a computed value that overflows
  becomes null;
- an integer is read only within +-2^53, the integers a float holds exactly
  (a 400-digit integer is not a count, a step id or a rollout time); a count
  lies from 0 to 2^53, a step id from 0;
- `time_scale` lies between 1e-6 and 1e6;
- a step's reward lies within what the run's reward type can give:
  `--rm-type math` 0 to 1; any other type, or none known, -1000 to 1000
  (Miles's rule-based rewards give -1 to 1, a remote reward model's scale is
  its own, and no reward model gives 1e308): one outside is left out of the
  means;
- times lie inside the run's span, from `started_at` to `ended_at`
  (`Span`): pause windows are clipped to it; a rollout that ends outside it,
  or would start before it, is noted. Times are truncated to microseconds and
  the harness's clock and the engine's are not one clock, so a step may reach
  up to `SPAN_SLACK_US` (1 s) beyond the span.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, TypeGuard

from harness.lab.milesnames import RM_TYPE_FLAG
from harness.summary.notes import shown
from harness.times import format_time_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONValue

MAX_EXACT_INT = 2**53
TIME_SCALE_MIN = 1e-6
TIME_SCALE_MAX = 1e6
SPAN_SLACK_US = 1_000_000
NUMBER_FIXED_BELOW = 1e9  # number_text: fixed-point below, exponent form from here
MATH_REWARD_RANGE = (0.0, 1.0)
PLAUSIBLE_REWARD_RANGE = (-1000.0, 1000.0)


def is_integer(value: object) -> TypeGuard[int]:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def exact_int(value: object) -> Optional[int]:
    """The value if it is an integer within +-2^53; None otherwise."""
    return value if is_integer(value) and -MAX_EXACT_INT <= value <= MAX_EXACT_INT else None


def out_of_range_int(value: object) -> bool:
    """True for an integer beyond +-2^53: flagged, never read as a number."""
    return is_integer(value) and not -MAX_EXACT_INT <= value <= MAX_EXACT_INT


def finite(value: object) -> Optional[float]:
    """A float that is finite, or None."""
    return value if isinstance(value, float) and math.isfinite(value) else None


def time_scale_problem(value: object) -> Optional[str]:
    """Why a manifest's `time_scale` cannot be used (None when it can)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "is not a number"
    if out_of_range_int(value) or not (isinstance(value, int) or math.isfinite(value)):
        return "is not a finite number"
    if not TIME_SCALE_MIN <= value <= TIME_SCALE_MAX:
        return f"is outside the sane range {TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g}"
    return None


def number_text(value: float, digits: int) -> str:
    """`value` with `digits` decimals, as a person reads it in a verdict or a table, at a sane width whatever it is.

    Up to 1e9 in magnitude it is fixed-point (`0.613`, `48.2`); beyond, in
    exponent form (`1.000e+308`), so no value is ever a 300-digit number;
    NaN and infinities are written as Python writes them.
    """
    if not math.isfinite(value) or abs(value) < NUMBER_FIXED_BELOW:
        return f"{value:.{digits}f}"
    return f"{value:.{max(digits, 1)}e}"


def reward_range(rm_type: Optional[str]) -> tuple[float, float, str]:
    """(low, high, what gives it) for the rewards a run with this `--rm-type` can log (see the module doc)."""
    if rm_type == "math":
        return (*MATH_REWARD_RANGE, f"the range of {RM_TYPE_FLAG} math")
    low, high = PLAUSIBLE_REWARD_RANGE
    return (
        low,
        high,
        f"the plausible range for {RM_TYPE_FLAG} {rm_type}" if rm_type else "the plausible range of a reward",
    )


@dataclass(frozen=True)
class Span:
    """The run's span in microseconds: from `started_at` to `ended_at`; None where status.json does not say."""

    start_us: Optional[int]
    end_us: Optional[int]

    def contains(self, micros: int, slack_us: int = 0) -> bool:
        """Whether `micros` lies in the span (or within `slack_us` of it)."""
        return (self.start_us is None or micros >= self.start_us - slack_us) and (
            self.end_us is None or micros <= self.end_us + slack_us
        )

    def clip(self, start: int, end: int) -> tuple[int, int]:
        """[start, end] cut to the span."""
        if self.start_us is not None:
            start, end = max(start, self.start_us), max(end, self.start_us)
        if self.end_us is not None:
            start, end = min(start, self.end_us), min(end, self.end_us)
        return start, end

    def text(self) -> str:
        def at(micros: Optional[int]) -> str:
            return "?" if micros is None else format_time_us(micros)

        return f"{at(self.start_us)} to {at(self.end_us)}"


def compare_problems(compare: JSONValue) -> tuple[Optional[str], list[str], list[str]]:
    """(baseline, baselines, problems) of an experiment's `compare` block, checked key by key.

    `baseline` must be a run name (a non-empty string); `baselines`, when
    given, a list of run names (it defaults to `[baseline]`). A baseline that
    is not a run name means no comparison; a bad entry of `baselines` is left
    out. Each problem names the key and the value.
    """
    if compare is None:
        return None, [], []
    if not isinstance(compare, dict):
        return None, [], [f"compare {shown(compare)} is not an object: no comparison"]
    problems: list[str] = []
    baseline = compare.get("baseline")
    if not isinstance(baseline, str) or not baseline:
        problems.append(f"compare.baseline {shown(baseline)} is not a run name: no comparison")
        baseline = None
    names = compare.get("baselines")
    baselines: list[str] = []
    if names is not None and not isinstance(names, list):
        problems.append(f"compare.baselines {shown(names)} is not a list of run names: ignored")
    elif names:
        for name in names:
            if isinstance(name, str) and name:
                baselines.append(name)
            else:
                problems.append(f"compare.baselines has {shown(name)}, not a run name: left out")
    if baseline is not None and not baselines:
        baselines = [baseline]
    return baseline, baselines, problems
