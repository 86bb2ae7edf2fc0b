"""`harness decide --dry-run`: what the next interim would do, planned and decided as `decide` would, nothing run
or written (harness.run.adaptive holds the steps both share)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.engines.spec import LaunchSpec
from harness.run.adaptive import (
    DecideRequest,
    check_request,
    design_header,
    next_seeds,
    plan_seed,
    refuse_another_design,
    replay_record,
    tried_seeds,
)
from harness.run.decide import Decision
from harness.run.lifecycle import decide_on_capture
from harness.stats.adaptive import check_design
from harness.stats.record import Header, read_record


@dataclass(frozen=True)
class NextRun:
    """A seed the next interim would take: its run, and whether it would run, its capture be reused, or be refused."""

    experiment: str
    seed: int
    decision: Decision
    spec: LaunchSpec  # what its pre-flight checks

    @property
    def run(self) -> str:
        return self.decision.run

    @property
    def action(self) -> str:
        """run, skip (a succeeded capture reused) or refuse (`decide` would refuse to start), as a sweep's plan."""
        return "refuse" if self.decision.refused else self.decision.action

    def to_dict(self) -> dict[str, object]:
        return {
            "experiment": self.experiment,
            "seed": self.seed,
            "run": self.run,
            "action": self.action,
            "reason": self.decision.reason,
        }


@dataclass(frozen=True)
class DecidePlan:
    """What `harness decide` would do (`--dry-run`): the design, the record so far, the next interim's seeds."""

    header: Header
    record: Path
    interims_recorded: int
    decisions: dict[str, str]
    open: tuple[str, ...]
    next_runs: tuple[NextRun, ...]

    @property
    def max_seeds_each(self) -> int:
        return self.header.per_interim * self.header.interims

    @property
    def max_runs(self) -> int:
        """The most runs the whole comparison can take (retries and replacements aside)."""
        return self.max_seeds_each * len(self.header.experiments)

    def to_dict(self) -> dict[str, object]:
        """The `--dry-run --json` document."""
        header = self.header
        return {
            "record": str(self.record),
            "experiments": list(header.experiments),
            "comparisons": list(header.comparisons),
            "metric": header.metric,
            "per_interim": header.per_interim,
            "interims": header.interims,
            "alpha": header.alpha,
            "permutations": header.permutations,
            "random_state": header.random_state,
            "simulated": header.simulated,
            "steps": header.steps,
            "max_seeds_each": self.max_seeds_each,
            "max_runs": self.max_runs,
            "interims_recorded": self.interims_recorded,
            "decisions": dict(self.decisions),
            "open": list(self.open),
            "next": [run.to_dict() for run in self.next_runs],
        }


def plan_decide(request: DecideRequest) -> DecidePlan:
    """The plan of `decide` without running or writing anything (the same refusals first)."""
    design = request.design
    check_design(design)
    firsts = {name: plan_seed(request, name, 1) for name in design.experiments}
    check_request(request, firsts)
    asked = design_header(request, firsts)
    record = read_record(request.record)
    refuse_another_design(request, record, asked)
    comparison = replay_record(design, record)
    tried = tried_seeds(record)
    runs: list[NextRun] = []
    if not comparison.finished:
        for name in comparison.open_experiments():
            for seed in next_seeds(tried.get(name, []), design.per_interim):
                plan = plan_seed(request, name, seed)
                runs.append(NextRun(name, seed, decide_on_capture(plan, "retry"), plan.spec))
    return DecidePlan(
        header=record.header or asked,
        record=request.record,
        interims_recorded=len(record.interims),
        decisions=dict(zip(design.comparison_names, comparison.decisions)),
        open=comparison.open_experiments() if not comparison.finished else (),
        next_runs=tuple(runs),
    )
