"""The adaptive comparisons where people look: the report's "Adaptive comparison" section and its figure.

`decision-<name>.svg`, one per record: a panel per experiment, each seed's
value as a dot at the interim that ran it and the mean of the values so far
after each interim, the first experiment in the studied role's look and the
others in the baseline's (harness.summary.palette); the title gives the
decision (SIMULATED first for simulated runs), the caption the design.
Drawn from the summary document alone (its `decisions` block, as recorded),
and again only when what it shows has changed (its fingerprint), as every
figure of the summary.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import orjson

from harness.summary.document import DecisionSummary, SummaryDocument, to_plain
from harness.summary.palette import BASELINE, STUDIED
from harness.summary.svg import PlannedFigure, Rendered, code_stamp, file_part, fit_to_width, render_planned

if TYPE_CHECKING:
    from matplotlib.figure import Figure

INTERIM_LABEL = "interim"
METRIC_LABELS = {
    "reward": "mean reward per seed (score, 0 to 1)",
    "reward-unfiltered": "mean reward before the filter per seed (score, 0 to 1)",
    "rollout-time": "median rollout time, pauses out, per seed (trainer s)",
    "dropped-groups": "dropped groups per seed",
}


def decision_figure_path(out_dir: Path, block: DecisionSummary) -> Path:
    """Where an adaptive comparison's figure goes."""
    return Path(out_dir) / f"decision-{file_part(block.name)}.svg"


def decision_text(document: SummaryDocument, block: DecisionSummary) -> tuple[str, str]:
    """(title, caption) of an adaptive comparison's figure."""
    decided = [c for c in block.comparisons if c.decision != "continue"]
    if len(block.comparisons) == 1:
        title = block.comparisons[0].answer
    else:
        title = (
            f"{block.metric}: {len(decided)} of {len(block.comparisons)} comparisons decided after "
            f"{len(block.interims)} interim{'s' * (len(block.interims) != 1)}"
        )
    if block.simulated:
        title = f"SIMULATED: {title}"
    caption = (
        f"Each dot is one seed's value ({METRIC_LABELS.get(block.metric, block.metric)}, over the {block.steps} "
        f"steps every seed completed) at the interim that ran it; the line, each experiment's mean over its values "
        f"so far. AdaStop, {block.per_interim} seeds per interim, at most {block.max_interims} interims, alpha "
        f"{block.alpha:g} two-sided over the family, {block.permutations:,} permutations, random state "
        f"{block.random_state}; as recorded in {block.record}"
    )
    if len(block.comparisons) > 1:
        caption += ". " + "; ".join(c.answer for c in block.comparisons)
    return title, caption + "."


def draw_decision(document: SummaryDocument, block: DecisionSummary) -> Figure:
    """An adaptive comparison's figure (a matplotlib Figure)."""
    from matplotlib.figure import Figure

    title, caption = decision_text(document, block)
    count = len(block.experiments)
    figure = Figure(figsize=(max(9.0, 3.2 * count), 5.6))
    figure.subplots_adjust(left=0.08, right=0.98, top=0.86, bottom=0.24, wspace=0.12)
    fit_to_width(figure.suptitle(title, fontsize=11.5, gid="title"))
    fit_to_width(figure.text(0.01, 0.015, caption, fontsize=8.5, va="bottom", gid="caption"))
    panels = figure.subplots(1, count, sharey=True, squeeze=False)[0]
    for index, (experiment, axes) in enumerate(zip(block.experiments, panels)):
        look = STUDIED if index == 0 else BASELINE
        xs: list[float] = []
        ys: list[float] = []
        means_x: list[int] = []
        means_y: list[float] = []
        so_far: list[float] = []
        for interim in block.interims:
            values = interim.values.get(experiment, [])
            width = min(0.3, 0.6 / max(1, len(values)))
            xs += [interim.interim + (j - (len(values) - 1) / 2) * width / 2 for j in range(len(values))]
            ys += values
            so_far += values
            if so_far:
                means_x.append(interim.interim)
                means_y.append(sum(so_far) / len(so_far))
        axes.plot(xs, ys, ls="none", **look.line(), ms=6, alpha=0.8, gid=f"decision-values-{experiment}")
        axes.plot(means_x, means_y, "-", color=look.color, lw=2, gid=f"decision-mean-{experiment}")
        axes.set_title(experiment, fontsize=10)
        axes.set_xlabel(INTERIM_LABEL)
        last = max(1, len(block.interims))
        axes.set_xticks(range(1, last + 1))
        axes.set_xlim(0.5, last + 0.5)
        axes.grid(True, alpha=0.3)
    panels[0].set_ylabel(METRIC_LABELS.get(block.metric, block.metric))
    return figure


def decision_fingerprint(block: DecisionSummary) -> str:
    """A hash of everything the figure shows (the block, this module's code, matplotlib's version)."""
    data = orjson.dumps([code_stamp(Path(__file__)), to_plain(block)])
    return "sha256:" + hashlib.sha256(data).hexdigest()


def render_decision_figures(document: SummaryDocument, out_dir: Path, *, force: bool = False) -> Rendered:
    """Each adaptive comparison's figure in `out_dir`, drawn only where what it shows changed (as render_figures;
    the summary's commands call both)."""
    return render_planned(planned_decision_figures(document, out_dir), Path(out_dir), force=force)


def planned_decision_figures(document: SummaryDocument, out_dir: Path) -> list[PlannedFigure]:
    """The figure of each adaptive comparison with an interim recorded."""
    return [
        PlannedFigure(
            decision_figure_path(out_dir, block),
            decision_fingerprint(block),
            functools.partial(draw_decision, document, block),
            functools.partial(decision_text, document, block),
        )
        for block in document.decisions
        if block.interims
    ]


# --------------------------------------------------------------------------- the report


def adaptive_section(
    document: SummaryDocument, figure_dir: Optional[Path], markdown_text: Callable[[str], str]
) -> list[str]:
    """The report's "Adaptive comparison" section: per record, the design, each answer, each interim, the figure.

    `markdown_text`: the report's one rule for text from outside (harness.summary.report)."""
    from urllib.parse import quote

    if not document.decisions:
        return []
    out = ["## Adaptive comparison", ""]
    out.append(
        "Seeds run on demand by `harness decide` until AdaStop (Mathieu et al., the `adastop` package) decided each "
        "comparison, with the two-sided family-wise error held at alpha. The values are as recorded when each "
        "interim was decided, never recomputed; no p-value is given, for the design was not fixed."
    )
    out.append("")
    for block in document.decisions:
        heading = f"### {markdown_text(block.name)}" + (" (SIMULATED)" if block.simulated else "")
        out += [heading, ""]
        out.append(
            f"{markdown_text(block.metric)} of {', '.join(map(markdown_text, block.experiments))}: "
            f"{block.per_interim} seeds per interim, at most {block.max_interims} interims, alpha {block.alpha:g}, "
            f"{block.permutations:,} permutations, random state {block.random_state}, over the {block.steps} steps "
            f"every seed completed; recorded in `{markdown_text(block.record)}`."
        )
        out.append("")
        out += [f"- **{markdown_text(c.answer)}**" for c in block.comparisons]
        out.append("")
        header = ["interim", *(f"{name} seeds (mean)" for name in block.experiments), "decisions", "alpha spent"]
        rows = []
        so_far: dict[str, list[float]] = {name: [] for name in block.experiments}
        for interim in block.interims:
            cells = [str(interim.interim)]
            for name in block.experiments:
                so_far[name] += interim.values.get(name, [])
                seeds = interim.seeds.get(name)
                shown = so_far[name]
                mean = f" ({sum(shown) / len(shown):.4g})" if shown else ""
                cells.append((_seeds(seeds) if seeds else "-") + mean)
            cells.append("; ".join(f"{c} {d}" for c, d in interim.decisions.items()))
            cells.append(f"{interim.alpha_spent:.4f}")
            rows.append(cells)
        out += ["| " + " | ".join(map(markdown_text, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
        out += ["| " + " | ".join(map(markdown_text, row)) + " |" for row in rows]
        out.append("")
        swaps = [line for interim in block.interims for line in interim.replaced]
        out += [f"- {markdown_text(line)}" for line in swaps + block.notes]
        if swaps or block.notes:
            out.append("")
        path = decision_figure_path(Path("."), block)
        if block.interims and (figure_dir is None or (Path(figure_dir) / path.name).exists()):
            title, caption = (markdown_text(text) for text in decision_text(document, block))
            out += [f"![{title}]({quote(path.name)})", "", f"*{title}.* {caption}", ""]
    return out


def _seeds(seeds: list[int]) -> str:
    """`1-5`, or `1-4, 6`."""
    runs: list[str] = []
    start = previous = seeds[0]
    for seed in [*seeds[1:], None]:
        if seed is not None and seed == previous + 1:
            previous = seed
            continue
        runs.append(str(start) if start == previous else f"{start}-{previous}")
        if seed is not None:
            start = previous = seed
    return ", ".join(runs)
