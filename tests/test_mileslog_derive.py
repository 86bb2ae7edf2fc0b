"""derive_step_values: dropped and zero-variance groups, split all right / all wrong, every suffix form."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.mileslog import derive_step_values

DROP = "rollout/dynamic_filter/drop_"
COUNT = "rollout/zero_std/count_"
OUTPUT_KEYS = [
    "dropped_groups",
    "dropped_all_right",
    "dropped_all_wrong",
    "dropped_other",
    "zero_std_all_right",
    "zero_std_all_wrong",
    "zero_std_other",
    "unreadable_keys",
]


def test_output_keys_are_stable() -> None:
    assert list(derive_step_values({})) == OUTPUT_KEYS


def test_no_keys_means_nothing_dropped_and_zero_std_unknown() -> None:
    assert derive_step_values({"perf/rollout_time": 5.0}) == {
        "dropped_groups": 0,
        "dropped_all_right": 0,
        "dropped_all_wrong": 0,
        "dropped_other": {},
        "zero_std_all_right": None,
        "zero_std_all_wrong": None,
        "zero_std_other": None,
        "unreadable_keys": [],
    }


@pytest.mark.parametrize(
    ("right_key", "wrong_key"),
    [
        ("zero_std_1", "zero_std_0"),  # integer rewards (--rm-type math)
        ("zero_std_1.0", "zero_std_0.0"),  # float rewards
        ("zero_std_1.0", "zero_std_-1.0"),  # -1/1 rewards
        ("zero_std_1", "zero_std_-1"),
    ],
)
def test_dropped_split_by_reward_in_every_suffix_form(right_key: str, wrong_key: str) -> None:
    derived = derive_step_values({DROP + right_key: 12, DROP + wrong_key: 4, "perf/rollout_time": 1.0})
    assert (derived["dropped_groups"], derived["dropped_all_right"], derived["dropped_all_wrong"]) == (16, 12, 4)
    assert derived["dropped_other"] == {}


def test_other_drop_reasons_by_name_and_in_the_total() -> None:
    derived = derive_step_values(
        {
            DROP + "zero_std_1": 10,
            DROP + "group_has_aborted": 2,
            DROP + "group_has_missing_reward": 1,
            DROP + "my_custom_filter": 3,
        }
    )
    assert derived["dropped_groups"] == 16
    assert derived["dropped_other"] == {"group_has_aborted": 2, "group_has_missing_reward": 1, "my_custom_filter": 3}
    assert derived["dropped_all_right"] == 10 and derived["dropped_all_wrong"] == 0


def test_partial_credit_zero_variance_is_neither_right_nor_wrong() -> None:
    derived = derive_step_values({DROP + "zero_std_0.5": 3, COUNT + "0.5": 2, COUNT + "1.0": 4})
    assert derived["dropped_groups"] == 3 and derived["dropped_other"] == {"zero_std_partial": 3}
    assert (derived["dropped_all_right"], derived["dropped_all_wrong"]) == (0, 0)
    assert (derived["zero_std_all_right"], derived["zero_std_all_wrong"], derived["zero_std_other"]) == (4, 0, 2)


@pytest.mark.parametrize(
    ("right", "wrong"),
    [("1", "0"), ("1.0", "0.0"), ("1.0", "-1.0")],
)
def test_zero_std_counts_in_every_suffix_form(right: str, wrong: str) -> None:
    derived = derive_step_values({COUNT + right: 11, COUNT + wrong: 5})
    assert (derived["zero_std_all_right"], derived["zero_std_all_wrong"], derived["zero_std_other"]) == (11, 5, 0)


def test_both_forms_of_one_reward_add_up() -> None:
    derived = derive_step_values({COUNT + "1": 2, COUNT + "1.0": 3, DROP + "zero_std_0": 1, DROP + "zero_std_0.0": 4})
    assert derived["zero_std_all_right"] == 5
    assert derived["dropped_all_wrong"] == 5


def test_percentages_are_not_counts() -> None:
    derived = derive_step_values(
        {"rollout/zero_std/all_zero_percentage": 0.5, "rollout/zero_std/all_one_percentage": 0.25}
    )
    assert derived["zero_std_all_right"] is None and derived["unreadable_keys"] == []


def test_whole_floats_count_and_other_values_are_unreadable() -> None:
    derived = derive_step_values(
        {
            DROP + "zero_std_1": 3.0,
            DROP + "zero_std_0": math.nan,
            DROP + "group_has_aborted": "2",
            COUNT + "1": 2.5,
            COUNT + "0": True,
            COUNT + "abc": 4,
        }
    )
    assert derived["dropped_groups"] == 3 and derived["dropped_all_right"] == 3
    assert derived["unreadable_keys"] == sorted(
        [DROP + "zero_std_0", DROP + "group_has_aborted", COUNT + "1", COUNT + "0", COUNT + "abc"]
    )
    assert derived["zero_std_all_right"] is None  # no readable count key


def test_a_non_string_key_is_ignored_not_a_crash() -> None:
    assert derive_step_values({1: 2, DROP + "zero_std_1": 1})["dropped_groups"] == 1


def test_raw_keys_are_not_changed() -> None:
    metrics = {DROP + "zero_std_1.0": 2, COUNT + "0": 1}
    before = dict(metrics)
    derive_step_values(metrics)
    assert metrics == before


suffixes = st.sampled_from(["0", "0.0", "1", "1.0", "-1.0", "0.5", "group_has_aborted"])


@given(st.dictionaries(suffixes, st.integers(min_value=0, max_value=1000)))
def test_drop_parts_add_up_to_the_total(drops: dict[str, int]) -> None:
    metrics = {DROP + ("" if s == "group_has_aborted" else "zero_std_") + s: n for s, n in drops.items()}
    derived = derive_step_values(metrics)
    assert derived["dropped_groups"] == sum(drops.values())
    parts = derived["dropped_all_right"] + derived["dropped_all_wrong"] + sum(derived["dropped_other"].values())
    assert parts == derived["dropped_groups"]
