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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, cast

from harness.capture.columns import MetricsColumns
from harness.lab.milesnames import (
    DROP_PREFIX,
    RAW_REWARD,
    RAW_REWARD_UNFILTERED,
    ROLLOUT_TIME,
    STEP_TIME,
    STEP_TIME_OLD,
    TRUNCATED_RATIO,
    WRITE_UP_MILES,
)
from harness.mileslog import keys
from harness.mileslog.derive import derive_step_values
from harness.mileslog.keys import whole_number
from harness.summary.document import StepTable
from harness.summary.frames import RunFrame
from harness.summary.notes import Rank, RunNotes, StepNotes
from harness.summary.run_config import RunConfig
from harness.summary.sanity import MAX_EXACT_INT, SPAN_SLACK_US, reward_range
from harness.summary.windows import Coverage
from harness.times import US_PER_S, format_time_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

METRICS = "metrics.jsonl"
_ABSENT = object()
_INF = math.inf
_VALUE_KEYS = (
    ROLLOUT_TIME,
    RAW_REWARD,
    RAW_REWARD_UNFILTERED,
    TRUNCATED_RATIO,
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

    rollout = _rollout_times(values[ROLLOUT_TIME], complete, flagged, found)
    overlaps = _pause_overlaps(frame, rollout, found)

    rollout_side = [keys.rollout_side_logged(m) for m in columns.metrics]
    counts = _group_counts(config, group_keys, groups, rollout_side, found)

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
            f"{RAW_REWARD_UNFILTERED} (only the write-up's, {WRITE_UP_MILES}, does), so the reward before "
            f"the filter is {RAW_REWARD} x B plus each dropped group's reward, over B plus the dropped groups"
        )
    if config.filter and not any_reward and len(columns) and not not_derived:
        notes.append(
            f"filter run without {RAW_REWARD_UNFILTERED}: the Miles in the image does not print it, so reward "
            f"is null ({RAW_REWARD} counts only the kept groups and is not comparable)"
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
        truncated_ratio=finite_column(values[TRUNCATED_RATIO]),
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
        found.add(problem, positions, [raw[i] for i in positions], rank=_ROLLOUT, flag=positions is negative)
    return rollout


@dataclass
class _Overlaps:
    overlap: list[Optional[float]]
    adjusted: list[Optional[float]]
    clean: list[Optional[bool]]
    pause_total_s: float


def _pause_overlaps(frame: RunFrame, rollout: list[Optional[float]], found: _Found) -> _Overlaps:
    """Each rollout's pause overlap, adjusted time and clean flag (None where unknown), and the pause total.

    A column at a time in plain floats: the windows each rollout meets are
    found by bisection (`windows.Coverage`), and only the rollouts a window
    cuts are computed one by one, so a run of one step sets nothing up and a
    run of thousands costs a few passes over its columns.
    """
    span = frame.span
    time_scale = frame.time_scale if frame.time_scale is not None else 1  # unknown: see below
    origin = frame.first_time_us if frame.first_time_us is not None else 0
    windows = Coverage(frame.windows, origin)
    count = len(rollout)
    ends = frame.steps.t_rollout_end_us
    # Times as floats: exact, as integers of microseconds below 2^53 (until the year 2255).
    end_us = _floats(ends)
    known = _placed(frame, rollout, end_us, bool(windows), found)
    if frame.time_scale is None and windows:  # where the rollouts lie against the windows is unknown (a note)
        known = []
    every = len(known) == count  # the common run: its columns are taken as they are
    seconds = cast("list[float]", rollout if every else [rollout[i] for i in known])
    float_origin = float(origin)  # as a float subtracts it: a float minus a float is faster, and the same
    hi = [end - float_origin for end in cast("list[float]", end_us if every else [end_us[i] for i in known])]
    wall_per_s = float(time_scale) * US_PER_S  # a rollout time of 1e303 s is infinite in wall time: said below
    lo = [end - s * wall_per_s for end, s in zip(hi, seconds)]
    if span.start_us is not None and frame.time_scale is not None and lo:
        first_allowed = span.start_us - SPAN_SLACK_US - origin
        early = [k for k, start in enumerate(lo) if not start >= first_allowed] if min(lo) < first_allowed else []
        if early:
            found.add(
                f"{ROLLOUT_TIME} ({{values}}) would start the rollout before the run did "
                f"({format_time_us(span.start_us)}) in {{steps}}: pause overlap unknown, not counted clean",
                [known[k] for k in early],
                [seconds[k] for k in early],
                rank=_ROLLOUT_END,
                flag=True,
            )
            keep = sorted(set(range(len(known))) - set(early))
            known, seconds = [known[k] for k in keep], [seconds[k] for k in keep]
            hi, lo = [hi[k] for k in keep], [lo[k] for k in keep]
            every = False
    overlap_k: list[Optional[float]] = [0.0] * len(known)
    adjusted_k: list[Optional[float]] = list(seconds)
    clean_k = [True] * len(known)
    covered_whole: list[int] = []
    for k, covered_us in windows.cover(lo, hi):  # the rollouts a window cuts
        trainer_us = covered_us / time_scale if time_scale != 1 else covered_us
        step_overlap = trainer_us / US_PER_S
        step_adjusted = (seconds[k] * US_PER_S - trainer_us) / US_PER_S
        if -_INF < step_overlap + step_adjusted < _INF:  # both finite (or a sum past the float range: looked at)
            overlap_k[k], adjusted_k[k] = step_overlap, step_adjusted
        else:  # strict JSON: an overflow is null, with a note per value
            overlap_k[k], adjusted_k[k] = _finite_or_noted(known[k], step_overlap, step_adjusted, found)
        clean_k[k] = False
        # Times are whole microseconds: less than one left of the rollout is nothing left (0, -0.0, 3e-14).
        if seconds[k] * wall_per_s - covered_us < 1.0 or seconds[k] == 0.0:
            covered_whole.append(known[k])
            adjusted_k[k] = None
    zero = [k for k, s in enumerate(seconds) if s == 0.0 and clean_k[k]] if 0.0 in seconds else []
    for k in zero:
        adjusted_k[k] = None
    found.add(
        "the pause windows cover the whole rollout in {steps}: rollout_time_adjusted_s null (nothing of it "
        "is left once the pauses are taken out)",
        sorted(covered_whole),
        rank=_ROLLOUT_END,
        flag=True,
    )
    found.add(
        f"{ROLLOUT_TIME} is 0 in {{steps}}: rollout_time_adjusted_s null",
        [known[k] for k in zero],
        rank=_ROLLOUT_END,
        flag=True,
    )
    pause_total_s = windows.total / time_scale / US_PER_S
    if every:
        return _Overlaps(overlap_k, adjusted_k, cast("list[Optional[bool]]", clean_k), pause_total_s)
    overlap: list[Optional[float]] = [None] * count
    adjusted: list[Optional[float]] = [None] * count
    clean: list[Optional[bool]] = [None] * count
    for k, i in enumerate(known):
        overlap[i], adjusted[i], clean[i] = overlap_k[k], adjusted_k[k], clean_k[k]
    return _Overlaps(overlap, adjusted, clean, pause_total_s)


def _placed(
    frame: RunFrame,
    rollout: Sequence[Optional[float]],
    end_us: Sequence[Optional[float]],
    has_windows: bool,
    found: _Found,
) -> list[int]:
    """The steps whose rollout can be placed against the pause windows: a rollout time, and an end that is there,
    inside the run, and not back in time (in a run with windows); each of the others is noted."""
    span = frame.span
    ends = frame.steps.t_rollout_end_us
    low = -_INF if span.start_us is None else span.start_us - SPAN_SLACK_US
    high = _INF if span.end_us is None else span.end_us + SPAN_SLACK_US
    present = cast("list[float]", end_us)  # when None is not in it
    if None not in end_us and (not present or low <= min(present) and max(present) <= high):
        timed = list(range(len(end_us)))  # every end is there, inside the run
    else:
        timed = [i for i, end in enumerate(end_us) if end is not None and low <= end <= high]
        # A note's text is made only where it has steps (the common run has none).
        positions = [i for i, (r, end) in enumerate(zip(rollout, end_us)) if r is not None and end is None]
        found.add("t_rollout_end missing in {steps}: pause overlap unknown there", positions, rank=_ROLLOUT_END)
        positions = [
            i
            for i, (r, end) in enumerate(zip(rollout, end_us))
            if r is not None and end is not None and not low <= end <= high
        ]
        if positions:
            found.add(
                f"t_rollout_end ({{values}}) is outside the run ({span.text()}) in {{steps}}: "
                "pause overlap unknown, not counted clean",
                positions,
                [_time_text(ends[i]) for i in positions],
                rank=_ROLLOUT_END,
                flag=True,
            )
    suspect = _back_in_time(ends, end_us, timed, has_windows, found)
    if len(timed) == len(rollout) and not suspect and None not in rollout:
        return timed
    return [i for i in timed if rollout[i] is not None and i not in suspect]


def _back_in_time(
    ends: Sequence[Optional[int]], end_us: Sequence[Optional[float]], timed: list[int], has_windows: bool, found: _Found
) -> set[int]:
    """The steps whose t_rollout_end goes back in time from the step before (both of each pair), noted.

    Rollouts end in the order of their steps, so one of the two times is
    wrong, and which one cannot be told: where the run has pause windows,
    neither step's pause overlap is known. Without windows nothing depends on
    the times (no pause can overlap), so the note is all. `timed`: the steps
    whose end is there and inside the run.
    """
    times = cast("list[float]", end_us if len(timed) == len(end_us) else [end_us[i] for i in timed])
    if times == sorted(times):
        return set()
    suspect: set[int] = set()
    for k in range(len(times) - 1):
        if not times[k + 1] < times[k]:
            continue
        before, after = timed[k], timed[k + 1]
        unknown = ": pause overlap unknown in both, not counted clean" if has_windows else ""
        found.add(
            f"t_rollout_end goes back in time from step {found.steps[before]} "
            f"({_time_text(ends[before])}) to step {found.steps[after]} ({_time_text(ends[after])})" + unknown,
            [before, after],
            rank=_ROLLOUT_END,
            flag=True,
        )
        if has_windows:
            suspect.update((before, after))
    return suspect


def _floats(values: Sequence[Optional[int]]) -> list[Optional[float]]:
    """Each value as a float, None kept."""
    if None in values:
        return [None if value is None else float(value) for value in values]
    return list(map(float, cast("Sequence[int]", values)))


def _finite_or_noted(
    position: int, overlap: float, adjusted: float, found: _Found
) -> tuple[Optional[float], Optional[float]]:
    """A step's overlap and adjusted time, each None (with a note naming its value) where it is not finite."""
    kept: list[Optional[float]] = []
    for rank, (name, value) in enumerate((("pause_overlap_s", overlap), ("rollout_time_adjusted_s", adjusted))):
        if -_INF < value < _INF:
            kept.append(value)
            continue
        found.add(
            f"{name} is not a finite number ({value!r}) in {{steps}}: null",
            [position],
            rank=(_NON_FINITE, rank),
            flag=True,
        )
        kept.append(None)
    return kept[0], kept[1]


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
    filtering = config.filter
    for i, step in enumerate(counted):
        if step.problems:
            for key, value in step.not_counts:
                not_counts.setdefault(key, []).append((i, value))
            for name, total in step.past_exact:
                past_exact.setdefault(name, []).append((i, total))
            for key in step.unreadable:
                unreadable.setdefault(key, []).append(i)
        if filtering and rollout_side[i]:  # keys.drops_known, with rollout_side computed once per step
            values = step.values
            drops = values["dropped_groups"]
            dropped[i], dropped_right[i] = drops, values["dropped_all_right"]
            dropped_wrong[i], dropped_other[i] = values["dropped_all_wrong"], values["dropped_other"]
            if batch is not None and over and drops is not None:
                needed = -(-(batch + drops) // over)
                batches[i] = needed if needed <= MAX_EXACT_INT else None  # B and O of 2^53 and 1: not a count
        elif filtering:
            no_rollout_side.append(i)
        elif step.values["dropped_groups"] or step.drop_keys_unknown:
            drops_without_filter.append(i)
    for name in _ZERO_STD_FIELDS:
        columns[name] = [step.values[name] for step in counted]
    for key, found_at in not_counts.items():
        unknown = [*_fields_of(key), *(["batches"] if key.startswith(DROP_PREFIX) else [])]
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

    problems: bool = field(init=False)  # any of the three above: read once a step

    def __post_init__(self) -> None:
        object.__setattr__(self, "problems", bool(self.not_counts or self.past_exact or self.unreadable))


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
        any(key.startswith(DROP_PREFIX) for key, _ in not_counts),
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


def _step_times(
    metrics: Sequence[JSONObject], complete: Sequence[bool], flagged: dict[str, set[int]], found: _Found
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
        rank=_STEP_TIME,
    )
    found.add(STEP_TIME + " missing in complete {steps}", missing, phase=1, rank=_STEP_TIME)
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
