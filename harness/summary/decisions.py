"""Adaptive comparisons (`harness decide`; docs/summary.md, "Adaptive comparisons"): each seed's value by the
summary's rules, the answer in one line, and the document's `decisions` block read from the records.

- **A seed's value** (`metric_value`) is computed from its run's summary
  (`RunSummary`) as the across-seed block computes it, over the seed's
  complete steps: `harness decide` counts only seeds whose capture
  succeeded, every one of the design's steps complete, so these are the
  steps every seed of the comparison completed.
- **The block** (`decision_summary`) is what the record holds, never
  recomputed from the captures: a comparison decided at interim 2 shows the
  values it was decided on, whatever ran since. Where a recorded run's
  capture has changed since (rerun, restored, gone), a note says so; the
  decision stands on the values recorded.
- **The answer** (`answer_line`) never gives a p-value: the design is not
  fixed, and a fixed design's p-value would overstate what was shown. It
  gives the decision, the interim, the seeds, and the seeds a fixed design
  would have needed for the difference seen.

Pure, but for `read_decisions`, which reads the records of a capture root.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

from harness.capture.reader import DECISIONS_DIR_NAME
from harness.errors import HarnessError
from harness.lab.milesnames import RAW_REWARD_UNFILTERED
from harness.stats import seeds as seedstats
from harness.stats.record import read_record
from harness.summary.document import DecisionInterim, DecisionOutcome, DecisionSummary, RunSummary
from harness.summary.seeds import complete_steps, per_seed_mean, seed_figures

if TYPE_CHECKING:
    from harness.stats.record import Header, Record

# --metric: what one seed's value is.
METRICS: dict[str, str] = {
    "reward": "the mean reward over its steps (the across-seed value: before the filter for a filter run)",
    "reward-unfiltered": f"the mean over its steps of Miles's {RAW_REWARD_UNFILTERED} as printed (every "
    "finished answer; never derived)",
    "rollout-time": "the median of its steps' rollout times with the heat guard's pause time taken out (trainer s)",
    "dropped-groups": "the groups the filter dropped over its steps (filter runs only)",
}
DEFAULT_METRIC = "reward"
SIMULATED = "SIMULATED"


def metric_value(name: str, run: RunSummary, metric: str) -> tuple[Optional[float], str]:
    """(the seed's value of `metric` over its complete steps, or None; why there is none)."""
    steps = complete_steps(run)
    if not steps:
        return None, "no complete step"
    if metric == "reward":
        return per_seed_mean(run, steps), "no reward in its steps"
    if metric == "reward-unfiltered":
        table = run.steps
        values = [
            value
            for step, done, value in zip(table.step, table.complete, table.raw_reward_unfiltered)
            if done and value is not None and step in steps
        ]
        return seedstats.mean(values), f"Miles did not print {RAW_REWARD_UNFILTERED} in its steps"
    figures = seed_figures(name, run, steps, steps)
    if metric == "rollout-time":
        return figures.rollout_time_adjusted_median_s, "no pause-adjusted rollout time in half of its steps or more"
    if metric == "dropped-groups":
        dropped = figures.dropped_groups
        why = "no dropped-group counts (a run without the filter has none)"
        return (float(dropped) if dropped is not None else None), why
    raise ValueError(f"no metric {metric!r}")


def answer_line(outcome: DecisionOutcome, header: Header, last_interim: int) -> str:
    """`A vs B: reward larger, decided at interim 2 (10 seeds each, 20 runs; a fixed design would have needed 16
    each)`, or `equal (no difference found at alpha 0.05 after 25 seeds each)`, or undecided so far."""
    comparison, metric, decision = outcome.comparison, header.metric, outcome.decision
    seeds, second_seeds, fixed_design_seeds = outcome.seeds, outcome.second_seeds, outcome.fixed_design_seeds
    each = f"{seeds} seeds each" if seeds == second_seeds else f"{seeds} and {second_seeds} seeds"
    if decision in ("larger", "smaller"):
        fixed = (
            f"; a fixed design would have needed {fixed_design_seeds} each"
            if fixed_design_seeds is not None
            else "; no fixed-design number (the seeds do not vary, or no difference)"
        )
        line = f"{comparison}: {metric} {decision}, decided at interim {outcome.decided_at} ({each}, {seeds + second_seeds} runs{fixed})"
    elif decision == "equal":
        line = f"{comparison}: {metric} equal (no difference found at alpha {header.alpha:g} after {each})"
    else:
        line = (
            f"{comparison}: {metric} undecided after interim {last_interim} of {header.interims} ({each}); "
            "harness decide again runs the next interim"
        )
    return line


def fixed_design_seeds(first: Sequence[float], second: Sequence[float], alpha: float) -> Optional[int]:
    """The seeds per experiment a fixed design (two-sided t-test, 80% power, `alpha`) needs for the difference of
    these values, from their pooled SD (harness.stats.seeds)."""
    a, b = seedstats.mean(first), seedstats.mean(second)
    if a is None or b is None:
        return None
    return seedstats.seeds_needed(a - b, seedstats.pooled_sd(first, second), alpha=alpha).seeds


def decision_summary(record: Record, runs: Optional[Mapping[str, RunSummary]] = None) -> DecisionSummary:
    """The `decisions` block of one record (its header and interims as written); `runs`: the document's runs, for
    the notes on captures that changed since."""
    header = record.header
    if header is None:
        raise ValueError(f"{record.path.name} has no design line")
    interims, counted = _interims(record, header)
    outcomes = [_outcome(comparison, record, header, counted) for comparison in header.comparisons]
    notes = []
    if record.torn is not None:
        notes.append(record.torn.describe(record.path))
    notes += [note for interim in record.interims for note in interim.notes]
    notes += changed_since(record, runs) if runs is not None else []
    return DecisionSummary(
        name=header.name,
        record=f"{record.path.parent.name}/{record.path.name}",
        metric=header.metric,
        experiments=list(header.experiments),
        per_interim=header.per_interim,
        max_interims=header.interims,
        alpha=header.alpha,
        permutations=header.permutations,
        random_state=header.random_state,
        simulated=header.simulated,
        steps=header.steps,
        finished=bool(record.interims and record.interims[-1].finished),
        comparisons=outcomes,
        interims=interims,
        notes=notes,
    )


def _interims(record: Record, header: Header) -> tuple[list[DecisionInterim], dict[str, list[list[float]]]]:
    """Each interim as the block holds it, and each experiment's values counted after each interim."""
    so_far: dict[str, list[float]] = {name: [] for name in header.experiments}
    counted: dict[str, list[list[float]]] = {name: [] for name in header.experiments}  # values after each interim
    interims: list[DecisionInterim] = []
    for interim in record.interims:
        for name, values in interim.values.items():
            so_far.setdefault(name, []).extend(values)
        for name in header.experiments:
            counted[name].append(list(so_far.get(name, [])))
        interims.append(
            DecisionInterim(
                interim=interim.interim,
                seeds={k: list(v) for k, v in interim.seeds.items()},
                runs={k: list(v) for k, v in interim.runs.items()},
                values={k: list(v) for k, v in interim.values.items()},
                decisions=dict(interim.decisions),
                statistics=dict(interim.statistics),
                boundary=interim.boundary,
                boundary_smaller=interim.boundary_smaller,
                alpha_spent=interim.alpha_spent,
                replaced=[f"{s.experiment} seed {s.seed} replaced by seed {s.by}: {s.why}" for s in interim.replaced],
            )
        )
    return interims, counted


def _outcome(
    comparison: str, record: Record, header: Header, counted: Mapping[str, list[list[float]]]
) -> DecisionOutcome:
    """One comparison at the interim it was decided (or the last one recorded), with its answer."""
    last = record.interims[-1] if record.interims else None
    first, second = comparison.split(" vs ", 1)
    decision = last.decisions.get(comparison, "continue") if last is not None else "continue"
    decided_at = last.decided_at.get(comparison) if last is not None else None
    at = decided_at or len(record.interims)
    # the values the comparison counted: each side's first (interim x n), as the comparator reads them
    take = at * header.per_interim
    a = counted[first][at - 1][:take] if at else []
    b = counted[second][at - 1][:take] if at else []
    fixed = fixed_design_seeds(a, b, header.alpha) if len(a) > 1 and len(b) > 1 else None
    outcome = DecisionOutcome(
        comparison=comparison,
        first=first,
        second=second,
        decision=decision,
        decided_at=decided_at,
        seeds=len(a),
        second_seeds=len(b),
        mean=seedstats.mean(a),
        second_mean=seedstats.mean(b),
        fixed_design_seeds=fixed,
        answer="",
    )
    outcome.answer = answer_line(outcome, header, len(record.interims))
    return outcome


def changed_since(record: Record, runs: Mapping[str, RunSummary]) -> list[str]:
    """A note for each recorded run whose capture is gone or is another attempt now: the decision keeps the value
    recorded."""
    notes = []
    for interim in record.interims:
        for experiment, names in interim.runs.items():
            attempts = interim.attempts.get(experiment, [])
            for i, name in enumerate(names):
                recorded = attempts[i] if i < len(attempts) else None
                run = runs.get(name)
                if run is None:
                    notes.append(
                        f"{name} (interim {interim.interim}) is no longer a capture here: its recorded value stands"
                    )
                elif recorded is not None and run.attempt is not None and run.attempt != recorded:
                    notes.append(
                        f"{name} is attempt {run.attempt} now, attempt {recorded} when interim {interim.interim} "
                        "counted it: the decision stands on the value recorded"
                    )
    return notes


def read_decisions(
    capture_root: Path, runs: Optional[Mapping[str, RunSummary]] = None
) -> tuple[list[DecisionSummary], list[str]]:
    """The `decisions` blocks of every record under `<capture root>/decisions/` (by name), and a warning for each
    record that cannot be used (edited, damaged: left out)."""
    directory = Path(capture_root) / DECISIONS_DIR_NAME
    if not directory.is_dir() or directory.is_symlink():
        return [], []
    blocks: list[DecisionSummary] = []
    warnings: list[str] = []
    for path in sorted(directory.glob("*.jsonl")):
        try:
            record = read_record(path)
        except HarnessError as err:
            warnings.append(f"{err.message} (left out of the summary)")
            continue
        if record.header is None:
            continue
        blocks.append(decision_summary(record, runs))
        if record.torn is not None:
            warnings.append(record.torn.describe(path))
    return blocks, warnings
