"""`harness status`, `logs`, `stop`, `recover`: looking after captures and their containers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    CaptureDirOrSim,
    RecoverRayOption,
    SimCapturesOption,
    capture_root,
    command,
    note,
    sim_hint_when_not_found,
    sim_root_hint,
    stdout,
    warn,
)

if TYPE_CHECKING:
    from harness.capture import RunStatus
    from harness.run.capture_ops import CaptureRow
    from harness.run.settle import Plan, Result

# find_runs's reason for a directory that is simply not a run: not worth a warning.
NOT_A_RUN = "no status.json, so not a run"
RunArgument = Annotated[str, typer.Argument(help="Run name (a directory under the capture dir).")]


@command("status")
def status(
    run: Annotated[
        Optional[str],
        typer.Argument(show_default=False, help="One run's page instead: its state and why, attempts, guard, log."),
    ] = None,
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
) -> None:
    """Show every capture: state, steps, pauses, exit code, start, duration, and the heat guard now.

    Where Ray placed runs (--ray), a last column names the host each ran on.

    Pauses are `N (S s)`: the windows and the wall seconds they cover (the
    summary's rollout times are the trainer's seconds). The exit code is the
    one `harness run` exited with (the trainer's beside it where it differs).
    The guard column is the last temperature recorded, or `PAUSED since ...`
    while a pause window is open.

    `harness status RUN` shows one run's page: its state and the reason, its
    notes, what the heat guard did, every attempt and what changed between
    them, and the last lines of its log.
    """
    from rich.text import Text

    from harness.capture import Capture, find_runs
    from harness.run.capture_ops import capture_rows

    capture_dir = capture_root(capture_dir, sim)
    if run is not None:
        from harness.cli.render import print_run_page
        from harness.run.capture_ops import find_run
        from harness.run.run_page import run_page

        with sim_hint_when_not_found(capture_dir, run):
            capture = find_run(capture_dir, run)
        print_run_page(run_page(capture), capture_dir)
        return
    runs, skipped = find_runs(capture_dir)
    for odd in skipped:
        if odd.reason != NOT_A_RUN:
            warn(f"{odd.directory}: {odd.reason}")
    rows = capture_rows([Capture(path) for path in runs])
    if not rows:
        stdout().print(Text(f"no captures in {capture_dir}{sim_root_hint(capture_dir)}"))
        return None
    _print_captures(rows, capture_dir)


def _print_captures(rows: "list[CaptureRow]", capture_dir: Path) -> None:
    """The captures table; `host` only where Ray placed a run."""
    from rich.text import Text

    from harness.cli.tables import Column, print_table

    # Run, state, steps and duration always; the others go, least useful first, where the width is short.
    columns = [
        Column("run"),
        Column("state", wrap=True),
        Column("steps", "right"),
        Column("pauses (wall s)", drop=4),
        Column("exit code", "right", drop=3),
        Column("started", drop=1),
        Column("duration", "right"),
        Column("guard", wrap=True, drop=5),
    ]
    hosts = any(row.placed_by_ray for row in rows)  # the host each ran on, its harness's for a local run
    if hosts:
        columns.append(Column("host", drop=2))
    # plain Text: a run name or a reason with [brackets] is shown, never read as markup
    print_table(
        stdout(),
        columns,
        [
            tuple(
                Text(cell)
                for cell in (
                    row.run,
                    row.state,
                    row.steps,
                    row.pauses,
                    row.exit_code,
                    row.started,
                    row.duration,
                    row.guard,
                    *([row.host or "-"] if hosts else []),
                )
            )
            for row in rows
        ],
        title=f"captures in {capture_dir}",
    )


@command("logs")
def logs(
    run: RunArgument,
    follow: Annotated[
        bool, typer.Option("-f", "--follow", help="Keep printing new lines while the run is running.")
    ] = False,
    timestamps: Annotated[bool, typer.Option("--timestamps", help="Keep each line's receive-time prefix.")] = False,
    attempt: Annotated[
        Optional[int],
        typer.Option(
            "--attempt",
            min=0,
            help="This attempt's log (harness history lists them) [default: the one "
            "running now, else the current one].",
        ),
    ] = None,
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
) -> None:
    """Print a run's container.log (the trainer's output as the harness received it; on a terminal its control
    characters escaped, as everything from outside is shown to a person; piped, as written, like the file)."""
    import sys

    from harness.capture import Capture, RunAttempts, find_capture
    from harness.cli.messages import shown
    from harness.run.capture_ops import follow_log, live_capture

    root = capture_root(capture_dir, sim)
    with sim_hint_when_not_found(root, run):
        capture = find_capture(root, run)
    if attempt is not None:
        capture = Capture(RunAttempts(capture.directory).find(attempt).directory, capture.run)
    else:
        capture = live_capture(capture)
    to_person = sys.stdout.isatty()
    for line in follow_log(capture, follow=follow, on_skipped=note):
        text = line if timestamps else line.split(" ", 1)[-1]
        sys.stdout.write((shown(text) if to_person else text) + "\n")
        sys.stdout.flush()


@command("stop")
def stop(
    run: RunArgument,
    reason: Annotated[
        str, typer.Option("--reason", help="Why; recorded in status.json.")
    ] = "stopped with harness stop",
    timeout_s: Annotated[float, typer.Option("--timeout-s", help="How long to wait for the run to end.")] = 180.0,
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    checkpoint: Annotated[
        bool,
        typer.Option(
            "--checkpoint",
            help="First ask the trainer for a checkpoint (at its next rollout's end), wait until it is verified, "
            "then stop: `harness run --resume` continues from it (docs/checkpoints.md).",
        ),
    ] = False,
) -> None:
    """Stop a running run gracefully; its harness records it as stopped with the reason."""
    from harness.capture import find_capture
    from harness.run.capture_ops import request_stop
    from harness.run.checkpoint_ops import request_checkpoint_then_stop

    found = find_capture(capture_root(capture_dir, sim), run)
    if checkpoint:
        saved, final = request_checkpoint_then_stop(found, reason, timeout_s=timeout_s, note=note, warn=warn)
        stdout().print(f"{stop_line(run, final)}; resume from {saved} with `harness run --resume`", markup=False)
        return
    final = request_stop(found, reason, timeout_s=timeout_s, note=note, warn=warn)
    stdout().print(stop_line(run, final), markup=False)


@command("history")
def history(run: RunArgument, capture_dir: CaptureDirOrSim = None, sim: SimCapturesOption = False) -> None:
    """List a run's attempts: each start of the run, its state, steps, start and duration, and what differs in
    configuration from the current one (marked *), which status, the summary and the report read.

    The current attempt is the newest that succeeded, or the newest when none
    has; `harness restore RUN ATTEMPT` makes another one current.
    """
    from rich.text import Text

    from harness.capture import RunAttempts
    from harness.cli.tables import Column, print_table
    from harness.run.capture_ops import attempt_rows, find_run

    root = capture_root(capture_dir, sim)
    with sim_hint_when_not_found(root, run):
        capture = find_run(root, run)
    foreign = RunAttempts(capture.directory).foreign_line()
    if foreign is not None:
        warn(foreign)
    rows = attempt_rows(capture)
    columns = [
        Column("attempt", "right"),
        Column("state", wrap=True),
        Column("steps", "right"),
        Column("started", drop=2),
        Column("duration", "right", drop=1),
        Column("differs from the current", wrap=True),
    ]
    cells = [
        tuple(
            Text(cell)
            for cell in (
                f"{row.attempt}{' *' if row.current else ''}",
                row.state,
                row.steps,
                row.started,
                row.duration,
                row.differs,
            )
        )
        for row in rows
    ]
    print_table(stdout(), columns, cells, title=f"attempts of {run} (* current)")


@command("restore")
def restore(
    run: RunArgument,
    attempt: Annotated[int, typer.Argument(min=0, help="The attempt to make current (harness history lists them).")],
    reason: Annotated[str, typer.Option("--reason", help="Why; recorded with who chose it.")] = "chosen by hand",
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
) -> None:
    """Make one of a run's attempts its current capture (the one status, the summary and the report read); who chose
    it, when and why are recorded in the run's attempts directory (current.jsonl)."""
    from harness.run.capture_ops import find_run, restore_attempt

    restored = restore_attempt(find_run(capture_root(capture_dir, sim), run), attempt, reason)
    stdout().print(f"{run}: attempt {restored.number} is current ({reason})", markup=False)


def stop_line(run: str, final: "RunStatus") -> str:
    """`run: state (why)`; a run that ended without an error (it ended as the stop landed) has no `(why)`."""
    return f"{run}: {final.state}" + (f" ({final.error})" if final.error else "")


@command("recover")
def recover(
    all_: Annotated[
        bool,
        typer.Option("--all", help="Also runs whose harness ran on another host (its lock cannot be seen from here)."),
    ] = False,
    leave_running: Annotated[
        bool, typer.Option("--leave-running", help="Thaw and save, but leave the trainers running.")
    ] = False,
    keep: Annotated[bool, typer.Option("--keep", help="Do not remove stopped containers.")] = False,
    grace_s: Annotated[float, typer.Option("--grace-s", min=0, help="Seconds between SIGTERM and SIGKILL.")] = 60.0,
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    ray: RecoverRayOption = None,
) -> None:
    """Settle runs whose harness is gone: thaw, save their logs and steps, stop them, record how they ended.

    A pause window the heat guard left open is closed when the run is thawed.
    Only a trainer whose run id is its capture's current one is touched, and a
    final status is never rewritten. With --ray, the trainers are looked for on
    every node of the cluster (a small task per node asks its engines).
    """
    from harness.engines import engine_named, listed_engine_names
    from harness.run.settle import carry_out, plan_all

    outside: list = []
    if ray:
        from harness.cli.cluster import recover_on_ray

        results, notes = recover_on_ray(
            ray, capture_root(capture_dir, sim), all_=all_, leave_running=leave_running, keep=keep, grace_s=grace_s
        )
    else:
        notes = []
        plans = plan_all(
            capture_root(capture_dir, sim),
            [engine_named(name) for name in listed_engine_names()],
            notes,
            other_hosts=all_,
            outside=outside if capture_dir is not None else None,
        )
        results = [(plan, carry_out(plan, leave_running=leave_running, keep=keep, grace_s=grace_s)) for plan in plans]
    for message in notes:
        warn(f"cannot ask the {message}")
    console = stdout()
    if not any(plan.action != "leave" for plan, _ in results):
        console.print("nothing to recover: no run has lost its harness", markup=False)
    if not ray and outside:
        console.print(
            f"{len(outside)} engine object{'s' if len(outside) != 1 else ''} of a capture outside "
            f"{capture_dir} left alone",
            markup=False,
        )
    for plan, result in results:
        for stranger, why in plan.strangers:
            console.print(f"{plan.label}: {stranger.name} left alone: {why}", markup=False)
        console.print(_recovered(plan, result), markup=False)
    _say_resumable(console, capture_root(capture_dir, sim), ray)


def _recovered(plan: "Plan", result: "Result") -> str:
    """One line for what recover did to a run (a SettlePlan and what carrying it out gave)."""
    if result.skipped is not None:
        return f"{plan.label}: left alone: {result.skipped}"
    final = result.status
    assert final is not None
    kept = f"; the torn one kept as {result.torn_kept_as}" if result.torn_kept_as else ""
    current = f"; {result.made_current}" if result.made_current else ""
    if plan.action == "current":
        return f"{plan.label}: {final.state} ({plan.reason}){current}"
    if plan.action == "rebuild":
        return f"{plan.label}: {final.state}, its status.json rebuilt from its files ({final.notes[-1]}){kept}{current}"
    if plan.action == "close":
        return (
            f"{plan.label}: closed {result.windows_closed} open pause window"
            f"{'s' if result.windows_closed != 1 else ''} at {result.closed_at}, {result.closed_when} "
            "(the run is not frozen; its status is final and unchanged)"
        )
    closed = (
        f", {result.windows_closed} open pause window{'s' if result.windows_closed != 1 else ''} closed"
        if result.windows_closed
        else ""
    )
    return (
        f"{plan.label}: {final.state}, {final.steps_complete}/{final.steps_expected} steps saved, "
        f"{result.lines_saved} log line(s) added, {_kind(plan, final)} {result.container}{closed}{kept}{current}"
    )


def _say_resumable(console: Any, root: Path, ray: Optional[str]) -> None:
    """The runs that can continue from a checkpoint, each with the command that does it."""
    from harness.run.checkpoint_ops import resumable_runs

    if ray:
        from harness.cluster.connect import shown_address

        ray = shown_address(ray)  # its URL password hidden
    for found in resumable_runs(root, lambda simulated: capture_root(None, simulated), ray):
        check = found.choice.check
        console.print(
            f"{found.run}: can resume from {check.name} (rollout {check.rollout_id + 1} onward): {found.command}",
            markup=False,
        )


def _kind(plan: "Plan", status: "RunStatus") -> str:
    """What the engine ran the trainer as: a container, or a process."""
    if plan.owned is not None:
        return plan.owned.kind
    return "process" if status.engine == "process" else "container"
