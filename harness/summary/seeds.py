"""Across seeds (docs/summary.md, "Across seeds"): runs grouped into conditions, figures pooled over seeds, and
each comparison's condition set against its baseline's and against the pool of its baselines.

- **Conditions** come from what the manifests say: runs with the same
  configuration hash (`conditions.config_hash`: the configuration without
  the seed) are one condition, named after their experiment; an experiment
  whose runs ran under several configurations is several conditions
  (`<experiment>@<hash>`), with a note naming the keys that differ. Simulated
  and real runs differ in the hash, so they are never one condition. A run
  whose capture records no configuration is a condition of its own.
- **Pooled figures** are over the complete steps every seed has: a seed with
  fewer complete steps than the condition's longest (a run cut short) is left
  out of them, with a note naming it; so is a second run of a seed already
  counted. Each seed's figures (`SeedFigures`) are recomputed over those
  steps, and spread over the seeds (`SeedSpread`: mean, SD, min, max).
- **Across-seed comparisons** (`SeedComparison`): the run's condition against
  its baseline's, and against the pool of every baseline's condition (where
  that differs), one value per seed (its mean reward over the steps complete
  in every seed of both sides), judged by `harness.stats.seeds`; each pair of
  conditions is computed once, however many runs' comparisons carry it.

Pure: it reads the finished `RunSummary`s only. One condition or comparison
that fails (a bug) is a note; the others are still made.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping, Optional, Sequence

from harness.lab.milesnames import RAW_REWARD_UNFILTERED
from harness.stats import seeds as seedstats
from harness.summary.aggregates import FIRST_STEPS, median
from harness.summary.conditions import config_differences
from harness.summary.document import (
    Comparison,
    ConditionSummary,
    RunSummary,
    SeedComparison,
    SeedFigures,
    SeedSpread,
    SummaryDocument,
)
from harness.summary.notes import steps_text
from harness.summary.sanity import MAX_EXACT_INT
from harness.summary.verdict import SeedFacts, seeds_verdict

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

BASELINE = "baseline"
UNLIKE_STARTS = "the seeds did not start alike"
BASELINES = "baselines"


@dataclass
class Conditions:
    """The document's conditions, and which condition each run is in."""

    summaries: dict[str, ConditionSummary] = field(default_factory=dict)
    of_run: dict[str, str] = field(default_factory=dict)
    steps: dict[str, frozenset[int]] = field(default_factory=dict)  # condition -> its pooled steps
    warnings: list[str] = field(default_factory=list)
    step_sets: Optional["StepSets"] = None  # each run's complete steps, found once


# --------------------------------------------------------------------------- grouping


def group_runs(runs: Mapping[str, RunSummary]) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(condition -> its runs, run -> condition), by configuration hash; names as the module doc says."""
    by_hash: dict[str, list[str]] = {}
    own: list[str] = []
    for name in sorted(runs):
        digest = runs[name].config_hash
        if digest is None:
            own.append(name)
        else:
            by_hash.setdefault(digest, []).append(name)
    hashes_of: dict[str, list[str]] = {}
    for digest, names in by_hash.items():
        hashes_of.setdefault(runs[names[0]].experiment or names[0], []).append(digest)
    groups: dict[str, list[str]] = {}
    for experiment, digests in sorted(hashes_of.items()):
        for digest in digests:
            key = experiment if len(digests) == 1 else f"{experiment}@{digest[:8]}"
            groups[key] = by_hash[digest]
    for name in own:
        key = name if name not in groups else f"{name}@run"
        groups[key] = [name]
    of_run = {name: key for key, names in groups.items() for name in names}
    return dict(sorted(groups.items())), of_run


def split_notes(
    groups: Mapping[str, Sequence[str]], runs: Mapping[str, RunSummary], configs: Mapping[str, Optional[JSONObject]]
) -> dict[str, list[str]]:
    """For each experiment that is several conditions, one note (on each of them) naming them and what differs."""
    by_experiment: dict[str, list[str]] = {}
    for key, names in groups.items():
        run = runs[names[0]]
        if run.config_hash is not None and run.experiment is not None:
            by_experiment.setdefault(run.experiment, []).append(key)
    notes: dict[str, list[str]] = {}
    for experiment, keys in by_experiment.items():
        if len(keys) < 2:
            continue
        listed = "; ".join(f"{key} ({', '.join(groups[key])})" for key in keys)
        first = configs.get(groups[keys[0]][0])
        differ: list[str] = []
        for key in keys[1:]:
            other = configs.get(groups[key][0])
            if first is not None and other is not None:
                differ += [d for d in config_differences(first, other) if d not in differ]
        what = f"; they differ in {', '.join(differ[:6])}" if differ else ""
        note = (
            f"the runs of {experiment} ran under {len(keys)} configurations, so they are {len(keys)} conditions, "
            f"not one: {listed}{what}"
        )
        for key in keys:
            notes.setdefault(key, []).append(note)
    return notes


# --------------------------------------------------------------------------- one condition


def complete_steps(run: RunSummary) -> frozenset[int]:
    """The step ids of the run's complete steps."""
    table = run.steps
    if all(table.complete):
        return frozenset(table.step)
    return frozenset(step for step, done in zip(table.step, table.complete) if done)


class StepSets:
    """Each run's complete steps, found once (runs are compared step by step many times)."""

    def __init__(self, runs: Mapping[str, RunSummary]) -> None:
        self.runs = runs
        self._found: dict[str, frozenset[int]] = {}

    def __getitem__(self, name: str) -> frozenset[int]:
        found = self._found.get(name)
        if found is None:
            found = self._found[name] = complete_steps(self.runs[name])
        return found


def pool(
    names: Sequence[str], runs: Mapping[str, RunSummary], step_sets: Optional[StepSets] = None
) -> tuple[list[str], frozenset[int], dict[str, str]]:
    """(the seeds pooled, the steps every one of them completed, run -> why it is left out).

    The pooled seeds are those with the most complete steps (a seed with
    fewer was cut short); a second run of a seed already pooled is left out.
    """
    step_sets = step_sets or StepSets(runs)
    steps = {name: step_sets[name] for name in names}
    longest = max((len(s) for s in steps.values()), default=0)
    kept: list[str] = []
    left_out: dict[str, str] = {}
    seen_seeds: dict[int, str] = {}
    for name in names:
        seed = runs[name].seed
        if len(steps[name]) < longest:
            left_out[name] = f"{len(steps[name])} complete steps, fewer than the {longest} of the other seeds"
        elif seed is not None and seed in seen_seeds:
            left_out[name] = f"seed {seed} again ({seen_seeds[seed]} is counted): each seed counts once"
        else:
            kept.append(name)
            if seed is not None:
                seen_seeds[seed] = name
    shared = frozenset.intersection(*(steps[name] for name in kept)) if kept else frozenset()
    return kept, shared, left_out


def unlike_starts(names: Sequence[str], runs: Mapping[str, RunSummary]) -> Optional[str]:
    """A note naming how the pooled seeds started when they did not start alike (a cooled start below which
    temperature, or none), else None. A run whose capture does not say how it started is not said to differ."""
    how: dict[str, list[str]] = {}
    for name in names:
        run = runs[name]
        if run.start_below_c is not None:
            how.setdefault(f"waited to cool below {run.start_below_c:g} C", []).append(name)
        elif run.start_temp_c is not None:
            how.setdefault("had no cooled start", []).append(name)
    if len(how) < 2:
        return None

    def started(group: list[str]) -> str:
        temps = [runs[name].start_temp_c for name in group]
        known = [f"{temp:.1f}" for temp in temps if temp is not None]
        return f" (started at {_and(known)} C)" if known else ""

    said = "; ".join(f"{_and(group)} {what}{started(group)}" for what, group in how.items())
    return f"{UNLIKE_STARTS}: {said}: pooled as one condition all the same"


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def seed_figures(
    name: str, run: RunSummary, steps: frozenset[int], own: Optional[frozenset[int]] = None
) -> SeedFigures:
    """One seed's figures over `steps` (its complete steps among them); `own`: its complete steps, if known.

    Where `steps` are all its complete steps (the usual case), its own
    aggregates are these figures already: the same values under the same
    rules (means, the first four, a median over at least half the steps).
    """
    table = run.steps
    if (own if own is not None else complete_steps(run)) == steps:
        aggregates = run.aggregates
        positions = table.complete_positions() if not all(table.complete) else range(len(table))
        return SeedFigures(
            run=name,
            seed=run.seed,
            reward_mean=aggregates.reward_mean,
            reward_mean_first4=aggregates.reward_mean_first4,
            rollout_time_adjusted_median_s=aggregates.rollout_time_adjusted_median_s,
            dropped_groups=_total(run, table.dropped_groups, positions),
            dropped_all_right=_total(run, table.dropped_all_right, positions),
            dropped_all_wrong=_total(run, table.dropped_all_wrong, positions),
        )
    positions = [i for i, (step, done) in enumerate(zip(table.step, table.complete)) if done and step in steps]
    rewards = [table.reward[i] for i in positions]
    known = [r for r in rewards if r is not None]
    first = rewards[:FIRST_STEPS]
    adjusted = [t for t in (table.rollout_time_adjusted_s[i] for i in positions) if t is not None]

    return SeedFigures(
        run=name,
        seed=run.seed,
        reward_mean=seedstats.mean(known),
        reward_mean_first4=(
            seedstats.mean([r for r in first if r is not None])
            if len(first) == FIRST_STEPS and all(r is not None for r in first)
            else None
        ),
        # a median over at least half of the steps, as a run's own (docs/summary.md, "The rules")
        rollout_time_adjusted_median_s=median(adjusted) if adjusted and 2 * len(adjusted) >= len(positions) else None,
        dropped_groups=_total(run, table.dropped_groups, positions),
        dropped_all_right=_total(run, table.dropped_all_right, positions),
        dropped_all_wrong=_total(run, table.dropped_all_wrong, positions),
    )


def _total(run: RunSummary, column: Sequence[Optional[int]], positions: Sequence[int]) -> Optional[int]:
    """A count summed over the steps at `positions`: a filter run's, and only where every one of them has it."""
    if not run.filter or not positions:
        return None
    values = column if len(positions) == len(column) else [column[i] for i in positions]
    if None in values:
        return None
    summed = sum(v for v in values if v is not None)
    return summed if summed <= MAX_EXACT_INT else None


def seed_spread(values: Iterable[Optional[float]]) -> SeedSpread:
    """A figure spread over the seeds that have it."""
    spread = seedstats.spread([float(v) for v in values if v is not None])
    return SeedSpread(spread.n, spread.mean, spread.sd, spread.min, spread.max)


def summarize_condition(
    names: Sequence[str], runs: Mapping[str, RunSummary], step_sets: Optional[StepSets] = None
) -> tuple[ConditionSummary, frozenset[int]]:
    """One condition's summary, and its pooled steps."""
    step_sets = step_sets or StepSets(runs)
    first = runs[names[0]]
    kept, steps, left_out = pool(names, runs, step_sets)
    figures = [seed_figures(name, runs[name], steps, step_sets[name]) for name in kept]
    notes = [f"{name} is left out of the pooled figures: {why}" for name, why in left_out.items()]
    lacking = [f.run for f in figures if f.reward_mean is None]
    if lacking:
        notes.append(f"no reward in the pooled steps of {', '.join(lacking)}: left out of the reward figures")
    if len(kept) > 1 and any(len(step_sets[n]) != len(steps) for n in kept):
        notes.append(f"the seeds' complete steps differ: pooled over the {len(steps)} steps every one completed")
    unlike = unlike_starts(kept, runs)
    if unlike is not None:
        notes.append(unlike)
    simulated = {runs[name].simulated for name in names}
    summary = ConditionSummary(
        experiment=first.experiment,
        config_hash=first.config_hash,
        simulated=simulated.pop() if len(simulated) == 1 else None,
        filter=bool(first.filter),
        runs=list(names),
        seeds=figures,
        left_out=left_out,
        steps_pooled=len(steps),
        reward_mean=seed_spread(f.reward_mean for f in figures),
        reward_mean_first4=seed_spread(f.reward_mean_first4 for f in figures),
        rollout_time_adjusted_median_s=seed_spread(f.rollout_time_adjusted_median_s for f in figures),
        dropped_groups=seed_spread(f.dropped_groups for f in figures),
        dropped_all_right=seed_spread(f.dropped_all_right for f in figures),
        dropped_all_wrong=seed_spread(f.dropped_all_wrong for f in figures),
        notes=notes,
    )
    if summary.reward_mean.seeds == 1 and len(figures) == 1:
        summary.notes.append("one seed: no spread across seeds (run more seeds for one)")
    return summary, steps


def summarize_conditions(
    runs: Mapping[str, RunSummary], configs: Optional[Mapping[str, Optional[JSONObject]]] = None
) -> Conditions:
    """Every run in a condition, and every condition's pooled figures (a failure is one condition's note)."""
    groups, of_run = group_runs(runs)
    extra = split_notes(groups, runs, configs or {})
    out = Conditions(of_run=of_run, step_sets=StepSets(runs))
    for key, names in groups.items():
        try:
            summary, steps = summarize_condition(names, runs, out.step_sets)
        except Exception as err:  # a bug must not cost the other conditions their figures: say it, go on
            out.warnings.append(f"condition {key}: no pooled figures ({type(err).__name__}: {err})")
            continue
        summary.notes[:0] = extra.get(key, [])
        if runs[names[0]].config_hash is None:
            summary.notes.insert(0, f"{names[0]} records no configuration (no manifest.json): a condition of its own")
        out.summaries[key] = summary
        out.steps[key] = steps
    for note in dict.fromkeys(n for notes in extra.values() for n in notes):
        out.warnings.append(note)
    for key, summary in out.summaries.items():  # pooled, but said: the commands print it too
        out.warnings += [f"condition {key}: {note}" for note in summary.notes if note.startswith(UNLIKE_STARTS)]
    return out


# --------------------------------------------------------------------------- across seeds


@dataclass
class SeedComparisons:
    """Makes the across-seed blocks of the comparisons, each pair of conditions once."""

    runs: Mapping[str, RunSummary]
    conditions: Conditions
    effect: float = seedstats.DEFAULT_EFFECT
    _made: dict[tuple[str, str, tuple[str, ...]], SeedComparison] = field(default_factory=dict)

    def blocks(self, run: str, baseline: str, baselines: Sequence[str]) -> list[SeedComparison]:
        """The run's condition against its baseline's, and against the pool of its baselines' (where different)."""
        own = self.conditions.of_run.get(run)
        if own is None or own not in self.conditions.summaries:
            return []
        wanted: list[tuple[str, tuple[str, ...]]] = []
        base = self.conditions.of_run.get(baseline)
        if base is not None and base != own and base in self.conditions.summaries:
            wanted.append((BASELINE, (base,)))
        found = [self.conditions.of_run[name] for name in baselines if name in self.conditions.of_run]
        pooled = tuple(c for c in dict.fromkeys(found) if c != own and c in self.conditions.summaries)
        if pooled and pooled != (base,):
            wanted.append((BASELINES, pooled))
        out = []
        for against, others in wanted:
            key = (own, against, others)
            if key not in self._made:
                self._made[key] = self._compare(against, own, others)
            out.append(self._made[key])
        return out

    def between(self, own: str, other: str) -> SeedComparison:
        """Condition `own` against condition `other`, as a comparison's across-seed block would have them."""
        for condition in (own, other):
            if condition not in self.conditions.summaries:
                raise KeyError(condition)
        key = (own, BASELINE, (other,))
        if key not in self._made:
            self._made[key] = self._compare(BASELINE, own, (other,))
        return self._made[key]

    def _compare(self, against: str, own: str, others: tuple[str, ...]) -> SeedComparison:
        conditions = self.conditions
        mine = conditions.summaries[own]
        steps = conditions.steps[own].intersection(*(conditions.steps[c] for c in others))
        notes: list[str] = []
        lengths = {c: len(conditions.steps[c]) for c in (own, *others)}
        if any(n != len(steps) for n in lengths.values()):
            notes.append(
                f"compared over the {len(steps)} steps complete in every seed of both sides ("
                + ", ".join(f"{c}: {n}" for c, n in lengths.items())
                + ")"
            )
        x = self._means([f.run for f in mine.seeds], steps, notes)
        y = self._means([f.run for c in others for f in conditions.summaries[c].seeds], steps, notes)
        stats = seedstats.compare(list(x.values()), list(y.values()), self.effect)
        label = conditions_label(against, others)
        interval = stats.interval
        n_least = min(stats.x.n, stats.y.n)
        needed = stats.seeds_needed_for_effect.seeds
        # too few: no interval; or one that includes 0 while more seeds than these are needed to see the effect
        too_few = interval is None or (
            not stats.zero_spread and not stats.excludes_zero and (needed is None or needed > n_least)
        )
        first = self.runs[mine.runs[0]]
        facts = SeedFacts(
            condition=own,
            baseline=label,
            filter=mine.filter,
            biased=mine.filter and first.reward_key == RAW_REWARD_UNFILTERED,
            steps=len(steps),
            stats=stats,
            too_few_seeds=too_few,
        )
        return SeedComparison(
            against=against,
            condition=own,
            baseline_conditions=list(others),
            steps=len(steps),
            seeds=stats.x.n,
            baseline_seeds=stats.y.n,
            mean=stats.x.mean,
            baseline_mean=stats.y.mean,
            difference=stats.difference,
            interval_low=interval[0] if interval is not None else None,
            interval_high=interval[1] if interval is not None else None,
            interval_excludes_zero=stats.excludes_zero,
            welch_p=stats.welch_p,
            p_improvement=stats.p_improvement,
            pooled_sd=stats.pooled_sd,
            seeds_needed=stats.seeds_needed.seeds,
            effect=stats.effect,
            seeds_needed_for_effect=needed,
            too_few_seeds=too_few,
            verdict=seeds_verdict(facts),
            confidence=seedstats.CONFIDENCE,
            bootstrap_resamples=stats.resamples,
            notes=notes,
        )

    def _means(self, names: Sequence[str], steps: frozenset[int], notes: list[str]) -> dict[str, float]:
        """Each seed's mean reward over `steps` (those of its steps that have a reward); seeds with none left out."""
        out: dict[str, float] = {}
        sets = self.conditions.step_sets or StepSets(self.runs)
        for name in names:
            run = self.runs[name]
            value = run.aggregates.reward_mean if sets[name] == steps else per_seed_mean(run, steps)
            if value is None:
                notes.append(f"{name} has no reward in the steps compared: left out")
            else:
                out[name] = value
        return out


def per_seed_mean(run: RunSummary, steps: frozenset[int]) -> Optional[float]:
    """A seed's mean reward over the complete steps among `steps` that have a reward."""
    table = run.steps
    values = [
        reward
        for step, done, reward in zip(table.step, table.complete, table.reward)
        if done and reward is not None and step in steps
    ]
    return seedstats.mean(values)


def per_step_rewards(runs: Sequence[RunSummary], steps: frozenset[int]) -> dict[int, list[float]]:
    """Step -> the rewards of the seeds at that step (complete steps among `steps`), for the figures."""
    out: dict[int, list[float]] = {step: [] for step in sorted(steps)}
    for run in runs:
        for step, done, reward in zip(run.steps.step, run.steps.complete, run.steps.reward):
            if done and reward is not None and step in out:
                out[step].append(reward)
    return out


def describe_steps(steps: frozenset[int]) -> str:
    """`steps 0-11` for the pooled steps."""
    return steps_text(sorted(steps)) if steps else "no steps"


# --------------------------------------------------------------------------- read back, for figures and report


def pooled_steps(document_runs: Mapping[str, RunSummary], condition: ConditionSummary) -> frozenset[int]:
    """The steps a condition's figures are pooled over: complete in every one of its pooled seeds."""
    sets = [complete_steps(document_runs[f.run]) for f in condition.seeds if f.run in document_runs]
    return frozenset.intersection(*sets) if sets else frozenset()


def seed_values(
    document_runs: Mapping[str, RunSummary], conditions: Mapping[str, ConditionSummary], block: SeedComparison
) -> dict[str, dict[str, float]]:
    """Condition -> {run: its mean reward over the steps the block compared}, for each condition of the block."""
    keys = [block.condition, *block.baseline_conditions]
    found = [conditions[key] for key in keys if key in conditions]
    steps = frozenset.intersection(*(pooled_steps(document_runs, c) for c in found)) if found else frozenset()
    out: dict[str, dict[str, float]] = {}
    for key in keys:
        values: dict[str, float] = {}
        for figures in conditions[key].seeds if key in conditions else []:
            run = document_runs.get(figures.run)
            value = per_seed_mean(run, steps) if run is not None else None
            if value is not None:
                values[figures.run] = value
        out[key] = values
    return out


def unique_blocks(blocks: Iterable[SeedComparison]) -> list[SeedComparison]:
    """The across-seed comparisons once each (the runs of a condition carry the same ones), in order."""
    seen: dict[tuple[str, str, tuple[str, ...]], SeedComparison] = {}
    for block in blocks:
        seen.setdefault((block.condition, block.against, tuple(block.baseline_conditions)), block)
    return list(seen.values())


def across_seeds_lines(comparisons: Iterable[Comparison]) -> list[str]:
    """`across seeds, X against Y: <verdict>`, once per comparison of conditions (of the document's comparisons)."""
    blocks = unique_blocks(block for comparison in comparisons for block in comparison.across_seeds)
    return [f"across seeds, {b.condition} against {baseline_label(b)}: {b.verdict}" for b in blocks]


def across_seeds_after_sweep(
    document: SummaryDocument, runs: Sequence[str], baseline: Optional[str], summarize: str
) -> list[str]:
    """What a sweep of `runs` (their experiment compared with `baseline`) ends with: the across-seed lines of the
    comparisons of its runs, or, where there are none, one line pointing to what gives them (`summarize`: the
    command). Nothing for a sweep of one seed or of an experiment without a baseline."""
    seeds = {document.runs[name].seed for name in runs if name in document.runs}
    if baseline is None or len(runs) < 2 or len(seeds) < 2:
        return []
    ours = [comparison for comparison in document.comparisons if comparison.run in runs]
    lines = across_seeds_lines(ours)
    if lines:
        return lines
    if baseline not in document.runs:
        return [
            f"across seeds: no capture of the baseline {baseline} under the capture root yet: run its seeds, then "
            f"`{summarize}` compares them"
        ]
    return [f"across seeds: no comparison of these seeds with {baseline}'s yet; `{summarize}` says why"]


def baseline_label(block: SeedComparison) -> str:
    """`plain`, or `plain + plain-48 (pooled)`."""
    return conditions_label(block.against, block.baseline_conditions)


def conditions_label(against: str, conditions: Sequence[str]) -> str:
    """The other side of an across-seed comparison: its baseline's condition, or the pool of its baselines'
    conditions, `plain + plain-48 (pooled)` (not "the baselines": in a run's comparison those are runs)."""
    if against == BASELINE:
        return conditions[0]
    return f"{' + '.join(conditions)} (pooled)"
