"""The summary's figures across seeds (docs/summary.md, "Across seeds"), where there is a spread to show.

- `seeds-reward-<condition>.svg`, for each condition with at least two seeds
  pooled: the reward per step as the mean over its seeds, with the band from
  the lowest to the highest seed at each step and each seed faint;
- `seeds-<condition>-vs-<baseline condition>.svg` (or `-vs-baselines`), for
  each across-seed comparison with at least two seeds a side: each seed's
  mean reward as a dot per condition, and the difference of the means with
  its bootstrap interval.

Drawn from the summary document alone, as every figure of the summary
(`harness.summary.figures`, whose rules they follow: `harness.summary.svg`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from harness.summary import svg
from harness.summary.document import SeedComparison, SeedFigures, SummaryDocument, to_plain
from harness.summary.notes import steps_text
from harness.summary.palette import BASELINE, BASELINE_BAND, DIFFERENCE, STUDIED, ZERO_LINE
from harness.summary.seeds import baseline_label, per_step_rewards, pooled_steps, seed_values, unique_blocks
from harness.summary.svg import (
    REWARD_LABEL,
    STEP_LABEL,
    PlannedFigure,
    file_part,
    fit_to_width,
    marked,
    new_figure,
    shown_of_run,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _code_stamp() -> str:
    return svg.code_stamp(Path(__file__), Path(svg.__file__))


def condition_figure_path(out_dir: Path, condition: str) -> Path:
    """Where a condition's reward-across-seeds figure goes."""
    return out_dir / f"seeds-reward-{file_part(condition)}.svg"


def seed_comparison_figure_path(out_dir: Path, block: SeedComparison) -> Path:
    """Where an across-seed comparison's figure goes."""
    other = file_part(block.baseline_conditions[0]) if block.against == "baseline" else "baselines"
    return out_dir / f"seeds-{file_part(block.condition)}-vs-{other}.svg"


def _seed_count(n: int) -> str:
    return "one seed" if n == 1 else f"{n} seeds"


def condition_text(document: SummaryDocument, key: str) -> tuple[str, str]:
    """(title, caption) of a condition's reward-across-seeds figure: its mean and spread over its seeds."""
    condition = document.conditions[key]
    spread = condition.reward_mean
    subject = f"The mean reward before the filter of {key}" if condition.filter else f"The mean reward of {key}"
    if spread.mean is None:
        title = f"{subject}: no seed has a reward"
    else:
        sd = f", SD {spread.sd:.3f}" if spread.sd is not None else ""
        title = (
            f"{subject} over {_seed_count(spread.seeds)}: {spread.mean:.3f} "
            f"(seeds {spread.min:.3f} to {spread.max:.3f}{sd})"
        )
    title = marked(document, title, condition.runs)
    steps = pooled_steps(document.runs, condition)
    what = "over every finished answer" if condition.filter else "over the answers used for training"
    runs = ", ".join(f.run for f in condition.seeds)
    caption = (
        f"Mean reward per step {what}, the mean over the {_seed_count(len(condition.seeds))} of {key} ({runs}) at "
        f"each of the {steps_text(sorted(steps)) if steps else 'no steps'} every one completed; band: lowest to "
        "highest seed at each step; faint lines: each seed"
    )
    if condition.left_out:
        caption += "; left out: " + "; ".join(f"{run} ({why})" for run, why in condition.left_out.items())
    return title, caption + "."


def seed_comparison_text(document: SummaryDocument, block: SeedComparison) -> tuple[str, str]:
    """(title, caption) of an across-seed comparison's figure: the difference and whether its interval holds 0."""
    mine, theirs = block.condition, baseline_label(block)
    seeds = (
        f"{block.seeds} seeds each"
        if block.seeds == block.baseline_seeds
        else f"{block.seeds} seeds of {mine} and {block.baseline_seeds} of {theirs}"
    )
    difference, low, high = block.difference, block.interval_low, block.interval_high
    if difference is None:
        title = f"No comparison across seeds of {mine} and {theirs}: a side has no reward"
    else:
        against = theirs if block.seeds == block.baseline_seeds else "them"  # named already
        head = f"With {seeds}, {mine} read {difference:+.3f} against {against}"
        if low is None or high is None:
            title = f"{head}; no interval"
        elif low == high:
            title = f"{head}, and the seeds do not vary at all"
        else:
            where = "excludes" if block.interval_excludes_zero else "includes"
            title = f"{head}, and the 95% interval ({low:+.3f} to {high:+.3f}) {where} 0"
    runs = [f.run for key in (mine, *block.baseline_conditions) for f in _seeds_of(document, key)]
    title = marked(document, title, runs)
    condition = document.conditions.get(mine)
    what = "before the filter" if condition is not None and condition.filter else "of the answers used for training"
    caption = (
        f"Left: each dot is one seed's mean reward ({what}) over the {block.steps} steps every seed of both sides "
        f"completed, a bar each condition's mean over its seeds. Right: the difference of the means, {mine} minus "
        f"{theirs}, with its {block.confidence:.0%} percentile bootstrap interval over seeds "
        f"({block.bootstrap_resamples:,} resamples)"
    )
    if block.welch_p is not None:
        caption += f"; Welch p {block.welch_p:.3f}"
    if block.p_improvement is not None:
        caption += f"; {mine} higher in {block.p_improvement:.0%} of seed pairs"
    if block.seeds_needed is not None:
        sd = f", from the pooled SD {block.pooled_sd:.3f} of both sides' seeds" if block.pooled_sd is not None else ""
        caption += f"; about {block.seeds_needed} seeds each would detect a difference of this size (80% power{sd})"
    return title, caption + "."


def _seeds_of(document: SummaryDocument, key: str) -> list[SeedFigures]:
    condition = document.conditions.get(key)
    return list(condition.seeds) if condition is not None else []


def draw_condition(document: SummaryDocument, key: str) -> Figure:
    """A condition's reward across seeds (a matplotlib Figure)."""
    condition = document.conditions[key]
    title, caption = condition_text(document, key)
    figure, axes = new_figure(title, caption)
    steps = pooled_steps(document.runs, condition)
    runs = [document.runs[f.run] for f in condition.seeds if f.run in document.runs]
    look = STUDIED if condition.filter else BASELINE  # the filter's role, or a baseline's, as in every figure
    for i, (figures, run) in enumerate(zip(condition.seeds, runs)):
        xs, ys = run.steps.pick(run.steps.reward)
        chosen = [(x, y) for x, y in zip(xs, ys) if x in steps]
        axes.plot(
            [x for x, _ in chosen],
            [y for _, y in chosen],
            "-",
            color=look.color,
            alpha=0.25,
            lw=1,
            label="each seed" if i == 0 else None,
            gid=f"seeds-seed-{figures.run}",
        )

    per_step = {step: values for step, values in per_step_rewards(runs, steps).items() if values}
    xs = sorted(per_step)
    if xs:
        axes.fill_between(
            xs,
            [min(per_step[x]) for x in xs],
            [max(per_step[x]) for x in xs],
            color=look.color if condition.filter else BASELINE_BAND,
            alpha=0.15 if condition.filter else 0.6,
            lw=0,
            label="lowest to highest seed",
            gid="seeds-band",
        )
        axes.plot(
            xs,
            [sum(per_step[x]) / len(per_step[x]) for x in xs],
            "-",
            **look.line(),
            lw=2,
            label=f"mean over {_seed_count(len(runs))}",
            gid="seeds-mean",
        )
    axes.set_xlabel(STEP_LABEL)
    axes.set_ylabel(REWARD_LABEL)
    axes.legend(loc="best", fontsize=8.5)
    return figure


def draw_seed_comparison(document: SummaryDocument, block: SeedComparison) -> Figure:
    """An across-seed comparison (a matplotlib Figure): dots per condition, and the difference with its interval."""
    from matplotlib.figure import Figure  # heavy: loaded only when a figure is drawn

    title, caption = seed_comparison_text(document, block)
    figure = Figure(figsize=(9.0, 5.6))
    figure.subplots_adjust(left=0.09, right=0.98, top=0.86, bottom=0.24, wspace=0.35)
    fit_to_width(figure.suptitle(title, fontsize=11.5, gid="title"))
    fit_to_width(figure.text(0.01, 0.015, caption, fontsize=8.5, va="bottom", gid="caption"))
    dots, difference = figure.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    values = seed_values(document.runs, document.conditions, block)
    keys = [block.condition, *block.baseline_conditions]
    for i, key in enumerate(keys):
        found = list(values.get(key, {}).values())
        if not found:
            continue
        spread = [(j - (len(found) - 1) / 2) * min(0.06, 0.5 / max(1, len(found))) for j in range(len(found))]
        dots.plot(
            [i + offset for offset in spread],
            found,
            ls="none",
            **(STUDIED if i == 0 else BASELINE).line(),
            ms=7,
            gid=f"seeds-dots-{key}",
        )
        centre = sum(found) / len(found)
        dots.plot([i - 0.25, i + 0.25], [centre, centre], "-", color=(STUDIED if i == 0 else BASELINE).color, lw=2.5)
    dots.set_xticks(range(len(keys)), [f"{key}\n({len(values.get(key, {}))} seeds)" for key in keys], fontsize=8.5)
    dots.set_xlim(-0.6, len(keys) - 0.4)
    dots.set_ylabel("mean reward per seed (score, 0 to 1)")
    dots.grid(True, axis="y", alpha=0.3)
    difference.axhline(0.0, color=ZERO_LINE, lw=1, ls="--")
    if block.difference is not None:
        low, high = block.interval_low, block.interval_high
        if low is not None and high is not None:
            drawn = difference.errorbar(
                [0],
                [block.difference],
                yerr=[[block.difference - low], [high - block.difference]],
                fmt=DIFFERENCE.marker,
                color=DIFFERENCE.color,
                capsize=8,
                ms=8,
            )
            drawn.lines[0].set_gid("seeds-difference")
            for bars in drawn.lines[2]:
                bars.set_gid("seeds-interval")
        else:
            difference.plot([0], [block.difference], ls="none", **DIFFERENCE.line(), ms=8, gid="seeds-difference")
    difference.set_xticks([0], ["difference"])
    difference.set_xlim(-1, 1)
    difference.set_ylabel(f"{block.condition} minus baseline (reward)")
    difference.grid(True, axis="y", alpha=0.3)
    return figure


def drawable_conditions(document: SummaryDocument) -> list[str]:
    """The conditions with a spread to draw: two or more seeds pooled."""
    return [key for key, condition in document.conditions.items() if len(condition.seeds) >= 2]


def drawable_seed_comparisons(document: SummaryDocument) -> list[SeedComparison]:
    """The across-seed comparisons with a spread on both sides (two or more seeds each), once each."""
    blocks = unique_blocks(block for comparison in document.comparisons for block in comparison.across_seeds)
    return [block for block in blocks if block.seeds >= 2 and block.baseline_seeds >= 2]


def condition_fingerprint(document: SummaryDocument, key: str) -> str:
    """A hash of everything a condition's figure shows."""
    condition = document.conditions[key]
    data = orjson.dumps([_code_stamp(), key, to_plain(condition), [shown_of_run(document, n) for n in condition.runs]])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def seed_comparison_fingerprint(document: SummaryDocument, block: SeedComparison) -> str:
    """A hash of everything an across-seed comparison's figure shows."""
    runs = [f.run for key in (block.condition, *block.baseline_conditions) for f in _seeds_of(document, key)]
    data = orjson.dumps([_code_stamp(), to_plain(block), [shown_of_run(document, n) for n in runs]])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def planned_seed_figures(document: SummaryDocument, out_dir: Path) -> list[PlannedFigure]:
    """The figures across seeds of `document`, in the order they are drawn, none drawn yet."""
    planned = []
    for key in drawable_conditions(document):
        stamp = condition_fingerprint(document, key)
        planned.append(
            svg.planned_figure(
                condition_figure_path(out_dir, key), stamp, draw_condition, condition_text, document, key
            )
        )
    for block in drawable_seed_comparisons(document):
        stamp = seed_comparison_fingerprint(document, block)
        path = seed_comparison_figure_path(out_dir, block)
        planned.append(svg.planned_figure(path, stamp, draw_seed_comparison, seed_comparison_text, document, block))
    return planned
