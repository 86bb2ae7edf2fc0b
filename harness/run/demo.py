"""`make demo`: the lab's whole pipeline on the simulator, on any machine.

The write-up's runs from the lab's own experiment files, with the seeds the
write-up asks for: e2b-dapo-filter, plain and plain-48 over seeds 1-3, and
e6a-base; on the simulator (harness.run.simswap), each as `harness run --sim`
runs it: the heat guard on the simulated GB10, the same time scale, and the
same cooled start (DEMO_START_BELOW_C, every simulated run's). Then the summary, its figures and the
report, the headline numbers beside the write-up's, and the filter against
plain across seeds.

The runs go at once: on the simulator each mostly sleeps (it needs no GPU,
so there is no GPU lock to wait for), and the slowest run sets the time.
Deciding is pure here (`headline`); `run_at_once` acts through the same
`run_planned` a `harness run` uses.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from harness.capture import RunState
from harness.experiments.store import ExperimentStore
from harness.run.context import RunContext
from harness.run.decide import Decision
from harness.run.lifecycle import SweepResult, run_in_parallel
from harness.run.plan import Planned, plan_runs
from harness.run.simswap import SIM_START_BELOW_C, SimTarget
from harness.summary.seeds import across_seeds_lines

if TYPE_CHECKING:
    from harness.summary.document import Aggregates, Comparison, SummaryDocument

FILTER_RUN = "e2b-dapo-filter"
BASELINE_RUN = "plain"
# (experiment, seeds): the filter run and its baseline over three seeds each, so the summary compares them
# across seeds (the write-up's open question), and the baselines whose spread frames the reward.
DEMO_RUNS: tuple[tuple[str, tuple[int, ...]], ...] = (
    (FILTER_RUN, (1, 2, 3)),
    (BASELINE_RUN, (1, 2, 3)),
    ("plain-48", (1, 2, 3)),
    ("e6a-base", (1,)),
)
# Every demo run starts cooled, as the seeds sweep's and every other simulated run's do (harness.run.simswap): the
# simulated machine starts with its CPU side warm (the host was busy), and each run waits, shown in the live table,
# until every watched temperature is below this.
DEMO_START_BELOW_C = SIM_START_BELOW_C


def plan_demo(
    store: ExperimentStore,
    capture_root: Path,
    target: SimTarget,
    *,
    steps: Optional[int] = None,
    environ: Optional[dict[str, str]] = None,
) -> list[Planned]:
    """The demo's runs on the simulator, as `run --sim` plans them (`steps`: fewer, for a quick look)."""
    plans: list[Planned] = []
    for name, seeds in DEMO_RUNS:
        overrides = [] if steps is None else [f"steps={steps}"]
        plans += plan_runs(
            store, name, seeds, overrides, capture_root, dict(os.environ if environ is None else environ), sim=target
        )
    return plans


def run_at_once(plans: Sequence[Planned], ctx: RunContext) -> list[SweepResult]:
    """Every plan at once, each as `harness run` runs it; the results in the plans' order."""
    return run_in_parallel(plans, ctx, len(plans))


@dataclass(frozen=True)
class DemoOutcome:
    """What the demo's runs came to, and whether their summary may be published (pure: `demo_outcome`)."""

    results: tuple[SweepResult, ...]
    refused: tuple[Decision, ...]  # succeeded captures of another configuration: the command fails
    missing: tuple[SweepResult, ...]  # runs that did not succeed (ran and failed, skipped, or never started)

    @property
    def publish(self) -> bool:
        """The summary, figures and headline numbers need every run: without one, what is there would be
        compared as if it were the write-up's set."""
        return not self.refused and not self.missing

    @property
    def reused(self) -> int:
        """Runs whose succeeded capture was kept rather than run again."""
        return sum(result.decision.action == "skip" for result in self.results)

    @property
    def states(self) -> list[str]:
        """Each run's final state, `not run` where none started."""
        return [str(result.status.state) if result.status else "not run" for result in self.results]


def demo_outcome(results: Sequence[SweepResult]) -> DemoOutcome:
    """Sort the demo's results into refused, missing and the rest."""
    refused = tuple(result.decision for result in results if result.decision.refused)
    missing = tuple(result for result in results if result.status is None or result.status.state != RunState.SUCCEEDED)
    return DemoOutcome(tuple(results), refused, missing)


# --- the headline numbers beside the write-up's ------------------------------------------------

# The lab write-up's figures (DAPO-filter section: 12 steps, seed 1, on a GB10).
WRITE_UP = {
    "plain_zero_std": "about half, mostly all right",
    "plain_median": "58.0 s",
    "dropped": "16-48, median 36",
    "dropped_right": "most",
    "one_batch": "3 of 12: 88.7 s, 1.5x",
    "two_batch": "9 of 12: 164.4 s, 2.8x",
    "reward": "0.686 vs 0.657",
    "baselines": "0.638-0.660",
    "first4": "0.672 vs 0.625",
    "pauses": "every rollout overlapped one",
    "step_sums": "113 vs 60 min",
    "across_seeds": "one seed each: no interval",
}


@dataclass(frozen=True)
class HeadlineRow:
    """One figure: what it is, the demo's value, the write-up's."""

    figure: str
    demo: str
    write_up: str


def _num(value: object, fmt: str, suffix: str = "") -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value:{fmt}}{suffix}"


def _batches(comparison: Optional["Comparison"], key: str, steps: Optional[int]) -> str:
    group = comparison.by_batches.get(key) if comparison is not None else None
    if group is None:
        return f"0 of {_num(steps, 'd')}"
    return (
        f"{group.steps} of {_num(steps, 'd')}: {_num(group.rollout_time_adjusted_median_s, '.1f', ' s')}, "
        f"{_num(group.ratio, '.2f', 'x')}"
    )


def _share(part: object, whole: object) -> str:
    if not isinstance(part, (int, float)) or not isinstance(whole, (int, float)) or not whole:
        return "-"
    return f"{100 * part / whole:.0f}%"


def _zero_std_share(plain: Optional["Aggregates"], batch: Optional[int]) -> str:
    """The plain run's zero-variance groups: their share of every group, and how many per step."""
    if (
        plain is None
        or plain.zero_std_all_right_total is None
        or plain.zero_std_all_wrong_total is None
        or not plain.steps
        or not batch
    ):
        return "-"
    right, wrong = plain.zero_std_all_right_total, plain.zero_std_all_wrong_total
    return (
        f"{_share(right + wrong, plain.steps * batch)} of groups "
        f"({right / plain.steps:.1f} all right, {wrong / plain.steps:.1f} all wrong per step)"
    )


def _step_sums(filtered: Optional["Aggregates"], plain: Optional["Aggregates"]) -> str:
    """The sums of step times, filter vs plain, in minutes."""
    if filtered is None or plain is None or filtered.step_time_sum_s is None or plain.step_time_sum_s is None:
        return "-"
    return f"{filtered.step_time_sum_s / 60:.0f} vs {plain.step_time_sum_s / 60:.0f} min"


def headline(document: "SummaryDocument") -> list[HeadlineRow]:
    """The write-up's headline figures, read from a summary document (pure; "-" where a run is missing)."""
    plain_run = document.runs.get(BASELINE_RUN)
    filtered_run = document.runs.get(FILTER_RUN)
    plain = plain_run.aggregates if plain_run is not None else None
    filtered = filtered_run.aggregates if filtered_run is not None else None
    comparison = next((c for c in document.comparisons if c.run == FILTER_RUN), None)
    reward = comparison.reward if comparison is not None else None
    batch = plain_run.rollout_batch_size if plain_run is not None else None

    dropped_right = filtered.dropped_all_right_total if filtered is not None else None
    dropped_wrong = filtered.dropped_all_wrong_total if filtered is not None else None
    dropped_total = dropped_right + dropped_wrong if dropped_right is not None and dropped_wrong is not None else None
    steps = filtered.steps if filtered is not None else None
    overlapped = filtered.steps - filtered.clean_steps if filtered is not None else None
    zero_std, sums = _zero_std_share(plain, batch), _step_sums(filtered, plain)

    def plain_value(name: str) -> object:
        return getattr(plain, name) if plain is not None else None

    def filtered_value(name: str) -> object:
        return getattr(filtered, name) if filtered is not None else None

    def reward_value(name: str) -> object:
        return getattr(reward, name) if reward is not None else None

    return [
        HeadlineRow("plain: zero-variance groups", zero_std, WRITE_UP["plain_zero_std"]),
        HeadlineRow(
            "plain: median rollout, pauses out",
            _num(plain_value("rollout_time_adjusted_median_s"), ".1f", " s"),
            WRITE_UP["plain_median"],
        ),
        HeadlineRow(
            "filter: dropped groups per step",
            f"{_num(filtered_value('dropped_groups_min'), 'd')}-{_num(filtered_value('dropped_groups_max'), 'd')}, "
            f"median {_num(filtered_value('dropped_groups_median'), 'g')}",
            WRITE_UP["dropped"],
        ),
        HeadlineRow(
            "filter: dropped groups all right", _share(dropped_right, dropped_total), WRITE_UP["dropped_right"]
        ),
        HeadlineRow("filter: one-batch steps, x plain", _batches(comparison, "1", steps), WRITE_UP["one_batch"]),
        HeadlineRow("filter: two-batch steps, x plain", _batches(comparison, "2", steps), WRITE_UP["two_batch"]),
        HeadlineRow(
            "reward: filter (unfiltered) vs plain",
            f"{_num(reward_value('run_mean'), '.3f')} vs {_num(reward_value('baseline_mean'), '.3f')}",
            WRITE_UP["reward"],
        ),
        HeadlineRow(
            "reward: the baselines' spread",
            f"{_num(reward_value('spread_min'), '.3f')}-{_num(reward_value('spread_max'), '.3f')}",
            WRITE_UP["baselines"],
        ),
        HeadlineRow(
            "reward: first four steps",
            f"{_num(reward_value('run_mean_first4'), '.3f')} vs {_num(reward_value('baseline_mean_first4'), '.3f')}",
            WRITE_UP["first4"],
        ),
        HeadlineRow(
            "filter: heat pauses",
            f"{_num(overlapped, 'd')} of {_num(steps, 'd')} rollouts overlapped one; "
            f"{_num(filtered_value('pause_total_s'), '.0f', ' s')} paused",
            WRITE_UP["pauses"],
        ),
        HeadlineRow("sum of step times, filter vs plain", sums, WRITE_UP["step_sums"]),
        HeadlineRow("reward across seeds, filter vs plain", _across_seeds(comparison), WRITE_UP["across_seeds"]),
    ]


def _across_seeds(comparison: Optional["Comparison"]) -> str:
    """`0.668 vs 0.656, 3 seeds each: +0.012, 95% interval -0.004 to +0.029`, or why there is no interval."""
    block = next((b for b in comparison.across_seeds if b.against == "baseline"), None) if comparison else None
    if block is None or block.mean is None or block.baseline_mean is None or block.difference is None:
        return "-"
    seeds = (
        f"{block.seeds} seeds each"
        if block.seeds == block.baseline_seeds
        else f"{block.seeds} and {block.baseline_seeds} seeds"
    )
    head = f"{block.mean:.3f} vs {block.baseline_mean:.3f}, {seeds}: {block.difference:+.3f}"
    if block.interval_low is None or block.interval_high is None:
        return f"{head}, no interval"
    return f"{head}, 95% interval {block.interval_low:+.3f} to {block.interval_high:+.3f}"


def verdict_lines(document: "SummaryDocument") -> list[str]:
    """What the demo says after the table: each run's verdict, then each comparison across seeds once."""
    lines = [f"{c.run} against {c.baseline}: {c.reward.verdict}" for c in document.comparisons]
    return lines + across_seeds_lines(document.comparisons)
