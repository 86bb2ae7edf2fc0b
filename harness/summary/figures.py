"""The write-up's figures, drawn from the summary document alone (SVG, matplotlib Agg).

For each comparison (a run with a `compare` block):

- `rollout-time-<run>.svg` (figure 3.2): rollout seconds per step with the
  pause time taken out; the run's steps marked by the batches of prompts they
  needed, against the baseline's steps and the baseline's median.
- `reward-<run>.svg` (figure 3.3): mean reward per step, the run's reward
  (before the filter, for a filter run) against the baseline, with the band
  between the lowest and highest baseline run at each step.

Across seeds, where there is a spread to show: `harness.summary.seed_figures`.

Titles state the claim the numbers support, with the seed counts; captions
say what is plotted and over how many steps and seeds, axes carry units. A
figure drawn from a simulated run says SIMULATED in its title. Text stays text in the SVG
(`svg.fonttype: none`) so it can be read and searched, and each series has a
stable id (`gid`) so tests and readers can find it. Output is deterministic:
no date in the metadata, a fixed hash salt.

A figure is drawn again only when what it shows has changed: each SVG carries
a fingerprint of its inputs (the comparison, the columns it plots of each run
it names, and the code that draws it) as its Dublin Core identifier, and a figure
whose file already has the same fingerprint is left as it is, without even
loading matplotlib.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import orjson

from harness.summary import svg
from harness.summary.document import Comparison, RunSummary, SummaryDocument, to_plain
from harness.summary.palette import BASELINE, BASELINE_BAND, INCOMPLETE, STUDIED, batches_look
from harness.summary.sanity import number_text
from harness.summary.seed_figures import planned_seed_figures
from harness.summary.svg import (
    REWARD_LABEL,
    STEP_LABEL,
    PlannedFigure,
    Rendered,
    file_part,
    marked,
    new_figure,
    planned_figure,
    render_planned,
    shown_of_run,
)

if TYPE_CHECKING:  # matplotlib is loaded only when a figure is drawn
    from matplotlib.figure import Figure

ROLLOUT_LABEL = "rollout time, pause time taken out (s)"
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def figure_paths(out_dir: Path, run: str) -> dict[str, Path]:
    """Where the two figures of one comparison go."""
    name = file_part(run)
    return {"rollout_time": out_dir / f"rollout-time-{name}.svg", "reward": out_dir / f"reward-{name}.svg"}


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


def draw_rollout_time(document: SummaryDocument, comparison: Comparison) -> Figure:
    """The rollout-time figure (a matplotlib Figure) of one comparison."""
    run, baseline = comparison.run, comparison.baseline
    run_doc = document.runs[run]
    base_doc = document.runs.get(baseline)
    title, caption = rollout_time_text(document, comparison)
    figure, axes = new_figure(title, caption)

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
    figure, axes = new_figure(title, caption)

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


def _code_stamp() -> str:
    return svg.code_stamp(Path(__file__), Path(svg.__file__))


def fingerprint(document: SummaryDocument, comparison: Comparison) -> str:
    """A hash of everything the two figures of one comparison show (see the module doc)."""
    names = [comparison.run, comparison.baseline, *comparison.reward.baselines]
    plain = to_plain(replace(comparison, across_seeds=[]))  # those are drawn apart
    data = orjson.dumps([_code_stamp(), plain, [shown_of_run(document, name) for name in names]])
    return "sha256:" + hashlib.sha256(data).hexdigest()


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
            planned_figure(paths["rollout_time"], stamp, draw_rollout_time, rollout_time_text, document, comparison)
        )
        planned.append(planned_figure(paths["reward"], stamp, draw_reward, reward_text, document, comparison))
    return planned + planned_seed_figures(document, out_dir)


def render_figures(document: SummaryDocument, out_dir: Path, *, force: bool = False) -> Rendered:
    """Every figure of `document` in `out_dir`, drawing only those whose inputs changed (or all, `force`)."""
    return render_planned(planned_figures(document, out_dir), Path(out_dir), force=force)
