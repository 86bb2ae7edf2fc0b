"""The reward verdict says the result and its limits, for every position against the baselines."""

from __future__ import annotations

from harness.summary.verdict import FILTERED_KEY, UNFILTERED_KEY, RewardFacts, reward_verdict

WRITE_UP = dict(
    run="e2b-dapo-filter",
    baseline="plain",
    filter=True,
    reward_key=UNFILTERED_KEY,
    run_mean=0.686,
    baseline_mean=0.657,
    baselines={"e6a-base": 0.638, "plain": 0.657, "plain-48": 0.660, "plain-48-s2": 0.645, "plain-48-s3": 0.650},
    steps_higher=8,
    steps_compared=12,
    run_steps=12,
    steps_expected=12,
    state="stopped",
    seeds=1,
)


def verdict(**changes) -> str:  # noqa: ANN003
    return reward_verdict(RewardFacts(**{**WRITE_UP, **changes}))


def test_the_write_up_case_word_for_word():
    assert verdict() == (
        "0.686 with the filter against 0.657 for plain; above every baseline (0.638 to 0.660), higher in 8 of 12 "
        "steps; but one seed of 12 steps, and the reward counted before the filter leans high (aborted slow answers "
        "are not in it), so this is not evidence of learning: run a second seed."
    )


def test_inside_the_spread_says_no_effect():
    text = verdict(run_mean=0.650, steps_higher=5)
    assert "inside the spread of the baselines (0.638 to 0.660)" in text
    assert "within the spread between baseline runs: no effect shown" in text
    assert "higher in 5 of 12 steps" in text


def test_below_every_baseline_says_no_gain_even_with_a_reward_that_leans_high():
    text = verdict(run_mean=0.600, steps_higher=1)
    assert "below every baseline (0.638 to 0.660)" in text
    assert "no gain is shown, even with a reward that leans high" in text


def test_missing_baseline_captures_are_named():
    text = verdict(baselines={"plain": 0.657, "e6a-base": 0.638}, missing=["plain-48", "plain-48-s2"])
    assert "above every baseline found (0.638 to 0.660" not in text  # the spread is only what was found
    assert "above every baseline found (0.638 to 0.657; no capture of plain-48, plain-48-s2)" in text


def test_no_baseline_capture_at_all():
    text = verdict(
        baseline_found=False,
        baseline_mean=None,
        baselines={},
        missing=["plain", "e6a-base"],
        steps_higher=0,
        steps_compared=0,
    )
    assert text.startswith("0.686 with the filter; no capture of the baseline plain;")
    assert "no baseline run with a reward to set it against (no capture of e6a-base)" in text
    assert text.endswith("there is nothing to judge it against: capture plain, e6a-base.")


def test_one_baseline_only():
    text = verdict(baselines={"plain": 0.657})
    assert "above the only baseline run with a reward (plain, 0.657)" in text


def test_fewer_steps_than_planned_are_a_limit():
    text = verdict(run_steps=7, steps_compared=7, steps_higher=6, state="failed")
    assert "only 7 of 12 steps finished (the run failed)" in text
    assert "one seed of 7 steps" in text


def test_baseline_with_fewer_shared_steps_is_a_limit():
    assert "only 9 of its steps are in plain too" in verdict(steps_compared=9, steps_higher=6)


def test_several_seeds_and_no_bias_give_a_plain_result():
    text = verdict(filter=False, run="plain-48", reward_key=FILTERED_KEY, seeds=3)
    assert text == (
        "0.686 for plain-48 against 0.657 for plain; above every baseline (0.638 to 0.660), higher in 8 of 12 "
        "steps; so the difference is larger than the spread between baseline runs."
    )


def test_one_seed_without_bias_is_a_lead():
    text = verdict(filter=False, run="plain-48", reward_key=FILTERED_KEY)
    assert text.endswith("but one seed of 12 steps, so this is a lead, not a result: run a second seed.")


def test_filter_run_without_unfiltered_reward_has_no_verdict_and_says_why():
    text = verdict(run_mean=None, reward_key=None)
    assert text.startswith("No reward verdict: e2b-dapo-filter did not log rollout/raw_reward_unfiltered")
    assert "could not be derived" in text
