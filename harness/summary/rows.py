"""Step rows: one run's frame -> its `StepTable` (docs/summary.md, "The rules" and "Sanity rules").

Computed a column at a time, Miles's keys read by `harness.mileslog.keys`:

- The rollout of step N occupies [t_rollout_end - rollout_time x time_scale,
  t_rollout_end] (wall clock, microseconds relative to the run's first time,
  so float64 holds them to well under a microsecond). Its pause overlap is the
  length of the merged windows inside it, divided by time_scale; adjusted =
  rollout - overlap; clean = no overlap. Unknown (null) where the rollout time
  or t_rollout_end is missing, where t_rollout_end lies outside the run's
  span, or where the rollout would start before the run did.
- Dropped groups and batches (filter runs), zero-variance counts, the reward
  and the step time, by the Miles rules.
- An integer beyond 2^53 in a key the summary reads is flagged and read as
  missing; a negative rollout or step time is flagged and left out; a
  computed value that is not finite is null. Each is one note naming
  metrics.jsonl, the key, the values and the steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from harness.mileslog import keys
from harness.mileslog.derive import derive_step_values
from harness.summary.document import StepTable
from harness.summary.frames import RunFrame
from harness.summary.notes import RunNotes, StepNotes
from harness.summary.sanity import out_of_range_int
from harness.times import US_PER_S, format_time_us

METRICS = "metrics.jsonl"
_ABSENT = object()

# The order of the checks within one step (see StepNotes): phase 0 reads the rollout
# times, phase 1 the rest of the step; notes come out as if the steps were read one by one.
_FLAGGED, _ROLLOUT, _ROLLOUT_END = 0, 1, 2
_GROUPS, _DROPS, _REWARD, _STEP_TIME, _INCOMPLETE = 0, 1, 2, 3, 4


@dataclass
class Rows:
    """A run's step rows and what the rest of its summary needs from them."""

    table: StepTable
    reward_key: Optional[str]  # the Miles key of the reward; None when no step has one
    pause_total_s: float


def build_rows(frame: RunFrame, notes: RunNotes) -> Rows:
    """The step rows of one run; `notes` gets one sentence per problem found."""
    import numpy as np

    from harness.summary.windows import merge_windows, overlap_lengths, union_length

    columns = frame.steps
    count = len(columns)
    steps, complete, metrics = columns.step, columns.complete, columns.metrics
    problems = StepNotes()
    config = frame.config
    filter_on, batch, over = config.filter, config.rollout_batch_size, config.over_sampling_batch_size
    time_scale = frame.time_scale

    flagged: dict[str, set[int]] = {}

    def read(key: str) -> list[Any]:
        """The key's column with integers beyond 2^53 flagged (one note) and read as missing."""
        column = columns.column(key)
        bad = [i for i, value in enumerate(column) if type(value) is int and out_of_range_int(value)]
        if bad:
            problems.add(f"{METRICS}: {key} is an integer beyond 2^53 ({{values}}) in {{steps}}: read as missing",
                         bad, [steps[i] for i in bad], [column[i] for i in bad], rank=(_FLAGGED, key), flag=True)
            flagged[key] = set(bad)
            for i in bad:
                column[i] = None
        return column

    # --- phase 0: rollout times and where they lie
    rollout_raw = read(keys.ROLLOUT_TIME)
    rollout = [keys.finite_number(value) for value in rollout_raw]
    not_number, negative, missing = [], [], []
    for i, (value, seconds) in enumerate(zip(rollout_raw, rollout)):
        if value is not None and seconds is None:
            not_number.append(i)
        elif seconds is not None and seconds < 0:
            negative.append(i)
            rollout[i] = None
        elif value is None and complete[i] and i not in flagged.get(keys.ROLLOUT_TIME, ()):
            missing.append(i)
    for problem, found in ((f"{keys.ROLLOUT_TIME} is not a finite number in {{steps}}: no rollout time there", not_number),
                           (f"{keys.ROLLOUT_TIME} is negative ({{values}}) in {{steps}}: no rollout time there", negative),
                           (f"{keys.ROLLOUT_TIME} missing in complete {{steps}}: no rollout time there", missing)):
        problems.add(problem, found, [steps[i] for i in found], [rollout_raw[i] for i in found], rank=_ROLLOUT,
                     flag=found is negative)

    span = frame.span
    ends = columns.t_rollout_end_us
    starts, stops = merge_windows(frame.windows)
    origin = frame.first_time_us if frame.first_time_us is not None else 0

    no_end, outside = [], []
    rollout_s = np.full(count, np.nan)
    end_rel = np.full(count, np.nan)
    for i, seconds in enumerate(rollout):
        if seconds is None:
            continue
        rollout_s[i] = seconds
        end = ends[i]
        if end is None:
            no_end.append(i)
        elif not span.contains(end):
            outside.append(i)
        else:
            end_rel[i] = end - origin
    problems.add("t_rollout_end missing in {steps}: pause overlap unknown there", no_end,
                 [steps[i] for i in no_end], rank=_ROLLOUT_END)
    problems.add(f"t_rollout_end ({{values}}) is outside the run ({span.text()}) in {{steps}}: "
                 "pause overlap unknown, not counted clean", outside, [steps[i] for i in outside],
                 [format_time_us(ends[i]) for i in outside], rank=_ROLLOUT_END, flag=True)
    wall_us = rollout_s * (float(time_scale) * US_PER_S)
    known = ~np.isnan(rollout_s) & ~np.isnan(end_rel)
    hi = np.where(known, end_rel, 0.0)
    lo = hi - np.where(known, wall_us, 0.0)
    if span.start_us is not None:
        early = known & ~(lo >= span.start_us - origin)
        found = np.flatnonzero(early).tolist()
        problems.add(f"{keys.ROLLOUT_TIME} ({{values}}) would start the rollout before the run did "
                     f"({format_time_us(span.start_us)}) in {{steps}}: pause overlap unknown, not counted clean",
                     found, [steps[i] for i in found], [rollout[i] for i in found], rank=_ROLLOUT_END, flag=True)
        known &= ~early
        hi = np.where(known, hi, 0.0)
        lo = np.where(known, lo, 0.0)
    overlap_wall_us = overlap_lengths(starts - origin, stops - origin, lo, hi)
    overlap_trainer_us = overlap_wall_us / time_scale if time_scale != 1 else overlap_wall_us
    with np.errstate(over="ignore", invalid="ignore"):
        adjusted_s = (rollout_s * US_PER_S - overlap_trainer_us) / US_PER_S
    touched = overlap_wall_us != 0.0
    overlap_column = _where_known(known, np.where(touched, overlap_trainer_us / US_PER_S, 0.0))
    adjusted_column = _where_known(known, np.where(touched, adjusted_s, rollout_s))
    clean_column = [None if not k else not t for k, t in zip(known.tolist(), touched.tolist())]

    # --- phase 1: groups, reward, step time, completeness
    group_keys = sorted(key for key in columns.keys() if key.startswith(keys.GROUP_KEY_PREFIXES))
    group_columns = []
    for key in group_keys:
        column = read(key)
        present = columns.column(key, _ABSENT)
        group_columns.append([_ABSENT if p is _ABSENT else v for p, v in zip(present, column)])
    derived = _derive_column(group_keys, group_columns, count)
    rollout_side = [keys.rollout_side_logged(m) for m in metrics]

    dropped: list[Optional[int]] = [None] * count
    dropped_right: list[Optional[int]] = [None] * count
    dropped_wrong: list[Optional[int]] = [None] * count
    dropped_other: list[Optional[int]] = [None] * count
    batches: list[Optional[int]] = [None] * count
    unreadable: dict[str, list[int]] = {}
    no_rollout_side, drops_without_filter = [], []
    for i, values in enumerate(derived):
        for key in values["unreadable_keys"]:
            if i not in flagged.get(key, ()):
                unreadable.setdefault(key, []).append(i)
        if filter_on and rollout_side[i]:
            dropped[i] = values["dropped_groups"]
            dropped_right[i], dropped_wrong[i] = values["dropped_all_right"], values["dropped_all_wrong"]
            dropped_other[i] = sum(values["dropped_other"].values())
            batches[i] = -(-(batch + dropped[i]) // over) if batch is not None and over else None
        elif filter_on:
            no_rollout_side.append(i)
        elif values["dropped_groups"]:
            drops_without_filter.append(i)
    for key, found in unreadable.items():
        problems.add(f"{key} is not a whole number in {{steps}}: left out of the counts", found,
                     [steps[i] for i in found], phase=1, rank=(_GROUPS, key))
    problems.add("no rollout-side keys in {steps}: dropped groups unknown there", no_rollout_side,
                 [steps[i] for i in no_rollout_side], phase=1, rank=_DROPS)
    problems.add("drop keys logged without the filter in {steps}: not shown", drops_without_filter,
                 [steps[i] for i in drops_without_filter], phase=1, rank=_DROPS)

    raw_reward = [keys.finite_number(v) for v in read(keys.RAW_REWARD)]
    raw_unfiltered = [keys.finite_number(v) for v in read(keys.RAW_REWARD_UNFILTERED)]
    reward_key = keys.reward_key(filter_on)
    reward = raw_unfiltered if reward_key == keys.RAW_REWARD_UNFILTERED else raw_reward
    any_reward = any(value is not None for value in reward)
    no_reward = reward_key + " missing in {steps}: no reward there"
    found = [i for i in range(count) if reward[i] is None and (rollout_side[i] or complete[i])
             and i not in flagged.get(reward_key, ())]
    problems.add(no_reward, found, [steps[i] for i in found], phase=1, rank=_REWARD)

    for key in keys.STEP_TIME_KEYS:
        read(key)  # flags what is out of range; the values are read by the rule below
    step_time: list[Optional[float]] = [None] * count
    old_name, step_time_missing, step_time_negative = [], [], []
    for i, m in enumerate(metrics):
        if _any_flagged(flagged, i):  # what is flagged is read as missing
            m = {k: None if i in flagged.get(k, ()) else m.get(k) for k in keys.STEP_TIME_KEYS}
        seconds, key = keys.step_time(m)
        if seconds is not None and seconds < 0:
            step_time_negative.append((i, key, seconds))
            continue
        step_time[i] = seconds
        if key == keys.STEP_TIME_OLD:
            old_name.append(i)
        elif seconds is None and complete[i] and not _any_flagged(flagged, i):
            step_time_missing.append(i)
    problems.add(keys.STEP_TIME + " not logged in {steps}: " + keys.STEP_TIME_OLD + " (older name) used", old_name,
                 [steps[i] for i in old_name], phase=1, rank=_STEP_TIME)
    problems.add(keys.STEP_TIME + " missing in complete {steps}", step_time_missing,
                 [steps[i] for i in step_time_missing], phase=1, rank=_STEP_TIME)
    for key in keys.STEP_TIME_KEYS:
        found = [(i, seconds) for i, k, seconds in step_time_negative if k == key]
        problems.add(f"{key} is negative ({{values}}) in {{steps}}: no step time there", [i for i, _ in found],
                     [steps[i] for i, _ in found], [seconds for _, seconds in found], phase=1, rank=_STEP_TIME,
                     flag=True)

    incomplete = [i for i in range(count) if not complete[i]]
    problems.add("{steps} incomplete (the run ended before the step did): shown, left out of medians and means",
                 incomplete, [steps[i] for i in incomplete], phase=1, rank=_INCOMPLETE)

    if filter_on and not any_reward and count:
        notes.append(
            f"filter run without {keys.RAW_REWARD_UNFILTERED}: the Miles in the image is too old to log it, so reward "
            f"is null ({keys.RAW_REWARD} counts only the kept groups and is not comparable)"
        )
        problems.discard(no_reward)  # said once for the whole run
    if filter_on and (batch is None or not over):
        notes.append("B or O unknown: batches not computed")
    problems.emit(notes)

    complete_count = sum(complete)
    if not count:
        notes.append("no step records (metrics.jsonl missing or empty)")
    elif frame.steps_expected is not None and complete_count < frame.steps_expected:
        notes.append(f"{complete_count} complete step{'' if complete_count == 1 else 's'} of "
                     f"{frame.steps_expected} expected")

    table = StepTable(
        step=list(steps),
        complete=list(complete),
        rollout_time_s=rollout,
        pause_overlap_s=overlap_column,
        rollout_time_adjusted_s=adjusted_column,
        clean=clean_column,
        dropped_groups=dropped,
        dropped_all_right=dropped_right,
        dropped_all_wrong=dropped_wrong,
        batches=batches,
        zero_std_all_right=[values["zero_std_all_right"] for values in derived],
        zero_std_all_wrong=[values["zero_std_all_wrong"] for values in derived],
        reward=list(reward),
        raw_reward=raw_reward,
        raw_reward_unfiltered=raw_unfiltered,
        truncated_ratio=[keys.finite_number(v) for v in read(keys.TRUNCATED_RATIO)],
        step_time_s=step_time,
        dropped_other=dropped_other,
        zero_std_other=[values["zero_std_other"] for values in derived],
    )
    _null_non_finite(table, notes)
    pause_total_s = union_length(starts, stops) / time_scale / US_PER_S
    return Rows(table, reward_key if any_reward else None, pause_total_s)


def _where_known(known: Any, values: Any) -> list[Optional[float]]:
    return [value if k else None for k, value in zip(known.tolist(), values.tolist())]


def _any_flagged(flagged: dict[str, set[int]], i: int) -> bool:
    return any(i in flagged.get(key, ()) for key in keys.STEP_TIME_KEYS)


def _derive_column(group_keys: list[str], group_columns: list[list[Any]], count: int) -> list[dict[str, Any]]:
    """`derive_step_values` for each step, computed once per distinct set of drop and count values.

    Only the drop and zero-std keys matter to it, and their values repeat a
    lot from step to step, so steps share the results (read-only).
    """
    if not group_keys:
        return [derive_step_values({})] * count
    memo: dict[tuple, dict[str, Any]] = {}
    out = []
    for values in zip(*group_columns):
        try:
            derived = memo.get(values)
        except TypeError:  # an unhashable value (a list): nothing to remember
            derived = None
            values_key = None
        else:
            values_key = values
        if derived is None:
            derived = derive_step_values({k: v for k, v in zip(group_keys, values) if v is not _ABSENT})
            if values_key is not None:
                memo[values_key] = derived
        out.append(derived)
    return out


def _null_non_finite(table: StepTable, notes: RunNotes) -> None:
    """Strict JSON has no NaN or infinity: such a computed value (an overflow) is null, one note per key and value."""
    found = StepNotes()
    for rank, column_name in enumerate(("pause_overlap_s", "rollout_time_adjusted_s")):
        column = getattr(table, column_name)
        for i, value in enumerate(column):
            if value is not None and not math.isfinite(value):
                column[i] = None
                found.add(f"{column_name} is not a finite number ({value!r}) in {{steps}}: null", [i],
                          [table.step[i]], rank=rank, flag=True)
    found.emit(notes)
