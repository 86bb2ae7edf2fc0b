"""`harness run`: plan one run from an experiment and start it (or print the plan)."""

from __future__ import annotations

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


def plan_from_cli(experiment: str, experiments_dir, capture_dir, seed, set_):  # noqa: ANN001, ANN201
    """Load, validate and plan one run from command-line options; warnings are printed."""
    import os
    from pathlib import Path

    from harness.experiments import ExperimentStore
    from harness.launch import plan_launch

    store = ExperimentStore(experiments_dir)
    loaded = store.load(experiment, seed=seed, overrides=set_ or ())
    for message in loaded.warnings:
        warn(message)
    spec = plan_launch(
        loaded.experiment,
        base_args=store.base_args,
        capture_root=str(capture_dir),
        project_root=str(Path.cwd()),
        environ=os.environ,
    )
    for name in spec.missing_env:
        warn(f"{name} is listed in container.pass_env but not set in this environment; the container gets none")
    return loaded.experiment, spec


@command("run")
def run(
    experiment: Annotated[str, typer.Argument(help="Experiment name (file stem in the experiments directory).")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the launch spec and start nothing.")] = False,
    json_: JsonOption = False,
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    capture_dir: CaptureDir = DEFAULT_CAPTURE_DIR,
    seed: SeedOption = None,
    set_: SetOption = None,
) -> None:
    """Run one experiment in a container on the GPU (with --dry-run: show what would start)."""
    _, spec = plan_from_cli(experiment, experiments_dir, capture_dir, seed, set_)
    if dry_run:
        print_spec(spec, as_json=json_)
        return
    from harness.errors import HarnessError

    raise HarnessError("only --dry-run is available until the runner lands")


def print_spec(spec, *, as_json: bool) -> None:  # noqa: ANN001
    """Print a launch spec: one JSON document, or a readable listing."""
    import json
    import shlex

    from harness.launch import docker_run_command

    if as_json:
        typer.echo(json.dumps(spec.to_dict(), indent=2))
        return
    console = stdout()
    out = console.print
    out(f"[bold]run[/bold] {spec.run}   [bold]run id[/bold] {spec.run_id}   (dry run: nothing started)")
    out(f"image           {spec.image}")
    out(f"container       {spec.container_name}")
    out(f"capture         {spec.capture_dir}")
    out(f"steps expected  {spec.steps_expected}")
    out(f"time limit      {f'{spec.max_minutes:g} min' if spec.max_minutes else 'none'}")
    if spec.device_requests:
        for request in spec.device_requests:
            which = "all GPUs" if request.count == -1 else f"GPUs {','.join(request.device_ids or ())}"
            caps = ",".join(c for group in request.capabilities for c in group)
            out(f"gpu request     {which} (driver {request.driver}, capabilities {caps})")
    else:
        out("gpu request     none")
    out(f"shm size        {spec.shm_size}   ipc {spec.ipc_mode}   "
        f"ulimits {' '.join(f'{k}={v}' for k, v in spec.ulimits.items())}")
    for mount in spec.mounts:
        out(f"mount           {mount.source} -> {mount.target}{' (read-only)' if mount.read_only else ''}")
    for name, value in spec.labels.items():
        out(f"label           {name}={value}", markup=False)
    out("[bold]environment[/bold]")
    for name, value in spec.display_env().items():
        out(f"  {name}={value}", markup=False)
    out("[bold]trainer argv[/bold] (as the image's entry runs it)")
    out("  " + " \\\n    ".join(_argv_lines(spec.trainer_argv)), markup=False)
    out("[bold]by hand[/bold]")
    out("  " + shlex.join(docker_run_command(spec)), markup=False)


def _argv_lines(argv) -> list[str]:  # noqa: ANN001
    """The argv shell-quoted, one flag and its values per line."""
    import shlex

    from harness.lab.milesargv import split_flags

    return [shlex.join([flag, *values]) for flag, values in split_flags(list(argv))]
