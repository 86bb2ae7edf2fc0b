"""`harness sim`: the simulated Miles trainer (harness.sim), its arguments passed through untouched."""

from __future__ import annotations

import typer

from harness.cli.app import command


@command(
    "sim",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def sim_command(ctx: typer.Context) -> None:
    """Run the simulated Miles trainer: Miles's train.py flags in, a Miles-shaped log on stdout.

    Takes the flags of Miles's train.py (the ones that change a rollout:
    --rollout-batch-size, --n-samples-per-prompt, --over-sampling-batch-size,
    --dynamic-sampling-filter-path, --num-rollout, --seed, --rollout-seed,
    --rollout-max-response-len, --partial-rollout; the rest are accepted and
    ignored) and --time-scale X: 0 runs as fast as it can and prints simulated
    seconds; X from 0.0001 to 100 sleeps X wall seconds per simulated second and prints
    measured wall seconds / X, so a pause shows as it would. Same as
    `python3 -m harness.sim`; see docs/simulator.md.
    """
    from harness.sim.cli import main

    raise typer.Exit(main(list(ctx.args)))
