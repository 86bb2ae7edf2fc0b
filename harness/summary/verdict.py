"""The reward verdicts: one sentence that states the result and its limits.

`reward_verdict` words one run against its baseline (the write-up's sentence);
`seeds_verdict` a condition's seeds against its baseline's (docs/summary.md,
"Across seeds"): the seeds on each side, the difference, its interval and
whether that excludes 0, Welch's p, and what follows.

Pure: it takes the facts a comparison found and words them. Numbers are shown
with three decimals, at a sane width whatever they are (`number_text`; display
only; the JSON keeps them unrounded). The sentence says, in order: the two means; where the run's mean falls against
the spread of the baseline runs (and which baseline captures are missing);
in how many of the shared steps the run read higher; then the limits (one
seed, unfinished steps, a reward that leans high because the filter's abort
leaves the slowest answers out); then what follows and what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from harness.lab.milesnames import RAW_REWARD as FILTERED_KEY
from harness.lab.milesnames import RAW_REWARD_UNFILTERED as UNFILTERED_KEY
from harness.stats.seeds import ALPHA, CONFIDENCE, POWER, SeedComparisonStats
from harness.summary.sanity import number_text


@dataclass(frozen=True)
class RewardFacts:
    """What a reward comparison found; the input of `reward_verdict`."""

    run: str
    baseline: str
    filter: bool
    run_mean: Optional[float]
    reward_key: Optional[str] = None  # which Miles key the run's reward is; None: none logged
    baseline_found: bool = True
    baseline_mean: Optional[float] = None
    baselines: Mapping[str, Optional[float]] = field(default_factory=dict)  # found captures only
    missing: Sequence[str] = ()  # baseline captures not found
    steps_higher: int = 0
    steps_compared: int = 0
    run_steps: int = 0  # complete steps of the run
    steps_expected: Optional[int] = None
    state: str = "succeeded"
    seeds: int = 1  # seeds of the run's experiment that were captured


def _f(value: float) -> str:
    return number_text(value, 3)


def _join(items: Sequence[str]) -> str:
    if len(items) <= 2:
        return ", and ".join(items)
    return ", ".join(items[:-1]) + ", and " + items[-1]


def reward_verdict(facts: RewardFacts) -> str:
    """The verdict sentence for one run against its baseline and the spread of its baselines."""
    run, baseline = facts.run, facts.baseline
    if facts.run_mean is None:
        if facts.filter and facts.reward_key is None:
            return (
                f"No reward verdict: {run} did not log {UNFILTERED_KEY} (only the write-up's Miles prints it) and "
                f"it could not be derived from its steps, and its {FILTERED_KEY} counts only the kept groups, so "
                f"it cannot be set against {baseline}: rerun it on a Miles that logs the reward before the filter."
            )
        return f"No reward verdict: {run} has no reward in any complete step."

    mean = facts.run_mean
    # a missing named baseline is already said in the head
    missing = [name for name in facts.missing if facts.baseline_found or name != baseline]
    position_kind, position = _position(facts, mean, missing)
    if facts.steps_compared:
        steps = f"higher in {facts.steps_higher} of {facts.steps_compared} steps"
    else:
        steps = "no step logged in both runs to compare one by one"
    biased = facts.filter and facts.reward_key == UNFILTERED_KEY
    limits = _limits(facts, biased)
    conclusion = _conclusion(position_kind, biased, bool(limits))
    if position_kind == "none" and (missing or not facts.baseline_found):
        wanted = ([] if facts.baseline_found else [baseline]) + missing
        action = f": capture {', '.join(wanted)}"
    elif facts.seeds <= 1:
        action = ": run a second seed"
    else:
        action = ""

    first = f"{_head(facts, mean)}; {position}, {steps}"
    if limits:
        return f"{first}; but {_join(limits)}, so {conclusion}{action}."
    return f"{first}; so {conclusion}{action}."


def _head(facts: RewardFacts, mean: float) -> str:
    """The run's mean, and the baseline's (or why there is none)."""
    subject = f"{_f(mean)} with the filter" if facts.filter else f"{_f(mean)} for {facts.run}"
    if not facts.baseline_found:
        return f"{subject}; no capture of the baseline {facts.baseline}"
    if facts.baseline_mean is None:
        return f"{subject}; the baseline {facts.baseline} has no reward to compare"
    return f"{subject} against {_f(facts.baseline_mean)} for {facts.baseline}"


def _position(facts: RewardFacts, mean: float, missing: Sequence[str]) -> tuple[str, str]:
    """(above, below, equal, inside or none; the words): where the run's mean lies against its baselines' means."""
    values = {name: value for name, value in facts.baselines.items() if value is not None}
    missing_text = f"no capture of {', '.join(missing)}" if missing else ""
    extra = f"; {missing_text}" if missing_text else ""
    if not values:
        position = "no baseline run with a reward to set it against"
        return "none", position + (f" ({missing_text})" if missing_text else "")
    if len(values) == 1:
        ((name, value),) = values.items()
        kind = "above" if mean > value else "below" if mean < value else "equal"
        word = {"above": "above", "below": "below", "equal": "equal to"}[kind]
        return kind, f"{word} the only baseline run with a reward ({name}, {_f(value)}{extra})"
    low, high = min(values.values()), max(values.values())
    found = " found" if missing else ""
    spread = f"({_f(low)} to {_f(high)}{extra})"
    if mean > high:
        return "above", f"above every baseline{found} {spread}"
    if mean < low:
        return "below", f"below every baseline{found} {spread}"
    return "inside", f"inside the spread of the baselines{found} {spread}"


def _limits(facts: RewardFacts, biased: bool) -> list[str]:
    """What keeps the comparison from being a result: one seed, steps missing, steps not shared, a biased reward."""
    limits: list[str] = []
    if facts.seeds <= 1:
        limits.append(f"one seed of {facts.run_steps} steps")
    if facts.steps_expected is not None and facts.run_steps < facts.steps_expected:
        ended = f" (the run {facts.state})" if facts.state != "succeeded" else ""
        limits.append(f"only {facts.run_steps} of {facts.steps_expected} steps finished{ended}")
    if facts.baseline_found and facts.baseline_mean is not None and 0 < facts.steps_compared < facts.run_steps:
        limits.append(f"only {facts.steps_compared} of its steps are in {facts.baseline} too")
    if biased:
        limits.append("the reward counted before the filter leans high (aborted slow answers are not in it)")
    return limits


def _conclusion(position_kind: str, biased: bool, limited: bool) -> str:
    """What the position allows one to conclude, given a biased reward or limits."""
    if position_kind == "above":
        if biased:
            return "this is not evidence of learning"
        return (
            "this is a lead, not a result"
            if limited
            else "the difference is larger than the spread between baseline runs"
        )
    if position_kind == "below":
        return "no gain is shown" + (", even with a reward that leans high" if biased else "")
    return {
        "inside": "the difference is within the spread between baseline runs: no effect shown",
        "equal": "no difference is shown",
    }.get(position_kind, "there is nothing to judge it against")


# --------------------------------------------------------------------------- across seeds


@dataclass(frozen=True)
class SeedFacts:
    """What an across-seed comparison found; the input of `seeds_verdict`."""

    condition: str
    baseline: str  # a condition, or "a + b + c (pooled)"
    filter: bool
    biased: bool  # the reward is the one counted before the filter, which leans high
    steps: int
    stats: SeedComparisonStats
    too_few_seeds: bool


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def _p(value: Optional[float]) -> str:
    if value is None:
        return "Welch p not defined"
    return "Welch p < 0.001" if value < 0.001 else f"Welch p {value:.3f}"


def _seeds(n: int) -> str:
    return "one seed" if n == 1 else f"{n} seeds"


def _needed(facts: SeedFacts) -> str:
    """`about 14 seeds each would detect a difference of +0.012, and 31 an effect of 0.020 (...)`, or why not."""
    stats = facts.stats
    observed, wanted = stats.seeds_needed, stats.seeds_needed_for_effect
    power = f"{POWER:.0%} power, alpha {ALPHA:g}, two-sided"
    if wanted.seeds is None and observed.seeds is None:
        return f"how many seeds would be needed is not known: {wanted.why or observed.why}"
    parts = []
    if observed.seeds is not None and stats.difference is not None:
        parts.append(f"about {observed.seeds} seeds each would detect a difference of {_signed(stats.difference)}")
    elif observed.why and stats.difference is not None:
        parts.append(f"a difference of {_signed(stats.difference)} would need {observed.why}")
    if wanted.seeds is not None:
        parts.append(f"{wanted.seeds} seeds each an effect of {stats.effect:.3f}")
    elif wanted.why:
        parts.append(f"an effect of {stats.effect:.3f} {wanted.why}")
    sd = sd_words(facts)
    return ", and ".join(parts) + f" ({power}{', from the ' + sd if sd else ''})"


def sd_words(facts: SeedFacts) -> Optional[str]:
    """Which SD the seeds needed come from: `pooled SD 0.016 of both sides' seeds`, or one side's alone."""
    stats = facts.stats
    if stats.pooled_sd is None:
        return None
    if stats.x.n >= 2 and stats.y.n >= 2:
        return f"pooled SD {_f(stats.pooled_sd)} of both sides' seeds"
    alone = facts.condition if stats.x.n >= 2 else facts.baseline
    return f"SD {_f(stats.pooled_sd)} of the seeds of {alone} alone"


def seeds_verdict(facts: SeedFacts) -> str:
    """The across-seed sentence: seeds on each side, the difference, its interval, p, whether the interval excludes 0.

    With one seed on a side there is no interval: it says so, and how many
    seeds are needed, instead of a number.
    """
    stats = facts.stats
    x, y = stats.x, stats.y
    mine, theirs = facts.condition, facts.baseline
    what = "the mean reward before the filter" if facts.biased else "the mean reward"
    if x.mean is None or y.mean is None:
        lacking = mine if x.mean is None else theirs
        return f"No comparison across seeds: {lacking} has no seed with a reward in the {facts.steps} steps compared."
    if x.n < 2 or y.n < 2:
        means = f"{what} {x.mean:.3f} against {y.mean:.3f} over {facts.steps} steps"
        if x.n < 2 and y.n < 2:
            return (
                f"No interval across seeds: {mine} and {theirs} have one seed each ({means}), and one seed has no "
                "spread to judge a difference by, nor to say how many seeds would: too few seeds to conclude "
                "anything; run at least a second seed of each."
            )
        single = mine if x.n < 2 else theirs
        counts = (
            f"{mine} has {_seeds(x.n)} and {theirs} {y.n}" if x.n < 2 else f"{theirs} has one seed and {mine} {x.n}"
        )
        return (
            f"No interval across seeds: {counts} ({means}), and one seed has no spread to judge a difference by: "
            f"too few seeds to conclude anything; run at least a second seed of {single}. From the spread of the "
            f"seeds there are, {_needed(facts)}."
        )
    head = f"Across {_seeds(x.n)} each" if x.n == y.n else f"Across {_seeds(x.n)} of {mine} and {y.n} of {theirs}"
    difference = stats.difference if stats.difference is not None else 0.0
    if stats.zero_spread:
        return (
            f"{head}, every seed of {mine} gave {x.mean:.3f} and every seed of {theirs} {y.mean:.3f}: the seeds do "
            f"not vary at all, so the difference of {_signed(difference)} is the interval itself and no p-value or "
            f"seeds-needed figure follows; seeds that never vary are worth a look (the same seed twice, or "
            f"runs that are not independent)."
        )
    interval = stats.interval
    where = "excludes" if stats.excludes_zero else "includes"
    span = (
        f"{CONFIDENCE:.0%} bootstrap interval {_signed(interval[0])} to {_signed(interval[1])}, which {where} 0"
        if interval is not None
        else "no bootstrap interval (a value is not finite)"
    )
    improvement = (
        f"; {mine} higher in {stats.p_improvement:.0%} of seed pairs" if stats.p_improvement is not None else ""
    )
    against = f"for {theirs}" if x.n == y.n else "for them"  # the head named them
    first = (
        f"{head}, {what} of {mine} was {x.mean:.3f} against {y.mean:.3f} {against} over {facts.steps} steps: "
        f"a difference of {_signed(difference)}, {span} ({_p(stats.welch_p)}{improvement})"
    )
    if stats.excludes_zero and stats.welch_p is not None and stats.welch_p < ALPHA:
        conclusion = "so the difference holds across these seeds"
        if facts.biased:
            conclusion += (
                ", but the reward counted before the filter leans high (aborted slow answers are not in it), "
                "so it is not yet evidence of learning"
            )
        return f"{first}; {conclusion}."
    if stats.excludes_zero:
        return (
            f"{first}; but Welch's test does not confirm it, as often with few seeds: a lead, not a result; "
            f"{_needed(facts)}."
        )
    tail = ": too few seeds to conclude anything" if facts.too_few_seeds else ""
    return f"{first}; so no effect is shown at {_seeds(min(x.n, y.n))}{tail}; {_needed(facts)}."
