"""The Miles rules, once: metric names, which reward is the reward, the step-time fallback, the filter.

The parser, live progress, `harness parse-log` and the summary all read their
numbers through this module, so a rule changes in one place (docs/summary.md
states each rule once):

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
  (`derive.derive_unfiltered_reward`), and the reading says which source it
  used: `printed` or `derived`.
- **Filter paths.** `FILTER_PATH` is the zero-variance filter at 08752a12;
  `FILTER_PATH_PUBLIC` the only one the public snapshots up to August 2026
  have (08752a12 keeps it as a deprecated alias).
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
from typing import TYPE_CHECKING, Mapping, NamedTuple, Optional, Sequence

if TYPE_CHECKING:
    from harness.mileslog.pyrepr import PyDict

ROLLOUT_TIME = "perf/rollout_time"
STEP_TIME = "perf/step_time"
STEP_TIME_OLD = "perf/total_train_time"  # older slime's name for the same timer
TRAIN_TIME = "perf/train_time"
RAW_REWARD = "rollout/raw_reward"
RAW_REWARD_UNFILTERED = "rollout/raw_reward_unfiltered"
TRUNCATED_RATIO = "rollout/truncated_ratio"

ROLLOUT_PREFIX = "rollout/"
DYNAMIC_FILTER_PREFIX = "rollout/dynamic_filter/"
ZERO_STD_PREFIX = "rollout/zero_std/"
DROP_PREFIX = DYNAMIC_FILTER_PREFIX + "drop_"
ZERO_STD_DROP_PREFIX = DROP_PREFIX + "zero_std_"
ZERO_STD_COUNT_PREFIX = ZERO_STD_PREFIX + "count_"
# Every key `derive.derive_step_values` may read: the drop reasons and the zero-std counts.
GROUP_KEY_PREFIXES = (DYNAMIC_FILTER_PREFIX, ZERO_STD_PREFIX)

ROLLOUT_SIDE_KEYS = (ROLLOUT_TIME,)
STEP_END_KEYS = (STEP_TIME, TRAIN_TIME, STEP_TIME_OLD)
STEP_TIME_KEYS = (STEP_TIME, STEP_TIME_OLD)

FILTER_ARG = "dynamic_sampling_filter_path"
FILTER_FLAG = "--dynamic-sampling-filter-path"
BATCH_ARG = "rollout_batch_size"
BATCH_FLAG = "--rollout-batch-size"

# The zero-variance filter: its path at the write-up's Miles, and the only one public Miles had up to August 2026.
WRITE_UP_MILES = "08752a12"
FILTER_PATH = "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
FILTER_PATH_PUBLIC = "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std"
ZERO_STD_FILTER_PATHS = (FILTER_PATH, FILTER_PATH_PUBLIC)

# Where a step's reward came from.
PRINTED = "printed"
DERIVED = "derived"


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
    if args is not None and FILTER_ARG in args:
        return filter_is_on(args[FILTER_ARG]), "argument dump"
    if argv is not None:
        from harness.lab.milesargv import flag_values

        values = flag_values(list(argv)).get(FILTER_FLAG)
        if values is None:
            return False, "launch line"
        return filter_is_on(values[-1] if values else True), "launch line"
    return None, "none"


def filter_path(args: Optional[Mapping[str, object]], argv: Optional[Sequence[str]]) -> Optional[str]:
    """The run's filter path as text (the dump, else the launch argv's last flag), or None when no filter is set."""
    value: object = None
    if args is not None and FILTER_ARG in args:
        value = args[FILTER_ARG]
    elif argv is not None:
        from harness.lab.milesargv import flag_values

        values = flag_values(list(argv)).get(FILTER_FLAG)
        value = values[-1] if values else None
    return value.strip() if isinstance(value, str) and filter_is_on(value) else None


def rollout_batch_size(args: Optional[Mapping[str, object]], argv: Optional[Sequence[str]]) -> Optional[int]:
    """B, the groups a step keeps: the dump, else the launch argv's last `--rollout-batch-size`; None if unknown."""
    from harness.mileslog.derive import whole_number

    value: object = None
    if args is not None and BATCH_ARG in args:
        value = args[BATCH_ARG]
    elif argv is not None:
        from harness.lab.milesargv import flag_values

        values = flag_values(list(argv)).get(BATCH_FLAG)
        value = values[-1] if values else None
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    number = whole_number(value)
    return number if number is not None and number >= 1 else None


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
    from harness.mileslog.derive import derive_unfiltered_reward

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
