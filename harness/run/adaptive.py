"""`harness decide`: seeds run on demand until AdaStop decides the comparison, with the error rate held.

Each interim runs the next n seeds of every experiment still in an undecided
comparison (`next_seeds`, pure), through the same machinery as a sweep (the
`Runner`: `run_sweep`, or Ray's), reads each seed's capture by the summary's
rules (`harness.summary.decisions.metric_value`), feeds the values to the
`adastop` comparator (`harness.stats.adaptive`) and appends the interim to
the record (`harness.stats.record`), fsynced, before the next one starts.

- **Reuse.** A seed is planned as `sweep` plans it and decided in `retry`
  mode (`harness.run.decide`): a seed whose capture succeeded with the same
  configuration is taken as it is, never run again; one that succeeded with
  another configuration is refused before anything starts, as `sweep` does.
- **Failures.** A seed that does not succeed is run once more; if it fails
  again (or succeeds without a value of the metric), the next unused seed
  number takes its place, and the record says so (`retried`, `replaced`).
- **Resume.** The comparator is rebuilt by replaying the recorded interims
  (and refused if the record's decisions are not what its values give), so an
  interrupted `decide` run again with the same flags goes on from its last
  whole interim and ends with the record an uninterrupted one would have.
- **One design.** Changing n, K, alpha, B, the metric, the experiments or a
  configuration on an existing record is refused in one line; the record is
  locked, so a second `decide` on it waits (or exits 4 with --no-wait).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from harness.board.decisions import write_decision_text
from harness.capture import this_host, utc_now
from harness.capture.reader import read_capture
from harness.errors import ExitCode, HarnessError
from harness.experiments.schema import redacted_experiment
from harness.fs.failpoints import failpoint
from harness.fs.files import describe_os_error
from harness.mileslog import keys
from harness.run.decide import refuse_before_starting
from harness.run.lifecycle import decide_on_capture
from harness.run.plan import plan_runs
from harness.stats.adaptive import AdaptiveComparison, Design, InterimOutcome, _adastop, check_design, replay
from harness.stats.record import (
    Header,
    Interim,
    Record,
    RecordError,
    RecordLock,
    Retry,
    Swap,
    append_entry,
    check_record_name,
    cut_torn_tail,
    read_record,
    record_path,
)
from harness.summary.conditions import NOT_IN_CONDITION, config_hash, without_seed_flags
from harness.summary.decisions import METRICS, decision_summary, metric_value
from harness.summary.seeds import complete_steps
from harness.summary.summarize import summarize_run
from harness.times import now_rfc3339

if TYPE_CHECKING:
    from harness.experiments.store import ExperimentStore
    from harness.run.context import RunContext
    from harness.run.lifecycle import SweepResult
    from harness.run.plan import Planned
    from harness.run.simswap import SimTarget
    from harness.summary.document import DecisionSummary, RunSummary

Runner = Callable[[Sequence["Planned"]], list["SweepResult"]]

# A failed seed is run once more; each interim may replace at most this many seeds of one experiment before the
# comparison stops (something is wrong with the runs, not with a seed).
RETRIES = 1


@dataclass(frozen=True)
class DecideRequest:
    """What `harness decide` was asked: the design, the metric, where the record and the captures are."""

    design: Design
    metric: str
    name: str
    capture_root: Path
    store: ExperimentStore
    overrides: tuple[str, ...] = ()
    sim: Optional[SimTarget] = None
    environ: Mapping[str, str] = field(default_factory=dict)

    @property
    def record(self) -> Path:
        return record_path(self.capture_root, self.name)


@dataclass
class DecideOutcome:
    """What `decide` came to: the record's block (as the summary shows it), and what this call did."""

    summary: DecisionSummary
    started: int  # runs this call started (a reused capture starts none)
    interims_run: int  # interims this call added to the record
    notes: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        """The answer, one line per comparison."""
        return [comparison.answer for comparison in self.summary.comparisons]


# --------------------------------------------------------------------------- pure decisions


def next_seeds(tried: Sequence[int], count: int) -> list[int]:
    """The next `count` seed numbers after every seed tried so far (1, 2, ... for the first interim)."""
    start = max(tried, default=0) + 1
    return list(range(start, start + count))


def design_changes(header: Header, asked: Header) -> list[str]:
    """What the call asks that differs from the record's design, as the options that say it (pure)."""
    options = (
        ("metric", "--metric"),
        ("per_interim", "--per-interim"),
        ("interims", "--interims"),
        ("alpha", "--alpha"),
        ("permutations", "--permutations"),
        ("random_state", "the random state"),
        ("experiments", "the experiments"),
        ("against_first", "--against-first"),
        ("simulated", "--sim (a simulated run and a GB10 run are never compared)"),
        ("steps", "the steps"),
    )
    out = []
    for key, option in options:
        recorded, now = getattr(header, key), getattr(asked, key)
        if recorded != now:
            out.append(f"{option}: {_shown(recorded)} recorded, {_shown(now)} now")
    for experiment, condition in asked.conditions.items():
        recorded = header.conditions.get(experiment)
        if recorded is not None and recorded != condition:
            out.append(f"{experiment}'s configuration changed (the record's seeds ran another; --set or its file)")
    return out


def _shown(value: object) -> str:
    if isinstance(value, list):
        return " ".join(map(str, value))
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def plan_condition(plan: Planned) -> str:
    """A hash of what a planned run measures, without its seed (the summary's condition, from the plan)."""
    experiment = {k: v for k, v in redacted_experiment(plan.experiment).items() if k not in NOT_IN_CONDITION}
    container = experiment.get("container")
    if isinstance(container, dict):
        experiment["container"] = {k: v for k, v in container.items() if k != "secret_env"}
    experiment["trainer_argv"] = without_seed_flags(list(plan.spec.trainer_argv))
    experiment["image"] = plan.spec.image
    experiment["time_scale"] = plan.time_scale
    experiment["simulated"] = plan.sim is not None
    return config_hash(experiment) or "unknown"


# --------------------------------------------------------------------------- the loop


@dataclass
class _Slot:
    """One place in an interim's values: which experiment, which seed holds it now, how often it ran."""

    experiment: str
    seed: int
    runs: int = 0
    run: Optional[str] = None
    attempt: Optional[int] = None
    value: Optional[float] = None
    reused: bool = False


def plan_seed(request: DecideRequest, experiment: str, seed: int) -> Planned:
    """One seed of one experiment, planned as `sweep` plans it."""
    (plan,) = plan_runs(
        request.store,
        experiment,
        [seed],
        list(request.overrides),
        request.capture_root,
        dict(request.environ),
        sim=request.sim,
    )
    return plan


def design_header(request: DecideRequest, firsts: Mapping[str, Planned]) -> Header:
    """The design line this call would write: the request, and what the experiments' first seeds say."""
    design = request.design
    steps = {plan.experiment.steps for plan in firsts.values()}
    return Header(
        name=request.name,
        experiments=list(design.experiments),
        against_first=design.against_first,
        comparisons=list(design.comparison_names),
        metric=request.metric,
        per_interim=design.per_interim,
        interims=design.interims,
        alpha=design.alpha,
        permutations=design.permutations,
        random_state=design.random_state,
        simulated=request.sim is not None,
        steps=steps.pop() if len(steps) == 1 else -1,
        conditions={name: plan_condition(plan) for name, plan in firsts.items()},
        created_at=now_rfc3339(),
        adastop=str(getattr(_adastop(), "__version__", "unknown")),
    )


def check_request(request: DecideRequest, firsts: Mapping[str, Planned]) -> None:
    """One line for what makes the comparison impossible before any run: the design, the metric, unequal step
    counts, a metric these experiments cannot have."""
    check_design(request.design)
    if request.metric not in METRICS:
        raise HarnessError(f"--metric {request.metric}: not one of {', '.join(METRICS)}")
    check_record_name(request.name)
    steps = {name: plan.experiment.steps for name, plan in firsts.items()}
    if len(set(steps.values())) > 1:
        listed = ", ".join(f"{name} {count}" for name, count in steps.items())
        raise HarnessError(
            f"the experiments run different numbers of steps ({listed}): compared over the steps every seed "
            "completed, they would not measure the same thing; give them one step count (--set steps=N)"
        )
    if request.metric == "dropped-groups":
        for name, plan in firsts.items():
            filter_on, _ = keys.filter_setting(None, list(plan.spec.trainer_argv))
            if not filter_on:
                raise HarnessError(
                    f"--metric dropped-groups: {name} runs without the filter, so its captures have no dropped "
                    "groups to compare"
                )


def decide(request: DecideRequest, ctx: RunContext, runner: Runner) -> DecideOutcome:
    """Run interims until every comparison is decided (or K interims), appending each to the record."""
    design = request.design
    check_design(request.design)
    firsts = {name: plan_seed(request, name, 1) for name in design.experiments}
    check_request(request, firsts)
    asked = design_header(request, firsts)
    owner = {"decide": request.name, "pid": os.getpid(), "host": this_host(), "since": utc_now()}
    with RecordLock(request.record, request.capture_root, owner) as lock:
        lock.acquire(wait=ctx.options.wait_for_gpu, on_wait=ctx.reporter.warning, cancelled=lambda: ctx.stop.requested)
        return _decide_locked(request, ctx, runner, asked, read_record(request.record))


def _decide_locked(
    request: DecideRequest, ctx: RunContext, runner: Runner, asked: Header, record: Record
) -> DecideOutcome:
    notes: list[str] = []
    root = request.capture_root
    refuse_another_design(request, record, asked)
    torn_note = cut_torn_tail(record, root) if record.torn is not None else None
    if torn_note is not None:
        ctx.reporter.warning(torn_note)
        notes.append(torn_note)
        record = read_record(request.record)
    comparison = replay_record(request.design, record)
    check = record.last_check
    if record.header is None:
        check = append_entry(request.record, asked, "", root)
    header = record.header or asked
    started = 0
    made = 0
    while not comparison.finished:
        number = len(comparison.outcomes) + 1
        ctx.reporter.note(
            f"interim {number} of at most {request.design.interims}: {request.design.per_interim} more seeds of "
            + ", ".join(comparison.open_experiments())
        )
        slots, retried, replaced, ran = run_interim(request, ctx, runner, comparison, record, header)
        started += ran
        values = {name: [s.value for s in slots if s.experiment == name] for name in comparison.open_experiments()}
        outcome = comparison.interim({name: [v for v in vs if v is not None] for name, vs in values.items()})
        interim = _interim_entry(comparison, outcome, slots, retried, replaced, [torn_note] if torn_note else [])
        torn_note = None
        check = append_entry(request.record, interim, check, root)
        made += 1
        record = Record(record.path, header, [*record.interims, interim], None, check)
        _board(request, record, ctx)
        for line in decision_summary(record).comparisons:
            ctx.reporter.note(f"interim {number}: {line.answer}")
        failpoint("decide-interim", number)
    if made == 0 and record.interims:
        _board(request, record, ctx)
    return DecideOutcome(decision_summary(record), started, made, notes)


def refuse_another_design(request: DecideRequest, record: Record, asked: Header) -> None:
    """One line when the record was made under another design than the one asked (pure)."""
    if record.header is None:
        return
    changes = design_changes(record.header, asked)
    if changes:
        raise HarnessError(
            f"{_shown_path(request.record)} was made under another design ({'; '.join(changes[:3])}): give the "
            "record's settings, or --name NAME for a new record"
        )


def replay_record(design: Design, record: Record) -> AdaptiveComparison:
    """The comparator rebuilt from the record's interims; RecordError when a recorded decision is not what the
    recorded values give (the record was made by another comparator, or changed)."""
    try:
        comparison = replay(design, [interim.values for interim in record.interims])
    except ValueError as err:
        raise RecordError(
            f"{_shown_path(record.path)} cannot be replayed ({err}): move it aside to start anew"
        ) from None
    names = design.comparison_names
    for interim, outcome in zip(record.interims, comparison.outcomes):
        recorded = [interim.decisions.get(name) for name in names]
        if recorded != list(outcome.decisions):
            raise RecordError(
                f"{_shown_path(record.path)} interim {interim.interim} records decisions ({', '.join(map(str, recorded))}) "
                f"that its values do not give ({', '.join(outcome.decisions)}): it cannot be trusted; move it aside "
                "to start anew"
            )
    return comparison


def _shown_path(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def tried_seeds(record: Record) -> dict[str, list[int]]:
    """Every seed number each experiment has used or given up, in the record."""
    tried: dict[str, list[int]] = {}
    for interim in record.interims:
        for name, seeds in interim.seeds.items():
            tried.setdefault(name, []).extend(seeds)
        for swap in interim.replaced:
            tried.setdefault(swap.experiment, []).append(swap.seed)
    return tried


def run_interim(
    request: DecideRequest,
    ctx: RunContext,
    runner: Runner,
    comparison: AdaptiveComparison,
    record: Record,
    header: Header,
) -> tuple[list[_Slot], list[Retry], list[Swap], int]:
    """Run (or reuse) the next n seeds of each open experiment until each has a value: (the slots in order, the
    retries, the replacements, the runs started)."""
    n = request.design.per_interim
    tried = tried_seeds(record)
    slots: list[_Slot] = []
    for name in comparison.open_experiments():
        seeds = next_seeds(tried.get(name, []), n)
        tried.setdefault(name, []).extend(seeds)
        slots += [_Slot(name, seed) for seed in seeds]
    retried: list[Retry] = []
    replaced: list[Swap] = []
    started = 0
    pending = list(slots)
    while pending:
        plans = [plan_seed(request, slot.experiment, slot.seed) for slot in pending]
        for slot, plan in zip(pending, plans):
            if plan_condition(plan) != header.conditions.get(slot.experiment):
                raise HarnessError(
                    f"{slot.experiment} seed {slot.seed} would run another configuration than the record's seeds "
                    f"({_shown_path(request.record)}): one comparison is one configuration of each experiment"
                )
        decisions = [decide_on_capture(plan, "retry") for plan in plans]
        refuse_before_starting(decisions)
        results = runner(plans)
        if ctx.stop.requested:
            raise HarnessError(
                f"interrupted in interim {len(comparison.outcomes) + 1}: the record holds the interims before it; "
                "harness decide again with the same options goes on",
                ExitCode.INTERRUPTED,
            )
        again: list[_Slot] = []
        for slot, plan, result in zip(pending, plans, results):
            slot.runs += 1
            if result.decision.action == "run":
                started += 1
            status = result.status
            if status is None or status.state != "succeeded":
                why = _failure(result)
                if slot.runs <= RETRIES:
                    retried.append(Retry(slot.experiment, slot.seed, why))
                    again.append(slot)
                    continue
                _replace(slot, tried, replaced, f"failed twice (last: {why})", request, comparison)
                again.append(slot)
                continue
            value, why, attempt = _value(request, header, plan)
            if value is None and why.startswith(NO_METRIC) and not _has_values(slot.experiment, record, slots):
                raise HarnessError(
                    f"--metric {request.metric}: no capture of {slot.experiment} has it ({plan.spec.run}: "
                    f"{why[len(NO_METRIC) :]}); choose another metric"
                )
            if value is None:
                why = why.removeprefix(NO_METRIC)
                _replace(slot, tried, replaced, f"no {request.metric} value: {why}", request, comparison)
                again.append(slot)
                continue
            slot.run, slot.value, slot.attempt = plan.spec.run, value, attempt
            slot.reused = result.decision.action == "skip"
        pending = again
    return slots, retried, replaced, started


def _replace(
    slot: _Slot,
    tried: dict[str, list[int]],
    replaced: list[Swap],
    why: str,
    request: DecideRequest,
    comparison: AdaptiveComparison,
) -> None:
    """Give `slot` the next unused seed of its experiment (the record says which replaced which, and why)."""
    swaps = sum(1 for swap in replaced if swap.experiment == slot.experiment)
    if swaps >= request.design.per_interim:
        raise HarnessError(
            f"{slot.experiment}: {swaps + 1} seeds gave no value in interim {len(comparison.outcomes) + 1} (last, "
            f"seed {slot.seed}: {why}); the record holds the interims before it. Look at the runs (harness status), "
            "then harness decide again goes on"
        )
    (seed,) = next_seeds(tried.get(slot.experiment, []), 1)
    tried.setdefault(slot.experiment, []).append(seed)
    replaced.append(Swap(slot.experiment, slot.seed, seed, why))
    slot.seed, slot.runs = seed, 0


def _failure(result: SweepResult) -> str:
    status = result.status
    if status is None:
        return result.decision.reason
    return f"{status.state}" + (f": {status.error}" if status.error else "")


def _value(request: DecideRequest, header: Header, plan: Planned) -> tuple[Optional[float], str, Optional[int]]:
    """The seed's value by the summary's rules, or None and why (its steps, its kind of run); the attempt read."""
    run = plan.spec.run
    summary: RunSummary = summarize_run(read_capture(request.capture_root / run)).summary
    if summary.simulated is not None and summary.simulated != header.simulated:
        raise HarnessError(
            f"{run}'s capture is {'simulated' if summary.simulated else 'of a GB10'}, the record's runs are not: a "
            "simulated run and a GB10 run are never compared"
        )
    steps = complete_steps(summary)
    if len(steps) != header.steps:
        return None, f"{len(steps)} complete steps, not the {header.steps} every other seed completed", None
    value, why = metric_value(run, summary, request.metric)
    return value, NO_METRIC + why if value is None else why, summary.attempt


NO_METRIC = "the metric: "  # a value missing for what the run printed, not for how it ran


def _has_values(experiment: str, record: Record, slots: Sequence[_Slot]) -> bool:
    """Whether any seed of `experiment` has given a value, in the record or in this interim so far."""
    return any(interim.values.get(experiment) for interim in record.interims) or any(
        slot.experiment == experiment and slot.value is not None for slot in slots
    )


def _interim_entry(
    comparison: AdaptiveComparison,
    outcome: InterimOutcome,
    slots: Sequence[_Slot],
    retried: list[Retry],
    replaced: list[Swap],
    notes: list[str],
) -> Interim:
    names = comparison.design.comparison_names
    by: dict[str, list[_Slot]] = {}
    for slot in slots:
        by.setdefault(slot.experiment, []).append(slot)
    return Interim(
        interim=outcome.interim,
        seeds={name: [s.seed for s in group] for name, group in by.items()},
        runs={name: [s.run or "" for s in group] for name, group in by.items()},
        attempts={name: [s.attempt for s in group] for name, group in by.items()},
        values={name: [float(s.value) for s in group if s.value is not None] for name, group in by.items()},
        reused={name: [s.run or "" for s in group if s.reused] for name, group in by.items()},
        retried=retried,
        replaced=replaced,
        decisions=dict(zip(names, outcome.decisions)),
        decided_at=dict(zip(names, outcome.decided_at)),
        statistics=dict(zip(names, outcome.statistics)),
        differences=dict(zip(names, outcome.differences)),
        boundary=outcome.boundary,
        boundary_smaller=outcome.boundary_smaller,
        alpha_spent=outcome.alpha_spent,
        finished=outcome.finished,
        at=now_rfc3339(),
        notes=notes,
    )


def _board(request: DecideRequest, record: Record, ctx: RunContext) -> None:
    """The decision as text on TensorBoard (the lesser record: a failure there is a warning, never the end)."""
    try:
        write_decision_text(request.capture_root, record)
    except OSError as err:
        ctx.reporter.warning(f"tensorboard: {describe_os_error(err, 'the decision')}: the record is written")
