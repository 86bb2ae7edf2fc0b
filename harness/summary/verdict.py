"""The reward verdict: one sentence that states the result and its limits.

Pure: it takes the facts a comparison found and words them. Numbers are shown
with three decimals (display only; the JSON keeps them unrounded). The
sentence says, in order: the two means; where the run's mean falls against
the spread of the baseline runs (and which baseline captures are missing);
in how many of the shared steps the run read higher; then the limits (one
seed, unfinished steps, a reward that leans high because the filter's abort
leaves the slowest answers out); then what follows and what to do next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from harness.mileslog.keys import RAW_REWARD as FILTERED_KEY
from harness.mileslog.keys import RAW_REWARD_UNFILTERED as UNFILTERED_KEY


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
    return f"{value:.3f}"


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
    subject = f"{_f(mean)} with the filter" if facts.filter else f"{_f(mean)} for {run}"
    if not facts.baseline_found:
        head = f"{subject}; no capture of the baseline {baseline}"
    elif facts.baseline_mean is None:
        head = f"{subject}; the baseline {baseline} has no reward to compare"
    else:
        head = f"{subject} against {_f(facts.baseline_mean)} for {baseline}"

    values = {name: value for name, value in facts.baselines.items() if value is not None}
    # a missing named baseline is already said in the head
    missing = [name for name in facts.missing if facts.baseline_found or name != baseline]
    missing_text = f"no capture of {', '.join(missing)}" if missing else ""
    if not values:
        position_kind = "none"
        position = "no baseline run with a reward to set it against"
        if missing_text:
            position += f" ({missing_text})"
    elif len(values) == 1:
        ((name, value),) = values.items()
        position_kind = "above" if mean > value else "below" if mean < value else "equal"
        word = {"above": "above", "below": "below", "equal": "equal to"}[position_kind]
        extra = f"; {missing_text}" if missing_text else ""
        position = f"{word} the only baseline run with a reward ({name}, {_f(value)}{extra})"
    else:
        low, high = min(values.values()), max(values.values())
        found = " found" if missing else ""
        extra = f"; {missing_text}" if missing_text else ""
        spread = f"({_f(low)} to {_f(high)}{extra})"
        if mean > high:
            position_kind, position = "above", f"above every baseline{found} {spread}"
        elif mean < low:
            position_kind, position = "below", f"below every baseline{found} {spread}"
        else:
            position_kind, position = "inside", f"inside the spread of the baselines{found} {spread}"

    if facts.steps_compared:
        steps = f"higher in {facts.steps_higher} of {facts.steps_compared} steps"
    else:
        steps = "no step logged in both runs to compare one by one"

    biased = facts.filter and facts.reward_key == UNFILTERED_KEY
    limits: list[str] = []
    if facts.seeds <= 1:
        limits.append(f"one seed of {facts.run_steps} steps")
    if facts.steps_expected is not None and facts.run_steps < facts.steps_expected:
        ended = f" (the run {facts.state})" if facts.state != "succeeded" else ""
        limits.append(f"only {facts.run_steps} of {facts.steps_expected} steps finished{ended}")
    if facts.baseline_found and facts.baseline_mean is not None and 0 < facts.steps_compared < facts.run_steps:
        limits.append(f"only {facts.steps_compared} of its steps are in {baseline} too")
    if biased:
        limits.append("the reward counted before the filter leans high (aborted slow answers are not in it)")

    if position_kind == "above":
        if biased:
            conclusion = "this is not evidence of learning"
        elif limits:
            conclusion = "this is a lead, not a result"
        else:
            conclusion = "the difference is larger than the spread between baseline runs"
    elif position_kind == "inside":
        conclusion = "the difference is within the spread between baseline runs: no effect shown"
    elif position_kind == "below":
        conclusion = "no gain is shown" + (", even with a reward that leans high" if biased else "")
    elif position_kind == "equal":
        conclusion = "no difference is shown"
    else:
        conclusion = "there is nothing to judge it against"

    if position_kind == "none" and (missing or not facts.baseline_found):
        wanted = ([] if facts.baseline_found else [baseline]) + missing
        action = f": capture {', '.join(wanted)}"
    elif facts.seeds <= 1:
        action = ": run a second seed"
    else:
        action = ""

    first = f"{head}; {position}, {steps}"
    if limits:
        return f"{first}; but {_join(limits)}, so {conclusion}{action}."
    return f"{first}; so {conclusion}{action}."
