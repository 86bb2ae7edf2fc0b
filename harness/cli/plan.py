"""`harness plan`: the over-sampling batch size, and how many seeds a difference in reward needs (harness.stats)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

import typer
from typer.core import TyperGroup
from typing_extensions import Annotated

from harness.cli.app import (
    CaptureDirOrSim,
    JsonOption,
    SimCapturesOption,
    app,
    capture_root,
    command,
    print_message,
    sim_root_hint,
    stdout,
)
from harness.lab.milesnames import OVER_SAMPLING_BATCH_SIZE_FLAG, ROLLOUT_BATCH_SIZE_FLAG
from harness.stats.seeds import DEFAULT_EFFECT

if TYPE_CHECKING:
    from harness.stats.oversampling import Measured, Plan
    from harness.stats.power import SeedsPlan
    from harness.summary.document import SummaryDocument
    from harness.summary.summarize import Summary


class PlanCommands(TyperGroup):
    """`harness plan seeds ...` is the seeds plan; anything else is the over-sampling plan, as `harness plan` was."""

    def parse_args(self, ctx: Any, args: List[str]) -> List[str]:  # Any: typer's own click Context (private)
        if not args or args[0] not in self.commands:
            args = [OVER_SAMPLING, *args]
        return super().parse_args(ctx, args)


OVER_SAMPLING = "over-sampling"
plan_app = typer.Typer(
    cls=PlanCommands,
    name="plan",
    help="Plan runs: the over-sampling batch size (harness plan --drop-rate R | --from-run RUN...), or how many "
    "seeds a difference in reward needs (harness plan seeds --effect D).",
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(plan_app, name="plan")


@command(OVER_SAMPLING, on=plan_app, hidden=True)
def plan_command(
    runs: Annotated[
        Optional[List[str]],
        typer.Argument(help="Runs to measure the keep rate from (with --from-run).", show_default=False),
    ] = None,
    drop_rate: Annotated[
        Optional[float],
        typer.Option("--drop-rate", min=0.0, max=1.0, help="Share of groups the filter drops (0 to 1)."),
    ] = None,
    from_run: Annotated[
        bool, typer.Option("--from-run", help="Take the keep rate from the complete steps of RUNS.")
    ] = False,
    rollout_batch_size: Annotated[
        Optional[int],
        typer.Option(
            ROLLOUT_BATCH_SIZE_FLAG, min=1, help="B, groups kept per step [default with --from-run: the runs' B]."
        ),
    ] = None,
    target: Annotated[
        float, typer.Option("--target", help="Wanted probability that one batch of O prompts suffices.")
    ] = 0.9,
    monte_carlo: Annotated[
        bool, typer.Option("--monte-carlo", help="Cross-check with a Monte Carlo of Miles's submission rule.")
    ] = False,
    simulate: Annotated[bool, typer.Option("--simulate", hidden=True, help="Old name of --monte-carlo.")] = False,
    trials: Annotated[
        int, typer.Option("--trials", min=100, help="Monte Carlo steps per O (with --monte-carlo).")
    ] = 20_000,
    seed: Annotated[int, typer.Option("--seed", help="Monte Carlo seed (with --monte-carlo).")] = 1,
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    json_: JsonOption = False,
) -> None:
    """Recommend --over-sampling-batch-size: the smallest O whose chance of needing one batch reaches the target.

    Usage: harness plan --drop-rate 0.5 --rollout-batch-size 32, or
    harness plan --from-run e2b-dapo-filter [RUN...].

    The model: groups are kept independently with probability k, and one
    batch of O prompts suffices when at least B of them are kept, so
    P(one batch) = P(Binomial(O, k) >= B). With --drop-rate, k = 1 - R.
    With --from-run, each complete step of the runs has its own keep rate
    k_i (a filter step kept B of B + dropped groups; a step without the
    filter, the groups of B not zero-variance), and the plan averages over
    those steps: P(one batch) = mean over i of P(Binomial(O, k_i) >= B), and
    E[batches] likewise, so a few hard steps count as they did in the runs
    instead of vanishing into one pooled rate (docs/summary.md, "The planner").

    How many seeds a difference in reward needs: harness plan seeds --help.
    """
    from harness.stats import oversampling as planner

    measured, keep_rate, rollout_batch_size = _keep_rate_and_batch(
        runs, drop_rate, from_run, rollout_batch_size, capture_dir, sim
    )
    if measured is not None:
        result = planner.plan_from_steps(rollout_batch_size, measured, target)
    else:
        result = planner.plan(rollout_batch_size, keep_rate, target)
    simulated = ()
    if monte_carlo or simulate:
        chosen = [c.over_sampling_batch_size for c in result.candidates[-2:]]
        rates = measured.step_keep_rates if measured is not None else ()
        simulated = tuple(
            planner.simulate(o, rollout_batch_size, keep_rate, trials=trials, seed=seed, step_keep_rates=rates)
            for o in chosen
        )
    from dataclasses import replace

    result = replace(result, simulated=simulated)
    if json_:
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
        return
    _print_plan(result)


def _keep_rate_and_batch(
    runs: Optional[List[str]],
    drop_rate: Optional[float],
    from_run: bool,
    rollout_batch_size: Optional[int],
    capture_dir: Optional[Path],
    sim: bool,
) -> tuple[Optional["Measured"], float, int]:
    """The keep rate and B to plan with: measured from the runs (--from-run), or given (--drop-rate)."""
    from harness.errors import HarnessError
    from harness.stats import oversampling as planner

    if (drop_rate is None) == (not from_run):
        raise HarnessError("give either --drop-rate R or --from-run RUN... (one of them)")
    if runs and not from_run:
        raise HarnessError(f"unexpected arguments {' '.join(runs)}: runs are read only with --from-run")
    if not from_run:
        keep_rate = 1.0 - float(drop_rate)
        if rollout_batch_size is None:
            raise HarnessError(f"{ROLLOUT_BATCH_SIZE_FLAG} is needed with --drop-rate")
        return None, keep_rate, rollout_batch_size
    if not runs:
        raise HarnessError("--from-run needs at least one run name")
    root = capture_root(capture_dir, sim)
    measured = planner.keep_rate_from_runs(_summarized_runs(root, runs, sim_root_hint(root)))
    if rollout_batch_size is None:
        if len(measured.rollout_batch_sizes) != 1:
            raise HarnessError(f"the runs differ in B ({measured.rollout_batch_sizes}): give {ROLLOUT_BATCH_SIZE_FLAG}")
        rollout_batch_size = measured.rollout_batch_sizes[0]
    return measured, measured.keep_rate, rollout_batch_size


def _summarized_runs(capture_dir: Path, names: List[str], hint: str = "") -> dict[str, Any]:
    from harness.checkpoints.stitch import read_run
    from harness.errors import ExitCode, HarnessError
    from harness.summary.summarize import summarize_run

    out: dict[str, Any] = {}
    for name in names:
        path = Path(capture_dir) / name
        if not (path / "status.json").is_file():
            raise HarnessError(f"no capture of {name} under {capture_dir}{hint}", ExitCode.NOT_FOUND)
        stitched = read_run(path)  # a resumed run: its lineage as one run
        out[name] = summarize_run(stitched.capture, stitched.parts).to_dict()
    return out


@command("seeds", on=plan_app)
def plan_seeds_command(
    conditions: Annotated[
        Optional[List[str]],
        typer.Argument(
            metavar="CONDITION",
            help="With --from-runs: one condition (its SD alone), or two (their pooled SD, as the report's).",
            show_default=False,
        ),
    ] = None,
    effect: Annotated[
        Optional[float],
        typer.Option(
            "--effect",
            help=f"The difference in mean reward to detect [default: {DEFAULT_EFFECT:g}, the summary's].",
            show_default=False,
        ),
    ] = None,
    sd: Annotated[
        Optional[float],
        typer.Option("--sd", help="The standard deviation of the mean reward across seeds.", show_default=False),
    ] = None,
    from_runs: Annotated[
        bool,
        typer.Option(
            "--from-runs",
            help="Take the SD from the seeds of CONDITION (or of the condition of a run of that name) in the "
            "captures; with two, their pooled SD.",
        ),
    ] = False,
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    json_: JsonOption = False,
    per_interim: Annotated[
        int,
        typer.Option("--per-interim", metavar="N", help="The AdaStop design's seeds per interim (harness decide's n)."),
    ] = 5,
    interims: Annotated[
        int, typer.Option("--interims", metavar="K", help="The AdaStop design's most interims (harness decide's K).")
    ] = 5,
) -> None:
    """How many seeds per condition a difference in mean reward needs: 80% power at alpha 0.05, two-sided.

    Usage: harness plan seeds --effect 0.02 --sd 0.015, or
    harness plan seeds --effect 0.02 --from-runs CONDITION [CONDITION] [--sim], or
    harness plan seeds [--sim] for each across-seed comparison of the captures.

    A two-sample t-test over the seeds' mean rewards (Colas et al. 2018, "How
    Many Random Seeds?"), its power from the noncentral t: the same function
    the summary's across-seed comparisons use. The SD: --sd; or with
    --from-runs A B the pooled SD of the two conditions' per-seed mean rewards
    over the steps every seed of both completed, the report's own; with
    --from-runs A the SD of A's seeds alone; with neither, each comparison's
    pooled SD, as the report has it. A table of seeds against power follows,
    then the seeds an AdaStop design (harness decide, --per-interim N
    --interims K) is expected to use, by simulation with a fixed random state.
    """
    from harness.stats import power as planner

    names = list(conditions or ())
    adaptive = _seeds_options(names, from_runs, sd, per_interim, interims)
    effect_from = planner.EFFECT_GIVEN if effect is not None else planner.EFFECT_DEFAULT
    wanted = effect if effect is not None else DEFAULT_EFFECT
    if sd is not None:
        result = planner.plan_seeds(wanted, sd, "given (--sd)", effect_from, adaptive)
    else:
        root = capture_root(capture_dir, sim)
        summary = _captures_summary(root, sim_root_hint(root))
        if not from_runs:
            plans = [
                (label, planner.plan_seeds(wanted, value, sd_from, effect_from, adaptive))
                for label, value, sd_from in _comparison_sds(summary, root)
            ]
            _print_comparison_plans(plans, wanted, effect_from, json_)
            return
        value, sd_from = _condition_sd(summary, root, names)
        result = planner.plan_seeds(wanted, value, sd_from, effect_from, adaptive)
    _print_seeds_plan(result, json_)


def _seeds_options(
    names: List[str], from_runs: bool, sd: Optional[float], per_interim: int, interims: int
) -> tuple[int, int]:
    """Check the options that go together; the AdaStop design as (seeds per interim, interims)."""
    from harness.errors import HarnessError
    from harness.stats.adaptive import Design, check_design

    if names and not from_runs:
        raise HarnessError(f"unexpected arguments {' '.join(names)}: conditions are read only with --from-runs")
    if from_runs and sd is not None:
        raise HarnessError("give either --sd X or --from-runs CONDITION [CONDITION] (one of them)")
    if from_runs and not 1 <= len(names) <= 2:
        raise HarnessError(
            f"--from-runs takes one condition or two, not {len(names)}: one for its own SD, two for their pooled SD"
        )
    check_design(Design(("a", "b"), per_interim=per_interim, interims=interims))
    return per_interim, interims


def _print_comparison_plans(plans: "list[tuple[str, SeedsPlan]]", wanted: float, effect_from: str, json_: bool) -> None:
    """A seeds plan for each across-seed comparison of the captures: one JSON document, or one block each."""
    if json_:
        import json

        first = plans[0][1]
        document = {
            "effect": wanted,
            "effect_from": effect_from,
            "alpha": first.alpha,
            "power": first.power,
            "comparisons": [{"comparison": label, **plan.to_dict()} for label, plan in plans],
        }
        typer.echo(json.dumps(document, indent=2, allow_nan=False))
        return
    for label, plan in plans:
        print_message(stdout(), f"{label}:")
        _print_seeds_plan(plan, json_=False)


def _captures_summary(capture_dir: Path, hint: str) -> "Summary":
    """The summary of the captures (not written), or one line when there is no run."""
    from harness.errors import ExitCode, HarnessError
    from harness.summary.publish import no_runs_message, summarize_captures_in

    summary = summarize_captures_in(capture_dir, hint=hint)
    document = summary.document
    if not document.runs:
        raise HarnessError(no_runs_message(f"under {capture_dir}", document.skipped, hint), ExitCode.NOT_FOUND)
    return summary


def _condition_key(document: "SummaryDocument", capture_dir: Path, name: str) -> str:
    """The condition a name stands for: a condition, or the condition of the run of that name."""
    from harness.errors import HarnessError

    if name in document.conditions:
        return name
    key = next((k for k, c in document.conditions.items() if name in c.runs), None)
    if key is None:
        known = ", ".join(sorted(document.conditions)) or "none"
        raise HarnessError(f"no condition or run {name} under {capture_dir} (conditions: {known})")
    return key


def _condition_sd(summary: "Summary", capture_dir: Path, names: List[str]) -> tuple[float, str]:
    """The SD to plan from and whose it is: one condition's seeds alone, or two conditions' pooled as the report's."""
    from harness.errors import HarnessError
    from harness.summary.seeds import describe_steps, pooled_steps

    document = summary.document
    keys = [_condition_key(document, capture_dir, name) for name in names]
    described = [key + (f" (the condition of run {name})" if key != name else "") for key, name in zip(keys, names)]
    if len(keys) == 2:
        if keys[0] == keys[1]:
            raise HarnessError(f"{names[0]} and {names[1]} are one condition, {keys[0]}: name two conditions")
        if summary.seed_comparisons is None:
            raise HarnessError("the captures' conditions could not be compared (see the warnings of harness summarize)")
        block = summary.seed_comparisons.between(keys[0], keys[1])
        if block.pooled_sd is None:
            raise HarnessError(
                f"{keys[0]} and {keys[1]} have {block.seeds} and {block.baseline_seeds} seeds with a reward: no spread "
                "across seeds to plan from; run a second seed, or give --sd"
            )
        return block.pooled_sd, (
            f"pooled SD of {described[0]} ({block.seeds} seeds) and {described[1]} ({block.baseline_seeds} seeds), "
            f"over the {block.steps} steps every seed of both completed: the report's seeds needed"
        )
    (key,) = keys
    condition = document.conditions[key]
    spread = condition.reward_mean
    if spread.sd is None:
        raise HarnessError(
            f"{key} has {spread.seeds} seed{'s' * (spread.seeds != 1)} with a reward: no spread across seeds to "
            "plan from; run a second seed, or give --sd"
        )
    steps = describe_steps(pooled_steps(document.runs, condition))
    return spread.sd, (
        f"SD of {described[0]} alone, its {spread.seeds} seeds over {steps}; the report pools the SD of both "
        "conditions compared (--from-runs A B gives that)"
    )


def _comparison_sds(summary: "Summary", capture_dir: Path) -> list[tuple[str, float, str]]:
    """(comparison, its pooled SD, whose) for each across-seed comparison of the captures with a spread."""
    from harness.errors import HarnessError
    from harness.summary.seeds import baseline_label, unique_blocks

    blocks = unique_blocks(b for comparison in summary.document.comparisons for b in comparison.across_seeds)
    found = [
        (
            f"{block.condition} against {baseline_label(block)}",
            block.pooled_sd,
            f"pooled SD of {block.condition} ({block.seeds} seeds) and {baseline_label(block)} "
            f"({block.baseline_seeds} seeds), over {block.steps} steps: the report's",
        )
        for block in blocks
        if block.pooled_sd is not None
    ]
    if not found:
        raise HarnessError(
            f"no across-seed comparison with a spread under {capture_dir} to take an SD from: give --sd X or "
            "--from-runs CONDITION [CONDITION]"
        )
    return [(label, sd, whose) for label, sd, whose in found if sd is not None]


def _print_seeds_plan(result: "SeedsPlan", json_: bool) -> None:
    if json_:
        import json

        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
        return
    from rich.table import Table

    from harness.stats.power import EFFECT_DEFAULT

    console = stdout()
    said = " (the default; --effect D for another)" if result.effect_from == EFFECT_DEFAULT else ""
    print_message(
        console,
        f"seeds per condition to detect a difference of {result.effect:g}{said} in mean reward with "
        f"{result.power:.0%} power at alpha {result.alpha:g} (two-sided t-test over the seeds' means)",
    )
    print_message(console, f"SD across seeds {result.sd:.4g}: {result.sd_from}")
    if result.needed.seeds is None:
        print_message(console, f"no number of seeds: {result.needed.why}")
    if result.table:
        table = Table(box=None, pad_edge=False)
        table.add_column("seeds per condition", justify="right")
        table.add_column("power", justify="right")
        table.add_column("")
        for seeds, power in result.table:
            table.add_row(str(seeds), f"{power:.3f}", "<- needed" if seeds == result.needed.seeds else "")
        console.print(table)
    if result.needed.seeds is not None:
        print_message(console, f"needed: {result.needed.seeds} seeds per condition (SD {result.sd:.4g})")
    found = result.adaptive
    if found is not None:
        print_message(
            console,
            f"AdaStop (harness decide, {found.per_interim} seeds per interim, at most {found.interims} interims, "
            f"alpha {found.alpha:g}): about {found.expected_seeds:.1f} seeds per condition expected (at most "
            f"{found.max_seeds}), deciding the right way in {found.power:.0%} of comparisons; by simulation with a "
            f"fixed random state ({found.random_state}): {found.source}, standard error {found.standard_error:.1f}",
        )


def _print_plan(result: "Plan") -> None:
    from rich.table import Table
    from rich.text import Text

    console = stdout()
    b, k = result.rollout_batch_size, result.keep_rate
    if result.measured is not None:
        m = result.measured
        console.print(
            f"keep rate {k:.3f} (drop rate {1 - k:.3f}): {m.kept} kept of {m.judged} groups judged over {m.steps} "
            f"complete steps; per step {m.step_keep_min:.3f} to {m.step_keep_max:.3f}"
        )
        for name, how in m.runs.items():
            console.print(f"  {name}: {how}")
        console.print(f"model: the mixture of the {m.steps} steps' keep rates, each weighted 1/{m.steps} (plan --help)")
        for check in result.checks:
            console.print(
                f"at O = {check.over_sampling_batch_size}: {check.one_batch_steps} of {check.steps} "
                f"filter steps needed one batch; the model says P(one batch) {check.p_one_batch:.4f}"
            )
    else:
        console.print(f"keep rate {k:.3f} (drop rate {1 - k:.3f})")
    console.print(f"B = {b} groups kept per step; target P(one batch) >= {result.target:g}")
    table = Table(box=None, pad_edge=False)
    for header in ("O", "P(one batch)", "E[batches]", "E[prompts]", "prompts / B"):
        table.add_column(Text(header), justify="right")
    candidates = list(result.candidates)
    shown = candidates
    if len(candidates) > 20:  # every candidate is in --json; the table keeps the shape readable
        step = max(1, (len(candidates) - 3) // 16)
        shown = candidates[: len(candidates) - 3 : step] + candidates[-3:]
    for c in shown:
        table.add_row(
            str(c.over_sampling_batch_size),
            f"{c.p_one_batch:.4f}",
            f"{c.expected_batches:.3f}",
            f"{c.expected_prompts:.1f}",
            f"{c.expected_prompts / b:.2f}",
        )
    console.print(table)
    best = candidates[-1]
    console.print(
        f"recommended: {OVER_SAMPLING_BATCH_SIZE_FLAG} {result.recommended} "
        f"(P(one batch) {best.p_one_batch:.4f}, E[batches] {best.expected_batches:.3f}, "
        f"{best.expected_prompts / b:.2f}x the prompts of one batch of B)"
    )
    for s in result.simulated:
        console.print(
            f"Monte Carlo of the rollout rule, O = {s.over_sampling_batch_size}, {s.trials} steps (seed {s.seed}): "
            f"one batch in {s.p_one_batch:.4f}, mean batches {s.mean_batches:.3f}"
        )
