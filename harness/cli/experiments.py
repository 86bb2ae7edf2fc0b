"""`harness ls`, `harness show`: what the experiment files say."""

from __future__ import annotations

from harness.cli.app import (
    DEFAULT_EXPERIMENTS_DIR,
    ExperimentsDir,
    SeedOption,
    SetOption,
    command,
    stdout,
    warn,
)

import typer
from typing_extensions import Annotated


@command("ls")
def ls(experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR) -> None:
    """List the experiments and sweeps; a broken file is listed with its error."""
    from harness.cli.tables import Column, print_table
    from harness.errors import HarnessError
    from harness.experiments import ExperimentStore

    store = ExperimentStore(experiments_dir)
    rows: list[tuple[str, ...]] = []
    for name in store.names():
        try:
            if store.is_sweep(name):
                sweep = store.load_sweep(name)
                seeds = " ".join(str(s) for s in sweep.seeds)
                rows.append((name, f"sweep of {sweep.sweep}", seeds, "", "", "", _headline(sweep.description)))
                continue
            loaded = store.load(name)
        except HarnessError as err:
            rows.append((name, "", "", "", "", "", f"[red]error:[/red] {_escape(err.message)}"))
            continue
        exp = loaded.experiment
        flags = exp.effective_flags(store.base_args)
        batch = (flags.get("--rollout-batch-size") or ["?"])[0]
        over = (flags.get("--over-sampling-batch-size") or [batch])[0]
        rows.append((
            name,
            exp.extends or "",
            str(exp.seed),
            str(exp.steps),
            "on" if exp.filter_path(store.base_args) else "off",
            f"{over} for {batch}",
            _headline(exp.description),
        ))
    columns = [Column("name"), Column("extends", wrap=True, drop=1), Column("seed", "right"),
               Column("steps", "right"), Column("filter"), Column("over-sampling"), Column("description", wrap=True)]
    print_table(stdout(), columns, rows, title=f"experiments in {experiments_dir}")


@command("show")
def show(
    experiment: Annotated[str, typer.Argument(help="Experiment name (file stem in the experiments directory).")],
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    seed: SeedOption = None,
    set_: SetOption = None,
) -> None:
    """Print the resolved experiment (parents merged, overrides and seed applied) as YAML."""
    import yaml

    from harness.experiments import ExperimentStore

    store = ExperimentStore(experiments_dir)
    if store.is_sweep(experiment):
        typer.echo(yaml.safe_dump(store.load_sweep(experiment).model_dump(mode="json"), sort_keys=False), nl=False)
        return
    loaded = store.load(experiment, seed=seed, overrides=set_ or ())
    for message in loaded.warnings:
        warn(message)
    typer.echo(yaml.safe_dump(loaded.experiment.to_dict(), sort_keys=False, width=1000), nl=False)


def _headline(description: str) -> str:
    """The description's first sentence, escaped for rich."""
    first = description.split(". ")[0].split(": ")[0].strip()
    return _escape(first.rstrip("."))


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
