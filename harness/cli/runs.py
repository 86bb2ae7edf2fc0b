"""`harness run` and `harness sweep`: plan runs from an experiment and start them (or print the plan).

Both run on the GPU, or with `--sim` on the simulator (harness.run.simswap);
with no experiment named they take the lab's default one.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional, Sequence

import click
import typer
from typer.core import TyperCommand
from typing_extensions import Annotated

from harness.cli.app import (
    DEFAULT_CAPTURE_DIR,
    DEFAULT_EXPERIMENTS_DIR,
    SIM_CAPTURE_DIR,
    CaptureDirOrSim,
    ExperimentsDir,
    JsonOption,
    NodesOption,
    RayOption,
    SeedOption,
    SetOption,
    capture_root,
    command,
    note,
    stdout,
    warn,
)
from harness.cli.render import (
    dry_run_rows,
    preflight_report,
    print_across_seeds,
    print_spec,
    print_sweep,
    print_sweep_plan,
    report_status,
)
from harness.errors import ExitCode
from harness.run.simswap import DEFAULT_TIME_SCALE, SIM_ENGINE_CHOICES, SimTarget, choose_target
from harness.sim.timescale import TIME_SCALE_RANGE

if TYPE_CHECKING:
    from harness.capture import RunStatus
    from harness.run.context import RunOptions
    from harness.run.decide import Decision, Mode
    from harness.run.plan import Planned

# The lab's default experiment: the write-up's next step is a second seed of the filter run.
# `make run` and `make sweep` without EXP, and `run`/`sweep` without an experiment, take it.
DEFAULT_EXPERIMENT = "e2b-dapo-filter"
EXPERIMENT_ENV = "HARNESS_EXPERIMENT"
_NUMBER = re.compile(r"[0-9]+")


def chosen_experiment(experiment: Optional[str]) -> str:
    """The experiment named, else HARNESS_EXPERIMENT, else the lab's default; says which when it chose."""
    if experiment:
        return experiment
    from_env = os.environ.get(EXPERIMENT_ENV, "").strip()
    name = from_env or DEFAULT_EXPERIMENT
    source = (
        f"as {EXPERIMENT_ENV} says"
        if from_env
        else f"the lab's default ({EXPERIMENT_ENV} or an argument names another)"
    )
    note(f"experiment {name}, {source}")
    return name


def sim_target_from_cli(sim: bool, time_scale: Optional[float], sim_engine: str) -> Optional[SimTarget]:
    """The simulator's engine and time scale for `--sim`, or None for a real run (said once the runs are planned, so
    a bad experiment is one line with no banner before it)."""
    from harness.errors import HarnessError

    if not sim:
        if time_scale is not None or sim_engine != "auto":
            raise HarnessError("--time-scale and --sim-engine are for runs on the simulator: add --sim")
        return None
    return choose_target(sim_engine, DEFAULT_TIME_SCALE if time_scale is None else time_scale, sys.executable)


def check_capture_root(capture_dir: Path, *, sim: bool) -> Path:
    """`capture_dir`, unless it is the other kind's default: one summary would mix simulated and real numbers."""
    from harness.errors import HarnessError

    other = DEFAULT_CAPTURE_DIR if sim else SIM_CAPTURE_DIR
    if capture_dir.resolve() == other.resolve():
        kind, other_kind = ("simulated", "real") if sim else ("real", "simulated")
        raise HarnessError(
            f"--capture-dir {capture_dir}: the lab's {other_kind} captures are there, and one summary "
            f"would mix {kind} numbers with them; give another directory (default "
            f"{SIM_CAPTURE_DIR if sim else DEFAULT_CAPTURE_DIR})"
        )
    return capture_dir


def spread_seeds(args: Sequence[str]) -> list[str]:
    """`--seeds 1 2 3` as click reads it: `--seeds 1 --seeds 2 --seeds 3` (every number after the option)."""
    spread: list[str] = []
    words = list(args)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return [*spread, *words[i:]]
        spread.append(word)
        if word == "--seeds" or word.startswith("--seeds="):
            if word == "--seeds" and i + 1 < len(words):
                spread.append(words[i + 1])  # its first value, whatever it is: click checks it
                i += 1
            while i + 1 < len(words) and _NUMBER.fullmatch(words[i + 1]):
                spread += ["--seeds", words[i + 1]]
                i += 1
        i += 1
    return spread


class SeedsCommand(TyperCommand):
    """A command whose `--seeds` takes every number that follows it, wherever it stands."""

    def parse_args(self, ctx: click.Context, args: List[str]) -> List[str]:
        return super().parse_args(ctx, spread_seeds(args))


def _wandb(wandb: bool) -> list[str]:
    """`--wandb` as the override it stands for."""
    return ["export.wandb=offline"] if wandb else []


def _succeeded(status: Optional["RunStatus"]) -> bool:
    return status is not None and status.state == "succeeded"


def plan_from_cli(
    name: str,
    experiments_dir: Path,
    capture_dir: Path,
    seeds: Sequence[int],
    overrides: Sequence[str],
    sim: Optional[SimTarget] = None,
    variant: Optional[str] = None,
) -> list["Planned"]:
    """Plan the runs of `name` over `seeds` (a sweep file's own seeds when it is one); warnings are printed."""
    from harness.errors import HarnessError
    from harness.experiments.store import ExperimentStore
    from harness.run.plan import PlanScope, plan_runs

    store = ExperimentStore(experiments_dir)
    sweep: Optional[str] = None
    if store.is_sweep(name):
        sweep_file = store.load_sweep(name)
        sweep, name, seeds = name, sweep_file.sweep, list(seeds) or sweep_file.seeds
    if len(set(seeds)) != len(seeds):
        raise HarnessError(f"--seeds: each seed once, got {list(seeds)}")
    scope = PlanScope(variant=variant, sweep=sweep)
    plans = plan_runs(store, name, seeds, overrides, capture_dir, dict(os.environ), sim=sim, scope=scope)
    if sim is not None:
        note(sim.describe())
    for message in dict.fromkeys(m for plan in plans for m in plan.warnings):  # once, not once per seed
        warn(message)
    return plans


def _context(
    plans: Sequence["Planned"], capture_dir: Path, options: "RunOptions", *, say_skips: bool, verbose: bool
) -> Any:
    """Warn about leftovers `harness recover` would settle; the console and the runs' context."""
    from harness.cli.progress import reporter_for
    from harness.run.context import RunContext
    from harness.run.lifecycle import leftover_warnings

    for message in leftover_warnings(capture_dir, [plan.spec.engine for plan in plans]):
        warn(message)
    console = stdout()
    title = f"{len(plans)} runs" if len(plans) > 1 else ""
    reporter = reporter_for(
        console, say_skips=say_skips, verbose=verbose, specs=[plan.spec for plan in plans], title=title
    )
    return console, RunContext(options=options, reporter=reporter)


GraceOption = Annotated[
    float, typer.Option("--grace-s", min=0, help="Seconds between SIGTERM and SIGKILL when stopping.")
]
KeepOption = Annotated[
    bool,
    typer.Option("--keep", help="Keep the container after the run (it is removed once logs and status are saved)."),
]
NoWaitOption = Annotated[bool, typer.Option("--no-wait", help="Fail at once if another run holds the GPU.")]
SimOption = Annotated[
    bool,
    typer.Option(
        "--sim",
        help="On the simulator, not the GPU: the sim image on Docker, else the process engine (no GPU, no "
        "data); same experiment files and captures, under capture/sim.",
    ),
]
TimeScaleOption = Annotated[
    Optional[float],
    typer.Option(
        "--time-scale",
        show_default=False,
        help=f"With --sim: wall seconds per simulated second, {TIME_SCALE_RANGE} [default: {DEFAULT_TIME_SCALE:g}, the "
        "demo's: a 12-step run in about a minute].",
    ),
]
SimEngineOption = Annotated[
    str,
    typer.Option(
        "--sim-engine",
        metavar="|".join(SIM_ENGINE_CHOICES),
        help="With --sim: auto (Docker where the sim image is built, else a process), docker or process.",
    ),
]
VerboseOption = Annotated[
    bool, typer.Option("-v", "--verbose", help="Also a line for each pause and resume (else the step lines sum them).")
]
NameOption = Annotated[
    Optional[str],
    typer.Option(
        "--name",
        metavar="NAME",
        help="Run under this run name instead of the experiment's (a variant, e.g. with --set, gets a capture of "
        "its own beside the experiment's; make: NAME=).",
    ),
]
WandbOption = Annotated[
    bool,
    typer.Option(
        "--wandb",
        help="Also write an offline W&B run of each run under <capture dir>/wandb (= --set export.wandb=offline); "
        "nothing is sent: `wandb sync` uploads it (docs/tensorboard.md).",
    ),
]
ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue the run from its newest complete checkpoint, as a new attempt of the same run, verified from "
        "the trainer's own lines (docs/checkpoints.md; make: ARGS=--resume).",
    ),
]
AutoResumeOption = Annotated[
    Optional[int],
    typer.Option(
        "--auto-resume",
        min=0,
        max=100,
        metavar="N",
        help="Resume by itself up to N times when an attempt fails with a checkpoint behind it (over the "
        "experiment's resume.auto).",
    ),
]
ExperimentArgument = Annotated[
    Optional[str],
    typer.Argument(
        show_default=False,
        help=f"Experiment name (file stem in the experiments directory) [default: ${EXPERIMENT_ENV}, else "
        f"{DEFAULT_EXPERIMENT}].",
    ),
]

RUN_HELP = f"""Run one experiment in a container on the GPU, capture it, and exit 0 only if it succeeded.

\b
Examples:
  make run EXP=e2b-dapo-filter
      = harness run e2b-dapo-filter
  harness run e2b-dapo-filter --dry-run
      what would start; starts nothing
  make run EXP=e2b-dapo-filter SIM=1
      = harness run e2b-dapo-filter --sim
  make run EXP=plain NAME=plain-4 ARGS="--set steps=4"
      = harness run plain --name plain-4 --set steps=4: a variant
  make smoke
      the GPU smoke test: harness run smoke --force
  make smoke SIM=1
      the same on the simulator, as CI runs it

Without an experiment: ${EXPERIMENT_ENV}, else {DEFAULT_EXPERIMENT}. With --sim
the simulated trainer runs instead of Miles (docs/simulator.md), guarded
on simulated heat: the run `make demo` makes, under capture/sim. A capture
that succeeded with another configuration is refused, naming what changed
(--force reruns it as a new attempt; --name runs it under a name of its
own). The smoke run's captures go under capture/smoke.
"""

SWEEP_DRY_RUN_HELP = (
    "List each run, its run id and capture, and whether it would be skipped; check what `run --dry-run` checks; "
    "start nothing. Exits as the sweep would refuse."
)
SWEEP_HELP = f"""Run an experiment over seeds; succeeded runs are skipped unless --force.

\b
Examples:
  harness sweep --seeds 1 2 3
      the lab's default experiment, {DEFAULT_EXPERIMENT}
  harness sweep plain-48 --seeds 1 2 3
  harness sweep --seeds 1 2 3 plain-48
  harness sweep seeds
      a sweep file: plain-48 over seeds 1 2 3
  make sweep SEEDS="1 2 3"
      EXP=plain-48 names another experiment
  make sweep SIM=1
      = harness sweep --seeds 1 2 3 --sim --parallel 3
  harness sweep plain-48 --seeds 1 2 3 4 --ray auto
      side by side on a Ray cluster's GPUs: docs/cluster.md

--seeds takes every number that follows it. Without an experiment:
${EXPERIMENT_ENV}, else {DEFAULT_EXPERIMENT}; the choice is printed first.
Runs go one after another, or --parallel N at a time where none takes a
GPU. A run whose capture succeeded with another configuration is refused
before any starts (exit 2, naming what changed), unless --force.
"""


@command("run", help=RUN_HELP)
def run(
    experiment: ExperimentArgument = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the launch spec and start nothing.")] = False,
    json_: JsonOption = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Rerun even if the capture succeeded: a new attempt (the old one is kept)."),
    ] = False,
    max_minutes: Annotated[
        Optional[float], typer.Option("--max-minutes", min=0.01, help="Time limit; overrides limits.max_minutes.")
    ] = None,
    no_wait: NoWaitOption = False,
    keep: KeepOption = False,
    grace_s: GraceOption = 60.0,
    sim: SimOption = False,
    time_scale: TimeScaleOption = None,
    sim_engine: SimEngineOption = "auto",
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: CaptureDirOrSim = None,
    seed: SeedOption = None,
    set_: SetOption = None,
    name: NameOption = None,
    verbose: VerboseOption = False,
    wandb: WandbOption = False,
    ray: RayOption = None,
    nodes: NodesOption = 1,
    resume: ResumeOption = False,
    auto_resume: AutoResumeOption = None,
) -> Optional[ExitCode]:
    from harness.errors import HarnessError
    from harness.run.context import RunOptions
    from harness.run.lifecycle import exit_code_for, run_planned, stop_on_signals

    if resume and force:
        raise HarnessError("--resume and --force are exclusive (--resume continues the run, --force starts it anew)")
    experiment = chosen_experiment(experiment)
    capture_dir = check_capture_root(capture_root(capture_dir, sim), sim=sim)
    target = sim_target_from_cli(sim, time_scale, sim_engine)
    overrides = [*(set_ or ()), *([f"limits.max_minutes={max_minutes}"] if max_minutes else []), *_wandb(wandb)]
    plans = plan_from_cli(
        experiment, experiments_dir, capture_dir, [seed] if seed else [], overrides, target, variant=name
    )
    if len(plans) != 1:
        raise HarnessError(f"{experiment} is a sweep file: run it with `harness sweep {experiment}`")
    (plan,) = plans
    options = RunOptions(
        mode="force" if force else "retry",
        wait_for_gpu=not no_wait,
        keep=keep,
        grace_s=grace_s,
        resume=resume,
        auto_resume=auto_resume,
    )
    if ray or nodes > 1:
        from harness.cli.cluster import run_command_on_ray

        return run_command_on_ray(plan, address=ray, nodes=nodes, dry_run=dry_run, as_json=json_, options=options)
    if dry_run:
        return _dry_run(plan, options, as_json=json_)
    _, ctx = _context([plan], capture_dir, options, say_skips=False, verbose=verbose)
    with stop_on_signals(ctx.stop, ctx.reporter.note):
        result = run_planned(plan, ctx)
    if result.decision.action == "skip" and not result.decision.refused and _succeeded(result.status):
        note(f"{plan.spec.run}: already {result.decision.reason}")  # the run asked for is there: nothing to do
        return ExitCode.OK
    if result.decision.action == "skip" or result.status is None:
        raise HarnessError(result.decision.not_started())
    report_status(result.status, capture_dir)
    return exit_code_for([result.status.state])


def _dry_run(plan: "Planned", options: "RunOptions", *, as_json: bool) -> Optional[ExitCode]:
    """Show what `run` would start and what its checks found; fail as `run` would refuse, so a script can use the
    dry run as a preflight (exit 0: the run would start, or has succeeded already)."""
    from harness.capture import Capture
    from harness.run.decide import dry_run_refusal
    from harness.run.lifecycle import decide_on_capture
    from harness.run.plan import next_attempt_spec
    from harness.run.resume import plan_checkpoint_start

    decision = decide_on_capture(plan, options.mode)
    if decision.action == "run":  # what the run would decide about its checkpoints (reading only)
        never_ran = Capture(Path(plan.spec.capture_dir)).status_read().absent
        plan = plan_checkpoint_start(plan, resume=options.resume and not never_ran, mode=options.mode)
    spec = next_attempt_spec(plan.spec)
    problems, miles = preflight_report(spec)
    for problem in problems:
        warn(f"pre-flight: {problem.message}")
    print_spec(spec, as_json=as_json, miles=miles)
    refusal = dry_run_refusal([(decision, problems)])
    if refusal is not None:
        raise refusal
    if decision.action == "skip":
        note(f"{spec.run}: already {decision.reason}: `harness run` would start nothing")
    return None


@command("sweep", cls=SeedsCommand, help=SWEEP_HELP)
def sweep(
    experiment: Annotated[
        Optional[str],
        typer.Argument(
            show_default=False,
            help=f"An experiment (with --seeds) or a sweep file such as `seeds` [default: ${EXPERIMENT_ENV}, else "
            f"{DEFAULT_EXPERIMENT}].",
        ),
    ] = None,
    seeds: Annotated[
        Optional[List[int]],
        typer.Option("--seeds", min=1, metavar="N...", help="Seeds to run: --seeds 1 2 3 (every number after it)."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help=SWEEP_DRY_RUN_HELP),
    ] = False,
    json_: JsonOption = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="Also rerun failed, no_metrics, interrupted and stopped runs.")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Rerun every run, succeeded ones too.")] = False,
    fail_fast: Annotated[
        bool, typer.Option("--fail-fast", help="Stop the sweep at the first run that does not succeed.")
    ] = False,
    parallel: Annotated[
        int,
        typer.Option(
            "--parallel",
            min=1,
            metavar="N",
            help="Runs at a time when none takes a GPU (on the simulator, or gpus: none); GPU runs go one per "
            "GPU whatever N is.",
        ),
    ] = 1,
    no_wait: NoWaitOption = False,
    keep: KeepOption = False,
    grace_s: GraceOption = 60.0,
    sim: SimOption = False,
    time_scale: TimeScaleOption = None,
    sim_engine: SimEngineOption = "auto",
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: CaptureDirOrSim = None,
    set_: SetOption = None,
    name: NameOption = None,
    verbose: VerboseOption = False,
    wandb: WandbOption = False,
    ray: RayOption = None,
    resume: ResumeOption = False,
    auto_resume: AutoResumeOption = None,
) -> Optional[ExitCode]:
    from harness.run.context import RunOptions
    from harness.run.decide import refuse_before_starting
    from harness.run.lifecycle import decide_on_capture

    _check_sweep_options(retry=retry, force=force, resume=resume, json_=json_, dry_run=dry_run)
    experiment = chosen_experiment(experiment)
    capture_dir = check_capture_root(capture_root(capture_dir, sim), sim=sim)
    target = sim_target_from_cli(sim, time_scale, sim_engine)
    overrides = [*(set_ or ()), *_wandb(wandb)]
    plans = plan_from_cli(experiment, experiments_dir, capture_dir, list(seeds or ()), overrides, target, variant=name)
    mode: Mode = "force" if force else "retry" if retry or resume else "cached"
    decisions = [decide_on_capture(plan, mode) for plan in plans]
    if dry_run:
        print_sweep_plan(plans, decisions, mode, as_json=json_)
        return _refuse_as_the_sweep_would(plans, decisions)
    refuse_before_starting(decisions)
    options = RunOptions(
        mode=mode,
        fail_fast=fail_fast,
        wait_for_gpu=not no_wait,
        keep=keep,
        grace_s=grace_s,
        parallel=parallel,
        resume=resume,
        auto_resume=auto_resume,
    )
    return _run_sweep(plans, capture_dir, options, ray, verbose)


def _check_sweep_options(*, retry: bool, force: bool, resume: bool, json_: bool, dry_run: bool) -> None:
    """The sweep options that exclude each other, refused in one line before anything is read."""
    from harness.errors import HarnessError

    if retry and force:
        raise HarnessError("--retry and --force are exclusive (--force reruns everything)")
    if resume and force:
        raise HarnessError("--resume and --force are exclusive (--resume continues each run, --force starts anew)")
    if json_ and not dry_run:
        raise HarnessError("--json prints the plan of --dry-run; a sweep that runs prints its progress")


def _refuse_as_the_sweep_would(plans: "list[Planned]", decisions: "list[Decision]") -> None:
    """A dry run refuses in one line where the sweep would: a capture it would not start over, else a run it would
    start whose pre-flight (`run --dry-run`'s) finds problems."""
    from harness.run.decide import dry_run_refusal

    refusal = dry_run_refusal(dry_run_rows([(decision, plan.spec) for plan, decision in zip(plans, decisions)]))
    if refusal is not None:
        raise refusal


def _run_sweep(
    plans: "list[Planned]", capture_dir: Path, options: "RunOptions", ray: Optional[str], verbose: bool
) -> ExitCode:
    """The sweep's runs (placed by Ray with --ray), then each run's line and the across-seed numbers."""
    from harness.run.decide import refuse_before_starting
    from harness.run.lifecycle import exit_code_for, run_sweep, stop_on_signals, takes_no_gpu

    if options.parallel > 1 and not all(takes_no_gpu(plan) for plan in plans):
        note(f"--parallel {options.parallel}: these runs take a GPU, so they go one per GPU, as its lock has them")
    if ray:
        from harness.cli.cluster import run_on_ray

        code = run_on_ray(plans, address=ray, options=options, single=False)
        print_across_seeds(stdout(), plans, capture_dir)
        return code
    console, ctx = _context(plans, capture_dir, options, say_skips=True, verbose=verbose)
    with stop_on_signals(ctx.stop, ctx.reporter.note):
        results = run_sweep(plans, ctx)
    print_sweep(console, results)
    print_across_seeds(console, plans, capture_dir)
    refuse_before_starting([result.decision for result in results])  # a capture that changed while the sweep ran
    return exit_code_for([r.status.state if r.status else "not run" for r in results])
