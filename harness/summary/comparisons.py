"""Comparisons: a run against the baselines of its experiment's `compare` block (docs/summary.md, "Comparisons").

- `by_batches`: the run's complete steps grouped by the batches of prompts
  they needed, each group's adjusted rollout median and its ratio to the
  baseline's;
- `reward`: the run's mean reward against the baseline's and the spread of the
  baselines found, the steps where it read higher, and the verdict sentence
  (`verdict.reward_verdict`).

A comparison reads only the finished `RunSummary`s it names, so a run that is
not named cannot change it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional

from harness.summary.aggregates import median
from harness.summary.document import BatchGroup, Comparison, RewardComparison, RunSummary
from harness.summary.verdict import RewardFacts, reward_verdict


@dataclass
class CompareBlock:
    """A run's checked `compare` block: the baseline, and the runs whose spread frames the reward."""

    baseline: str
    baselines: list[str] = field(default_factory=list)


def compare_run(
    name: str,
    block: CompareBlock,
    runs: Mapping[str, RunSummary],
    seeds_of: Optional[Mapping[Optional[str], int]] = None,
) -> Comparison:
    """The comparison of run `name` with its baselines (which may be missing from `runs`).

    `seeds_of`: experiment -> its seeds captured with complete steps (`seeds_by_experiment`; computed here when
    not given, which costs a pass over every run).
    """
    run = runs[name]
    baseline_name = block.baseline
    baseline_names = [n for n in dict.fromkeys(block.baselines or [baseline_name]) if n != name]  # not its own
    notes: list[str] = []
    base = runs.get(baseline_name)
    if base is None:
        notes.append(f"no capture of the baseline {baseline_name}: no time ratios")
    base_median = base.aggregates.rollout_time_adjusted_median_s if base is not None else None

    by_batches = _by_batches(run, base_median)
    if not run.filter:
        notes.append(f"{name} runs without the filter: no batches, so no time ratios by batches")

    found = {n: runs[n] for n in baseline_names if n in runs}
    missing = [n for n in baseline_names if n not in runs]
    means = {n: r.aggregates.reward_mean for n, r in found.items()}
    for n, r in found.items():
        if r.state != "succeeded":
            notes.append(f"baseline {n} is {r.state}: its mean is over its complete steps")
    values = [v for v in means.values() if v is not None]
    run_mean = run.aggregates.reward_mean
    shared = _shared_rewards(run, base)
    if seeds_of is None:
        seeds_of = seeds_by_experiment(runs)
    seeds = seeds_of.get(run.experiment, 0) if run.experiment is not None else 0
    facts = RewardFacts(
        run=name,
        baseline=baseline_name,
        filter=bool(run.filter),
        run_mean=run_mean,
        reward_key=run.reward_key,
        baseline_found=base is not None,
        baseline_mean=base.aggregates.reward_mean if base is not None else None,
        baselines=means,
        missing=missing,
        steps_higher=sum(1 for mine, theirs in shared if mine > theirs),
        steps_compared=len(shared),
        run_steps=run.aggregates.steps,
        steps_expected=run.steps_expected,
        state=run.state,
        seeds=max(1, seeds),
    )
    reward = RewardComparison(
        run_mean=run_mean,
        baseline_mean=facts.baseline_mean,
        baselines=means,
        spread_min=min(values) if values else None,
        spread_max=max(values) if values else None,
        above_all_baselines=(run_mean > max(values)) if values and run_mean is not None else None,
        steps_higher=facts.steps_higher,
        steps_compared=facts.steps_compared,
        verdict=reward_verdict(facts),
        run_mean_first4=run.aggregates.reward_mean_first4,
        baseline_mean_first4=base.aggregates.reward_mean_first4 if base is not None else None,
        baselines_missing=missing,
        seeds_captured=facts.seeds,
    )
    comparison = Comparison(name, baseline_name, by_batches, reward, base_median, notes)
    _null_non_finite(comparison)
    return comparison


def _by_batches(run: RunSummary, base_median: Optional[float]) -> dict[str, BatchGroup]:
    """The run's complete steps by the batches of prompts they needed: each group's median and its ratio to the
    baseline's median."""
    table = run.steps
    groups: dict[int, list[Optional[float]]] = {}
    for done, batches, adjusted in zip(table.complete, table.batches, table.rollout_time_adjusted_s):
        if done and batches is not None:
            groups.setdefault(batches, []).append(adjusted)
    by_batches: dict[str, BatchGroup] = {}
    for batches in sorted(groups):
        group_median = median([t for t in groups[batches] if t is not None])
        ratio = group_median / base_median if group_median is not None and base_median else None
        by_batches[str(batches)] = BatchGroup(len(groups[batches]), group_median, ratio)
    return by_batches


def _shared_rewards(run: RunSummary, base: Optional[RunSummary]) -> list[tuple[float, float]]:
    """(the run's reward, the baseline's) at each step both completed with a reward."""
    base_rewards: dict[int, float] = {}
    if base is not None:
        base_rewards = {
            step: reward
            for step, done, reward in zip(base.steps.step, base.steps.complete, base.steps.reward)
            if done and reward is not None
        }
    table = run.steps
    return [
        (reward, base_rewards[step])
        for step, done, reward in zip(table.step, table.complete, table.reward)
        if done and reward is not None and step in base_rewards
    ]


def seeds_by_experiment(runs: Mapping[str, RunSummary]) -> dict[Optional[str], int]:
    """Experiment -> how many distinct seeds of it were captured with at least one complete step."""
    seeds: dict[Optional[str], set[Optional[int]]] = {}
    for run in runs.values():
        if run.experiment is not None and run.aggregates.steps:
            seeds.setdefault(run.experiment, set()).add(run.seed)
    return {experiment: len(found) for experiment, found in seeds.items()}


def _null_non_finite(comparison: Comparison) -> None:
    """A ratio of two huge medians can overflow: null, with a note (strict JSON)."""
    for where, owner in [(f"comparison.by_batches.{k}", g) for k, g in comparison.by_batches.items()] + [
        ("comparison.reward", comparison.reward),
        ("comparison", comparison),
    ]:
        for key, value in vars(owner).items():
            if type(value) is float and not math.isfinite(value):
                setattr(owner, key, None)
                comparison.notes.append(f"{where}.{key} is not a finite number ({value!r}): null")
