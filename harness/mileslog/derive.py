"""Normalised values derived from one step's raw Miles metric keys.

Miles names the zero-variance drop reasons and counts by the group's common
reward as Python prints `round(reward, 1)`: `drop_zero_std_1`, `_1.0`,
`_0`, `_0.0`, `_-1.0`, and likewise `zero_std/count_<reward>`. "All right"
is the top reward (1), "all wrong" the bottom one (0, or -1 with -1/1
rewards); a common reward strictly between them (partial credit) is neither
and is counted under `zero_std_other`. The raw keys are never changed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Mapping, TypedDict

if TYPE_CHECKING:
    from _typeshed import SupportsItems

from harness.lab.milesnames import DROP_PREFIX, ZERO_STD_COUNT_PREFIX, ZERO_STD_DROP_PREFIX
from harness.mileslog.keys import GROUP_KEY_PREFIXES, whole_number


class DerivedValues(TypedDict):
    """`derive_step_values` of one step: its dropped and zero-variance groups by kind."""

    dropped_groups: int
    dropped_all_right: int
    dropped_all_wrong: int
    dropped_other: dict[
        str, int
    ]  # by reason (the key after `drop_`); partial-credit zero-std drops as zero_std_partial
    zero_std_all_right: int | None
    zero_std_all_wrong: int | None
    zero_std_other: int | None
    unreadable_keys: list[str]


def _reward_suffix(suffix: str) -> float | None:
    try:
        value = float(suffix)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _split_by_reward(counts: Mapping[float, int]) -> tuple[int, int, int]:
    """(all right, all wrong, other) from counts keyed by the group's common reward."""
    right = sum(n for reward, n in counts.items() if reward >= 1.0)
    wrong = sum(n for reward, n in counts.items() if reward <= 0.0)
    other = sum(n for reward, n in counts.items() if 0.0 < reward < 1.0)
    return right, wrong, other


def derive_step_values(metrics: SupportsItems[object, object]) -> DerivedValues:
    """Dropped groups (total, all right, all wrong, other reasons) and zero-variance kept groups.

    `dropped_*` are 0 when no drop key is present (Miles omits reasons that did
    not occur); `zero_std_*` are None when no count key is present (with the
    filter on, or in a Miles that does not log them). Keys whose value is not
    a whole number are listed under `unreadable_keys` and left out of sums; a
    key that is not a string is no group key.
    """
    dropped_by_reward: dict[float, int] = {}
    dropped_other: dict[str, int] = {}
    zero_std_by_reward: dict[float, int] = {}
    unreadable: list[str] = []
    dropped_total = 0
    saw_zero_std = False

    for key, value in metrics.items():
        if not isinstance(key, str) or not key.startswith(GROUP_KEY_PREFIXES):  # most keys: one test
            continue
        if key.startswith(DROP_PREFIX):
            count = whole_number(value)
            if count is None:
                unreadable.append(key)
                continue
            dropped_total += count
            reward = _reward_suffix(key[len(ZERO_STD_DROP_PREFIX) :]) if key.startswith(ZERO_STD_DROP_PREFIX) else None
            if reward is None:
                reason = key[len(DROP_PREFIX) :]
                dropped_other[reason] = dropped_other.get(reason, 0) + count
            else:
                dropped_by_reward[reward] = dropped_by_reward.get(reward, 0) + count
        elif key.startswith(ZERO_STD_COUNT_PREFIX):
            reward = _reward_suffix(key[len(ZERO_STD_COUNT_PREFIX) :])
            count = whole_number(value)
            if reward is None or count is None:
                unreadable.append(key)
                continue
            saw_zero_std = True
            zero_std_by_reward[reward] = zero_std_by_reward.get(reward, 0) + count

    drop_right, drop_wrong, drop_partial = _split_by_reward(dropped_by_reward)
    if drop_partial:
        dropped_other["zero_std_partial"] = dropped_other.get("zero_std_partial", 0) + drop_partial
    zero_right, zero_wrong, zero_partial = _split_by_reward(zero_std_by_reward)
    return {
        "dropped_groups": dropped_total,
        "dropped_all_right": drop_right,
        "dropped_all_wrong": drop_wrong,
        "dropped_other": dropped_other,
        "zero_std_all_right": zero_right if saw_zero_std else None,
        "zero_std_all_wrong": zero_wrong if saw_zero_std else None,
        "zero_std_other": zero_partial if saw_zero_std else None,
        "unreadable_keys": sorted(unreadable),
    }
