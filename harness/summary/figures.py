"""The write-up's figures, drawn from the summary document alone (SVG, matplotlib Agg).

For each comparison (a run with a `compare` block):

- `rollout-time-<run>.svg` (figure 3.2): rollout seconds per step with the
  pause time taken out; the run's steps marked by the batches of prompts they
  needed, against the baseline's steps and the baseline's median.
- `reward-<run>.svg` (figure 3.3): mean reward per step, the run's reward
  (before the filter, for a filter run) against the baseline, with the band
  between the lowest and highest baseline run at each step.

Across seeds (docs/summary.md, "Across seeds"), where there is a spread to show:

- `seeds-reward-<condition>.svg`, for each condition with at least two seeds
  pooled: the reward per step as the mean over its seeds, with the band from
  the lowest to the highest seed at each step and each seed faint;
- `seeds-<condition>-vs-<baseline condition>.svg` (or `-vs-baselines`), for
  each across-seed comparison with at least two seeds a side: each seed's
  mean reward as a dot per condition, and the difference of the means with
  its bootstrap interval.

Titles state the claim the numbers support, with the seed counts; captions
say what is plotted and over how many steps and seeds, axes carry units. A
figure drawn from a simulated run says SIMULATED in its title. Text stays text in the SVG
(`svg.fonttype: none`) so it can be read and searched, and each series has a
stable id (`gid`) so tests and readers can find it. Output is deterministic:
no date in the metadata, a fixed hash salt.

A figure is drawn again only when what it shows has changed: each SVG carries
a fingerprint of its inputs (the comparison, the columns it plots of each run
it names, and this module's code) as its Dublin Core identifier, and a figure
whose file already has the same fingerprint is left as it is, without even
loading matplotlib.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypeVar

from harness.fs.files import check_target
from harness.summary.document import Comparison, RunSummary, SeedComparison, SeedFigures, SummaryDocument
from harness.summary.palette import BASELINE, BASELINE_BAND, DIFFERENCE, INCOMPLETE, STUDIED, ZERO_LINE, batches_look
from harness.summary.sanity import number_text

if TYPE_CHECKING:  # matplotlib is loaded only when a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties
    from matplotlib.text import Text

STEP_LABEL = "step (Miles rollout id)"
ROLLOUT_LABEL = "rollout time, pause time taken out (s)"
REWARD_LABEL = "mean reward per answer (score, 0 to 1)"
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


SIMULATED = "SIMULATED"


_UNSAFE_IN_FILE_NAME = re.compile(r"[^A-Za-z0-9._@+=-]")


def file_part(name: str) -> str:
    """A run or condition name as part of a figure's file name: as it is when every character is safe in one; else
    those that are not as `_`, and a short hash of the name, so that no name (an experiment named `../x` in a
    manifest) leaves the directory or takes another name's file."""
    if not _UNSAFE_IN_FILE_NAME.search(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{_UNSAFE_IN_FILE_NAME.sub('_', name)[:64]}-{digest}"


def figure_paths(out_dir: Path, run: str) -> dict[str, Path]:
    """Where the two figures of one comparison go."""
    name = file_part(run)
    return {"rollout_time": out_dir / f"rollout-time-{name}.svg", "reward": out_dir / f"reward-{name}.svg"}


def condition_figure_path(out_dir: Path, condition: str) -> Path:
    """Where a condition's reward-across-seeds figure goes."""
    return out_dir / f"seeds-reward-{file_part(condition)}.svg"


def seed_comparison_figure_path(out_dir: Path, block: SeedComparison) -> Path:
    """Where an across-seed comparison's figure goes."""
    other = file_part(block.baseline_conditions[0]) if block.against == "baseline" else "baselines"
    return out_dir / f"seeds-{file_part(block.condition)}-vs-{other}.svg"


def marked(document: SummaryDocument, title: str, runs: Sequence[str]) -> str:
    """The title, with SIMULATED before it when any of `runs` was made by the simulator."""
    simulated = any(document.runs[name].made_by_simulator for name in runs if name in document.runs)
    return f"{SIMULATED}: {title}" if simulated else title


def _word(n: int) -> str:
    return _WORDS.get(n, str(n))


def _batches(n: int) -> str:
    return f"{_word(n)} batch" if n == 1 else f"{_word(n)} batches"


def _seed_text(run_doc: RunSummary) -> str:
    steps = run_doc.aggregates.steps
    seed = run_doc.seed
    return f"{steps} steps" + (f" with seed {seed}" if seed is not None else "")


def rollout_time_text(document: SummaryDocument, comparison: Comparison) -> tuple[str, str]:
    """(title, caption) of the rollout-time figure: the claim the ratios support."""
    run = comparison.run
    baseline = comparison.baseline
    run_doc = document.runs[run]
    base_doc = document.runs.get(baseline)
    groups = comparison.by_batches
    ratios = [(int(k), v.ratio) for k, v in groups.items() if v.ratio is not None]
    if ratios and len(ratios) == 1:
        ((k, ratio),) = ratios
        title = f"Every step needed {_batches(k)} of prompts and took {number_text(ratio, 1)}x the rollout time without the filter"
    elif ratios:
        (k0, r0), rest = ratios[0], ratios[1:]
        title = (
            f"Steps that needed {_batches(k0)} of prompts took {number_text(r0, 1)}x the rollout time without the filter, "
            + (", ".join(f"{_batches(k)} {number_text(r, 1)}x" for k, r in rest))
        )
    elif base_doc is None:
        title = f"Rollout time per step of {run} (no capture of the baseline {baseline})"
    else:
        title = f"Rollout time per step of {run} against {baseline}"
    title = marked(document, title, [run, baseline])
    caption = f"Rollout seconds per step with the pause time taken out, {_seed_text(run_doc)}: {run}"
    over, batch = run_doc.over_sampling_batch_size, run_doc.rollout_batch_size
    if groups and over and batch:
        caption += (
            f", marked by the batches of {over} prompts each step needed (a step that dropped more than "
            f"{over - batch} groups needed a second batch)"
        )
    base_median = comparison.baseline_rollout_time_adjusted_median_s
    if base_doc is not None:
        median = f", median {number_text(base_median, 1)} s" if base_median is not None else ""
        caption += f"; against {baseline} ({_seed_text(base_doc)}{median})."
    else:
        caption += "."
    return title, caption


def reward_text(document: SummaryDocument, comparison: Comparison) -> tuple[str, str]:
    """(title, caption) of the reward figure."""
    run = comparison.run
    run_doc = document.runs[run]
    reward = comparison.reward
    mean, low, high = reward.run_mean, reward.spread_min, reward.spread_max
    subject = "The mean reward before the filter" if run_doc.filter else f"The mean reward of {run}"
    if mean is None:
        title = f"No comparable reward: {run} did not log the reward before the filter"
    elif low is None or high is None:
        title = f"{subject}: no baseline run to compare with"
    elif mean > high:
        title = f"{subject} read higher than every baseline run"
    elif mean < low:
        title = f"{subject} read lower than every baseline run"
    else:
        title = f"{subject} read within the spread of the baseline runs"
    title = marked(document, title, [run, comparison.baseline, *reward.baselines])
    what = "over every finished answer" if run_doc.filter else "over the answers used for training"
    caption = f"Mean reward per step {what}, {_seed_text(run_doc)}: {run} against {comparison.baseline}"
    found = [name for name, value in reward.baselines.items() if value is not None]
    if len(found) >= 2:
        caption += f"; band: lowest to highest of {len(found)} baseline runs at each step ({', '.join(found)})"
    if reward.steps_compared:
        caption += f"; higher in {reward.steps_higher} of {reward.steps_compared} steps"
    return title, caption + "."


def _adjusted(run_doc: Optional[RunSummary], *, complete: bool = True) -> tuple[list[int], list[float]]:
    if run_doc is None:
        return [], []
    return run_doc.steps.pick(run_doc.steps.rollout_time_adjusted_s, complete=complete)


def _rewards(run_doc: Optional[RunSummary], *, complete: bool = True) -> tuple[list[int], list[float]]:
    if run_doc is None:
        return [], []
    return run_doc.steps.pick(run_doc.steps.reward, complete=complete)


SVG_DPI = 72  # matplotlib writes an SVG at 72 dots per inch: a dot is a point


def fit_to_width(text: Text) -> Text:
    """Break a figure's `text` into the lines matplotlib's `wrap=True` gives it in an SVG, measuring each once.

    `wrap=True` measures a growing line word by word, each measure a text
    layout, and again at every layout of the figure: most of the time a figure
    takes to draw. Here the lines break where wrap=True breaks them (the
    first words too wide for the room between the text and the figure's edge,
    at the SVG's dots), found by halving, so a line of n words is measured
    about log2(n) times, and the rest of a paragraph that fits once; a wider
    prefix of words is never narrower.
    """
    figure = text.get_figure(root=True)
    if figure is None:  # on no figure: no edge to fit to
        return text
    x, _ = text.get_position()  # in figure fractions: a figure's title and caption
    figure_width = figure.get_figwidth() * SVG_DPI
    left_room, right_room = figure_width * (1 - x), figure_width * x
    alignment = text.get_horizontalalignment()
    room = left_room if alignment == "left" else right_room if alignment == "right" else 2 * min(left_room, right_room)
    font = text.get_fontproperties().copy()  # a key of the widths measured: never changed after

    def fits(words: list[str]) -> bool:
        return math.ceil(_line_width(" ".join(words), font)) <= room

    lines = []
    for paragraph in text.get_text().split("\n"):
        words = paragraph.split(" ")
        while words:
            if len(words) == 1 or fits(words):  # the last line of each paragraph, and most titles whole
                lines.append(" ".join(words))
                break
            # the first n >= 2 whose first n words are too wide; a line keeps at least one word
            low, high = 2, len(words)
            while low < high:
                middle = (low + high) // 2
                if fits(words[:middle]):
                    low = middle + 1
                else:
                    high = middle
            lines.append(" ".join(words[: low - 1]))
            words = words[low - 1 :]
    text.set_text("\n".join(lines))
    return text


@functools.lru_cache(maxsize=4096)
def _line_width(line: str, font: FontProperties) -> float:
    """The width of one line of text in `font` at the SVG's dots, as `wrap=True` measures it.

    Remembered: where TensorBoard's writer is installed, `harness summarize`
    draws each figure it changed twice (the SVG, then the board's image of
    it), and a line's width depends on its text and its font's properties
    alone (the harness never changes matplotlib's font settings).
    """
    from matplotlib import cbook
    from matplotlib.textpath import text_to_path

    width, _, _ = text_to_path.get_text_width_height_descent(line, font, ismath=cbook.is_math_text(line))
    return float(width)


def _new_figure(title: str, caption: str) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(9.0, 5.6))
    figure.subplots_adjust(left=0.09, right=0.98, top=0.88, bottom=0.2)
    axes = figure.add_subplot()
    fit_to_width(figure.suptitle(title, fontsize=11.5, gid="title"))
    fit_to_width(figure.text(0.01, 0.015, caption, fontsize=8.5, va="bottom", gid="caption"))
    axes.grid(True, alpha=0.3)
    from matplotlib.ticker import MaxNLocator

    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    return figure, axes


def draw_rollout_time(document: SummaryDocument, comparison: Comparison) -> Figure:
    """The rollout-time figure (a matplotlib Figure) of one comparison."""
    run, baseline = comparison.run, comparison.baseline
    run_doc = document.runs[run]
    base_doc = document.runs.get(baseline)
    title, caption = rollout_time_text(document, comparison)
    figure, axes = _new_figure(title, caption)

    xs, ys = _adjusted(base_doc)
    if xs:
        axes.plot(xs, ys, "-", **BASELINE.line(), ms=4, label=f"{baseline}", gid="rollout-baseline")
    base_median = comparison.baseline_rollout_time_adjusted_median_s
    if base_median is not None:
        axes.axhline(
            base_median,
            color=BASELINE.color,
            ls="--",
            lw=1,
            label=f"{baseline} median {number_text(base_median, 1)} s",
            gid="rollout-baseline-median",
        )

    table = run_doc.steps
    rows = [
        (step, batches, adjusted)
        for step, done, batches, adjusted in zip(
            table.step, table.complete, table.batches, table.rollout_time_adjusted_s
        )
        if done and adjusted is not None
    ]
    groups = sorted({batches for _, batches, _ in rows if batches is not None})
    for k in groups:
        chosen = [(step, adjusted) for step, batches, adjusted in rows if batches == k]
        stats = comparison.by_batches.get(str(k))
        ratio = f", {number_text(stats.ratio, 1)}x" if stats is not None and stats.ratio is not None else ""
        axes.plot(
            [step for step, _ in chosen],
            [adjusted for _, adjusted in chosen],
            ls="none",
            **batches_look(k).line(),
            ms=8,
            label=f"{run}: {_batches(k)} ({len(chosen)} steps{ratio})",
            gid=f"rollout-batches-{k}",
        )
    rest = [(step, adjusted) for step, batches, adjusted in rows if batches is None]
    if rest:
        axes.plot(
            [step for step, _ in rest],
            [adjusted for _, adjusted in rest],
            ls="none",
            **STUDIED.line(),
            ms=7,
            label=f"{run}",
            gid="rollout-run",
        )
    xs, ys = _adjusted(run_doc, complete=False)
    if xs:
        axes.plot(
            xs,
            ys,
            ls="none",
            **INCOMPLETE.line(),
            ms=8,
            label="incomplete step (not in medians)",
            gid="rollout-incomplete",
        )
    axes.set_xlabel(STEP_LABEL)
    axes.set_ylabel(ROLLOUT_LABEL)
    axes.set_ylim(bottom=0)
    axes.legend(loc="best", fontsize=8.5)
    return figure


def draw_reward(document: SummaryDocument, comparison: Comparison) -> Figure:
    """The reward figure (a matplotlib Figure) of one comparison."""
    run, baseline = comparison.run, comparison.baseline
    run_doc = document.runs[run]
    base_doc = document.runs.get(baseline)
    title, caption = reward_text(document, comparison)
    figure, axes = _new_figure(title, caption)

    per_step: dict[int, list[float]] = {}
    found = [name for name, value in comparison.reward.baselines.items() if value is not None]
    for name in found:
        xs, ys = _rewards(document.runs.get(name))
        for x, y in zip(xs, ys):
            per_step.setdefault(x, []).append(y)
    if len(found) >= 2 and per_step:
        steps = sorted(per_step)
        axes.fill_between(
            steps,
            [min(per_step[s]) for s in steps],
            [max(per_step[s]) for s in steps],
            color=BASELINE_BAND,
            alpha=0.7,
            lw=0,
            label=f"baselines ({len(found)} runs): lowest to highest",
            gid="reward-band",
        )
    xs, ys = _rewards(base_doc)
    if xs:
        axes.plot(xs, ys, "-", **BASELINE.line(), ms=4, label=f"{baseline}", gid="reward-baseline")
    label = f"{run}: reward before the filter" if run_doc.filter else run
    xs, ys = _rewards(run_doc)
    if xs:
        axes.plot(xs, ys, "-", **STUDIED.line(), label=label, gid="reward-run")
    xs, ys = _rewards(run_doc, complete=False)
    if xs:
        axes.plot(
            xs,
            ys,
            ls="none",
            **INCOMPLETE.line(),
            label="incomplete step (not in means)",
            gid="reward-run-incomplete",
        )
    axes.set_xlabel(STEP_LABEL)
    axes.set_ylabel(REWARD_LABEL)
    axes.legend(loc="best", fontsize=8.5)
    return figure


# --------------------------------------------------------------------------- across seeds


def _seed_count(n: int) -> str:
    return "one seed" if n == 1 else f"{n} seeds"


def condition_text(document: SummaryDocument, key: str) -> tuple[str, str]:
    """(title, caption) of a condition's reward-across-seeds figure: its mean and spread over its seeds."""
    from harness.summary.notes import steps_text
    from harness.summary.seeds import pooled_steps

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
    from harness.summary.seeds import baseline_label

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
    from harness.summary.seeds import pooled_steps

    condition = document.conditions[key]
    title, caption = condition_text(document, key)
    figure, axes = _new_figure(title, caption)
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
    from harness.summary.seeds import per_step_rewards

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
    from matplotlib.figure import Figure

    from harness.summary.seeds import seed_values

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
    from harness.summary.seeds import unique_blocks

    blocks = unique_blocks(block for comparison in document.comparisons for block in comparison.across_seeds)
    return [block for block in blocks if block.seeds >= 2 and block.baseline_seeds >= 2]


def save_svg(draw: Callable[[], Figure], path: Path, title: str, caption: str, fingerprint: str) -> Path:
    """Draw the figure and write it as SVG (text as text, no date), with its title, caption and fingerprint as
    metadata. A `path` that may not be written is refused before drawing, the costly part."""
    import io

    import matplotlib

    from harness.capture import write_text_atomic

    check_target(path)
    figure = draw()
    svg = io.BytesIO()
    metadata = {"Title": title, "Description": caption, "Identifier": fingerprint, "Date": None}
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "miles-gb10-lab"}):
        figure.savefig(svg, format="svg", metadata=metadata)
    write_text_atomic(path, svg.getvalue().decode("utf-8"))  # whole or not at all, and the umask's mode
    return path


@dataclass
class Rendered:
    """The figures of a document: those drawn now and those already up to date."""

    drawn: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)

    @property
    def paths(self) -> list[Path]:
        return self.drawn + self.unchanged


_IDENTIFIER = re.compile(rb"<dc:identifier>([^<]*)</dc:identifier>")


@functools.lru_cache(maxsize=4)
def code_stamp(source: Path) -> str:
    """What else decides a figure's look: the code of the module `source` that draws it and matplotlib's version."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        matplotlib_version = version("matplotlib")
    except PackageNotFoundError:  # pragma: no cover - matplotlib is a dependency
        matplotlib_version = "?"
    return hashlib.sha256(source.read_bytes()).hexdigest()[:16] + "/" + matplotlib_version


def _code_stamp() -> str:
    return code_stamp(Path(__file__))


def fingerprint(document: SummaryDocument, comparison: Comparison) -> str:
    """A hash of everything the two figures of one comparison show (see the module doc)."""
    from dataclasses import replace

    import orjson

    from harness.summary.document import to_plain

    names = [comparison.run, comparison.baseline, *comparison.reward.baselines]
    plain = to_plain(replace(comparison, across_seeds=[]))  # those are drawn apart
    data = orjson.dumps([_code_stamp(), plain, [_shown(document, name) for name in names]])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _shown(document: SummaryDocument, name: str) -> Optional[list[object]]:
    """What a figure shows of one run (None when it is not in the document)."""
    run = document.runs.get(name)
    if run is None:
        return None
    table = run.steps
    return [
        name,
        run.seed,
        run.filter,
        run.made_by_simulator,
        run.rollout_batch_size,
        run.over_sampling_batch_size,
        run.aggregates.steps,
        table.step,
        table.complete,
        table.rollout_time_adjusted_s,
        table.batches,
        table.reward,
    ]


def condition_fingerprint(document: SummaryDocument, key: str) -> str:
    """A hash of everything a condition's figure shows."""
    import orjson

    from harness.summary.document import to_plain

    condition = document.conditions[key]
    data = orjson.dumps([_code_stamp(), key, to_plain(condition), [_shown(document, n) for n in condition.runs]])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def seed_comparison_fingerprint(document: SummaryDocument, block: SeedComparison) -> str:
    """A hash of everything an across-seed comparison's figure shows."""
    import orjson

    from harness.summary.document import to_plain

    runs = [f.run for key in (block.condition, *block.baseline_conditions) for f in _seeds_of(document, key)]
    data = orjson.dumps([_code_stamp(), to_plain(block), [_shown(document, n) for n in runs]])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def svg_head(path: Path) -> bytes:
    """The top of an existing SVG, where matplotlib writes the metadata (b"" when there is no regular file)."""
    from harness.capture.bounded import Unreadable, open_regular

    try:  # a regular file only: a FIFO in a figure's place must not hang the read (the writer refuses it)
        with open_regular(path) as handle:
            head: bytes = handle.read(16384)
            return head
    except (OSError, Unreadable):
        return b""


def _fingerprint_of(path: Path) -> Optional[bytes]:
    """The fingerprint an existing SVG carries (None when there is no such file or none in it)."""
    match = _IDENTIFIER.search(svg_head(path))
    return match.group(1) if match else None


@dataclass(frozen=True)
class PlannedFigure:
    """One figure of a document: its file, the fingerprint of what it shows, and how to draw it and word it."""

    path: Path
    stamp: str
    draw: Callable[[], Figure]
    text: Callable[[], tuple[str, str]]  # (title, caption)


def planned_figures(document: SummaryDocument, out_dir: Path) -> list[PlannedFigure]:
    """Every figure of `document` (see the module doc), in the order they are drawn, none drawn yet."""
    out_dir = Path(out_dir)
    planned = []
    for comparison in document.comparisons:
        if comparison.run not in document.runs:
            continue
        paths = figure_paths(out_dir, comparison.run)
        stamp = fingerprint(document, comparison)
        planned.append(
            _planned(paths["rollout_time"], stamp, draw_rollout_time, rollout_time_text, document, comparison)
        )
        planned.append(_planned(paths["reward"], stamp, draw_reward, reward_text, document, comparison))
    for key in drawable_conditions(document):
        stamp = condition_fingerprint(document, key)
        planned.append(
            _planned(condition_figure_path(out_dir, key), stamp, draw_condition, condition_text, document, key)
        )
    for block in drawable_seed_comparisons(document):
        stamp = seed_comparison_fingerprint(document, block)
        path = seed_comparison_figure_path(out_dir, block)
        planned.append(_planned(path, stamp, draw_seed_comparison, seed_comparison_text, document, block))
    return planned


_Shown = TypeVar("_Shown")


def _planned(
    path: Path,
    stamp: str,
    draw: Callable[[SummaryDocument, _Shown], Figure],
    text: Callable[[SummaryDocument, _Shown], tuple[str, str]],
    document: SummaryDocument,
    shown: _Shown,
) -> PlannedFigure:
    """The figure of what `shown` is (a comparison, a condition, a pair of conditions), drawn and worded when asked."""
    return PlannedFigure(
        path, stamp, functools.partial(draw, document, shown), functools.partial(text, document, shown)
    )


def render_figures(document: SummaryDocument, out_dir: Path, *, force: bool = False) -> Rendered:
    """Every figure of `document` in `out_dir`, drawing only those whose inputs changed (or all, `force`)."""
    out_dir = Path(out_dir)
    rendered = Rendered()
    for planned in planned_figures(document, out_dir):
        if not force and _fingerprint_of(planned.path) == planned.stamp.encode():
            rendered.unchanged.append(planned.path)
            continue
        use_agg()
        out_dir.mkdir(parents=True, exist_ok=True)
        title, caption = planned.text()
        rendered.drawn.append(save_svg(planned.draw, planned.path, title, caption, planned.stamp))
    return rendered


@functools.lru_cache(maxsize=1)
def use_agg() -> None:
    """matplotlib's Agg backend, once: figures are files, never windows."""
    import matplotlib

    matplotlib.use("Agg")
