"""Across seeds: runs grouped into conditions, their figures pooled over seeds, conditions compared by seed.

The hand-made captures (tests/support/seedcaptures.py: the filter over 4 seeds, plain
over 3, plain-48 over 5) have every figure worked out here, independently of
the summary: the means and SDs with `statistics`, Welch's p with
`scipy.stats.ttest_ind`, the probability of improvement pair by pair, the
seeds needed by a plain search over `scipy.stats.nct`, and the bootstrap
interval by what it must hold (its coverage is tested in test_seedstats.py).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from harness.summary.document import SummaryDocument
from harness.summary.serialize import dumps_summary, load_summary, write_summary
from harness.summary.summarize import summarize, summarize_with_warnings
from support.seedcaptures import (
    COMPARE,
    FILTER_DROPS,
    FILTER_REWARDS,
    PLAIN48_REWARDS,
    PLAIN_REWARDS,
    ROLLOUTS,
    seeds_for_power,
    write_run,
    write_three_conditions,
)


def seed_means(rewards: dict[int, list[float]]) -> list[float]:
    return [statistics.fmean(values) for _, values in sorted(rewards.items())]


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> SummaryDocument:
    return summarize(write_three_conditions(tmp_path_factory.mktemp("three")))


# --- conditions ----------------------------------------------------------------------------------


def test_the_runs_of_one_configuration_are_one_condition_whatever_their_seeds(three):
    assert sorted(three.conditions) == ["e2b-dapo-filter", "plain", "plain-48"]
    assert three.conditions["e2b-dapo-filter"].runs == [
        "e2b-dapo-filter",
        "e2b-dapo-filter-s2",
        "e2b-dapo-filter-s3",
        "e2b-dapo-filter-s4",
    ]
    assert len(three.conditions["plain-48"].runs) == 5
    hashes = {three.runs[name].config_hash for name in three.conditions["plain"].runs}
    assert len(hashes) == 1 and None not in hashes
    assert three.conditions["plain"].config_hash == hashes.pop()
    assert three.simulated is False and not any(c.simulated for c in three.conditions.values())


def test_a_condition_s_figures_are_pooled_over_its_seeds(three):
    condition = three.conditions["e2b-dapo-filter"]
    means = seed_means(FILTER_REWARDS)

    assert condition.steps_pooled == 6 and condition.left_out == {} and condition.filter
    assert [f.reward_mean for f in condition.seeds] == pytest.approx(means, abs=1e-12)
    assert [f.reward_mean_first4 for f in condition.seeds] == pytest.approx(
        [statistics.fmean(v[:4]) for _, v in sorted(FILTER_REWARDS.items())], abs=1e-12
    )
    spread = condition.reward_mean
    assert spread.seeds == 4
    assert spread.mean == pytest.approx(statistics.fmean(means), abs=1e-12)
    assert spread.sd == pytest.approx(statistics.stdev(means), rel=1e-9)
    assert (spread.min, spread.max) == pytest.approx((min(means), max(means)))
    medians = [statistics.median(ROLLOUTS[seed]) for seed in sorted(FILTER_REWARDS)]
    assert condition.rollout_time_adjusted_median_s.mean == pytest.approx(statistics.fmean(medians))
    assert condition.rollout_time_adjusted_median_s.sd == pytest.approx(statistics.stdev(medians))
    totals = [sum(r + w for r, w in FILTER_DROPS[seed]) for seed in sorted(FILTER_REWARDS)]
    assert [f.dropped_groups for f in condition.seeds] == totals
    assert condition.dropped_groups.mean == pytest.approx(statistics.fmean(totals))
    assert condition.dropped_all_wrong.max == max(sum(w for _, w in FILTER_DROPS[s]) for s in FILTER_REWARDS)
    assert three.conditions["plain"].dropped_groups.seeds == 0  # no filter: not applicable, not 0


def test_the_filter_against_its_baseline_across_seeds(three):
    import scipy.stats  # on use: a second of import the other worker is spared

    x, y = seed_means(FILTER_REWARDS), seed_means(PLAIN_REWARDS)
    (comparison,) = [c for c in three.comparisons if c.run == "e2b-dapo-filter"]
    block = next(b for b in comparison.across_seeds if b.against == "baseline")
    difference = statistics.fmean(x) - statistics.fmean(y)
    pooled = math.sqrt((3 * statistics.variance(x) + 2 * statistics.variance(y)) / 5)
    pairs = [(a > b) + 0.5 * (a == b) for a in x for b in y]

    assert (block.condition, block.baseline_conditions, block.seeds, block.baseline_seeds) == (
        "e2b-dapo-filter",
        ["plain"],
        4,
        3,
    )
    assert block.steps == 6
    assert block.difference == pytest.approx(difference, abs=1e-12)
    assert block.welch_p == pytest.approx(float(scipy.stats.ttest_ind(x, y, equal_var=False).pvalue), rel=1e-9)
    assert block.p_improvement == pytest.approx(sum(pairs) / len(pairs))
    assert block.pooled_sd == pytest.approx(pooled, rel=1e-9)
    assert block.seeds_needed == seeds_for_power(difference, pooled)
    assert block.effect == 0.02 and block.seeds_needed_for_effect == seeds_for_power(0.02, pooled)
    assert block.interval_low is not None and block.interval_high is not None
    assert block.interval_low < difference < block.interval_high
    # the interval over seeds: no wider than the largest possible difference of resampled means
    assert block.interval_low >= min(x) - max(y) and block.interval_high <= max(x) - min(y)
    assert block.interval_excludes_zero is (block.interval_low > 0 or block.interval_high < 0)
    assert block.bootstrap_resamples == 9_999 and block.confidence == 0.95
    verdict = block.verdict
    assert verdict.startswith("Across 4 seeds of e2b-dapo-filter and 3 of plain")
    assert f"{difference:+.3f}" in verdict and "95% bootstrap interval" in verdict
    assert f"{block.interval_low:+.3f} to {block.interval_high:+.3f}" in verdict
    assert "excludes 0" in verdict and "Welch p" in verdict
    assert "leans high" in verdict  # the reward counted before the filter


def test_the_filter_against_the_pool_of_its_baselines(three):
    import scipy.stats  # on use: a second of import the other worker is spared

    x = seed_means(FILTER_REWARDS)
    y = seed_means(PLAIN_REWARDS) + seed_means(PLAIN48_REWARDS)
    (comparison,) = [c for c in three.comparisons if c.run == "e2b-dapo-filter"]
    block = next(b for b in comparison.across_seeds if b.against == "baselines")

    assert block.baseline_conditions == ["plain", "plain-48"]  # every seed of each baseline's condition
    assert (block.seeds, block.baseline_seeds) == (4, 8)
    assert block.welch_p == pytest.approx(float(scipy.stats.ttest_ind(x, y, equal_var=False).pvalue), rel=1e-9)
    assert block.baseline_mean == pytest.approx(statistics.fmean(y), abs=1e-12)
    assert "plain + plain-48 (pooled)" in block.verdict


def test_each_pair_of_conditions_is_compared_once_whatever_the_runs_that_carry_it(three):
    blocks = [c.across_seeds for c in three.comparisons]

    assert [c.run for c in three.comparisons] == sorted(three.conditions["e2b-dapo-filter"].runs)
    assert all(len(b) == 2 for b in blocks)
    assert all(b[0] is blocks[0][0] and b[1] is blocks[0][1] for b in blocks)
    # the run's own verdict keeps its sentence, one run against one baseline
    assert three.comparisons[0].reward.verdict.startswith("0.693 with the filter against 0.647 for plain")


def close_call(root: Path) -> Path:
    """Three seeds of the filter whose rewards are plain-48's: a difference smaller than the seeds' spread."""
    for seed in (1, 2, 3):
        write_run(root, "e2b-dapo-filter", seed, PLAIN48_REWARDS[seed], filter_on=True, compare=COMPARE)
        write_run(root, "plain", seed, PLAIN_REWARDS[seed])
    return root


def test_a_difference_within_the_spread_of_the_seeds_is_no_effect_and_says_how_many_seeds_would_tell(tmp_path):
    x, y = seed_means({s: PLAIN48_REWARDS[s] for s in (1, 2, 3)}), seed_means(PLAIN_REWARDS)
    block = summarize(close_call(tmp_path / "c")).comparisons[0].across_seeds[0]
    difference = statistics.fmean(x) - statistics.fmean(y)
    pooled = math.sqrt((statistics.variance(x) + statistics.variance(y)) / 2)

    assert block.interval_low is not None and block.interval_high is not None
    assert block.interval_low < 0 < block.interval_high and block.interval_excludes_zero is False
    assert block.seeds_needed == seeds_for_power(difference, pooled) > 3
    assert block.too_few_seeds
    assert block.verdict.startswith("Across 3 seeds each, the mean reward before the filter of e2b-dapo-filter was")
    assert "which includes 0" in block.verdict
    assert "no effect is shown at 3 seeds: too few seeds to conclude anything" in block.verdict
    assert f"about {block.seeds_needed} seeds each would detect a difference of {difference:+.3f}" in block.verdict


def test_the_effect_that_seeds_are_counted_for_is_configurable(tmp_path):
    document = summarize(close_call(tmp_path / "c"), effect=0.05)
    block = document.comparisons[0].across_seeds[0]

    assert block.effect == 0.05
    assert block.seeds_needed_for_effect == seeds_for_power(0.05, block.pooled_sd)
    assert f"{block.seeds_needed_for_effect} seeds each an effect of 0.050" in block.verdict


def test_the_document_with_conditions_is_strict_json_and_reads_back(three, tmp_path):
    path = write_summary(three, tmp_path / "s.json")
    again = load_summary(path)

    assert again == three
    assert json.loads(dumps_summary(again)) == three.to_dict()


# --- bad input -----------------------------------------------------------------------------------


def test_a_seed_cut_short_is_left_out_of_the_pooled_figures_with_a_note(tmp_path):
    """The finding: after an interrupted --force rerun, a 2-step mean was compared with 12-step means."""
    root = write_three_conditions(tmp_path / "c")
    write_run(root, "plain", 4, [0.90, 0.91], steps_expected=6, state="interrupted")
    document = summarize(root)
    plain = document.conditions["plain"]

    assert plain.runs == ["plain", "plain-s2", "plain-s3", "plain-s4"]
    assert [f.run for f in plain.seeds] == ["plain", "plain-s2", "plain-s3"]
    assert plain.left_out == {"plain-s4": "2 complete steps, fewer than the 6 of the other seeds"}
    assert any("plain-s4 is left out of the pooled figures" in note for note in plain.notes)
    block = document.comparisons[0].across_seeds[0]
    assert (block.baseline_seeds, block.steps) == (3, 6)
    assert block.baseline_mean == pytest.approx(statistics.fmean(seed_means(PLAIN_REWARDS)), abs=1e-12)


def test_runs_of_one_name_under_two_configurations_are_two_conditions_with_a_note(tmp_path):
    root = write_three_conditions(tmp_path / "c")
    for seed in (6, 7):  # the same experiment name, another rollout length: not the same condition
        write_run(root, "plain-48", seed, [0.6] * 8, extra_args="--over-sampling-batch-size 48")
    result = summarize_with_warnings(root)
    conditions = result.document.conditions

    split = sorted(key for key in conditions if key.startswith("plain-48"))
    assert len(split) == 2 and all("@" in key for key in split)
    assert sorted(len(conditions[key].runs) for key in split) == [2, 5]
    note = conditions[split[0]].notes[0]
    assert "the runs of plain-48 ran under 2 configurations, so they are 2 conditions, not one" in note
    assert "steps" in note and "trainer_argv" in note  # what differs
    assert note in result.warnings


def test_simulated_and_real_runs_are_never_one_condition(tmp_path):
    root = tmp_path / "c"
    write_run(root, "plain", 1, [0.6, 0.62, 0.61])
    write_run(root, "plain", 2, [0.6, 0.61, 0.63], simulated=True)
    write_run(root, "plain", 3, [0.62, 0.6, 0.61], simulated=True)
    document = summarize(root)

    assert len(document.conditions) == 2
    flags = sorted((c.simulated, tuple(c.runs)) for c in document.conditions.values())
    assert flags == [(False, ("plain",)), (True, ("plain-s2", "plain-s3"))]
    assert document.simulated is True
    assert "simulated" in " ".join(next(iter(document.conditions.values())).notes)


def test_seeds_that_started_from_different_cooled_starts_are_pooled_with_a_note_naming_the_difference(tmp_path):
    # The demo's runs waited below 55 C before they started; a `sweep --sim` seed started at the host's 60 C.
    root = tmp_path / "c"
    cooled = {"outcome": "cool", "below_c": 55.0, "waited_s": 0.7}
    write_run(root, "plain-48", 1, [0.6, 0.62, 0.61], simulated=True, start={**cooled, "hottest_c": 54.8})
    write_run(root, "plain-48", 2, [0.6, 0.61, 0.63], simulated=True, start={"outcome": "read", "hottest_c": 60.0})
    write_run(root, "plain-48", 3, [0.62, 0.6, 0.61], simulated=True, start={**cooled, "hottest_c": 54.9})
    write_run(root, "plain", 1, [0.6, 0.62, 0.61], simulated=True, start={**cooled, "hottest_c": 54.7})
    write_run(root, "plain", 2, [0.6, 0.62, 0.61], simulated=True, start={**cooled, "hottest_c": 54.6})
    result = summarize_with_warnings(root)
    conditions = result.document.conditions

    assert conditions["plain-48"].runs == ["plain-48", "plain-48-s2", "plain-48-s3"]  # still one condition
    [note] = [n for n in conditions["plain-48"].notes if "cooled start" in n]
    assert note == (
        "the seeds did not start alike: plain-48 and plain-48-s3 waited to cool below 55 C (started at 54.8 and "
        "54.9 C); plain-48-s2 had no cooled start (started at 60.0 C): pooled as one condition all the same"
    )
    assert any(note in warning for warning in result.warnings)
    assert not any("cooled start" in n for n in conditions["plain"].notes)  # both waited alike
    assert result.document.runs["plain-48-s2"].start_below_c is None
    assert result.document.runs["plain-48"].start_below_c == 55.0


def test_one_seed_on_a_side_has_no_interval_and_says_how_many_seeds_are_needed(tmp_path):
    root = tmp_path / "c"
    write_run(root, "e2b-dapo-filter", 1, [0.7, 0.72, 0.71], filter_on=True, compare={"baseline": "plain"})
    for seed, rewards in PLAIN_REWARDS.items():
        write_run(root, "plain", seed, rewards[:3])
    block = summarize(root).comparisons[0].across_seeds[0]

    assert (block.seeds, block.baseline_seeds) == (1, 3)
    assert block.interval_low is None and block.interval_high is None and block.welch_p is None
    assert block.too_few_seeds and block.seeds_needed_for_effect is not None
    assert block.verdict.startswith("No interval across seeds: e2b-dapo-filter has one seed and plain 3")
    assert "run at least a second seed of e2b-dapo-filter" in block.verdict
    assert f"{block.seeds_needed_for_effect} seeds each an effect of 0.020" in block.verdict
    assert "bootstrap interval" not in block.verdict


def test_seeds_that_all_read_the_same_are_a_stated_degenerate_case(tmp_path):
    root = tmp_path / "c"
    for seed in (1, 2, 3):
        write_run(root, "e2b-dapo-filter", seed, [0.7, 0.7], filter_on=True, compare={"baseline": "plain"})
        write_run(root, "plain", seed, [0.6, 0.6])
    document = summarize(root)
    block = document.comparisons[0].across_seeds[0]

    assert block.difference == pytest.approx(0.1)
    assert block.interval_low == block.interval_high == block.difference and block.interval_excludes_zero
    assert block.welch_p is None and block.seeds_needed is None and block.pooled_sd == 0.0
    assert "the seeds do not vary at all" in block.verdict
    assert document.conditions["plain"].reward_mean.sd == 0.0
    assert b"NaN" not in dumps_summary(document)  # strict JSON: it writes


def test_rewards_that_are_not_numbers_leave_their_seed_out_with_a_note(tmp_path):
    root = write_three_conditions(tmp_path / "c")
    write_run(root, "plain", 4, [1e308, 1e308, 1e308, 1e308, 1e308, 1e308])  # a mean that overflows
    write_run(root, "plain", 5, [None] * 6)  # no reward logged at all
    document = summarize(root)
    plain = document.conditions["plain"]

    assert plain.reward_mean.seeds == 3 and plain.reward_mean.mean is not None
    assert any("plain-s4" in note and "plain-s5" in note for note in plain.notes)
    block = document.comparisons[0].across_seeds[0]
    assert block.baseline_seeds == 3
    assert any("plain-s4" in note for note in block.notes)
    assert b"NaN" not in dumps_summary(document) and b"Infinity" not in dumps_summary(document)


def test_a_condition_that_fails_costs_the_others_nothing(tmp_path, monkeypatch):
    from harness.summary import seeds

    real = seeds.summarize_condition

    def broken(names, runs, *more):
        if names[0].startswith("plain-48"):
            raise RuntimeError("a bug")
        return real(names, runs, *more)

    monkeypatch.setattr(seeds, "summarize_condition", broken)
    result = summarize_with_warnings(write_three_conditions(tmp_path / "c"))

    assert sorted(result.document.conditions) == ["e2b-dapo-filter", "plain"]
    assert "condition plain-48: no pooled figures (RuntimeError: a bug)" in result.warnings
    block = next(b for b in result.document.comparisons[0].across_seeds if b.against == "baseline")
    assert block.seeds == 4  # the filter against plain is still made
    assert [b.against for b in result.document.comparisons[0].across_seeds] == ["baseline"]


def test_an_old_document_without_conditions_still_reads_and_its_simulated_runs_are_known(tmp_path):
    document = summarize(write_three_conditions(tmp_path / "c", simulated=True, time_scale=0.01))
    old = json.loads(dumps_summary(document))
    old.pop("conditions"), old.pop("simulated")
    for run in old["runs"].values():
        run.pop("simulated"), run.pop("config_hash")
    for comparison in old["comparisons"]:
        comparison.pop("across_seeds")
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    again = load_summary(path)

    assert again.conditions == {} and again.comparisons[0].across_seeds == []
    assert again.simulated_runs() == list(again.runs)  # time scale 0.01: only the simulator runs at it


def test_documents_across_seeds_are_valid_against_the_schema(three, tmp_path):
    from support.summaries import summary_schema_validator

    root = tmp_path / "degenerate"
    for seed in (1, 2):
        write_run(root, "e2b-dapo-filter", seed, [0.7, 0.7], filter_on=True, compare={"baseline": "plain"})
    write_run(root, "plain", 1, [0.6, 0.6])
    validator = summary_schema_validator()
    for document in (three, summarize(root)):
        validator.validate(json.loads(dumps_summary(document)))
