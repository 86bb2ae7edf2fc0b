"""`harness demo` (`make demo`): the write-up's runs on the simulator at once, live, then summary, figures, report."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import typer
from typing_extensions import Annotated

from harness.cli.app import DEFAULT_EXPERIMENTS_DIR, SIM_CAPTURE_DIR, ExperimentsDir, command, note, stdout, warn
from harness.cli.render import report_status
from harness.cli.runs import check_capture_root, sim_target_from_cli
from harness.errors import ExitCode
from harness.run.simswap import DEFAULT_TIME_SCALE, SIM_ENGINE_CHOICES
from harness.sim.timescale import TIME_SCALE_RANGE

# A quick look (`--steps N`) has a capture root of its own: its runs are another configuration of the demo's, and
# beside them they would be refused (or, with --force, would replace them in the demo's summary).
QUICK_LOOK_CAPTURE_DIR = Path("capture/sim-quick")

if TYPE_CHECKING:
    from harness.capture import RunStatus
    from harness.engines.spec import LaunchSpec
    from harness.guard import GuardReading
    from harness.mileslog.records import StepRecord
    from harness.run.decide import Decision
    from harness.run.plan import Planned

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


class DemoBoard:
    """The demo's Reporter: live progress of runs that go at once, one table on a terminal, one line per event
    elsewhere."""

    def __init__(self, console: Any, plans: Sequence["Planned"]) -> None:
        self.console = console
        self.specs = {plan.spec.run: plan.spec for plan in plans}
        self.rows: dict[str, dict[str, Any]] = {
            plan.spec.run: {
                "state": "waiting",
                "steps": 0,
                "expected": plan.spec.steps_expected,
                "last": None,
                "heat": "-",
                "filter_on": False,
            }
            for plan in plans
        }
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self.live: Any = None

    # --- what the runs report (the core's Reporter) -----------------------------------------------

    def note(self, message: str) -> None:
        self.say(message)

    def warning(self, message: str) -> None:
        warn(message)

    def decided(self, decision: "Decision") -> None:
        if decision.action != "skip":
            return
        from harness.capture import Capture

        found = Capture(Path(self.specs[decision.run].capture_dir)).status_read().status
        done = found.steps_complete if found is not None else 0
        reused = found is not None and found.state == "succeeded" and not decision.refused
        state = "reused" if reused else "refused" if decision.refused else "skipped"
        self.update(decision.run, f"{decision.run} {state}: {decision.reason}", state=state, steps=done)

    def started(self, spec: "LaunchSpec") -> None:
        from harness.mileslog import keys

        filter_on, _ = keys.filter_setting(None, spec.trainer_argv)
        self.update(
            spec.run, f"{spec.run}: started ({spec.engine}, run id {spec.run_id})", state="running", filter_on=filter_on
        )

    def step(self, run: str, record: "StepRecord", steps_complete: int) -> None:
        from harness.cli.progress import describe_step, step_summary

        row = self.rows[run]
        summary = step_summary(record, row["filter_on"])
        label = f"step {record.step}" + ("" if record.complete else " INCOMPLETE")
        heat = "" if row["heat"] == "-" else f" | heat guard: {row['heat']}"  # piped: no line per pause
        self.update(
            run,
            f"{run}: {label} ({steps_complete}/{row['expected']} complete) | {describe_step(summary)}{heat}",
            steps=steps_complete,
            last=summary,
        )

    def guard(self, run: str, reading: "GuardReading") -> None:
        temp = "-" if reading.temp_c is None else f"{reading.temp_c:.1f} C"
        heat = f"{'PAUSED, ' if reading.paused else ''}{temp}, {reading.pauses} pause{'s' * (reading.pauses != 1)}"
        self.update(run, heat=heat)

    def finished(self, status: "RunStatus") -> None:
        self.update(
            status.run,
            f"{status.run}: {status.state}, {status.steps_complete}/{status.steps_expected} steps complete",
            state=status.state,
            steps=status.steps_complete,
        )

    def update(self, run: str, line: Optional[str] = None, **changes: Any) -> None:
        with self._lock:
            self.rows[run].update(changes)
        if line is not None and self.live is None:
            self.say(line)

    def say(self, line: str) -> None:
        """A line above the table (or on its own, piped)."""
        with self._lock:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    # --- showing them ----------------------------------------------------------------------------

    def __enter__(self) -> "DemoBoard":
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(console=self.console, refresh_per_second=4, get_renderable=self.render, transient=False)
            self.live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def render(self) -> Any:
        from rich.table import Table
        from rich.text import Text

        from harness.cli.progress import describe_step

        table = Table(
            title=f"demo: {len(self.rows)} runs on the simulator, {_elapsed(time.monotonic() - self.t0)}",
            title_justify="left",
            box=None,
            pad_edge=False,
        )
        for name, justify in (
            ("run", "left"),
            ("state", "left"),
            ("steps", "right"),
            ("last step", "left"),
            ("heat guard", "left"),
        ):
            table.add_column(name, justify=justify, overflow="fold")  # type: ignore[arg-type]
        with self._lock:
            for run, row in self.rows.items():
                last = describe_step(row["last"]) if row["last"] else "-"
                table.add_row(
                    Text(run), Text(row["state"]), f"{row['steps']}/{row['expected']}", Text(last), Text(row["heat"])
                )
        return table


def _elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


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
    from harness.run.context import RunContext, RunOptions
    from harness.run.demo import demo_outcome, plan_demo, run_at_once
    from harness.run.lifecycle import exit_code_for, leftover_warnings, stop_on_signals

    started = time.monotonic()
    if capture_dir is None:
        capture_dir = SIM_CAPTURE_DIR if steps is None else QUICK_LOOK_CAPTURE_DIR
    check_capture_root(capture_dir, sim=True)
    target = sim_target_from_cli(True, time_scale, sim_engine)
    plans = plan_demo(ExperimentStore(experiments_dir), capture_dir, target, steps=steps)
    for message in dict.fromkeys(m for plan in plans for m in plan.warnings):
        warn(message)
    for message in leftover_warnings(capture_dir, [target.engine]):
        warn(message)
    note(f"demo: {len(plans)} runs at once ({', '.join(plan.spec.run for plan in plans)}); captures in {capture_dir}")
    console = stdout()
    board = DemoBoard(console, plans)
    # retry: a run that did not succeed (Ctrl-C, a failure) is run again; a succeeded one is reused.
    ctx = RunContext(options=RunOptions(mode="force" if force else "retry"), reporter=board)
    with board, stop_on_signals(ctx.stop, board.say):
        outcome = demo_outcome(run_at_once(plans, ctx))
    ran_s = time.monotonic() - started
    if outcome.refused:  # its old capture would go into the summary as if it were the run asked for
        more = f" (and {len(outcome.refused) - 1} more, above)" if len(outcome.refused) > 1 else ""
        raise HarnessError(outcome.refused[0].not_started() + more)
    for result in outcome.missing:
        if result.decision.action == "run" and result.status is not None:
            report_status(result.status, capture_dir)  # what `harness run --sim` says of it, and where its log is
        else:
            why = result.decision.reason if result.decision.action == "skip" else "the demo was stopped first"
            warn(f"{result.decision.run} not run: {why}")
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


def _publish(console: Any, capture_dir: Path, ran_s: float, started: float, *, reused: int, runs: int) -> None:
    """Summary, figures, report; where they are; the headline numbers beside the write-up's."""
    from rich.text import Text

    from harness.cli.tables import Column, print_table
    from harness.run.demo import headline, verdict_lines
    from harness.summary.publish import report_from_summary, summarize_to_files

    published = summarize_to_files(capture_dir)
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
        console.print(Text(line), soft_wrap=not console.is_terminal)
    console.print()
    console.print(Text(f"summary JSON  {published.summary_path}"))
    for path in sorted([*published.figures, *published.figures_unchanged]):  # unchanged ones are results too
        console.print(Text(f"figure        {path}"))
    console.print(Text(f"report        {report.report}"))
    status = "harness status --sim" if capture_dir == SIM_CAPTURE_DIR else f"harness status --capture-dir {capture_dir}"
    ran = f"{reused} of {runs} runs reused, " if reused else ""
    console.print(
        Text(
            f"{ran}runs {ran_s:.0f} s, summary and report {time.monotonic() - started - ran_s:.0f} s; "
            f"`{status}` lists the captures"
        )
    )
