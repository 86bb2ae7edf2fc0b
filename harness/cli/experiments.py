"""`harness ls`, `harness show`: what the experiment files say."""

from __future__ import annotations

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    DEFAULT_EXPERIMENTS_DIR,
    ExperimentsDir,
    SeedOption,
    SetOption,
    command,
    stdout,
    warn,
)
from harness.lab.milesnames import OVER_SAMPLING_BATCH_SIZE_FLAG, ROLLOUT_BATCH_SIZE_FLAG


@command("ls")
def ls(experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR) -> None:
    """List the experiments and sweeps; a broken file is marked broken with its error, the rest are listed."""
    from rich.text import Text

    from harness.cli.tables import Column, print_table
    from harness.errors import HarnessError
    from harness.experiments.store import ExperimentStore

    store = ExperimentStore(experiments_dir)
    columns = [
        Column("name"),
        Column("extends", wrap=True, drop=1),
        Column("seed", "right"),
        Column("steps", "right"),
        Column("filter"),
        Column("over-sampling"),
        Column("description", wrap=True),
    ]
    warnings: list[str] = []
    rows = []
    for name in store.names():
        try:
            row = _row(store, name, warnings)
        except HarnessError as err:
            row = (name, "", "", "", "", "", Text.assemble(("broken: ", "red"), err.message))
        # Text cells: names and descriptions are shown exactly as written, never read as markup.
        rows.append(tuple(cell if isinstance(cell, Text) else Text(_printable(cell)) for cell in row))
    print_table(stdout(), columns, rows, title=f"experiments in {experiments_dir}")
    for message in dict.fromkeys(warnings):
        warn(message)


def _row(store, name: str, warnings: list[str]) -> tuple:  # noqa: ANN001
    """One row of `ls`; the experiment's warnings (the ones `show` prints) are added to `warnings`."""
    if store.is_sweep(name):
        sweep = store.load_sweep(name)
        seeds = " ".join(str(s) for s in sweep.seeds)
        return (name, f"sweep of {sweep.sweep}", seeds, "", "", "", _headline(sweep.description))
    loaded = store.load(name)
    warnings.extend(loaded.warnings)
    exp = loaded.experiment
    flags = exp.effective_flags(store.base_args)
    batch = (flags.get(ROLLOUT_BATCH_SIZE_FLAG) or ["?"])[0]
    over = (flags.get(OVER_SAMPLING_BATCH_SIZE_FLAG) or [batch])[0]
    return (
        name,
        exp.extends or "",
        str(exp.seed),
        str(exp.steps),
        "on" if exp.filter_path(store.base_args) else "off",
        f"{over} for {batch}",
        _headline(exp.description) + (" (see warning below)" if loaded.warnings else ""),
    )


@command("show")
def show(
    experiment: Annotated[str, typer.Argument(help="Experiment name (file stem in the experiments directory).")],
    experiments_dir: ExperimentsDir = DEFAULT_EXPERIMENTS_DIR,
    seed: SeedOption = None,
    set_: SetOption = None,
) -> None:
    """Print the resolved experiment (parents merged, overrides and seed applied) as YAML; secrets as ***."""
    import yaml

    from harness.experiments.schema import redacted_experiment
    from harness.experiments.store import ExperimentStore

    store = ExperimentStore(experiments_dir)
    if store.is_sweep(experiment):
        typer.echo(yaml.safe_dump(store.load_sweep(experiment).model_dump(mode="json"), sort_keys=False), nl=False)
        return
    loaded = store.load(experiment, seed=seed, overrides=set_ or ())
    for message in loaded.warnings:
        warn(message)
    typer.echo(yaml.safe_dump(redacted_experiment(loaded.experiment), sort_keys=False, width=1000), nl=False)


def _headline(description: str) -> str:
    """The description's first sentence."""
    first = description.split(". ")[0].split(": ")[0].strip()
    return first.rstrip(".")


def _printable(text: str) -> str:
    """A file name as the terminal can print it (bytes that are not UTF-8 shown as U+FFFD)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
