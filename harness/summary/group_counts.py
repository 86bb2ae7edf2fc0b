"""The dropped and zero-variance group counts of the step rows, and the batches of prompts (filter runs), by the
Miles rules (`harness.mileslog.derive`), each count checked: an integer from 0 to 2^53."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from harness.lab.milesnames import DROP_PREFIX
from harness.mileslog.derive import derive_step_values
from harness.mileslog.keys import whole_number
from harness.summary.notes import CHECK_DROPS, CHECK_GROUPS, METRICS, StepsFound
from harness.summary.run_config import RunConfig
from harness.summary.sanity import MAX_EXACT_INT

ABSENT = object()  # a group key a step did not log (for the drop keys absence means 0)


def group_counts(
    config: RunConfig, group_keys: list[str], groups: list[list[object]], rollout_side: list[bool], found: StepsFound
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
            rank=(CHECK_GROUPS, key),
            flag=True,
        )
    for name, totals in past_exact.items():
        found.add(
            f"{METRICS}: {name} sums to more than 2^53 ({{values}}) in {{steps}}: unknown there",
            [i for i, _ in totals],
            [total for _, total in totals],
            phase=1,
            rank=(CHECK_GROUPS, name),
            flag=True,
        )
    for key, positions in unreadable.items():
        found.add(
            f"{key} is not a count the Miles rules read (its suffix is not a reward) in {{steps}}: "
            "left out of the counts",
            positions,
            phase=1,
            rank=(CHECK_GROUPS, key),
        )
    found.add(
        "no rollout-side keys in {steps}: dropped groups unknown there", no_rollout_side, phase=1, rank=CHECK_DROPS
    )
    found.add(
        "drop keys logged without the filter in {steps}: not shown", drops_without_filter, phase=1, rank=CHECK_DROPS
    )
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
        if value is ABSENT:
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
