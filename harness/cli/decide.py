"""`harness decide A B [C ...]`: run seeds until AdaStop decides each comparison (harness.run.adaptive)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    DEFAULT_EXPERIMENTS_DIR,
    CaptureDirOrSim,
    ExperimentsDir,
    JsonOption,
    RayOption,
    SetOption,
    capture_root,
    command,
    print_messages,
    stdout,
)
from harness.cli.runs import (
    NoWaitOption,
    SimEngineOption,
    SimOption,
    TimeScaleOption,
    VerboseOption,
    check_capture_root,
    sim_target_from_cli,
)
from harness.stats.adaptive import DEFAULT_ALPHA, DEFAULT_INTERIMS, DEFAULT_PER_INTERIM, DEFAULT_PERMUTATIONS
from harness.summary.decisions import DEFAULT_METRIC, METRICS

if TYPE_CHECKING:
    from harness.run.adaptive import DecideOutcome, DecideRequest
    from harness.run.adaptive_plan import DecidePlan
    from harness.run.context import RunContext
    from harness.run.lifecycle import SweepResult
    from harness.run.plan import Planned
    from harness.stats.adaptive import Design

DECIDE_HELP = f"""Compare experiments across seeds, running seeds until the comparison is decided.

AdaStop (Mathieu et al., the `adastop` package's comparator): each interim
runs the next n seeds of every experiment still in an undecided comparison,
reads their captures by the summary's rules, and stops the comparisons that
are decided, for at most K interims, with the two-sided family-wise error
held at alpha. Succeeded captures of the same configuration are reused,
never rerun; a seed that fails runs once more, then the next seed number
takes its place. Each interim is appended to <capture dir>/decisions/NAME.jsonl
(fsynced); run it again with the same options to go on after an
interruption. No p-value is reported: the design is not fixed.

Metrics (one value per seed): {"; ".join(f"{name}: {words}" for name, words in METRICS.items())}.

\b
Examples:
  harness decide e2b-dapo-filter plain-48
  make decide EXPS="e2b-dapo-filter plain-48"
  harness decide e2b-dapo-filter plain --metric rollout-time --sim --parallel 10
  harness decide e2b-dapo-filter plain plain-48 --against-first --dry-run
"""


@command("decide", help=DECIDE_HELP)
def decide_command(
    experiments: Annotated[
        List[str], typer.Argument(metavar="EXP_A EXP_B [EXP_C ...]", help="The experiments to compare.")
    ],
    metric: Annotated[
        str,
        typer.Option("--metric", metavar="|".join(METRICS), help="What each seed gives the comparison."),
    ] = DEFAULT_METRIC,
    per_interim: Annotated[
        int, typer.Option("--per-interim", metavar="N", help="Seeds of each open experiment per interim (n).")
    ] = DEFAULT_PER_INTERIM,
    interims: Annotated[int, typer.Option("--interims", metavar="K", help="At most this many interims (K).")] = (
        DEFAULT_INTERIMS
    ),
    alpha: Annotated[
        float, typer.Option("--alpha", help="The two-sided family-wise error held, in (0, 0.5).")
    ] = DEFAULT_ALPHA,
    permutations: Annotated[
        int, typer.Option("--permutations", metavar="B", help="Random permutations of the test (B).")
    ] = DEFAULT_PERMUTATIONS,
    against_first: Annotated[
        bool, typer.Option("--against-first", help="Compare each experiment with the first only, not every pair.")
    ] = False,
    name: Annotated[
        Optional[str],
        typer.Option("--name", metavar="NAME", help="The record's name [default: the experiments', e.g. A-vs-B]."),
    ] = None,
    parallel: Annotated[
        int,
        typer.Option(
            "--parallel",
            min=1,
            metavar="N",
            help="Runs at a time when none takes a GPU (on the simulator); GPU runs go one per GPU whatever N is.",
        ),
    ] = 1,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the plan (at most n x K seeds each, how many runs, the next interim's) and check what `run "
            "--dry-run` checks of the next interim's runs; run nothing. Exits as decide would refuse.",
        ),
    ] = False,
    json_: JsonOption = False,
    no_wait: NoWaitOption = False,
    sim: SimOption = False,
    time_scale: TimeScaleOption = None,
    sim_engine: SimEngineOption = "auto",
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: CaptureDirOrSim = None,
    set_: SetOption = None,
    verbose: VerboseOption = False,
    ray: RayOption = None,
) -> None:
    from harness.experiments.store import ExperimentStore
    from harness.run.adaptive import DecideRequest
    from harness.stats.adaptive import Design
    from harness.stats.record import check_record_name, default_name

    design = _checked_design(
        Design(tuple(experiments), against_first, per_interim, interims, alpha, permutations), metric
    )
    root = check_capture_root(capture_root(capture_dir, sim), sim=sim)
    target = sim_target_from_cli(sim, time_scale, sim_engine)
    request = DecideRequest(
        design=design,
        metric=metric,
        name=check_record_name(name or default_name(design.experiments, against_first)),
        capture_root=root,
        store=ExperimentStore(experiments_dir),
        overrides=tuple(set_ or ()),
        sim=target,
        environ=dict(os.environ),
    )
    if dry_run:
        return _dry_run(request, json_)
    console = stdout()
    outcome = _decide(request, console, ray=ray, parallel=parallel, no_wait=no_wait, verbose=verbose)
    _print_outcome(console, outcome, request.record, json_)


def _checked_design(design: "Design", metric: str) -> "Design":
    """The design and the metric checked before the experiments are read: a bad option is said first."""
    from harness.errors import HarnessError
    from harness.stats.adaptive import check_design

    check_design(design)
    if metric not in METRICS:
        raise HarnessError(f"--metric {metric}: not one of {', '.join(METRICS)}")
    return design


def _print_outcome(console: Any, outcome: "DecideOutcome", record: Path, json_: bool) -> None:
    """The outcome as one JSON document, or what this call did and one line per comparison."""
    if not json_:
        print_messages(console, [(line, 0) for line in _closing(outcome, record)])
        return
    from harness.summary.document import to_plain

    document = {
        "started": outcome.started,
        "interims_run": outcome.interims_run,
        **_plain(to_plain(outcome.summary)),
    }
    typer.echo(json.dumps(document, indent=2, allow_nan=False))


def _dry_run(request: "DecideRequest", json_: bool) -> None:
    """Print the plan; refuse, as a run would, where a next run could not start (its capture, or what `run
    --dry-run`'s pre-flight finds)."""
    from harness.cli.render import dry_run_rows
    from harness.run.adaptive_plan import plan_decide
    from harness.run.decide import dry_run_refusal

    plan = plan_decide(request)
    _print_plan(plan, as_json=json_)
    refusal = dry_run_refusal(dry_run_rows([(run.decision, run.spec) for run in plan.next_runs]))
    if refusal is not None:
        raise refusal


def _decide(
    request: "DecideRequest", console: Any, *, ray: Optional[str], parallel: int, no_wait: bool, verbose: bool
) -> "DecideOutcome":
    """Run interims until AdaStop decides, here or on Ray, stopping cleanly on a signal."""
    from harness.run.adaptive import decide
    from harness.run.context import RunContext, RunOptions
    from harness.run.lifecycle import stop_on_signals

    options = RunOptions(mode="retry", wait_for_gpu=not no_wait, parallel=parallel)
    ctx = RunContext(options=options, reporter=_reporter(console, [], verbose))
    runner = RayRunner(ray, ctx, console) if ray else LocalRunner(ctx, console, verbose)
    try:
        with stop_on_signals(ctx.stop, ctx.reporter.note):
            return decide(request, ctx, runner)
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()


def _closing(outcome: "DecideOutcome", record: Path) -> list[str]:
    """What the terminal ends with: what this call did, then one line per comparison."""
    interims = f"{outcome.interims_run} interim{'s' * (outcome.interims_run != 1)}"
    runs = f"{outcome.started} run{'s' * (outcome.started != 1)}"
    lines = [f"{record}: {interims} made now, {runs} started"]
    if outcome.summary.simulated:
        lines.append("SIMULATED: the simulator's runs, not a GB10's; these decisions say what the harness does")
    return lines + outcome.lines


def _plain(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _reporter(console: Any, specs: Sequence[Any], verbose: bool) -> Any:
    from harness.cli.progress import reporter_for

    return reporter_for(console, say_skips=True, verbose=verbose, specs=specs, reused=True)


class LocalRunner:
    """The interim's runs as a sweep runs them (`--parallel N` at a time where none takes a GPU), with a live table
    of their own."""

    def __init__(self, ctx: "RunContext", console: Any, verbose: bool) -> None:
        self.ctx, self.console, self.verbose = ctx, console, verbose

    def __call__(self, plans: Sequence["Planned"]) -> list["SweepResult"]:
        from harness.run.lifecycle import run_sweep

        notes = self.ctx.reporter
        self.ctx.reporter = _reporter(self.console, [plan.spec for plan in plans], self.verbose)
        try:
            return run_sweep(plans, self.ctx)
        finally:
            stop = getattr(self.ctx.reporter, "stop_live", None)
            if stop is not None:
                stop()
            self.ctx.reporter = notes


class RayRunner:
    """The interim's runs placed by Ray, one per GPU, as `sweep --ray` places them."""

    def __init__(self, address: str, ctx: "RunContext", console: Any) -> None:
        from harness.cluster.connect import connect

        self.address, self.ctx, self.console = address, ctx, console
        self.ray = connect(address)

    def __call__(self, plans: Sequence["Planned"]) -> list["SweepResult"]:
        from harness.cli.cluster import BoardView
        from harness.cluster.driver import RaySweep
        from harness.run.lifecycle import SweepResult

        view = BoardView(self.console)
        with view:
            runs = RaySweep(self.ray, self.address, ctx=self.ctx, board=view.board).run(plans)
        return [SweepResult(run.decision, run.status) for run in runs]

    def close(self) -> None:
        from harness.cluster.connect import disconnect

        disconnect()


def _print_plan(plan: "DecidePlan", *, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(plan.to_dict(), indent=2, allow_nan=False))
        return
    header = plan.header
    said = "SIMULATED: " if header.simulated else ""
    lines = [
        f"{said}decide {', '.join(header.comparisons)} on {header.metric}: {header.per_interim} seeds of each open "
        f"experiment per interim, at most {header.interims} interims, alpha {header.alpha:g} (two-sided, "
        f"family-wise), {header.permutations:,} permutations, random state {header.random_state}",
        f"at most {plan.max_seeds_each} seeds each, {plan.max_runs} runs in all ({len(header.experiments)} "
        f"experiments x {plan.max_seeds_each}); over the {header.steps} steps every seed completes",
        f"record {plan.record}: "
        + (f"{plan.interims_recorded} interim(s) recorded" if plan.interims_recorded else "none yet")
        + ("; " + ", ".join(f"{c} {d}" for c, d in plan.decisions.items()) if plan.interims_recorded else ""),
    ]
    if plan.next_runs:
        start, refused = (sum(run.action == action for run in plan.next_runs) for action in ("run", "refuse"))
        lines.append(
            f"next: interim {plan.interims_recorded + 1}, {len(plan.next_runs)} seeds of {', '.join(plan.open)}: "
            f"{start} would run, {len(plan.next_runs) - start - refused} reused"
            + (f", {refused} refused" if refused else "")
        )
        lines += [f"  {run.run} (seed {run.seed}): {run.action}: {run.decision.reason}" for run in plan.next_runs]
    else:
        lines.append("every comparison is decided: nothing would run")
    print_messages(stdout(), [(line, 0) for line in lines])
