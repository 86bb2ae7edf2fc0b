"""`harness run`: plan one run from an experiment and start it (or print the plan)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Union

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    DEFAULT_CAPTURE_DIR,
    DEFAULT_EXPERIMENTS_DIR,
    CaptureDir,
    ExperimentsDir,
    JsonOption,
    SeedOption,
    SetOption,
    command,
    stdout,
    warn,
)
from harness.cli.progress import progress_for


def plan_from_cli(name: str, experiments_dir: Path, capture_dir: Path, seeds: Sequence[int],
                  overrides: Sequence[str]) -> list:
    """Plan the runs of `name` over `seeds` (a sweep file's own seeds when it is one); warnings are printed."""
    import os

    from harness.errors import HarnessError
    from harness.experiments import ExperimentStore
    from harness.lifecycle import plan_runs

    store = ExperimentStore(experiments_dir)
    if store.is_sweep(name):
        sweep_file = store.load_sweep(name)
        name, seeds = sweep_file.sweep, list(seeds) or sweep_file.seeds
    if len(set(seeds)) != len(seeds):
        raise HarnessError(f"--seeds: each seed once, got {list(seeds)}")
    plans = plan_runs(store, name, seeds, overrides, capture_dir, dict(os.environ))
    for message in dict.fromkeys(m for plan in plans for m in plan.warnings):  # once, not once per seed
        warn(message)
    return plans


def _session(plans: list, capture_dir: Path) -> tuple:
    """Warn about leftovers `harness recover` would settle; the console, live progress and stop control."""
    from harness.lifecycle import leftover_warnings
    from harness.runner import StopControl

    for message in leftover_warnings(capture_dir, [plan.spec.engine for plan in plans]):
        warn(message)
    console = stdout()
    return console, progress_for(console), StopControl()


GraceOption = Annotated[float, typer.Option("--grace-s", min=0, help="Seconds between SIGTERM and SIGKILL when stopping.")]
KeepOption = Annotated[bool, typer.Option("--keep", help="Keep the container after the run (it is removed once logs and status are saved).")]
NoWaitOption = Annotated[bool, typer.Option("--no-wait", help="Fail at once if another run holds the GPU.")]


@command("run")
def run(
    experiment: Annotated[str, typer.Argument(help="Experiment name (file stem in the experiments directory).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the launch spec and start nothing.")] = False,
    json_: JsonOption = False,
    force: Annotated[bool, typer.Option("--force", help="Rerun even if the capture succeeded (the old one is kept under .replaced/).")] = False,
    max_minutes: Annotated[Optional[float], typer.Option("--max-minutes", min=0.01, help="Time limit; overrides limits.max_minutes.")] = None,
    no_wait: NoWaitOption = False,
    keep: KeepOption = False,
    grace_s: GraceOption = 60.0,
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: CaptureDir = DEFAULT_CAPTURE_DIR,
    seed: SeedOption = None,
    set_: SetOption = None,
) -> None:
    """Run one experiment in a container on the GPU, capture it, and exit 0 only if it succeeded."""
    from harness.errors import HarnessError
    from harness.lifecycle import RunOptions, exit_code_for, run_planned, stop_on_signals

    overrides = [*(set_ or ()), *([f"limits.max_minutes={max_minutes}"] if max_minutes else [])]
    plans = plan_from_cli(experiment, experiments_dir, capture_dir, [seed] if seed else [], overrides)
    if len(plans) != 1:
        raise HarnessError(f"{experiment} is a sweep file: run it with `harness sweep {experiment}`")
    (plan,) = plans
    if dry_run:
        for problem in _preflight(plan.spec):
            warn(f"pre-flight: {problem}")
        print_spec(plan.spec, as_json=json_)
        return
    _, progress, stop = _session([plan], capture_dir)
    options = RunOptions(wait_for_gpu=not no_wait, keep=keep, grace_s=grace_s)
    with stop_on_signals(stop, progress.note):
        result = run_planned(plan, options=options, progress=progress, stop=stop, on_wait=warn, on_warning=warn,
                             mode="force" if force else "retry")
    if result.decision.action == "skip":
        raise HarnessError(f"run {plan.spec.run} not started: {result.decision.reason}")
    status = result.status
    report_status(status)
    code = exit_code_for([status.state])
    if code:
        raise typer.Exit(int(code))


@command("sweep")
def sweep(
    experiment: Annotated[str, typer.Argument(help="An experiment (with --seeds) or a sweep file such as `seeds`.")],
    seeds: Annotated[Optional[List[int]], typer.Option("--seeds", min=1, help="Seeds to run: --seeds 1 2 3.")] = None,
    more_seeds: Annotated[Optional[List[int]], typer.Argument(hidden=True, min=1)] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List each run, its run id and capture, and whether it would be skipped; start nothing.")] = False,
    json_: JsonOption = False,
    retry: Annotated[bool, typer.Option("--retry", help="Also rerun failed, no_metrics, interrupted and stopped runs.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Rerun every run, succeeded ones too.")] = False,
    fail_fast: Annotated[bool, typer.Option("--fail-fast", help="Stop the sweep at the first run that does not succeed.")] = False,
    no_wait: NoWaitOption = False,
    keep: KeepOption = False,
    grace_s: GraceOption = 60.0,
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: CaptureDir = DEFAULT_CAPTURE_DIR,
    set_: SetOption = None,
) -> None:
    """Run an experiment over seeds, one after another; succeeded runs are skipped unless --force."""
    from harness.errors import HarnessError
    from harness.lifecycle import RunOptions, exit_code_for, run_sweep, stop_on_signals

    if more_seeds and not seeds:
        raise HarnessError(f"seeds {more_seeds} given without --seeds")
    if retry and force:
        raise HarnessError("--retry and --force are exclusive (--force reruns everything)")
    if json_ and not dry_run:
        raise HarnessError("--json prints the plan of --dry-run; a sweep that runs prints its progress")
    plans = plan_from_cli(experiment, experiments_dir, capture_dir, [*(seeds or ()), *(more_seeds or ())], set_ or ())
    mode = "force" if force else "retry" if retry else "cached"
    if dry_run:
        print_sweep_plan(plans, mode, as_json=json_)
        return
    console, progress, stop = _session(plans, capture_dir)

    def on_decision(decision) -> None:  # noqa: ANN001
        verb = "running" if decision.action == "run" else "skipping"
        progress.note(f"{decision.run}: {verb}: {decision.reason}")

    options = RunOptions(wait_for_gpu=not no_wait, keep=keep, grace_s=grace_s)
    with stop_on_signals(stop, progress.note):
        results = run_sweep(plans, mode=mode, fail_fast=fail_fast, options=options, progress=progress, stop=stop,
                            on_decision=on_decision, on_wait=warn, on_warning=warn)
    _print_sweep(console, results)
    states = [r.status.state if r.status else "not run" for r in results]
    code = exit_code_for(states)
    if code:
        raise typer.Exit(int(code))


def _preflight(spec) -> list[str]:  # noqa: ANN001
    """What would stop the run from starting, as `run` checks it (nothing is changed or started)."""
    from harness.engines import engine_named

    return [problem.message for problem in engine_named(spec.engine).preflight(spec)]


def _print_sweep(console, results) -> None:  # noqa: ANN001
    from rich.text import Text

    from harness.cli.tables import Column, print_table

    rows = []
    for result in results:
        status = result.status
        steps = f"{status.steps_complete}/{status.steps_expected}" if status else "-"
        cells = (result.decision.run, result.decision.action, status.state if status else "-", steps,
                 result.decision.reason)
        rows.append(tuple(Text(cell) for cell in cells))  # Text: a reason quoting a log line is never markup
    columns = [Column("run"), Column("action"), Column("state"), Column("steps", "right"), Column("reason", wrap=True)]
    print_table(console, columns, rows, title="sweep")


def print_sweep_plan(plans: Sequence, mode: str, *, as_json: bool) -> None:
    """What a sweep would do, run by run: run id, capture, run or skip and why. Starts nothing."""
    import json

    from rich.table import Table
    from rich.text import Text

    from harness.lifecycle import existing_status
    from harness.sweep import decide

    rows = []
    for plan in plans:
        spec = plan.spec
        decision = decide(spec.run, spec.run_id, existing_status(spec), mode)
        rows.append({"run": spec.run, "run_id": spec.run_id, "seed": spec.seed, "capture_dir": spec.capture_dir,
                     "action": decision.action, "reason": decision.reason})
    if as_json:
        experiment = plans[0].spec.experiment if plans else None
        typer.echo(json.dumps({"experiment": experiment, "mode": mode, "dry_run": True, "runs": rows}, indent=2, allow_nan=False))
        return
    table = Table(title=f"sweep plan ({mode}; dry run: nothing started)", title_justify="left")
    for column in ("run", "run id", "capture", "action", "reason"):
        table.add_column(column, overflow="fold")
    for row in rows:
        cells = (row["run"], row["run_id"], row["capture_dir"], row["action"], row["reason"])
        table.add_row(*(Text(cell) for cell in cells))
    stdout().print(table)


def report_status(status) -> None:  # noqa: ANN001
    """One line: the run's final state; an error line if it did not succeed."""
    line = (f"{status.run}: {status.state}, {status.steps_complete}/{status.steps_expected} steps complete, "
            f"exit code {status.exit_code}")
    if status.state == "succeeded":
        stdout().print(line, markup=False)
    else:
        warn(f"{line}: {status.error}")


def print_spec(spec, *, as_json: bool) -> None:  # noqa: ANN001
    """Print a launch spec: one JSON document, or a readable listing (values exactly as written, secrets as ***)."""
    import json
    import shlex

    from rich.text import Text

    from harness.launch import docker_run_command

    if as_json:
        typer.echo(json.dumps(spec.to_dict(), indent=2, allow_nan=False))
        return
    console = stdout()

    def out(*parts: Union[str, tuple[str, str]]) -> None:
        # Text, never markup: an image or a path with [brackets] or :colons: is shown as written.
        console.print(Text.assemble(*parts), soft_wrap=True)

    out(("run", "bold"), f" {spec.run}   ", ("run id", "bold"), f" {spec.run_id}   (dry run: nothing started)")
    out("image           ", spec.image)
    out("container       ", spec.container_name)
    out("capture         ", spec.capture_dir)
    out("steps expected  ", str(spec.steps_expected))
    out("time limit      ", f"{spec.max_minutes:g} min" if spec.max_minutes else "none")
    if spec.device_requests:
        for request in spec.device_requests:
            which = "all GPUs" if request.count == -1 else f"GPUs {','.join(request.device_ids or ())}"
            caps = ",".join(c for group in request.capabilities for c in group)
            out("gpu request     ", f"{which} (driver {request.driver}, capabilities {caps})")
    else:
        out("gpu request     ", "none")
    ulimits = " ".join(f"{k}={v}" for k, v in spec.ulimits.items())
    out("shm size        ", f"{spec.shm_size}   ipc {spec.ipc_mode}   init {'yes' if spec.init else 'no'}   ulimits {ulimits}")
    for mount in spec.mounts:
        out("mount           ", f"{mount.source} -> {mount.target}{' (read-only)' if mount.read_only else ''}")
    for name, value in spec.labels.items():
        out("label           ", f"{name}={value}")
    out(("environment", "bold"))
    for name, value in spec.display_env().items():
        out("  ", f"{name}={value}")
    out(("trainer argv", "bold"), " (as the image's entry runs it)")
    out("  ", " \\\n    ".join(_argv_lines(spec.trainer_argv)))
    out(("by hand", "bold"))
    out("  ", shlex.join(docker_run_command(spec)))


def _argv_lines(argv) -> list[str]:  # noqa: ANN001
    """The argv shell-quoted, one flag and its values per line, each as written."""
    import shlex

    from harness.lab.milesargv import parse_flags

    return [shlex.join(flag.words) for flag in parse_flags(list(argv))]
