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

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from harness.capture.columns import MetricsColumns
from harness.lab.milesnames import (
    RAW_REWARD,
    RAW_REWARD_UNFILTERED,
    ROLLOUT_TIME,
    STEP_TIME,
    STEP_TIME_OLD,
    TRUNCATED_RATIO,
    WRITE_UP_MILES,
)
from harness.mileslog import keys
from harness.summary.document import StepTable
from harness.summary.frames import RunFrame
from harness.summary.group_counts import ABSENT, group_counts
from harness.summary.notes import (
    CHECK_FLAGGED,
    CHECK_INCOMPLETE,
    CHECK_REWARD,
    CHECK_ROLLOUT,
    CHECK_STEP_TIME,
    METRICS,
    RunNotes,
    StepsFound,
)
from harness.summary.overlaps import pause_overlaps
from harness.summary.run_config import RunConfig
from harness.summary.sanity import MAX_EXACT_INT, reward_range

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

_INF = math.inf
_VALUE_KEYS = (
    ROLLOUT_TIME,
    RAW_REWARD,
    RAW_REWARD_UNFILTERED,
    TRUNCATED_RATIO,
    *keys.STEP_TIME_KEYS,
)


@dataclass
class Rows:
    """A run's step rows and what the rest of its summary needs from them."""

    table: StepTable
    reward_key: Optional[str]  # the Miles key of the reward; None when no step has one
    pause_total_s: float


def build_rows(frame: RunFrame, notes: RunNotes) -> Rows:
    """The step rows of one run; `notes` gets one sentence per problem found."""
    columns = frame.steps
    complete = columns.complete
    config = frame.config
    found = StepsFound(columns.step)
    values, group_keys, groups, flagged = _read_columns(columns, found)

    rollout = _rollout_times(values[ROLLOUT_TIME], complete, flagged, found)
    overlaps = pause_overlaps(frame, rollout, found)

    rollout_side = [keys.rollout_side_logged(m) for m in columns.metrics]
    counts = group_counts(config, group_keys, groups, rollout_side, found)

    raw_reward = finite_column(values[RAW_REWARD])
    raw_unfiltered = finite_column(values[RAW_REWARD_UNFILTERED])
    reward_key = keys.reward_key(config.filter)
    reward = list(raw_unfiltered if reward_key == RAW_REWARD_UNFILTERED else raw_reward)
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
        rank=CHECK_REWARD,
    )

    step_time = _step_times(columns.metrics, complete, flagged, found)
    found.add(
        "{steps} incomplete (the run ended before the step did): shown, left out of medians and means",
        [i for i, done in enumerate(complete) if not done],
        phase=1,
        rank=CHECK_INCOMPLETE,
    )

    if config.filter:
        _derived_note(reward_source, notes)
    if config.filter and not any_reward and len(columns) and not not_derived:
        notes.append(
            f"filter run without {RAW_REWARD_UNFILTERED}: the Miles in the image does not print it, so reward "
            f"is null ({RAW_REWARD} counts only the kept groups and is not comparable)"
        )
        found.notes.discard(no_reward)  # said once for the whole run
    if config.filter and (config.rollout_batch_size is None or not config.over_sampling_batch_size):
        notes.append("B or O unknown: batches not computed")
    found.notes.emit(notes)
    _steps_note(frame, notes)

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
        truncated_ratio=finite_column(values[TRUNCATED_RATIO]),
        step_time_s=step_time,
        reward_source=reward_source,
        **counts,
    )
    return Rows(table, reward_key if any_reward else None, overlaps.pause_total_s)


def _derived_note(reward_source: list[Optional[str]], notes: RunNotes) -> None:
    """A filter run's note on the rewards derived (none when every reward was printed)."""
    derived = reward_source.count(keys.DERIVED)
    if not derived:
        return
    printed = reward_source.count(keys.PRINTED)
    where = "every step with a reward" if not printed else f"{derived} step{'' if derived == 1 else 's'}"
    notes.append(
        f"reward derived in {where} (reward_source: derived): this Miles does not print "
        f"{RAW_REWARD_UNFILTERED} (only the write-up's, {WRITE_UP_MILES}, does), so the reward before "
        f"the filter is {RAW_REWARD} x B plus each dropped group's reward, over B plus the dropped groups"
    )


def _steps_note(frame: RunFrame, notes: RunNotes) -> None:
    """The run's note on steps missing: none at all, or fewer complete than expected."""
    complete_count = sum(frame.steps.complete)
    if not len(frame.steps):
        notes.append("no step records (metrics.jsonl missing or empty)")
    elif frame.steps_expected is not None and complete_count < frame.steps_expected:
        notes.append(
            f"{complete_count} complete step{'' if complete_count == 1 else 's'} of {frame.steps_expected} expected"
        )


def _derive_rewards(
    config: RunConfig,
    metrics: Sequence[Mapping[str, object]],
    reward: list[Optional[float]],
    source: list[Optional[str]],
    flagged: set[int],
    rollout_side: Sequence[bool],
    found: StepsFound,
) -> set[int]:
    """Fill in the reward before the filter where a filter step does not print it (`keys.reward_reading`), and
    mark those rows `derived`; returns the rows where it could not be derived, each reason noted once."""
    if not config.filter:
        return set()
    why_not: dict[str, list[int]] = {}
    for i, step_metrics in enumerate(metrics):
        if reward[i] is not None or i in flagged or RAW_REWARD_UNFILTERED in step_metrics:
            continue
        if not rollout_side[i] and RAW_REWARD not in step_metrics:
            continue  # nothing of the step's rollout was logged: the missing reward is said as missing
        reading = keys.reward_reading(step_metrics, True, config.rollout_batch_size)
        if reading.value is None or not math.isfinite(reading.value):
            why_not.setdefault(reading.why_none or "not derivable", []).append(i)
            continue
        reward[i], source[i] = reading.value, keys.DERIVED
    for why, positions in why_not.items():
        found.add(f"no reward in {{steps}}: {why}", positions, phase=1, rank=CHECK_REWARD)
    return {i for positions in why_not.values() for i in positions}


def _rewards_out_of_range(
    reward: list[Optional[float]], reward_key: str, config: RunConfig, found: StepsFound
) -> set[int]:
    """Positions of the rewards the run's reward type cannot give: flagged (one note), set to None in `reward`."""
    low, high, gives = reward_range(config.rm_type)
    bad = [i for i, value in enumerate(reward) if value is not None and not low <= value <= high]
    found.add(
        f"{METRICS}: {reward_key} {{values}} in {{steps}} is outside {gives} ({low:g} to {high:g}): "
        "left out of the means",
        bad,
        [reward[i] for i in bad],
        phase=1,
        rank=CHECK_REWARD,
        flag=True,
    )
    for i in bad:
        reward[i] = None
    return set(bad)


def _read_columns(
    columns: MetricsColumns,
    found: StepsFound,
) -> tuple[dict[str, list[JSONValue]], list[str], list[list[object]], dict[str, set[int]]]:
    """(the value keys' columns, the group keys, their columns, the positions flagged per key).

    Absent values are None in the value columns, `ABSENT` in the group
    columns (for the drop keys absence means 0). An integer beyond 2^53 in a
    value column is flagged (one note per key) and read as missing (None);
    the group columns are checked as counts (`group_counts`).
    """
    group_keys = sorted(key for key in columns.keys() if key.startswith(keys.GROUP_KEY_PREFIXES))
    values = dict(zip(_VALUE_KEYS, columns.columns(_VALUE_KEYS)))
    groups: list[list[object]] = list(columns.columns(group_keys, ABSENT))
    flagged: dict[str, set[int]] = {}
    for key, column in values.items():
        bad = _out_of_range(column)
        if bad:
            found.add(
                f"{METRICS}: {key} is an integer beyond 2^53 ({{values}}) in {{steps}}: read as missing",
                bad,
                [column[i] for i in bad],
                rank=(CHECK_FLAGGED, key),
                flag=True,
            )
            flagged[key] = set(bad)
            for i in bad:
                column[i] = None
    return values, group_keys, groups, flagged


def _rollout_times(
    raw: list[JSONValue], complete: Sequence[bool], flagged: dict[str, set[int]], found: StepsFound
) -> list[Optional[float]]:
    """The rollout times in seconds: finite and not negative, else None (with a note)."""
    rollout = finite_column(raw)
    rollout_flagged = flagged.get(ROLLOUT_TIME, set())
    not_number = [i for i, (v, s) in enumerate(zip(raw, rollout)) if s is None and v is not None]
    negative = [i for i, s in enumerate(rollout) if s is not None and s < 0]
    missing = [i for i, (v, done) in enumerate(zip(raw, complete)) if v is None and done and i not in rollout_flagged]
    for i in negative:
        rollout[i] = None
    for problem, positions in (
        (f"{ROLLOUT_TIME} is not a finite number in {{steps}}: no rollout time there", not_number),
        (f"{ROLLOUT_TIME} is negative ({{values}}) in {{steps}}: no rollout time there", negative),
        (f"{ROLLOUT_TIME} missing in complete {{steps}}: no rollout time there", missing),
    ):
        found.add(problem, positions, [raw[i] for i in positions], rank=CHECK_ROLLOUT, flag=positions is negative)
    return rollout


def finite_column(column: Sequence[object]) -> list[Optional[float]]:
    """`keys.finite_number` of each value (the finite floats, the bulk of a column, pass straight through)."""
    finite_number = keys.finite_number
    return [v if type(v) is float and -_INF < v < _INF else None if v is None else finite_number(v) for v in column]


def _out_of_range(column: Sequence[object]) -> list[int]:
    """Positions of the integers beyond +-2^53."""
    if int not in set(map(type, column)):
        return []
    return [i for i, v in enumerate(column) if type(v) is int and not -MAX_EXACT_INT <= v <= MAX_EXACT_INT]


def _step_times(
    metrics: Sequence[JSONObject], complete: Sequence[bool], flagged: dict[str, set[int]], found: StepsFound
) -> list[Optional[float]]:
    """The step times by the Miles rule (`keys.step_time`), not negative; notes for the older name and the gaps."""
    flagged_steps = set().union(*(flagged.get(key, ()) for key in keys.STEP_TIME_KEYS))
    newer = finite_column([m.get(STEP_TIME) for m in metrics])
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
        elif key == STEP_TIME_OLD:
            old_name.append(i)
        elif seconds is None and complete[i] and i not in flagged_steps:
            missing.append(i)
        times.append(seconds)
    found.add(
        STEP_TIME + " not logged in {steps}: " + STEP_TIME_OLD + " (older name) used",
        old_name,
        phase=1,
        rank=CHECK_STEP_TIME,
    )
    found.add(STEP_TIME + " missing in complete {steps}", missing, phase=1, rank=CHECK_STEP_TIME)
    for key in keys.STEP_TIME_KEYS:
        found.add(
            f"{key} is negative ({{values}}) in {{steps}}: no step time there",
            [i for i, _ in negative.get(key, [])],
            [seconds for _, seconds in negative.get(key, [])],
            phase=1,
            rank=CHECK_STEP_TIME,
            flag=True,
        )
    return times
