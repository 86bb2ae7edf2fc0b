"""`--ray ADDRESS` on run and sweep, `harness recover --ray`, `run --nodes N --dry-run`: the CLI side of harness.cluster.

Ray is imported only here, and only when `--ray` is given.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

import typer

from harness.cli.app import stdout, warn
from harness.errors import ExitCode
from harness.run.context import NullReporter

if TYPE_CHECKING:
    from harness.experiments.schema import Experiment
    from harness.run.context import RunOptions
    from harness.run.decide import Decision
    from harness.run.plan import Planned


class BoardView:
    """Live progress of runs on several hosts: a table with one line per run on a terminal, a line per change elsewhere."""

    def __init__(self, console: Any) -> None:
        from harness.cluster.board import Board

        self.console = console
        self.board = Board(self.changed)
        self.live: Any = None

    def _render(self) -> Any:
        from rich.table import Table

        from harness.cli.messages import outside

        table = Table(box=None, pad_edge=False, title="runs on the cluster", title_justify="left")
        for column in ("run", "host", "state", "step", "rollout trainer s", "reward", "heat guard"):
            table.add_column(column)
        for line in self.board.lines():
            style = "bold red" if line.paused_since else ""
            table.add_row(
                outside(line.run),
                outside(line.host),
                outside(line.state),
                outside(f"{line.steps_complete}/{line.steps_expected}"),
                outside(line.rollout_text),
                outside(line.reward_text),
                outside(line.pause_text, style=style),
            )
        return table

    def __enter__(self) -> "BoardView":
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._render(), console=self.console, refresh_per_second=2, get_renderable=self._render)
            self.live.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def changed(self, line: Any, what: str) -> None:
        if self.live is None:
            self.console.print(line.describe(), markup=False, highlight=False)

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False)


def run_command_on_ray(
    plan: "Planned", *, address: Optional[str], nodes: int, dry_run: bool, as_json: bool, options: "RunOptions"
) -> Optional[ExitCode]:
    """`harness run EXP --ray ADDRESS [--nodes N] [--dry-run]`."""
    from harness.cli.render import print_spec
    from harness.errors import HarnessError

    if address is None:
        raise HarnessError(f"--nodes {nodes} needs --ray ADDRESS: a run over several hosts is placed by Ray")
    if nodes > 1:
        if not dry_run:
            raise HarnessError(
                f"--nodes {nodes}: a run over several hosts is designed (docs/scale-out.md) but only "
                "its --dry-run is implemented: add --dry-run to see what each host would start"
            )
        dry_run_over_hosts(plan, address=address, nodes=nodes, as_json=as_json)
        return None
    if dry_run:  # where it runs is Ray's choice; what it runs is the same spec
        print_spec(plan.spec, as_json=as_json)
        return None
    return run_on_ray([plan], address=address, options=options, single=True)


class _RayReporter(NullReporter):
    """What the driver says while runs go on the cluster: notes above the board, warnings on stderr, and (for a
    sweep) a line per run it skips. Steps and pauses reach the board as capture writes."""

    def __init__(self, view: BoardView, *, say_skips: bool) -> None:
        self.view = view
        self.say_skips = say_skips

    def note(self, message: str) -> None:
        self.view.note(message)

    def warning(self, message: str) -> None:
        warn(message)

    def decided(self, decision: "Decision") -> None:
        if self.say_skips and decision.action == "skip":
            self.view.note(f"{decision.run} skipped: {decision.reason}")

    def cooling(self, run: str, reading: Any) -> None:
        """A cooled start's end, above the board (its nodes forward it the same way)."""
        if reading.outcome is not None:
            self.view.note(f"{run}: heat guard: {reading.describe()}")


def run_on_ray(plans: Sequence["Planned"], *, address: str, options: "RunOptions", single: bool) -> ExitCode:
    """Run `plans` on the Ray cluster at `address`, deciding and saying so as `run` and `sweep` do here; exit 0 only
    when every run succeeded."""
    from harness.cli.render import report_status
    from harness.cluster.connect import connect, disconnect
    from harness.cluster.driver import RaySweep, sweep_exit_code
    from harness.errors import HarnessError
    from harness.run.context import RunContext
    from harness.run.decide import refuse_before_starting
    from harness.run.lifecycle import stop_on_signals
    from harness.run.provenance import git_facts, harness_facts

    ray = connect(address)
    console = stdout()
    view = BoardView(console)
    # `run` says nothing of its decision (a skip is its error, below); a sweep names each run it skips.
    ctx = RunContext(
        options=options,
        reporter=_RayReporter(view, say_skips=not single),
        provenance={**harness_facts(), **git_facts(Path.cwd())},
    )
    sweep = RaySweep(ray, address, ctx=ctx, board=view.board)
    try:
        with stop_on_signals(ctx.stop, view.note), view, ctx.stop.acted_on():  # the driver passes a stop on
            runs = sweep.run(plans)
    finally:
        disconnect()
    if single:
        (run,) = runs
        if run.lock_refusal is not None:  # said, with its exit code, as a run here says it
            raise run.lock_refusal
        if run.decision.action == "skip":
            raise HarnessError(run.decision.not_started())
        if run.error and (run.status is None or run.status.state == "running" or run.sink is None):
            raise HarnessError(f"run {run.run} not started: {run.error}", run.error_code)
        if run.status is not None:
            report_status(run.status)
    else:
        _print_results(console, runs)
        refuse_before_starting([run.decision for run in runs])  # a capture that changed while the sweep ran
    return sweep_exit_code(runs, ctx.stop)


def _print_results(console: Any, runs: Sequence[Any]) -> None:
    from rich.text import Text

    from harness.cli.tables import Column, print_table

    rows = []
    for run in runs:
        status = run.status
        steps = f"{status.steps_complete}/{status.steps_expected}" if status else "-"
        reason = (
            run.error
            or (status.error if run.decision.action == "run" and status and status.error else None)
            or run.decision.reason
        )
        cells = (run.run, run.node.hostname if run.node else "-", run.decision.action, run.state, steps, reason)
        rows.append(tuple(Text(cell) for cell in cells))
    columns = [
        Column("run"),
        Column("host"),
        Column("action"),
        Column("state"),
        Column("steps", "right"),
        Column("reason", wrap=True),
    ]
    print_table(console, columns, rows, title="sweep on the cluster")


def dry_run_over_hosts(plan: Any, *, address: str, nodes: int, as_json: bool) -> None:
    """What each host would start for one run over `nodes` hosts, and the job; starts nothing."""
    from harness.cluster.connect import alive_nodes, connect, disconnect, nodes_for, run_request, shown_address
    from harness.cluster.scaleout import describe_plan, metadata_for, pick_hosts, plan_scale_out
    from harness.errors import HarnessError
    from harness.run.provenance import git_facts, harness_facts
    from harness.secrets import redact_userinfo, shown_json

    ray = connect(address)
    try:
        able = nodes_for(alive_nodes(ray), run_request(plan.experiment.cluster))
    finally:
        disconnect()
    try:
        hosts = pick_hosts(able, nodes, shown_address(address))
    except ValueError as err:
        raise HarnessError(f"run {plan.spec.run}: {err}") from None
    provenance = {**harness_facts(), **git_facts(Path.cwd())}
    scale = plan_scale_out(
        plan.spec,
        hosts,
        cluster_env=redacted_cluster_env(plan.experiment),
        metadata=metadata_for(plan.spec, provenance, nodes, hosts=hosts),
    )
    if as_json:  # every value by the secret rule: the job's entrypoint holds the trainer's flags
        typer.echo(json.dumps(shown_json(scale.to_dict()), indent=2, allow_nan=False))
        return
    console = stdout()
    for line in describe_plan(scale, plan.spec.secret_values()):
        console.print(redact_userinfo(line), markup=False, highlight=False, soft_wrap=True)


def recover_on_ray(
    address: str, capture_dir: Path, *, all_: bool, leave_running: bool, keep: bool, grace_s: float
) -> tuple[list, list[str]]:
    """Plans for the captures whose runs the cluster's nodes still hold (or whose harness is gone), carried out."""
    from harness.cluster.connect import alive_nodes, connect, disconnect
    from harness.cluster.remote import node_engines
    from harness.engines import listed_engine_names
    from harness.run.settle import carry_out, plan_all

    ray = connect(address)
    try:
        notes: list[str] = []
        engines = node_engines(ray, alive_nodes(ray), listed_engine_names())
        plans = plan_all(capture_dir, engines, notes, other_hosts=all_)
        results = [(plan, carry_out(plan, leave_running=leave_running, keep=keep, grace_s=grace_s)) for plan in plans]
    finally:
        disconnect()
    return results, notes


def redacted_cluster_env(experiment: "Experiment") -> dict[str, str]:
    """cluster.env as the plan of a run over several hosts shows it: each secret's value (and URL password) as ***."""
    from harness.secrets import shown_env_value

    return {name: shown_env_value(experiment.is_secret(name), value) for name, value in experiment.cluster.env.items()}
