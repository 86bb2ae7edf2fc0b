"""Step rows: one run's frame -> its `StepTable` (docs/summary.md, "The rules" and "Sanity rules").

Computed a column at a time, Miles's keys read by `harness.mileslog.keys`:

- The rollout of step N occupies [t_rollout_end - rollout_time x time_scale,
  t_rollout_end] (wall clock, microseconds relative to the run's first time,
  so float64 holds them to well under a microsecond). Its pause overlap is the
  length of the merged windows inside it, divided by time_scale; adjusted =
  rollout - overlap, never 0 or below (null where less than a microsecond is
  left); clean = no overlap. Unknown (null) where the rollout time or
  t_rollout_end is missing, where t_rollout_end lies outside the run's span
  or goes back in time from the step before (in a run with pause windows),
  where the rollout would start before the run did, or, in a run with pause
  windows, where the time scale is unknown.
- Dropped groups and batches (filter runs), zero-variance counts, the reward
  and the step time, by the Miles rules; a count is an integer from 0 to 2^53.
- An integer beyond 2^53 in a key the summary reads is flagged and read as
  missing; a group key whose value is not a count leaves the fields it counts
  in null; a negative rollout or step time is flagged and left out; a
  computed value that is not finite is null. Each is one note naming
  metrics.jsonl, the key, the values and the steps.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from harness.capture.columns import MetricsColumns
from harness.mileslog import keys
from harness.mileslog.derive import derive_step_values, whole_number
from harness.summary.document import StepTable
from harness.summary.frames import RunFrame
from harness.summary.notes import Rank, RunNotes, StepNotes
from harness.summary.run_config import RunConfig
from harness.summary.sanity import MAX_EXACT_INT, SPAN_SLACK_US, reward_range
from harness.times import US_PER_S, format_time_us

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from harness.jsontypes import JSONObject, JSONValue

METRICS = "metrics.jsonl"
_ABSENT = object()
_INF = math.inf
_VALUE_KEYS = (
    keys.ROLLOUT_TIME,
    keys.RAW_REWARD,
    keys.RAW_REWARD_UNFILTERED,
    keys.TRUNCATED_RATIO,
    *keys.STEP_TIME_KEYS,
)

# The order of the checks within one step (see StepNotes): phase 0 reads the rollout
# times, phase 1 the rest of the step; notes come out as if the steps were read one by one.
_FLAGGED, _ROLLOUT, _ROLLOUT_END, _NON_FINITE = 0, 1, 2, 3
_GROUPS, _DROPS, _REWARD, _STEP_TIME, _INCOMPLETE = 0, 1, 2, 3, 4


@dataclass
class Rows:
    """A run's step rows and what the rest of its summary needs from them."""

    table: StepTable
    reward_key: Optional[str]  # the Miles key of the reward; None when no step has one
    pause_total_s: float


class _Found:
    """The problems of one run's steps, by row position (the step ids are looked up here)."""

    def __init__(self, steps: Sequence[int]) -> None:
        self.steps = steps
        self.notes = StepNotes()

    def add(
        self,
        problem: str,
        positions: Sequence[int],
        values: Sequence[object] = (),
        *,
        phase: int = 0,
        rank: Rank = 0,
        flag: bool = False,
    ) -> None:
        self.notes.add(
            problem, positions, [self.steps[i] for i in positions], values, phase=phase, rank=rank, flag=flag
        )


def build_rows(frame: RunFrame, notes: RunNotes) -> Rows:
    """The step rows of one run; `notes` gets one sentence per problem found."""
    columns = frame.steps
    complete = columns.complete
    config = frame.config
    found = _Found(columns.step)
    values, group_keys, groups, flagged = _read_columns(columns, found)

    rollout = _rollout_times(values[keys.ROLLOUT_TIME], complete, flagged, found)
    overlaps = _pause_overlaps(frame, rollout, found)

    rollout_side = [keys.rollout_side_logged(m) for m in columns.metrics]
    counts = _group_counts(config, group_keys, groups, rollout_side, found)

    raw_reward = finite_column(values[keys.RAW_REWARD])
    raw_unfiltered = finite_column(values[keys.RAW_REWARD_UNFILTERED])
    reward_key = keys.reward_key(config.filter)
    reward = list(raw_unfiltered if reward_key == keys.RAW_REWARD_UNFILTERED else raw_reward)
    reward_flagged = flagged.get(reward_key, set()) | _rewards_out_of_range(reward, reward_key, config, found)
    reward_source: list[Optional[str]] = [keys.PRINTED if value is not None else None for value in reward]
    not_derived = _derive_rewards(config, columns.metrics, reward, reward_source, reward_flagged, rollout_side, found)
    any_reward = any(value is not None for value in reward)
    no_reward = reward_key + " missing in {steps}: no reward there"
    found.add(
        no_reward,
        [
            i
            for i, (value, side, done) in enumerate(zip(reward, rollout_side, complete))
            if value is None and (side or done) and i not in reward_flagged and i not in not_derived
        ],
        phase=1,
        rank=_REWARD,
    )

    step_time = _step_times(columns.metrics, complete, flagged, found)
    found.add(
        "{steps} incomplete (the run ended before the step did): shown, left out of medians and means",
        [i for i, done in enumerate(complete) if not done],
        phase=1,
        rank=_INCOMPLETE,
    )

    derived = reward_source.count(keys.DERIVED)
    if config.filter and derived:
        printed = reward_source.count(keys.PRINTED)
        where = "every step with a reward" if not printed else f"{derived} step{'' if derived == 1 else 's'}"
        notes.append(
            f"reward derived in {where} (reward_source: derived): this Miles does not print "
            f"{keys.RAW_REWARD_UNFILTERED} (only the write-up's, {keys.WRITE_UP_MILES}, does), so the reward before "
            f"the filter is {keys.RAW_REWARD} x B plus each dropped group's reward, over B plus the dropped groups"
        )
    if config.filter and not any_reward and len(columns) and not not_derived:
        notes.append(
            f"filter run without {keys.RAW_REWARD_UNFILTERED}: the Miles in the image does not print it, so reward "
            f"is null ({keys.RAW_REWARD} counts only the kept groups and is not comparable)"
        )
        found.notes.discard(no_reward)  # said once for the whole run
    if config.filter and (config.rollout_batch_size is None or not config.over_sampling_batch_size):
        notes.append("B or O unknown: batches not computed")
    found.notes.emit(notes)
    complete_count = sum(complete)
    if not len(columns):
        notes.append("no step records (metrics.jsonl missing or empty)")
    elif frame.steps_expected is not None and complete_count < frame.steps_expected:
        notes.append(
            f"{complete_count} complete step{'' if complete_count == 1 else 's'} of {frame.steps_expected} expected"
        )

    table = StepTable(
        step=list(columns.step),
        complete=list(complete),
        rollout_time_s=rollout,
        pause_overlap_s=overlaps.overlap,
        rollout_time_adjusted_s=overlaps.adjusted,
        clean=overlaps.clean,
        reward=reward,
        raw_reward=raw_reward,
        raw_reward_unfiltered=raw_unfiltered,
        truncated_ratio=finite_column(values[keys.TRUNCATED_RATIO]),
        step_time_s=step_time,
        reward_source=reward_source,
        **counts,
    )
    return Rows(table, reward_key if any_reward else None, overlaps.pause_total_s)


def _derive_rewards(
    config: RunConfig,
    metrics: Sequence[Mapping[str, object]],
    reward: list[Optional[float]],
    source: list[Optional[str]],
    flagged: set[int],
    rollout_side: Sequence[bool],
    found: _Found,
) -> set[int]:
    """Fill in the reward before the filter where a filter step does not print it (`keys.reward_reading`), and
    mark those rows `derived`; returns the rows where it could not be derived, each reason noted once."""
    if not config.filter:
        return set()
    why_not: dict[str, list[int]] = {}
    for i, step_metrics in enumerate(metrics):
        if reward[i] is not None or i in flagged or keys.RAW_REWARD_UNFILTERED in step_metrics:
            continue
        if not rollout_side[i] and keys.RAW_REWARD not in step_metrics:
            continue  # nothing of the step's rollout was logged: the missing reward is said as missing
        reading = keys.reward_reading(step_metrics, True, config.rollout_batch_size)
        if reading.value is None or not math.isfinite(reading.value):
            why_not.setdefault(reading.why_none or "not derivable", []).append(i)
            continue
        reward[i], source[i] = reading.value, keys.DERIVED
    for why, positions in why_not.items():
        found.add(f"no reward in {{steps}}: {why}", positions, phase=1, rank=_REWARD)
    return {i for positions in why_not.values() for i in positions}


def _rewards_out_of_range(reward: list[Optional[float]], reward_key: str, config: RunConfig, found: _Found) -> set[int]:
    """Positions of the rewards the run's reward type cannot give: flagged (one note), set to None in `reward`."""
    low, high, gives = reward_range(config.rm_type)
    bad = [i for i, value in enumerate(reward) if value is not None and not low <= value <= high]
    found.add(
        f"{METRICS}: {reward_key} {{values}} in {{steps}} is outside {gives} ({low:g} to {high:g}): "
        "left out of the means",
        bad,
        [reward[i] for i in bad],
        phase=1,
        rank=_REWARD,
        flag=True,
    )
    for i in bad:
        reward[i] = None
    return set(bad)


def _read_columns(
    columns: MetricsColumns,
    found: _Found,
) -> tuple[dict[str, list[JSONValue]], list[str], list[list[object]], dict[str, set[int]]]:
    """(the value keys' columns, the group keys, their columns, the positions flagged per key).

    Absent values are None in the value columns, `_ABSENT` in the group
    columns (for the drop keys absence means 0). An integer beyond 2^53 in a
    value column is flagged (one note per key) and read as missing (None);
    the group columns are checked as counts (`_group_counts`).
    """
    group_keys = sorted(key for key in columns.keys() if key.startswith(keys.GROUP_KEY_PREFIXES))
    values = dict(zip(_VALUE_KEYS, columns.columns(_VALUE_KEYS)))
    groups: list[list[object]] = list(columns.columns(group_keys, _ABSENT))
    flagged: dict[str, set[int]] = {}
    for key, column in values.items():
        bad = _out_of_range(column)
        if bad:
            found.add(
                f"{METRICS}: {key} is an integer beyond 2^53 ({{values}}) in {{steps}}: read as missing",
                bad,
                [column[i] for i in bad],
                rank=(_FLAGGED, key),
                flag=True,
            )
            flagged[key] = set(bad)
            for i in bad:
                column[i] = None
    return values, group_keys, groups, flagged


def _rollout_times(
    raw: list[JSONValue], complete: Sequence[bool], flagged: dict[str, set[int]], found: _Found
) -> list[Optional[float]]:
    """The rollout times in seconds: finite and not negative, else None (with a note)."""
    rollout = finite_column(raw)
    rollout_flagged = flagged.get(keys.ROLLOUT_TIME, set())
    not_number = [i for i, (v, s) in enumerate(zip(raw, rollout)) if s is None and v is not None]
    negative = [i for i, s in enumerate(rollout) if s is not None and s < 0]
    missing = [i for i, (v, done) in enumerate(zip(raw, complete)) if v is None and done and i not in rollout_flagged]
    for i in negative:
        rollout[i] = None
    for problem, positions in (
        (f"{keys.ROLLOUT_TIME} is not a finite number in {{steps}}: no rollout time there", not_number),
        (f"{keys.ROLLOUT_TIME} is negative ({{values}}) in {{steps}}: no rollout time there", negative),
        (f"{keys.ROLLOUT_TIME} missing in complete {{steps}}: no rollout time there", missing),
    ):
        found.add(problem, positions, [raw[i] for i in positions], rank=_ROLLOUT, flag=positions is negative)
    return rollout


@dataclass
class _Overlaps:
    overlap: list[Optional[float]]
    adjusted: list[Optional[float]]
    clean: list[Optional[bool]]
    pause_total_s: float


SMALL_RUN = 16  # steps up to which a run's overlaps are computed step by step: numpy's set-up costs more there


def _pause_overlaps(frame: RunFrame, rollout: list[Optional[float]], found: _Found) -> _Overlaps:
    """Each rollout's pause overlap, adjusted time and clean flag (None where unknown), and the pause total."""
    if len(rollout) <= SMALL_RUN:
        return _pause_overlaps_by_step(frame, rollout, found)
    return _pause_overlaps_by_column(frame, rollout, found)


def _pause_overlaps_by_column(frame: RunFrame, rollout: list[Optional[float]], found: _Found) -> _Overlaps:
    """`_pause_overlaps` for a long run: a column at a time (numpy)."""
    import numpy as np

    from harness.summary.windows import merge_windows, overlap_lengths, union_length

    span = frame.span
    time_scale = frame.time_scale if frame.time_scale is not None else 1  # unknown: see below
    ends = frame.steps.t_rollout_end_us
    starts, stops = merge_windows(frame.windows)
    origin = frame.first_time_us if frame.first_time_us is not None else 0
    # Times as floats: exact, as integers of microseconds below 2^53 (until the year 2255).
    rollout_s = np.array(rollout, dtype=np.float64)
    end_us = np.array(ends, dtype=np.float64)
    has_rollout = ~np.isnan(rollout_s)
    no_end = has_rollout & np.isnan(end_us)
    low = -np.inf if span.start_us is None else span.start_us - SPAN_SLACK_US
    high = np.inf if span.end_us is None else span.end_us + SPAN_SLACK_US
    with np.errstate(invalid="ignore"):
        outside = (end_us < low) | (end_us > high)
    found.add(
        "t_rollout_end missing in {steps}: pause overlap unknown there",
        np.flatnonzero(no_end).tolist(),
        rank=_ROLLOUT_END,
    )
    positions = np.flatnonzero(has_rollout & outside).tolist()
    found.add(
        f"t_rollout_end ({{values}}) is outside the run ({span.text()}) in {{steps}}: "
        "pause overlap unknown, not counted clean",
        positions,
        [_time_text(ends[i]) for i in positions],
        rank=_ROLLOUT_END,
        flag=True,
    )
    known = has_rollout & ~no_end & ~outside
    known &= ~_back_in_time(ends, end_us, outside, bool(starts.size), found)
    if frame.time_scale is None and starts.size:  # where the rollouts lie against the windows is unknown (a note)
        known[:] = False
    with np.errstate(over="ignore", invalid="ignore"):  # a rollout time of 1e303 s: said below, not warned
        wall_us = rollout_s * (float(time_scale) * US_PER_S)
        hi = np.where(known, end_us - origin, 0.0)
        lo = hi - np.where(known, wall_us, 0.0)
    if span.start_us is not None and frame.time_scale is not None:
        early = known & ~(lo >= low - origin)
        positions = np.flatnonzero(early).tolist()
        found.add(
            f"{keys.ROLLOUT_TIME} ({{values}}) would start the rollout before the run did "
            f"({format_time_us(span.start_us)}) in {{steps}}: pause overlap unknown, not counted clean",
            positions,
            [rollout[i] for i in positions],
            rank=_ROLLOUT_END,
            flag=True,
        )
        known &= ~early
        hi = np.where(known, hi, 0.0)
        lo = np.where(known, lo, 0.0)
    overlap_wall_us = overlap_lengths(starts - origin, stops - origin, lo, hi)
    overlap_trainer_us = overlap_wall_us / time_scale if time_scale != 1 else overlap_wall_us
    touched = overlap_wall_us != 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        overlap = np.where(touched, overlap_trainer_us / US_PER_S, 0.0)
        adjusted = np.where(touched, (rollout_s * US_PER_S - overlap_trainer_us) / US_PER_S, rollout_s)
        # Times are whole microseconds: less than one left of the rollout is nothing left (0, -0.0, 3e-14).
        nothing_left = known & ((touched & (wall_us - overlap_wall_us < 1.0)) | (rollout_s == 0.0))
    for rank, (name, column) in enumerate((("pause_overlap_s", overlap), ("rollout_time_adjusted_s", adjusted))):
        bad = known & ~np.isfinite(column)  # strict JSON: an overflow is null, with a note per value
        for i in np.flatnonzero(bad).tolist():
            found.add(
                f"{name} is not a finite number ({float(column[i])!r}) in {{steps}}: null",
                [i],
                rank=(_NON_FINITE, rank),
                flag=True,
            )
        column[~(known & ~bad)] = np.nan
    covered = nothing_left & touched
    found.add(
        "the pause windows cover the whole rollout in {steps}: rollout_time_adjusted_s null (nothing of it "
        "is left once the pauses are taken out)",
        np.flatnonzero(covered).tolist(),
        rank=_ROLLOUT_END,
        flag=True,
    )
    positions = np.flatnonzero(nothing_left & ~touched).tolist()
    found.add(
        f"{keys.ROLLOUT_TIME} is 0 in {{steps}}: rollout_time_adjusted_s null", positions, rank=_ROLLOUT_END, flag=True
    )
    adjusted[nothing_left] = np.nan
    return _Overlaps(
        overlap=_floats_or_none(overlap),
        adjusted=_floats_or_none(adjusted),
        clean=[None if not k else not t for k, t in zip(known.tolist(), touched.tolist())],
        pause_total_s=union_length(starts, stops) / time_scale / US_PER_S,
    )


def _pause_overlaps_by_step(frame: RunFrame, rollout: list[Optional[float]], found: _Found) -> _Overlaps:
    """`_pause_overlaps` for a short run: step by step in floats, the same arithmetic and notes as by column.

    Each line does what the matching numpy line of `_pause_overlaps_by_column`
    does to one element (NaN for unknown; a comparison with NaN is false), in
    the same order, so the two give the same numbers and notes
    (tests/test_summary_windows.py checks it on random runs).
    """
    from harness.summary.windows import merged_lists

    nan = math.nan
    span = frame.span
    time_scale = frame.time_scale if frame.time_scale is not None else 1
    ends = frame.steps.t_rollout_end_us
    starts, stops = merged_lists(frame.windows)
    origin = frame.first_time_us if frame.first_time_us is not None else 0
    count = len(rollout)
    rollout_s = [nan if r is None else float(r) for r in rollout]
    end_us = [nan if e is None else float(e) for e in ends]
    has_rollout = [r == r for r in rollout_s]
    no_end = [has and e != e for has, e in zip(has_rollout, end_us)]
    low = -_INF if span.start_us is None else span.start_us - SPAN_SLACK_US
    high = _INF if span.end_us is None else span.end_us + SPAN_SLACK_US
    outside = [e < low or e > high for e in end_us]
    # A note's text is made only where it has steps (the common run has none).
    positions = [i for i in range(count) if no_end[i]]
    if positions:
        found.add("t_rollout_end missing in {steps}: pause overlap unknown there", positions, rank=_ROLLOUT_END)
    positions = [i for i in range(count) if has_rollout[i] and outside[i]]
    if positions:
        found.add(
            f"t_rollout_end ({{values}}) is outside the run ({span.text()}) in {{steps}}: "
            "pause overlap unknown, not counted clean",
            positions,
            [_time_text(ends[i]) for i in positions],
            rank=_ROLLOUT_END,
            flag=True,
        )
    known = [has_rollout[i] and not no_end[i] and not outside[i] for i in range(count)]
    back = _back_in_time_by_step(ends, end_us, outside, bool(starts), found)
    known = [k and not b for k, b in zip(known, back)]
    if frame.time_scale is None and starts:  # where the rollouts lie against the windows is unknown (a note)
        known = [False] * count
    scale_us = float(time_scale) * US_PER_S
    wall_us = [r * scale_us for r in rollout_s]  # a rollout time of 1e303 s overflows to inf: said below
    hi = [end_us[i] - origin if known[i] else 0.0 for i in range(count)]
    lo = [hi[i] - (wall_us[i] if known[i] else 0.0) for i in range(count)]
    if span.start_us is not None and frame.time_scale is not None:
        first_allowed = low - origin
        early = [known[i] and not (lo[i] >= first_allowed) for i in range(count)]
        positions = [i for i in range(count) if early[i]]
        if positions:
            found.add(
                f"{keys.ROLLOUT_TIME} ({{values}}) would start the rollout before the run did "
                f"({format_time_us(span.start_us)}) in {{steps}}: pause overlap unknown, not counted clean",
                positions,
                [rollout[i] for i in positions],
                rank=_ROLLOUT_END,
                flag=True,
            )
        known = [k and not e for k, e in zip(known, early)]
        hi = [h if k else 0.0 for h, k in zip(hi, known)]
        lo = [v if k else 0.0 for v, k in zip(lo, known)]
    relative = [(start - origin, stop - origin) for start, stop in zip(starts, stops)]
    overlap_wall_us = [_covered(relative, lo[i], hi[i]) for i in range(count)]
    overlap_trainer_us = [v / time_scale for v in overlap_wall_us] if time_scale != 1 else overlap_wall_us
    touched = [v != 0.0 for v in overlap_wall_us]
    overlap = [_divide(overlap_trainer_us[i], US_PER_S) if touched[i] else 0.0 for i in range(count)]
    adjusted = [
        _divide(rollout_s[i] * US_PER_S - overlap_trainer_us[i], US_PER_S) if touched[i] else rollout_s[i]
        for i in range(count)
    ]
    # Times are whole microseconds: less than one left of the rollout is nothing left (0, -0.0, 3e-14).
    nothing_left = [
        known[i] and ((touched[i] and wall_us[i] - overlap_wall_us[i] < 1.0) or rollout_s[i] == 0.0)
        for i in range(count)
    ]
    for rank, (name, column) in enumerate((("pause_overlap_s", overlap), ("rollout_time_adjusted_s", adjusted))):
        bad = [known[i] and not math.isfinite(column[i]) for i in range(count)]
        for i in range(count):
            if bad[i]:
                found.add(
                    f"{name} is not a finite number ({float(column[i])!r}) in {{steps}}: null",
                    [i],
                    rank=(_NON_FINITE, rank),
                    flag=True,
                )
        for i in range(count):
            if not (known[i] and not bad[i]):
                column[i] = nan
    positions = [i for i in range(count) if nothing_left[i] and touched[i]]
    if positions:
        found.add(
            "the pause windows cover the whole rollout in {steps}: rollout_time_adjusted_s null (nothing of it "
            "is left once the pauses are taken out)",
            positions,
            rank=_ROLLOUT_END,
            flag=True,
        )
    positions = [i for i in range(count) if nothing_left[i] and not touched[i]]
    if positions:
        found.add(
            f"{keys.ROLLOUT_TIME} is 0 in {{steps}}: rollout_time_adjusted_s null",
            positions,
            rank=_ROLLOUT_END,
            flag=True,
        )
    for i in range(count):
        if nothing_left[i]:
            adjusted[i] = nan
    return _Overlaps(
        overlap=[None if v != v else v for v in overlap],
        adjusted=[None if v != v else v for v in adjusted],
        clean=[None if not k else not t for k, t in zip(known, touched)],
        pause_total_s=sum(stop - start for start, stop in zip(starts, stops)) / time_scale / US_PER_S,
    )


def _divide(value: float, by: float) -> float:
    """`value / by` as numpy divides floats: an overflow is infinity, not an error."""
    try:
        return value / by
    except OverflowError:  # pragma: no cover - a float divided by a float above 1 cannot overflow
        return math.copysign(_INF, value)


def _covered(windows: Sequence[tuple[int, int]], lo: float, hi: float) -> float:
    """How much of [lo, hi] the merged windows cover: `windows.overlap_lengths` for one interval."""
    if not windows:
        return 0.0
    first = sum(1 for _, stop in windows if float(stop) <= lo)  # searchsorted(ends, lo, side="right")
    stop_at = sum(1 for start, _ in windows if float(start) < hi)  # searchsorted(starts, hi, side="left")
    if not stop_at > first:
        return 0.0
    whole = float(sum(stop - start for start, stop in windows[first:stop_at]))
    first_c, last_c = min(first, len(windows) - 1), max(stop_at - 1, 0)
    cut_front = _maximum(0.0, lo - float(windows[first_c][0]))
    cut_back = _maximum(0.0, float(windows[last_c][1]) - hi)
    return whole - cut_front - cut_back


def _maximum(a: float, b: float) -> float:
    """numpy's maximum: NaN if either is."""
    if a != a or b != b:
        return math.nan
    return a if a >= b else b


def _back_in_time_by_step(
    ends: Sequence[Optional[int]], end_us: Sequence[float], outside: Sequence[bool], has_windows: bool, found: _Found
) -> list[bool]:
    """`_back_in_time`, step by step."""
    timed = [i for i, (e, out) in enumerate(zip(end_us, outside)) if e == e and not out]
    suspect = [False] * len(end_us)
    for k in range(len(timed) - 1):
        before, after = timed[k], timed[k + 1]
        if not end_us[after] < end_us[before]:
            continue
        unknown = ": pause overlap unknown in both, not counted clean" if has_windows else ""
        found.add(
            f"t_rollout_end goes back in time from step {found.steps[before]} "
            f"({_time_text(ends[before])}) to step {found.steps[after]} ({_time_text(ends[after])})" + unknown,
            [before, after],
            rank=_ROLLOUT_END,
            flag=True,
        )
        suspect[before] = suspect[after] = has_windows
    return suspect


def _back_in_time(
    ends: Sequence[Optional[int]],
    end_us: NDArray[np.float64],
    outside: NDArray[np.bool_],
    has_windows: bool,
    found: _Found,
) -> NDArray[np.bool_]:
    """The steps whose t_rollout_end goes back in time from the step before (both of each pair), noted.

    Rollouts end in the order of their steps, so one of the two times is
    wrong, and which one cannot be told: where the run has pause windows,
    neither step's pause overlap is known. Without windows nothing depends on
    the times (no pause can overlap), so the note is all.
    """
    import numpy as np

    timed = np.flatnonzero(~np.isnan(end_us) & ~outside)
    suspect = np.zeros(end_us.shape, dtype=bool)
    for k in np.flatnonzero(end_us[timed][1:] < end_us[timed][:-1]).tolist():
        before, after = int(timed[k]), int(timed[k + 1])
        unknown = ": pause overlap unknown in both, not counted clean" if has_windows else ""
        found.add(
            f"t_rollout_end goes back in time from step {found.steps[before]} "
            f"({_time_text(ends[before])}) to step {found.steps[after]} ({_time_text(ends[after])})" + unknown,
            [before, after],
            rank=_ROLLOUT_END,
            flag=True,
        )
        suspect[[before, after]] = has_windows
    return suspect


def _group_counts(
    config: RunConfig, group_keys: list[str], groups: list[list[object]], rollout_side: list[bool], found: _Found
) -> dict[str, list[Optional[int]]]:
    """The dropped and zero-variance group columns, and the batches of prompts (filter runs), by the Miles rules.

    A group key whose value is not a count (`_Counted`) leaves the fields it
    counts in unknown (null) in its step, as does a sum beyond 2^53; each is a
    note naming the key, the values and the steps.
    """
    count = len(rollout_side)
    counted = _count_column(group_keys, groups, count)
    batch, over = config.rollout_batch_size, config.over_sampling_batch_size
    columns: dict[str, list[Optional[int]]] = {name: [None] * count for name in _COUNT_FIELDS}
    dropped, dropped_right, dropped_wrong = (columns[name] for name in _DROP_FIELDS[:3])
    dropped_other, batches = columns["dropped_other"], columns["batches"]
    not_counts: dict[str, list[tuple[int, object]]] = {}
    past_exact: dict[str, list[tuple[int, int]]] = {}
    unreadable: dict[str, list[int]] = {}
    no_rollout_side: list[int] = []
    drops_without_filter: list[int] = []
    for i, step in enumerate(counted):
        values = step.values
        if step.problems:
            for key, value in step.not_counts:
                not_counts.setdefault(key, []).append((i, value))
            for name, total in step.past_exact:
                past_exact.setdefault(name, []).append((i, total))
            for key in step.unreadable:
                unreadable.setdefault(key, []).append(i)
        if config.filter and rollout_side[i]:  # keys.drops_known, with rollout_side computed once per step
            drops = values["dropped_groups"]
            dropped[i], dropped_right[i] = drops, values["dropped_all_right"]
            dropped_wrong[i], dropped_other[i] = values["dropped_all_wrong"], values["dropped_other"]
            if batch is not None and over and drops is not None:
                needed = -(-(batch + drops) // over)
                batches[i] = needed if needed <= MAX_EXACT_INT else None  # B and O of 2^53 and 1: not a count
        elif config.filter:
            no_rollout_side.append(i)
        elif values["dropped_groups"] or step.drop_keys_unknown:
            drops_without_filter.append(i)
        for name in ("zero_std_all_right", "zero_std_all_wrong", "zero_std_other"):
            columns[name][i] = values[name]
    for key, found_at in not_counts.items():
        unknown = [*_fields_of(key), *(["batches"] if key.startswith(keys.DROP_PREFIX) else [])]
        found.add(
            f"{METRICS}: {key} is not a count ({{values}}) in {{steps}}: {', '.join(unknown)} unknown there",
            [i for i, _ in found_at],
            [value for _, value in found_at],
            phase=1,
            rank=(_GROUPS, key),
            flag=True,
        )
    for name, totals in past_exact.items():
        found.add(
            f"{METRICS}: {name} sums to more than 2^53 ({{values}}) in {{steps}}: unknown there",
            [i for i, _ in totals],
            [total for _, total in totals],
            phase=1,
            rank=(_GROUPS, name),
            flag=True,
        )
    for key, positions in unreadable.items():
        found.add(
            f"{key} is not a count the Miles rules read (its suffix is not a reward) in {{steps}}: "
            "left out of the counts",
            positions,
            phase=1,
            rank=(_GROUPS, key),
        )
    found.add("no rollout-side keys in {steps}: dropped groups unknown there", no_rollout_side, phase=1, rank=_DROPS)
    found.add("drop keys logged without the filter in {steps}: not shown", drops_without_filter, phase=1, rank=_DROPS)
    return columns


_DROP_FIELDS = ("dropped_groups", "dropped_all_right", "dropped_all_wrong", "dropped_other")
_ZERO_STD_FIELDS = ("zero_std_all_right", "zero_std_all_wrong", "zero_std_other")
_COUNT_FIELDS = (
    "dropped_groups",
    "dropped_all_right",
    "dropped_all_wrong",
    "batches",
    "zero_std_all_right",
    "zero_std_all_wrong",
    "dropped_other",
    "zero_std_other",
)


@dataclass(frozen=True)
class _Counted:
    """One step's group counts by the Miles rules, checked: the fields, and why any of them is unknown (None).

    A count is an integer from 0 to 2^53 (5 or 5.0): not a fraction, not
    negative, nothing beyond what a float holds exactly, nor a sum beyond it.
    """

    values: dict[str, Optional[int]]  # the _DROP_FIELDS and _ZERO_STD_FIELDS
    not_counts: tuple[tuple[str, object], ...] = ()  # (key, value) of the keys whose value is not a count
    past_exact: tuple[tuple[str, int], ...] = ()  # (field, sum) of the fields whose sum passes 2^53
    unreadable: tuple[str, ...] = ()  # keys the rules cannot read whatever their value (a count with an odd suffix)
    drop_keys_unknown: bool = False  # a drop key whose value is not a count

    @property
    def problems(self) -> bool:
        return bool(self.not_counts or self.past_exact or self.unreadable)


@functools.lru_cache(maxsize=4096)
def _fields_of(key: str) -> tuple[str, ...]:
    """The fields a group key counts in, by the Miles rules: those that one group under it adds to."""
    one = derive_step_values({key: 1})
    by_name: Mapping[str, object] = one
    fields = [
        name
        for name in ("dropped_groups", "dropped_all_right", "dropped_all_wrong", *_ZERO_STD_FIELDS)
        if by_name[name]
    ]
    if sum(one["dropped_other"].values()):
        fields.append("dropped_other")
    return tuple(fields)


def _counted(group_keys: Sequence[str], values: Sequence[object]) -> _Counted:
    """`derive_step_values` of one step's group keys, checked (see `_Counted`)."""
    not_counts = []
    read: dict[str, object] = {}
    for key, value in zip(group_keys, values):
        if value is _ABSENT:
            continue
        if _fields_of(key):
            count = whole_number(value)
            if count is None or not 0 <= count <= MAX_EXACT_INT:
                not_counts.append((key, value))
                continue
        read[key] = value
    derived = derive_step_values(read)
    counts: dict[str, Optional[int]] = {  # _DROP_FIELDS and _ZERO_STD_FIELDS, dropped_other last
        "dropped_groups": derived["dropped_groups"],
        "dropped_all_right": derived["dropped_all_right"],
        "dropped_all_wrong": derived["dropped_all_wrong"],
        "zero_std_all_right": derived["zero_std_all_right"],
        "zero_std_all_wrong": derived["zero_std_all_wrong"],
        "zero_std_other": derived["zero_std_other"],
        "dropped_other": sum(derived["dropped_other"].values()),
    }
    unknown = {name for key, _ in not_counts for name in _fields_of(key)}
    past_exact = []
    for name, total in counts.items():
        if total is not None and total > MAX_EXACT_INT and name not in unknown:
            past_exact.append((name, total))
            unknown.add(name)
    for name in unknown:
        counts[name] = None
    return _Counted(
        counts,
        tuple(not_counts),
        tuple(past_exact),
        tuple(derived["unreadable_keys"]),
        any(key.startswith(keys.DROP_PREFIX) for key, _ in not_counts),
    )


# (group keys, their values, the values' types): True == 1 == 1.0, but only 1 and 1.0 are counts
_CountKey = tuple[tuple[str, ...], tuple[object, ...], tuple[type, ...]]
_COUNTED: dict[_CountKey, _Counted] = {}  # shared by all runs: the counting is pure
_COUNTED_LIMIT = 100_000


def _count_column(group_keys: list[str], group_columns: list[list[object]], count: int) -> list[_Counted]:
    """`_counted` for each step, computed once per distinct set of drop and count values.

    Only the drop and zero-std keys matter to it, and their values repeat a
    lot from step to step and from run to run, so steps share the results
    (read-only).
    """
    if not group_keys:
        return [_counted((), ())] * count
    if len(_COUNTED) > _COUNTED_LIMIT:
        _COUNTED.clear()
    names = tuple(group_keys)
    out = []
    for values in zip(*group_columns):
        key = (names, values, tuple(map(type, values)))
        try:
            counted = _COUNTED.get(key)
            hashable = True
        except TypeError:  # an unhashable value (a list): nothing to remember
            counted, hashable = None, False
        if counted is None:
            counted = _counted(group_keys, values)
            if hashable:
                _COUNTED[key] = counted
        out.append(counted)
    return out


def finite_column(column: Sequence[object]) -> list[Optional[float]]:
    """`keys.finite_number` of each value (the finite floats, the bulk of a column, pass straight through)."""
    finite_number = keys.finite_number
    return [v if type(v) is float and -_INF < v < _INF else None if v is None else finite_number(v) for v in column]


def _out_of_range(column: Sequence[object]) -> list[int]:
    """Positions of the integers beyond +-2^53."""
    if int not in set(map(type, column)):
        return []
    return [i for i, v in enumerate(column) if type(v) is int and not -MAX_EXACT_INT <= v <= MAX_EXACT_INT]


def _time_text(micros: Optional[int]) -> str:
    return "?" if micros is None else format_time_us(micros)


def _floats_or_none(values: NDArray[np.float64]) -> list[Optional[float]]:
    """A float array as a list, NaN (unknown) as None."""
    return [None if v != v else v for v in values.tolist()]


def _step_times(
    metrics: Sequence[JSONObject], complete: Sequence[bool], flagged: dict[str, set[int]], found: _Found
) -> list[Optional[float]]:
    """The step times by the Miles rule (`keys.step_time`), not negative; notes for the older name and the gaps."""
    flagged_steps = set().union(*(flagged.get(key, ()) for key in keys.STEP_TIME_KEYS))
    newer = finite_column([m.get(keys.STEP_TIME) for m in metrics])
    if not flagged_steps and all(seconds is not None and seconds >= 0 for seconds in newer):
        return newer  # every step has perf/step_time: the rule takes it
    times: list[Optional[float]] = []
    old_name: list[int] = []
    missing: list[int] = []
    negative: dict[str, list[tuple[int, float]]] = {}
    for i, m in enumerate(metrics):
        if i in flagged_steps:  # what is flagged is read as missing
            m = {k: None if i in flagged.get(k, ()) else m.get(k) for k in keys.STEP_TIME_KEYS}
        seconds, key = keys.step_time(m)
        if seconds is not None and key is not None and seconds < 0:  # a time always comes with its key
            negative.setdefault(key, []).append((i, seconds))
            seconds = None
        elif key == keys.STEP_TIME_OLD:
            old_name.append(i)
        elif seconds is None and complete[i] and i not in flagged_steps:
            missing.append(i)
        times.append(seconds)
    found.add(
        keys.STEP_TIME + " not logged in {steps}: " + keys.STEP_TIME_OLD + " (older name) used",
        old_name,
        phase=1,
        rank=_STEP_TIME,
    )
    found.add(keys.STEP_TIME + " missing in complete {steps}", missing, phase=1, rank=_STEP_TIME)
    for key in keys.STEP_TIME_KEYS:
        found.add(
            f"{key} is negative ({{values}}) in {{steps}}: no step time there",
            [i for i, _ in negative.get(key, [])],
            [seconds for _, seconds in negative.get(key, [])],
            phase=1,
            rank=_STEP_TIME,
            flag=True,
        )
    return times
