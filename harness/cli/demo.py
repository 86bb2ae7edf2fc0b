"""`harness demo` (`make demo`): the write-up's runs on the simulator at once, live, then summary, figures, report."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    DEFAULT_EXPERIMENTS_DIR,
    SIM_CAPTURE_DIR,
    ExperimentsDir,
    command,
    note,
    print_message,
    stdout,
    warn,
)
from harness.cli.render import report_status
from harness.cli.runs import check_capture_root, sim_target_from_cli
from harness.errors import ExitCode
from harness.run.simswap import DEFAULT_TIME_SCALE, SIM_ENGINE_CHOICES
from harness.sim.timescale import TIME_SCALE_RANGE

if TYPE_CHECKING:
    from harness.run.demo import DemoOutcome
    from harness.run.plan import Planned

# A quick look (`--steps N`) has a capture root of its own: its runs are another configuration of the demo's, and
# beside them they would be refused (or, with --force, would replace them in the demo's summary).
QUICK_LOOK_CAPTURE_DIR = Path("capture/sim-quick")

DEMO_HELP = """The lab's whole pipeline on the simulator, on any machine: no GPU, Docker optional.

Runs e2b-dapo-filter, plain and plain-48 (seeds 1-3 each) and e6a-base from
the lab's experiment files on the simulated trainer, all at once, with the
heat guard on the simulated GB10 (the `sim` sensor) so it really pauses them,
each exactly as `harness run EXP --sim` runs it; then summarizes the
captures, draws the figures, writes the report, and prints the headline
numbers beside the write-up's and the filter against plain across seeds.
Runs that already succeeded are reused (--force reruns them); runs that did
not (Ctrl-C, a failure) run again, and until all of them succeeded nothing
is summarized. `make demo` sets up the venv and
the sim image first.

\b
Examples:
  make demo
  harness demo --steps 3 --time-scale 0.002     (a quick look; the write-up's figures need 12 steps)
"""


@command("demo", help=DEMO_HELP)
def demo(
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale",
            help=f"Wall seconds per simulated second, {TIME_SCALE_RANGE}, as `run --sim` takes it "
            "(smaller: faster, and pauses weigh more).",
        ),
    ] = DEFAULT_TIME_SCALE,
    sim_engine: Annotated[
        str,
        typer.Option(
            "--sim-engine",
            metavar="|".join(SIM_ENGINE_CHOICES),
            help="What runs the simulator: auto (Docker where the sim image is built, else a process), docker or "
            "process.",
        ),
    ] = "auto",
    steps: Annotated[
        Optional[int],
        typer.Option("--steps", min=1, help="Steps per run [default: each experiment's, 12]; fewer for a quick look."),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Rerun runs that already succeeded.")] = False,
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: Annotated[
        Optional[Path],
        typer.Option(
            "--capture-dir",
            show_default=False,
            help=f"Where the demo's captures and summary go; never a lab's capture/gpu, so simulated numbers never "
            f"mix with real ones [default: {SIM_CAPTURE_DIR}; {QUICK_LOOK_CAPTURE_DIR} with --steps, so a quick look "
            "never changes the demo's runs].",
        ),
    ] = None,
) -> Optional[ExitCode]:
    from harness.errors import HarnessError
    from harness.experiments.store import ExperimentStore
    from harness.run.demo import plan_demo
    from harness.run.lifecycle import exit_code_for, leftover_warnings

    started = time.monotonic()
    if capture_dir is None:
        capture_dir = SIM_CAPTURE_DIR if steps is None else QUICK_LOOK_CAPTURE_DIR
    check_capture_root(capture_dir, sim=True)
    target = sim_target_from_cli(True, time_scale, sim_engine)
    note(target.describe())
    plans = plan_demo(ExperimentStore(experiments_dir), capture_dir, target, steps=steps)
    for message in dict.fromkeys(m for plan in plans for m in plan.warnings):
        warn(message)
    for message in leftover_warnings(capture_dir, [target.engine]):
        warn(message)
    note(f"demo: {len(plans)} runs at once ({', '.join(plan.spec.run for plan in plans)}); captures in {capture_dir}")
    console = stdout()
    outcome = _run_demo(console, plans, force)
    ran_s = time.monotonic() - started
    if outcome.refused:  # its old capture would go into the summary as if it were the run asked for
        more = f" (and {len(outcome.refused) - 1} more, above)" if len(outcome.refused) > 1 else ""
        raise HarnessError(outcome.refused[0].not_started() + more)
    _say_missing(outcome, capture_dir)
    if outcome.publish:
        _publish(console, capture_dir, ran_s, started, reused=outcome.reused, runs=len(outcome.results))
    else:  # a summary without them would compare what is there as if it were the write-up's set
        names = ", ".join(result.decision.run for result in outcome.missing)
        succeeded = len(outcome.results) - len(outcome.missing)
        warn(
            f"no summary, figures or headline numbers: they need all {len(outcome.results)} runs, and {names} did "
            f"not succeed; `harness demo` again reruns {'it' if len(outcome.missing) == 1 else 'them'}"
            + (f" and reuses the {succeeded} that succeeded" if succeeded else "")
        )
    return exit_code_for(outcome.states)


def _run_demo(console: Any, plans: "list[Planned]", force: bool) -> "DemoOutcome":
    """Every run at once under one live board, stopping cleanly on a signal."""
    from harness.cli.progress import RichReporter, reporter_for
    from harness.run.context import RunContext, RunOptions
    from harness.run.demo import demo_outcome, run_at_once
    from harness.run.lifecycle import stop_on_signals

    board = reporter_for(
        console, say_skips=True, specs=[plan.spec for plan in plans], title=f"demo: {len(plans)} runs", reused=True
    )
    # retry: a run that did not succeed (Ctrl-C, a failure) is run again; a succeeded one is reused.
    ctx = RunContext(options=RunOptions(mode="force" if force else "retry"), reporter=board)
    if isinstance(board, RichReporter):
        board.start_live()
    try:
        with stop_on_signals(ctx.stop, board.note):
            return demo_outcome(run_at_once(plans, ctx))
    finally:
        if isinstance(board, RichReporter):
            board.stop_live()


def _say_missing(outcome: "DemoOutcome", capture_dir: Path) -> None:
    """Each run the demo lacks: what `harness run --sim` says of it, or why it was not run."""
    for result in outcome.missing:
        if result.decision.action == "run" and result.status is not None:
            report_status(result.status, capture_dir)  # what `harness run --sim` says of it, and where its log is
        else:
            why = result.decision.reason if result.decision.action == "skip" else "the demo was stopped first"
            warn(f"{result.decision.run} not run: {why}")


def _publish(console: Any, capture_dir: Path, ran_s: float, started: float, *, reused: int, runs: int) -> None:
    """Summary, figures, report; where they are; the headline numbers beside the write-up's."""
    from rich.text import Text

    from harness.cli.tables import Column, print_table
    from harness.run.demo import headline, verdict_lines
    from harness.summary.publish import report_from_summary, summarize_to_files

    published = summarize_to_files(capture_dir)
    from harness.cli.board import summary_images

    summary_images(capture_dir, published.document, changed=bool(published.figures))
    report = report_from_summary(published.summary_path)
    document = published.document
    rows = [tuple(Text(cell) for cell in (row.figure, row.demo, row.write_up)) for row in headline(document)]
    console.print()
    print_table(
        console,
        [Column("figure", wrap=True), Column("demo (simulator)", wrap=True), Column("write-up (GB10)", wrap=True)],
        rows,
        title="headline numbers",
    )
    for line in verdict_lines(document):  # each run's verdict, then each comparison across seeds
        print_message(console, line)
    console.print()
    # A path is one word: kept whole on its line however wide (rich would crop it at the width).
    console.print(Text(f"summary JSON  {published.summary_path}"), soft_wrap=True)
    for path in sorted([*published.figures, *published.figures_unchanged]):  # unchanged ones are results too
        console.print(Text(f"figure        {path}"), soft_wrap=True)
    console.print(Text(f"report        {report.report}"), soft_wrap=True)
    status = "harness status --sim" if capture_dir == SIM_CAPTURE_DIR else f"harness status --capture-dir {capture_dir}"
    ran = f"{reused} of {runs} runs reused, " if reused else ""
    print_message(
        console,
        f"{ran}runs {ran_s:.0f} s, summary and report {time.monotonic() - started - ran_s:.0f} s; "
        f"`{status}` lists the captures",
    )
