"""A run's aggregates over its complete steps (docs/summary.md, "The rules").

Medians are the middle value, or the mean of the two middle values for an
even count (what pandas gives). Means are `math.fsum(values) / count`, so
they do not depend on the order of summation; a sum that overflows (rewards
of 1e308) makes the mean null, with a note naming the key and the values.
Nothing is rounded.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from harness.summary.document import Aggregates, StepTable
from harness.summary.notes import RunNotes, shown, values_text
from harness.summary.sanity import MAX_EXACT_INT

FIRST_STEPS = 4


def median(values: Sequence[float]) -> Optional[float]:
    """The median as a float (the mean of the two middle values for an even count); None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[middle])
    return (float(ordered[middle - 1]) + float(ordered[middle])) / 2


def run_median(values: Sequence[float], steps: int, what: str, notes: RunNotes) -> Optional[float]:
    """The median of a run's values over its `steps` complete steps; None (and a note) when fewer than half have one.

    The steps that lack a value are not a random few (their rollout met a
    pause window left open, a clock gone wrong, a scale unknown...), so the
    median of a minority is not the run's median.
    """
    if len(values) * 2 >= steps or not values:  # none: the notes of the steps say why
        return median(values)
    notes.append(
        f"{what} is null: only {len(values)} of {steps} complete steps have a value "
        f"(the median of those is {median(values)!r})"
    )
    return None


def mean(values: Sequence[float], what: str, notes: RunNotes) -> Optional[float]:
    """The mean with a correctly rounded sum; None (and a note) when the sum overflows."""
    if not values:
        return None
    try:
        return math.fsum(values) / len(values)
    except OverflowError:
        notes.flag(f"{what} is null: the sum of its values overflows (values up to {values_text([max(values)])})")
        return None


def total(values: Sequence[Optional[int]], what: str, notes: RunNotes) -> Optional[int]:
    """The sum of the counts present (None when none is); None (and a note) when it passes 2^53."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    counted = sum(present)
    if counted > MAX_EXACT_INT:
        notes.flag(f"{what} is null: the sum of its counts passes 2^53 ({shown(counted)})")
        return None
    return counted


def aggregate(table: StepTable, filter_on: bool, pause_total_s: float, reward_key: str, notes: RunNotes) -> Aggregates:
    """The aggregates of one run; `notes` gets what they leave out."""
    done = table.complete_positions()
    adjusted = [v for v in (table.rollout_time_adjusted_s[i] for i in done) if v is not None]
    clean = [t for t in (table.rollout_time_s[i] for i in done if table.clean[i] is True) if t is not None]
    dropped = [v for v in (table.dropped_groups[i] for i in done) if v is not None]
    rewards = [v for v in (table.reward[i] for i in done) if v is not None]
    first_rewards = [v for v in (table.reward[i] for i in done[:FIRST_STEPS]) if v is not None]
    step_times = [t for t in (table.step_time_s[i] for i in done) if t is not None]
    has_all_step_times = bool(done) and len(step_times) == len(done)
    if done and len(first_rewards) < FIRST_STEPS and rewards:
        notes.append(f"reward_mean_first4 is null: fewer than {FIRST_STEPS} of the first complete steps have a reward")
    if done and not has_all_step_times and step_times:
        notes.append("step_time_sum_s is null: a complete step has no step time")
    source = f"metrics.jsonl {reward_key}"
    step_time_sum = None
    if has_all_step_times:
        try:
            step_time_sum = math.fsum(step_times)
        except OverflowError:
            notes.flag(
                f"step_time_sum_s is null: the sum of the step times overflows "
                f"(values up to {values_text([max(step_times)])})"
            )

    def column_total(name: str) -> Optional[int]:
        column = getattr(table, name)
        return total([column[i] for i in done], f"{name}_total", notes)

    return Aggregates(
        steps=len(done),
        clean_steps=len(clean),
        rollout_time_adjusted_median_s=run_median(adjusted, len(done), "rollout_time_adjusted_median_s", notes),
        rollout_time_clean_median_s=median(clean),
        dropped_groups_min=min(dropped) if filter_on and dropped else None,
        dropped_groups_median=(
            run_median(dropped, len(done), "dropped_groups_median", notes) if filter_on and dropped else None
        ),
        dropped_groups_max=max(dropped) if filter_on and dropped else None,
        reward_mean=mean(rewards, f"reward_mean ({source})", notes),
        reward_mean_first4=(
            mean(first_rewards, f"reward_mean_first4 ({source})", notes) if len(first_rewards) == FIRST_STEPS else None
        ),
        step_time_sum_s=step_time_sum,
        pause_total_s=pause_total_s,
        incomplete_steps=len(table) - len(done),
        dropped_all_right_total=column_total("dropped_all_right") if filter_on else None,
        dropped_all_wrong_total=column_total("dropped_all_wrong") if filter_on else None,
        zero_std_all_right_total=column_total("zero_std_all_right"),
        zero_std_all_wrong_total=column_total("zero_std_all_wrong"),
    )


def null_non_finite(aggregates: Aggregates, notes: RunNotes) -> None:
    """Strict JSON: an aggregate that is not a finite number (an overflow) is null, with a note."""
    for name, value in vars(aggregates).items():
        if type(value) is float and not math.isfinite(value):
            setattr(aggregates, name, None)
            notes.flag(f"aggregates.{name} is not a finite number ({value!r}): null")
