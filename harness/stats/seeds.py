"""Statistics across seeds: does one condition's mean differ from another's, given how much seeds vary?

Pure functions of two lists of per-seed values (one value per seed, e.g. a
run's mean reward), after the published practice for RL evaluation:

- **the difference of the means**, with a 95% bootstrap interval over seeds
  (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical Precipice"):
  `scipy.stats.bootstrap`, each side's seeds resampled on their own, the
  percentile interval (rliable's default), 9,999 resamples and a fixed random
  state, so the same captures always give the same interval;
- **Welch's t-test** p-value, two-sided (Colas et al. 2018, "How Many Random
  Seeds?"): unequal variances allowed;
- **the probability of improvement** P(X > Y) over every pair of seeds, a
  tie counting half (Agarwal et al.);
- **seeds needed**: the seeds per condition a two-sided two-sample t-test at
  alpha 0.05 needs for 80% power to detect a difference, from the pooled
  standard deviation (Colas et al.'s power analysis), computed exactly with
  the noncentral t distribution (the figures of the usual power tables: an
  effect of half a standard deviation needs 64 seeds each).

Degenerate cases are answers, never NaN or a division error: one seed on a
side has no spread, so no interval and no p-value (None); seeds that all gave
the same value on both sides have a spread of 0 (the interval is the
difference itself, and no p-value or seeds-needed is computed); a value that
would not be finite (sums of 1e308) is None.

numpy and scipy are imported only by the functions that need them.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from statistics import NormalDist
from types import ModuleType
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

CONFIDENCE = 0.95
ALPHA = 0.05
POWER = 0.8
DEFAULT_EFFECT = 0.02  # a difference of 0.02 in mean reward: the size of the write-up's reward question
RESAMPLES = 9_999
# Above this many seeds in all, fewer resamples: the work grows with resamples x seeds, and with thousands of
# seeds the interval is as narrow as it will get.
MANY_SEEDS = 1_000
RESAMPLES_MANY = 1_999
BOOTSTRAP_BATCH_VALUES = 2_000_000  # resampled values held at once (memory), whatever the seeds
RANDOM_STATE = 20_210  # fixed: a summary of the same captures is the same summary
MAX_SEEDS = 1_000_000  # seeds-needed beyond this is "more than", not a number
POWER_TABLE_SEEDS = (2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100)


@dataclass(frozen=True)
class Spread:
    """Values across seeds: how many, their mean, sample standard deviation (n - 1), min and max."""

    n: int
    mean: Optional[float]
    sd: Optional[float]  # None below two values, or where it would not be finite
    min: Optional[float]
    max: Optional[float]


@dataclass(frozen=True)
class SeedsNeeded:
    """Seeds per condition for the power asked; `seeds` None with `why` when there is no such number."""

    seeds: Optional[int]
    why: Optional[str] = None


@dataclass(frozen=True)
class SeedComparisonStats:
    """Two conditions' per-seed values compared (see the module doc); x is the condition, y its baseline."""

    x: Spread
    y: Spread
    difference: Optional[float]  # mean of x - mean of y
    interval: Optional[tuple[float, float]]  # the bootstrap interval of the difference; None below 2 seeds a side
    resamples: int  # bootstrap resamples drawn (0: none)
    welch_p: Optional[float]
    p_improvement: Optional[float]  # P(X > Y) over seed pairs, ties half; None below 2 seeds a side
    pooled_sd: Optional[float]
    seeds_needed: SeedsNeeded  # to detect the observed difference
    effect: float
    seeds_needed_for_effect: SeedsNeeded
    zero_spread: bool  # every seed on both sides gave the same value

    @property
    def excludes_zero(self) -> Optional[bool]:
        """Whether the interval leaves 0 out (None: no interval)."""
        if self.interval is None:
            return None
        low, high = self.interval
        return low > 0 or high < 0


def _finite(value: float) -> Optional[float]:
    return value if math.isfinite(value) else None


def mean(values: Sequence[float]) -> Optional[float]:
    """The mean (`math.fsum`), None when empty or when the sum overflows."""
    if not values:
        return None
    try:
        return _finite(math.fsum(values) / len(values))
    except OverflowError:
        return None


def variance(values: Sequence[float]) -> Optional[float]:
    """The sample variance (n - 1), None below two values or where it would not be finite."""
    centre = mean(values)
    if len(values) < 2 or centre is None:
        return None
    if min(values) == max(values):
        return 0.0  # exactly: the mean of equal values need not be their value to the last bit
    try:
        return _finite(math.fsum((v - centre) * (v - centre) for v in values) / (len(values) - 1))
    except OverflowError:
        return None


def spread(values: Sequence[float]) -> Spread:
    """n, mean, SD, min and max of the values (finite numbers)."""
    var = variance(values)
    return Spread(
        n=len(values),
        mean=mean(values),
        sd=_finite(math.sqrt(var)) if var is not None else None,
        min=min(values) if values else None,
        max=max(values) if values else None,
    )


def pooled_sd(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """sqrt(((n1 - 1) s1^2 + (n2 - 1) s2^2) / (n1 + n2 - 2)); a side with one seed adds no spread, none adds nothing.

    None when neither side has two seeds.
    """
    parts = [(len(v) - 1, variance(v)) for v in (x, y) if len(v) >= 2]
    if not parts or any(var is None for _, var in parts):
        return None
    weights = sum(dof for dof, _ in parts)
    try:
        return _finite(math.sqrt(math.fsum(dof * (var or 0.0) for dof, var in parts) / weights))
    except OverflowError:
        return None


def welch_p(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """The two-sided p-value of Welch's t-test; None below two seeds a side or with no spread on either side."""
    if len(x) < 2 or len(y) < 2:
        return None
    mx, my, vx, vy = mean(x), mean(y), variance(x), variance(y)
    if mx is None or my is None or vx is None or vy is None:
        return None
    ex, ey = vx / len(x), vy / len(y)
    se2 = ex + ey
    if not math.isfinite(se2) or se2 <= 0.0:
        return None
    t = (mx - my) / math.sqrt(se2)
    a, b = ex / se2, ey / se2  # Welch-Satterthwaite, scaled so no term under- or overflows
    dof = 1.0 / (a * a / (len(x) - 1) + b * b / (len(y) - 1))
    if not math.isfinite(t):
        return None
    return _clip01(2.0 * _student_t_cdf(dof, -abs(t)))


def probability_of_improvement(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """P(X > Y) over every pair of an x seed and a y seed, a tie counting half; None when a side is empty."""
    if not x or not y:
        return None
    ordered = sorted(y)
    wins = 0.0
    for value in x:
        below, up_to = bisect_left(ordered, value), bisect_right(ordered, value)
        wins += below + (up_to - below) / 2
    return wins / (len(x) * len(y))


def resamples_for(seeds: int) -> int:
    """Bootstrap resamples for this many seeds in all (see MANY_SEEDS)."""
    return RESAMPLES if seeds <= MANY_SEEDS else RESAMPLES_MANY


def bootstrap_interval(
    x: Sequence[float], y: Sequence[float], confidence: float = CONFIDENCE, random_state: int = RANDOM_STATE
) -> Optional[tuple[float, float]]:
    """The percentile bootstrap interval of mean(x) - mean(y), each side resampled on its own (scipy.stats.bootstrap).

    None below two seeds a side (one seed has no spread to resample) or where
    an end would not be finite. Every seed alike on both sides: every
    resample is the difference itself, so the interval is that point.
    """
    if len(x) < 2 or len(y) < 2:
        return None
    difference = _difference(x, y)
    if difference is None:
        return None
    if variance(x) == 0.0 and variance(y) == 0.0:
        return (difference, difference)
    import warnings

    import numpy as np

    seeds = len(x) + len(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's warnings about few distinct values: the interval says it
        result = _scipy().stats.bootstrap(
            (np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)),
            _difference_of_means,
            n_resamples=resamples_for(seeds),
            batch=max(1, BOOTSTRAP_BATCH_VALUES // seeds),
            vectorized=True,
            paired=False,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(random_state),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return (low, high)


def _difference_of_means(x: "NDArray[np.float64]", y: "NDArray[np.float64]", axis: int = -1) -> "NDArray[np.float64]":
    import numpy as np

    difference: NDArray[np.float64] = np.mean(x, axis=axis) - np.mean(y, axis=axis)
    return difference


def _difference(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    mx, my = mean(x), mean(y)
    if mx is None or my is None:
        return None
    return _finite(mx - my)


def power(seeds: int, effect: float, sd: float, alpha: float = ALPHA) -> float:
    """The power of a two-sided two-sample t-test with `seeds` per side, for a true difference `effect`.

    P(|T| > t_crit) with T noncentral t, df = 2 n - 2, noncentrality
    (effect / sd) sqrt(n / 2).
    """
    if seeds < 2:
        raise ValueError(f"a t-test needs at least 2 seeds a side, not {seeds}")
    if sd <= 0.0:
        raise ValueError(f"the standard deviation must be above 0, not {sd}")
    special = _scipy_special()
    dof = 2 * seeds - 2
    noncentrality = abs(effect) / sd * math.sqrt(seeds / 2)
    critical = float(special.stdtrit(dof, 1.0 - alpha / 2))
    below = float(special.nctdtr(dof, noncentrality, critical))
    if not math.isfinite(below):  # scipy's series gives up far in a tail: the normal approximation there
        below = NormalDist().cdf(critical - noncentrality)
    # the far tail, below -t_crit: at most alpha / 2 (no shift), and where scipy cannot compute it, nothing
    far = float(special.nctdtr(dof, noncentrality, -critical))
    return _clip01(1.0 - below + (far if math.isfinite(far) else 0.0))


def seeds_needed(effect: float, sd: Optional[float], target_power: float = POWER, alpha: float = ALPHA) -> SeedsNeeded:
    """The fewest seeds per condition (at least 2) whose t-test detects `effect` with `target_power` at `alpha`.

    From the normal approximation 2 ((z_(1-alpha/2) + z_power) sd / effect)^2,
    then stepped to the exact (noncentral t) answer.
    """
    if sd is None:
        return SeedsNeeded(None, "no spread across seeds is known (fewer than two seeds)")
    if not math.isfinite(sd) or not math.isfinite(effect):
        return SeedsNeeded(None, "the spread or the effect is not a finite number")
    if sd == 0.0:
        return SeedsNeeded(None, "the seeds do not vary (standard deviation 0), so no number of seeds follows")
    if effect == 0.0:
        return SeedsNeeded(None, "there is no difference to detect")
    z = NormalDist()
    ratio = (z.inv_cdf(1.0 - alpha / 2) + z.inv_cdf(target_power)) * sd / abs(effect)
    approximate = 2.0 * ratio * ratio
    if not math.isfinite(approximate) or approximate > MAX_SEEDS:
        return SeedsNeeded(None, f"more than {MAX_SEEDS:,} seeds")
    n = max(2, math.ceil(approximate))
    while power(n, effect, sd, alpha) < target_power:
        n += 1
        if n > MAX_SEEDS:
            return SeedsNeeded(None, f"more than {MAX_SEEDS:,} seeds")
    while n > 2 and power(n - 1, effect, sd, alpha) >= target_power:
        n -= 1
    return SeedsNeeded(n)


def power_table(
    effect: float, sd: float, alpha: float = ALPHA, seeds: Sequence[int] = POWER_TABLE_SEEDS
) -> list[tuple[int, float]]:
    """(seeds per condition, power) for each number of seeds in `seeds`."""
    return [(n, power(n, effect, sd, alpha)) for n in seeds]


def compare(x: Sequence[float], y: Sequence[float], effect: float = DEFAULT_EFFECT) -> SeedComparisonStats:
    """Every figure of the module for condition values `x` against baseline values `y` (finite numbers)."""
    sx, sy = spread(x), spread(y)
    difference = _difference(x, y)
    both = len(x) >= 2 and len(y) >= 2
    zero_spread = both and sx.sd == 0.0 and sy.sd == 0.0
    sd = pooled_sd(x, y)
    interval = bootstrap_interval(x, y) if both else None
    observed = seeds_needed(difference, sd) if difference is not None else SeedsNeeded(None, "no difference")
    return SeedComparisonStats(
        x=sx,
        y=sy,
        difference=difference,
        interval=interval,
        resamples=resamples_for(len(x) + len(y)) if interval is not None and not zero_spread else 0,
        welch_p=welch_p(x, y),
        p_improvement=probability_of_improvement(x, y) if both else None,
        pooled_sd=sd,
        seeds_needed=observed,
        effect=effect,
        seeds_needed_for_effect=seeds_needed(effect, sd),
        zero_spread=zero_spread,
    )


def _student_t_cdf(dof: float, t: float) -> float:
    return float(_scipy_special().stdtr(dof, t))


def _scipy() -> ModuleType:  # scipy ships no type information (no py.typed): its attributes are untyped
    """scipy, with the two parts used here imported (on first use: they are heavy)."""
    import scipy.special  # type: ignore[import-untyped]
    import scipy.stats  # type: ignore[import-untyped]

    module: ModuleType = scipy
    return module


def _scipy_special() -> ModuleType:
    """scipy.special alone, for the t distributions: the p-value and the power need no more, and scipy.stats,
    which only the bootstrap needs, takes more than twice as long to import."""
    import scipy.special

    module: ModuleType = scipy.special
    return module


def _clip01(value: float) -> float:
    return min(1.0, max(0.0, value))


def warm() -> None:
    """Import what the interval and the power need (scipy), so that no comparison waits for it.

    The summarizer calls it while its worker processes read large captures,
    where the import costs no time of its own.
    """
    _scipy()
