"""harness.stats.seeds: the across-seed statistics, against values worked out independently of it.

Welch's p against scipy.stats.ttest_ind (another code path than the module's
own formula), seeds-needed against the published power tables, the bootstrap
interval by its coverage over many simulated experiments (not to the digit),
and the degenerate cases as answers, never NaN.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest

from harness.stats import seeds as seedstats


def test_spread_is_the_sample_mean_sd_min_and_max():
    values = [0.61, 0.65, 0.70, 0.66]
    spread = seedstats.spread(values)

    assert spread.n == 4
    assert spread.mean == pytest.approx(statistics.fmean(values), abs=1e-15)
    assert spread.sd == pytest.approx(statistics.stdev(values), rel=1e-12)
    assert (spread.min, spread.max) == (0.61, 0.70)
    assert seedstats.spread([0.5]).sd is None and seedstats.spread([]).mean is None


@pytest.mark.parametrize(
    "x, y",
    [
        ([0.61, 0.65, 0.70], [0.60, 0.62, 0.59]),
        ([0.61, 0.65, 0.70, 0.58, 0.66], [0.60, 0.62, 0.59]),
        ([1.0, 2.0, 3.0, 4.0], [1.5, 1.6, 1.4, 1.55, 1.45, 1.5]),
        ([0.5, 0.5, 0.5], [0.4, 0.6, 0.5]),  # no spread on one side: Welch still has a standard error
    ],
)
@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy's, on the side whose seeds are alike
def test_welch_p_is_scipy_s_unequal_variance_t_test(x, y):
    import scipy.stats  # on use: a second of import the other worker is spared

    expected = scipy.stats.ttest_ind(x, y, equal_var=False).pvalue

    assert seedstats.welch_p(x, y) == pytest.approx(float(expected), rel=1e-9)


def test_welch_p_needs_two_seeds_a_side_and_some_spread():
    assert seedstats.welch_p([0.5], [0.4, 0.6]) is None
    assert seedstats.welch_p([0.5, 0.5], [0.4, 0.4]) is None  # zero variance on both sides: no t statistic


def test_probability_of_improvement_counts_pairs_ties_half():
    x, y = [3.0, 1.0, 2.0], [2.0, 0.0]
    # pairs: 3>2, 3>0, 1<2, 1>0, 2=2 (half), 2>0 -> 4.5 of 6
    assert seedstats.probability_of_improvement(x, y) == pytest.approx(4.5 / 6)
    assert seedstats.probability_of_improvement([1.0], [1.0]) == 0.5
    assert seedstats.probability_of_improvement([], [1.0]) is None


def test_pooled_sd_weights_each_side_by_its_degrees_of_freedom():
    x, y = [0.61, 0.65, 0.70], [0.60, 0.62, 0.59, 0.64, 0.61]
    expected = math.sqrt((2 * statistics.variance(x) + 4 * statistics.variance(y)) / 6)

    assert seedstats.pooled_sd(x, y) == pytest.approx(expected, rel=1e-12)
    assert seedstats.pooled_sd([0.6], y) == pytest.approx(statistics.stdev(y), rel=1e-12)  # one seed adds nothing
    assert seedstats.pooled_sd([0.6], [0.5]) is None


# Per condition, for 80% power at alpha 0.05 two-sided (Cohen 1988's d; the exact noncentral-t figures of G*Power
# and statsmodels' TTestIndPower, rounded up): the table every power-analysis text prints.
POWER_TABLE = [(0.2, 394), (0.5, 64), (0.8, 26), (1.0, 17), (1.2, 12), (2.0, 6)]


@pytest.mark.parametrize("d, seeds", POWER_TABLE)
def test_seeds_needed_is_the_power_table_s(d, seeds):
    assert seedstats.seeds_needed(d * 0.03, 0.03).seeds == seeds  # the scale is the effect over the SD
    assert seedstats.seeds_needed(-d, 1.0).seeds == seeds  # a difference either way


def test_seeds_needed_is_the_fewest_that_reach_the_power():
    n = seedstats.seeds_needed(0.5, 1.0).seeds
    assert n is not None
    assert seedstats.power(n, 0.5, 1.0) >= 0.8 > seedstats.power(n - 1, 0.5, 1.0)


def test_the_power_is_scipy_s_noncentral_t():
    import scipy.stats  # on use: a second of import the other worker is spared

    n, d = 10, 0.9
    dof, critical = 2 * n - 2, scipy.stats.t.ppf(0.975, 2 * n - 2)
    nc = d * math.sqrt(n / 2)
    expected = scipy.stats.nct.sf(critical, dof, nc) + scipy.stats.nct.cdf(-critical, dof, nc)

    assert seedstats.power(n, d, 1.0) == pytest.approx(float(expected), rel=1e-9)
    assert [n for n, _ in seedstats.power_table(0.02, 0.03)] == list(seedstats.POWER_TABLE_SEEDS)


@pytest.mark.parametrize(
    "effect, sd, why",
    [
        (0.02, None, "fewer than two seeds"),
        (0.02, 0.0, "do not vary"),
        (0.0, 0.03, "no difference"),
        (1e-9, 1.0, "more than 1,000,000"),
    ],
)
def test_seeds_needed_says_why_there_is_no_number(effect, sd, why):
    needed = seedstats.seeds_needed(effect, sd)
    assert needed.seeds is None and why in (needed.why or "")


def test_the_power_grows_with_the_seeds_even_where_scipy_s_tail_series_gives_up():
    # at 100 seeds of an effect of 1.33 SD the far tail underflows in scipy (NaN): the power is still about 1
    powers = [seedstats.power(n, 0.02, 0.015) for n in (10, 30, 100, 1_000, 100_000)]
    assert powers == sorted(powers) and powers[2] > 0.999 and all(math.isfinite(p) for p in powers)
    assert seedstats.seeds_needed(0.0005, 0.1).seeds == pytest.approx(627_910, rel=0.01)  # 2 (2.8 / 0.005)^2


def test_a_huge_effect_needs_two_seeds_not_fewer():
    assert seedstats.seeds_needed(100.0, 1.0).seeds == 2


def test_the_bootstrap_interval_is_reproducible_and_holds_the_difference():
    x, y = [0.61, 0.65, 0.70, 0.66, 0.63], [0.60, 0.62, 0.59, 0.64, 0.61]
    first, again = seedstats.bootstrap_interval(x, y), seedstats.bootstrap_interval(x, y)

    assert first == again  # a fixed random state: the same captures, the same interval
    assert first is not None
    low, high = first
    assert low < statistics.fmean(x) - statistics.fmean(y) < high


def test_the_bootstrap_interval_covers_the_true_difference_about_95_percent_of_the_time():
    """Coverage, not digits: over many simulated experiments with a known difference, the share of intervals
    holding it. The percentile bootstrap is a little narrow at few seeds (it resamples the seeds there are), so
    the band is wide on the low side; an interval that were a point, or the whole line, fails it."""
    rng = random.Random(7)
    true_difference, trials, held = 0.02, 300, 0
    for trial in range(trials):
        x = [rng.gauss(0.62 + true_difference, 0.03) for _ in range(12)]
        y = [rng.gauss(0.62, 0.03) for _ in range(12)]
        interval = seedstats.bootstrap_interval(x, y, random_state=trial)
        assert interval is not None
        held += interval[0] <= true_difference <= interval[1]
    coverage = held / trials
    assert 0.87 <= coverage <= 0.99, coverage


def test_one_seed_a_side_has_no_interval_and_no_p_but_says_how_many_seeds():
    stats = seedstats.compare([0.70], [0.60, 0.62, 0.64], effect=0.02)

    assert stats.interval is None and stats.welch_p is None and stats.p_improvement is None
    assert stats.excludes_zero is None
    assert (
        stats.seeds_needed_for_effect.seeds == seedstats.seeds_needed(0.02, statistics.stdev([0.60, 0.62, 0.64])).seeds
    )
    lone = seedstats.compare([0.70], [0.60])
    assert lone.seeds_needed.seeds is None and lone.pooled_sd is None


def test_seeds_that_never_vary_are_a_stated_degenerate_case_without_nan():
    stats = seedstats.compare([0.6, 0.6, 0.6], [0.5, 0.5, 0.5])

    assert stats.zero_spread
    assert stats.difference == pytest.approx(0.1)
    assert stats.interval == (stats.difference, stats.difference) and stats.excludes_zero
    assert stats.welch_p is None and stats.seeds_needed.seeds is None and stats.pooled_sd == 0.0
    assert stats.p_improvement == 1.0
    same = seedstats.compare([0.6, 0.6], [0.6, 0.6])
    assert same.difference == 0.0 and same.excludes_zero is False and same.p_improvement == 0.5


def test_values_whose_sums_overflow_give_none_not_infinity():
    huge = [1e308, 1e308, 1e308]
    stats = seedstats.compare(huge, [0.5, 0.6, 0.7])

    assert stats.x.mean is None and stats.difference is None and stats.interval is None
    assert stats.x.sd is None and stats.welch_p is None
    # the other side's figures, and the comparison of order, never depend on a sum: each is still given
    assert stats.y.mean == pytest.approx(0.6) and stats.y.sd == pytest.approx(0.1)
    assert stats.p_improvement == 1.0  # every huge value is above every baseline value
