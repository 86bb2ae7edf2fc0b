"""The Miles rules, once: which reward is the reward, the step-time fallback, the filter, what a count is.

The parser, live progress, `harness parse-log` and the summary all read their
numbers through this module, so a rule changes in one place (docs/summary.md
states each rule once). Miles's names (its flags, filter paths and metric
keys) are in `harness.lab.milesnames`.

- **Filter.** The dynamic filter is on when `dynamic_sampling_filter_path`
  is set (not absent, None, False or empty). Miles's argument dump is the
  truth; the launch line's last `--dynamic-sampling-filter-path` answers
  when the dump does not; a run where neither says is read as without the
  filter.
- **Reward.** With the filter on, the reward is `rollout/raw_reward_unfiltered`
  (every finished answer, kept and dropped groups alike): the filter run's
  `rollout/raw_reward` counts only the kept groups and is not comparable.
  Without the filter it is `rollout/raw_reward`, as for the baselines. A
  value that is missing or not a finite number is no reward (None). Only
  the write-up's Miles (main 08752a12) prints the unfiltered reward; where
  a step lacks the key it is derived from what every Miles prints
  (`derive_unfiltered_reward`, below), and the reading says which source it
  used: `printed` or `derived`.
- **Step time.** `perf/step_time`; older slime's `perf/total_train_time`
  where that is not a finite number.
- **Train side.** A `perf N` line with a step-end key is the trainer's:
  the step is complete when it is read. A `perf N` line with the rollout
  time or a `rollout/` key is the rollout's.
- **Groups.** Dropped groups are the `rollout/dynamic_filter/drop_<reason>`
  keys (absent when none were dropped for that reason); zero-variance kept
  groups the `rollout/zero_std/count_<reward>` keys (see `derive`).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Mapping, NamedTuple, Optional, Sequence

from harness.lab.milesargv import flag_values
from harness.lab.milesnames import (
    DROP_PREFIX,
    DYNAMIC_FILTER_PREFIX,
    FILTER_FLAG,
    RAW_REWARD,
    RAW_REWARD_UNFILTERED,
    ROLLOUT_BATCH_SIZE_FLAG,
    ROLLOUT_PREFIX,
    ROLLOUT_TIME,
    STEP_TIME,
    STEP_TIME_OLD,
    TRAIN_TIME,
    ZERO_STD_DROP_PREFIX,
    ZERO_STD_PREFIX,
    arg_name,
)

if TYPE_CHECKING:
    from harness.mileslog.pyrepr import PyDict

# Every key `derive.derive_step_values` may read: the drop reasons and the zero-std counts.
GROUP_KEY_PREFIXES = (DYNAMIC_FILTER_PREFIX, ZERO_STD_PREFIX)

ROLLOUT_SIDE_KEYS = (ROLLOUT_TIME,)
STEP_END_KEYS = (STEP_TIME, TRAIN_TIME, STEP_TIME_OLD)
STEP_TIME_KEYS = (STEP_TIME, STEP_TIME_OLD)

# Where a step's reward came from.
PRINTED = "printed"
DERIVED = "derived"

_INTEGER_SUFFIX = re.compile(r"-?\d{1,18}")


def finite_number(value: object) -> Optional[float]:
    """A finite float, or None (bools, strings, NaN and infinities are not numbers here)."""
    if type(value) is float:
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # an integer beyond float range
        return None
    return value if math.isfinite(value) else None


def whole_number(value: object) -> int | None:
    """A whole number as an int (5 or 5.0); None for bools, fractions, non-finite values and the rest."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return int(value)
    return None


# ---- the filter ------------------------------------------------------------


def filter_is_on(path: object) -> bool:
    """True when a `dynamic_sampling_filter_path` value sets a filter (a bare flag, True, counts)."""
    if path is None or path is False:
        return False
    if isinstance(path, str):
        return path.strip() not in ("", "None", "False")
    return True


def filter_setting(args: Optional[Mapping[str, object]], argv: Optional[Sequence[str]]) -> tuple[Optional[bool], str]:
    """(filter on, where that was read): the argument dump, else the launch argv, else (None, "none")."""
    given, value, source = _given(args, argv, FILTER_FLAG)
    if source == "none":
        return None, source
    return (filter_is_on(value) if given else False), source


def filter_path(args: Optional[Mapping[str, object]], argv: Optional[Sequence[str]]) -> Optional[str]:
    """The run's filter path as text (the dump, else the launch argv's last flag), or None when no filter is set."""
    _, value, _ = _given(args, argv, FILTER_FLAG)
    return value.strip() if isinstance(value, str) and filter_is_on(value) else None


def rollout_batch_size(args: Optional[Mapping[str, object]], argv: Optional[Sequence[str]]) -> Optional[int]:
    """B, the groups a step keeps: the dump, else the launch argv's last `--rollout-batch-size`; None if unknown."""
    _, value, _ = _given(args, argv, ROLLOUT_BATCH_SIZE_FLAG)
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    number = whole_number(value)
    return number if number is not None and number >= 1 else None


def _given(args: Optional[Mapping[str, object]], argv: Optional[Sequence[str]], flag: str) -> tuple[bool, object, str]:
    """(given, its value, where it was read) for one of Miles's flags: the argument dump's value where the dump has
    it, else the launch argv's last (True for a bare flag; not given: None), else (False, None, "none")."""
    if args is not None and arg_name(flag) in args:
        return True, args[arg_name(flag)], "argument dump"
    if argv is not None:
        values = flag_values(list(argv)).get(flag)
        if values is None:
            return False, None, "launch line"
        return True, (values[-1] if values else True), "launch line"
    return False, None, "none"


# ---- per-step values -------------------------------------------------------


def reward_key(filter_on: Optional[bool]) -> str:
    """The Miles key that is the run's comparable reward (unknown filter: read as off)."""
    return RAW_REWARD_UNFILTERED if filter_on else RAW_REWARD


class RewardReading(NamedTuple):
    """A step's reward, where it came from (`printed`, `derived`, None), and why there is none."""

    value: Optional[float]
    source: Optional[str]
    why_none: Optional[str]


def reward_reading(
    metrics: Mapping[str, object], filter_on: Optional[bool], batch: Optional[int] = None
) -> RewardReading:
    """The step's reward by the rule above: printed, else (filter on, the key absent) derived; else why not.

    `batch` is B, the groups the step kept; without it nothing is derived.
    """
    key = reward_key(filter_on)
    value = finite_number(metrics.get(key))
    if value is not None:
        return RewardReading(value, PRINTED, None)
    if key in metrics:
        return RewardReading(None, None, f"{key} is not a finite number")
    if not filter_on:
        return RewardReading(None, None, f"{key} missing")
    derived, why = derive_unfiltered_reward(metrics, batch)
    if derived is None:
        return RewardReading(None, None, f"{key} not printed and not derivable: {why}")
    return RewardReading(derived, DERIVED, None)


def step_reward(
    metrics: Mapping[str, object], filter_on: Optional[bool], batch: Optional[int] = None
) -> Optional[float]:
    """The step's reward by the rule above (derived where it can be, given B); None when there is none."""
    return reward_reading(metrics, filter_on, batch).value


def step_time(metrics: Mapping[str, object]) -> tuple[Optional[float], Optional[str]]:
    """(seconds, the key they came from): `perf/step_time`, else `perf/total_train_time`; (None, None)."""
    for key in STEP_TIME_KEYS:
        value = finite_number(metrics.get(key))
        if value is not None:
            return value, key
    return None, None


def is_rollout_side(payload: PyDict) -> bool:
    """True for the rollout's `perf N` payload: the rollout time or any `rollout/` key."""
    return any(key in payload for key in ROLLOUT_SIDE_KEYS) or any(
        isinstance(key, str) and key.startswith(ROLLOUT_PREFIX) for key in payload
    )


def ends_step(payload: PyDict) -> bool:
    """True for the trainer's `perf N` payload, the last line of step N."""
    return any(key in payload for key in STEP_END_KEYS)


def rollout_side_logged(metrics: Mapping[str, object]) -> bool:
    """True when a merged step holds the rollout's line, so absent drop keys mean 0 dropped."""
    return ROLLOUT_TIME in metrics or any(key.startswith(DYNAMIC_FILTER_PREFIX) for key in metrics)


def drops_known(filter_on: Optional[bool], metrics: Mapping[str, object]) -> bool:
    """True when a step's dropped groups are a count: the filter is on and the rollout's line was logged.

    Otherwise they are null, never 0: not applicable without the filter, unknown without the rollout's line.
    """
    return bool(filter_on) and rollout_side_logged(metrics)


def derive_unfiltered_reward(metrics: Mapping[str, object], batch: Optional[int]) -> tuple[Optional[float], str]:
    """(the reward before the filter, "") from `rollout/raw_reward`, B and the zero-variance drops; else (None, why).

    Where Miles does not print it (every public Miles up to August 2026): the
    kept answers' mean (`rollout/raw_reward`, B groups) and each dropped
    group's common reward (its drop key's suffix) together,

        (raw_reward x B + sum over r of r x drop_zero_std_r) / (B + sum of drop_zero_std_r)

    (every group has n answers, so n cancels). It is exact when the rewards
    are integers (the suffix is then the reward, not a rounding of it) and
    zero variance is the only reason a group was dropped; anything else has
    no derived value, and the reason says why. `batch` is B.
    """
    raw = finite_number(metrics.get(RAW_REWARD))
    if raw is None:
        return None, f"no finite {RAW_REWARD}"
    if batch is None or batch < 1:
        return None, "the rollout batch size (the groups kept) is unknown"
    if not rollout_side_logged(metrics):
        return None, "the rollout's perf line is missing, so the dropped groups are unknown"
    dropped = 0
    reward_sum = 0
    for key, value in metrics.items():
        if not key.startswith(DROP_PREFIX):
            continue
        count = whole_number(value)
        if count is None or count < 0:
            return None, f"{key} is not a count ({value!r})"
        if count == 0:
            continue
        if not key.startswith(ZERO_STD_DROP_PREFIX):
            return None, f"groups dropped for another reason than zero variance ({key[len(DROP_PREFIX) :]}: {count})"
        suffix = key[len(ZERO_STD_DROP_PREFIX) :]
        if not _INTEGER_SUFFIX.fullmatch(suffix):
            return None, f"rewards that are not integers ({key}: the key rounds the group's reward to 0.1)"
        dropped += count
        reward_sum += int(suffix) * count
    return (raw * batch + reward_sum) / (batch + dropped), ""
