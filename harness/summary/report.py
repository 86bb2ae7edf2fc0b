"""report.md: the headline numbers in tables, the verdicts, the figures embedded.

Drawn from the summary document alone, so a report can be rebuilt from a
published JSON. Numbers are rounded here, for display only: seconds to 0.1,
rewards to 0.001, ratios to 0.01, step-time sums in minutes to 0.1. A dash
means null in the JSON (not logged or not applicable). Every reward figure
says where it came from: `printed` by Miles, or `derived` from what it
printed (a Miles that does not print the reward before the filter).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Optional, Sequence
from urllib.parse import quote

from harness.capture import write_text_atomic
from harness.summary.adaptive_report import adaptive_section
from harness.summary.document import Aggregates, Comparison, SeedComparison, SummaryDocument
from harness.summary.figures import figure_paths, reward_text, rollout_time_text
from harness.summary.guard_figure import figure_text, guard_figure_path
from harness.summary.sanity import number_text
from harness.summary.seed_figures import (
    condition_figure_path,
    condition_text,
    drawable_conditions,
    drawable_seed_comparisons,
    seed_comparison_figure_path,
    seed_comparison_text,
)
from harness.summary.seeds import baseline_label, unique_blocks

REPORT_FILE_NAME = "report.md"
CLEAN_DEFINITION = (
    "A step is *clean* when no heat-guard pause overlaps its rollout, so its rollout time needs no correction; "
    'the clean median is the raw rollout time\'s median over the clean complete steps (docs/summary.md, "The rules").'
)
DASH = "-"


_MARKDOWN = re.compile(r"[\\`*_\[\]|~#]")
# C0 and C1 controls, the line and paragraph separators, and the bidirectional marks (which reorder what is shown)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def markdown_text(text: str) -> str:
    """Text from outside (a run or directory name, a note quoting one) as Markdown that shows it as written.

    HTML's `<`, `>` and `&` become entities, so `<img src=x onerror=...>` is
    text, never a tag; Markdown's marks (`` \\ ` * _ [ ] | ~ # ``) are
    backslash-escaped, so no name makes emphasis, a link, a code span or a
    table cell; control characters, the line and paragraph separators and
    the bidirectional marks are escaped as `\\x1b`, `\\u2028`, `\\u202e` (a line
    break would end a table row). Every table cell and every line of the
    report that holds such text goes through it: the one rule.
    """
    text = html.escape(text, quote=False)
    text = _MARKDOWN.sub(lambda found: "\\" + found.group(0), text)
    return _CONTROL.sub(lambda found: repr(found.group(0))[1:-1], text)


def _num(value: Optional[float], digits: int, suffix: str = "") -> str:
    return DASH if value is None else f"{number_text(value, digits)}{suffix}"


def _int(value: Optional[float]) -> str:
    if value is None:
        return DASH
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e9 else number_text(value, 1)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table; every header and cell is text, shown as written (`markdown_text`): pass them unescaped."""
    lines = ["| " + " | ".join(map(markdown_text, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(markdown_text, row)) + " |" for row in rows]
    return lines


def pause_count_text(aggregates: Aggregates) -> str:
    """The heat guard's pauses, `2`, and those the engine could not make: `2, 1 failed`."""
    failed = f", {aggregates.pause_failures} failed" if aggregates.pause_failures else ""
    return f"{aggregates.pauses}{failed}"


def _reward_from(document: SummaryDocument, run: str) -> str:
    """Where a run's reward figures came from: `printed` by Miles, or `derived` (docs/summary.md, "The rules")."""
    summary = document.runs.get(run)
    return (summary.reward_source if summary is not None else None) or DASH


def render_report(document: SummaryDocument, figure_dir: Optional[Path] = None) -> str:
    """The report as Markdown text; figures are linked by file name (they sit beside it)."""
    scaled = sorted(n for n, r in document.runs.items() if r.time_scale != 1)
    unit = "trainer s" if scaled else "s"
    out = _head(document, scaled)
    out += _runs_section(document, unit, scaled)
    out += _groups_sections(document)
    out += across_seeds_section(document, unit, figure_dir)
    if document.decisions:
        out += adaptive_section(document, figure_dir, markdown_text)
    for comparison in document.comparisons:
        out += _comparison_section(document, comparison, unit, figure_dir)
    if not document.comparisons:
        out += ["No run has a `compare` block, so there are no comparisons or figures.", ""]
    out += _guard_section(document, figure_dir)
    out += _notes_section(document)
    return "\n".join(out)


def _head(document: SummaryDocument, scaled: list[str]) -> list[str]:
    """The title, SIMULATED where it is, what the report is made of, and whose seconds it counts."""
    runs = document.runs
    simulated = document.simulated_runs()
    out: list[str] = ["# miles-gb10-lab: summary" + (" (SIMULATED)" if simulated else ""), ""]
    if simulated:
        which = "Every run here" if len(simulated) == len(runs) else f"{len(simulated)} of the {len(runs)} runs"
        out += [
            f"**SIMULATED.** {which} ran on the simulated trainer, not on a GB10: "
            + ("" if len(simulated) == len(runs) else f"{', '.join(map(markdown_text, simulated))}; ")
            + "its numbers show what the harness does with a run, not what Miles does on the GPU.",
            "",
        ]
    out.append(
        f"{len(runs)} runs, generated {markdown_text(document.generated_at)} by harness "
        f"{markdown_text(document.harness_version)} (schema {markdown_text(document.schema)}). Rollout times have "
        "the heat-guard pause time taken out; medians and means are over complete steps."
    )
    out.append("")
    out.append(CLEAN_DEFINITION)
    out.append("")
    if scaled:
        out.append(
            "Seconds are the trainer's (*trainer s*): for a simulated run, wall seconds = trainer seconds x its "
            f"time scale, which is not 1 for {', '.join(map(markdown_text, scaled))}; the pause columns give both."
        )
    else:
        out.append(
            "Seconds are wall seconds: every run here has time scale 1, so the trainer's seconds are the wall's."
        )
    out.append("")
    return out


def _runs_section(document: SummaryDocument, unit: str, scaled: list[str]) -> list[str]:
    """The table of runs: each run's configuration and aggregates."""
    runs = document.runs
    out: list[str] = []
    out += ["## Runs", ""]
    rows = []
    for name, summary in runs.items():
        agg = summary.aggregates
        expected = summary.steps_expected
        steps = f"{agg.steps}" + (f" of {expected}" if expected is not None else "")
        step_sum = agg.step_time_sum_s
        rows.append(
            [
                name,
                summary.state,
                "on" if summary.filter else "off",
                _int(summary.rollout_batch_size),
                _int(summary.over_sampling_batch_size),
                _int(summary.n_samples_per_prompt),
                steps,
                str(agg.clean_steps),
                _num(agg.rollout_time_adjusted_median_s, 1),
                _num(agg.rollout_time_clean_median_s, 1),
                _num(agg.reward_mean, 3),
                _num(agg.reward_mean_first4, 3),
                summary.reward_source or DASH,
                _num(step_sum / 60 if step_sum is not None else None, 1),
                _num(summary.start_temp_c, 1),
                pause_count_text(agg),
                _num(agg.pause_total_s, 1),
            ]
        )
        if scaled:
            rows[-1].append(_num(agg.pause_total_s * summary.time_scale, 1))
    minutes = "trainer min" if scaled else "min"
    out += _table(
        [
            "run",
            "state",
            "filter",
            "B",
            "O",
            "n",
            "steps",
            "clean",
            f"rollout median ({unit})",
            f"clean median ({unit})",
            "reward mean",
            "first 4",
            "reward from",
            f"step time sum ({minutes})",
            "start (C)",
            "pauses",
            f"pauses ({unit})",
        ]
        + (["pauses (wall s)"] if scaled else []),
        rows,
    )
    out.append("")
    return out


def _groups_sections(document: SummaryDocument) -> list[str]:
    """The dropped groups of the filter runs, and the kept groups that taught nothing of the runs without it."""
    runs = document.runs
    out: list[str] = []
    filtered = [(n, r.aggregates) for n, r in runs.items() if r.filter]
    if filtered:
        out += ["## Dropped groups per step (filter runs)", ""]
        out += _table(
            ["run", "min", "median", "max", "all right (total)", "all wrong (total)"],
            [
                [
                    n,
                    _int(agg.dropped_groups_min),
                    _int(agg.dropped_groups_median),
                    _int(agg.dropped_groups_max),
                    _int(agg.dropped_all_right_total),
                    _int(agg.dropped_all_wrong_total),
                ]
                for n, agg in filtered
            ],
        )
        out.append("")
    plain = [(n, r) for n, r in runs.items() if not r.filter and r.aggregates.zero_std_all_right_total is not None]
    if plain:
        out += ["## Kept groups that taught nothing (runs without the filter)", ""]
        out += _table(
            ["run", "all right (total)", "all wrong (total)", "groups trained on"],
            [
                [
                    n,
                    _int(r.aggregates.zero_std_all_right_total),
                    _int(r.aggregates.zero_std_all_wrong_total),
                    _int(r.rollout_batch_size * r.aggregates.steps) if r.rollout_batch_size else DASH,
                ]
                for n, r in plain
            ],
        )
        out.append("")
    return out


def _comparison_section(
    document: SummaryDocument, comparison: Comparison, unit: str, figure_dir: Optional[Path]
) -> list[str]:
    """One comparison: rollout time by batches, the rewards, the verdict, the notes and the two figures."""
    out: list[str] = []
    run, baseline = markdown_text(comparison.run), markdown_text(comparison.baseline)  # for lines; cells: as is
    out += [f"## {run} against {baseline}", ""]
    base_median = comparison.baseline_rollout_time_adjusted_median_s
    if comparison.by_batches:
        out.append(
            f"Rollout time by batches of prompts needed ({baseline}: median {_num(base_median, 1, ' ' + unit)}):"
        )
        out.append("")
        out += _table(
            ["batches", "steps", f"median ({unit})", f"ratio to {comparison.baseline}"],
            [
                [
                    str(k),
                    str(v.steps),
                    _num(v.rollout_time_adjusted_median_s, 1),
                    _num(v.ratio, 2, "x"),
                ]
                for k, v in comparison.by_batches.items()
            ],
        )
        out.append("")
    reward = comparison.reward
    out += _table(
        ["reward", "mean", "first 4 steps", "from"],
        [
            [
                comparison.run,
                _num(reward.run_mean, 3),
                _num(reward.run_mean_first4, 3),
                _reward_from(document, comparison.run),
            ],
            [
                comparison.baseline,
                _num(reward.baseline_mean, 3),
                _num(reward.baseline_mean_first4, 3),
                _reward_from(document, comparison.baseline),
            ],
            [
                f"baselines ({len([v for v in reward.baselines.values() if v is not None])} runs)",
                f"{_num(reward.spread_min, 3)} to {_num(reward.spread_max, 3)}",
                DASH,
                DASH,
            ],
        ],
    )
    out.append("")
    out += [f"**Verdict.** {markdown_text(reward.verdict)}", ""]
    for note in comparison.notes:
        out.append(f"- {markdown_text(note)}")
    if comparison.notes:
        out.append("")
    paths = figure_paths(Path("."), comparison.run)
    for key, text in (("rollout_time", rollout_time_text), ("reward", reward_text)):
        title, caption = map(markdown_text, text(document, comparison))
        name = paths[key].name
        if figure_dir is None or (Path(figure_dir) / name).exists():
            out += [f"![{title}]({quote(name)})", "", f"*{title}.* {caption}", ""]
    return out


def _notes_section(document: SummaryDocument) -> list[str]:
    """Every run's notes and every directory skipped."""
    out: list[str] = []
    noted = [(n, r.notes) for n, r in document.runs.items() if r.notes]
    if noted or document.skipped:
        out += ["## Notes", ""]
        for name, notes in noted:
            out += [f"- **{markdown_text(name)}**: {markdown_text(note)}" for note in notes]
        for skipped in document.skipped:
            out.append(f"- skipped {markdown_text(skipped.directory)}: {markdown_text(skipped.reason)}")
        out.append("")
    return out


def _figure(lines: list[str], figure_dir: Optional[Path], path: Path, title: str, caption: str) -> None:
    if figure_dir is None or (Path(figure_dir) / path.name).exists():
        title, caption = markdown_text(title), markdown_text(caption)
        lines += [f"![{title}]({quote(path.name)})", "", f"*{title}.* {caption}", ""]


def _spread(mean: Optional[float], sd: Optional[float], digits: int) -> str:
    if mean is None:
        return DASH
    return f"{mean:.{digits}f}" + (f" (SD {sd:.{digits}f})" if sd is not None else "")


def _signed(value: Optional[float]) -> str:
    return DASH if value is None else f"{value:+.3f}"


def _range(low: Optional[float], high: Optional[float], digits: int) -> str:
    return DASH if low is None or high is None else f"{low:.{digits}f} to {high:.{digits}f}"


def across_seeds_section(document: SummaryDocument, unit: str, figure_dir: Optional[Path]) -> list[str]:
    """The "Across seeds" section: the conditions' pooled figures, the across-seed comparisons and their figures."""
    conditions = document.conditions
    if not conditions:
        return []
    out = ["## Across seeds", ""]
    out.append(
        "Runs are grouped into conditions by their configuration without the seed (from their manifests), and "
        "each condition's figures are over the steps every one of its seeds completed: the mean over its seeds, "
        "the standard deviation between them, and the lowest and highest seed. The reward of a filter run is "
        "the one counted before the filter."
    )
    out.append("")
    blocks = unique_blocks(block for comparison in document.comparisons for block in comparison.across_seeds)
    few = [block for block in blocks if block.too_few_seeds]
    if few:
        listed = "; ".join(
            f"{markdown_text(block.condition)} against {markdown_text(baseline_label(block))} ({block.seeds} and "
            f"{block.baseline_seeds} seeds)"
            for block in few
        )
        out += [f"**Too few seeds to conclude anything** for {listed}: see each verdict for how many are needed.", ""]
    elif not blocks and all(len(c.seeds) <= 1 for c in conditions.values()):
        out += ["Every condition has one seed, so nothing can be concluded across seeds: run more seeds.", ""]
    out += _conditions_table(document, unit)
    out.append("")
    for key, condition in conditions.items():
        out += [
            f"- **{markdown_text(key)}**: {markdown_text(note)}"
            for note in condition.notes
            if not note.startswith("one seed:")
        ]
    if any(not note.startswith("one seed:") for c in conditions.values() for note in c.notes):
        out.append("")
    if blocks:
        out += _seed_comparisons_table(blocks)
    drawn = {id(block) for block in drawable_seed_comparisons(document)}
    for block in blocks:
        heading = f"{block.condition} against {baseline_label(block)}"
        out += [f"**{markdown_text(heading)}.** {markdown_text(block.verdict)}", ""]
        out += [f"- {markdown_text(note)}" for note in block.notes]
        if block.notes:
            out.append("")
        if id(block) in drawn:
            _figure(
                out, figure_dir, seed_comparison_figure_path(Path("."), block), *seed_comparison_text(document, block)
            )
    for key in drawable_conditions(document):
        _figure(out, figure_dir, condition_figure_path(Path("."), key), *condition_text(document, key))
    return out


def _conditions_table(document: SummaryDocument, unit: str) -> list[str]:
    """Each condition's figures pooled over its seeds."""
    conditions = document.conditions
    return _table(
        [
            "condition",
            "seeds",
            "steps",
            "reward mean",
            "seeds' range",
            "first 4",
            f"rollout median ({unit})",
            "dropped groups per seed",
        ],
        [
            [
                key + (" (simulated)" if condition.simulated else ""),
                f"{len(condition.seeds)}" + (f" of {len(condition.runs)}" if condition.left_out else ""),
                str(condition.steps_pooled),
                _spread(condition.reward_mean.mean, condition.reward_mean.sd, 3),
                _range(condition.reward_mean.min, condition.reward_mean.max, 3),
                _spread(condition.reward_mean_first4.mean, condition.reward_mean_first4.sd, 3),
                _spread(condition.rollout_time_adjusted_median_s.mean, condition.rollout_time_adjusted_median_s.sd, 1),
                _spread(condition.dropped_groups.mean, condition.dropped_groups.sd, 1),
            ]
            for key, condition in conditions.items()
        ],
    )


def _seed_comparisons_table(blocks: list[SeedComparison]) -> list[str]:
    """The across-seed comparisons' numbers, with the seeds each effect asked for needs, and what they mean."""
    out: list[str] = []
    effects = sorted({block.effect for block in blocks})
    out += _table(
        [
            "comparison",
            "seeds",
            "difference",
            "95% interval",
            "excludes 0",
            "Welch p",
            "P(higher)",
            "pooled SD",
            "seeds needed",
        ]
        + [f"seeds for {effect:g}" for effect in effects],
        [
            [
                f"{block.condition} against {baseline_label(block)}",
                f"{block.seeds} and {block.baseline_seeds}",
                _signed(block.difference),
                DASH
                if block.interval_low is None or block.interval_high is None
                else f"{_signed(block.interval_low)} to {_signed(block.interval_high)}",
                DASH if block.interval_excludes_zero is None else ("yes" if block.interval_excludes_zero else "no"),
                _num(block.welch_p, 3),
                _num(block.p_improvement, 2),
                _num(block.pooled_sd, 3),
                _int(block.seeds_needed),
            ]
            + [_int(block.seeds_needed_for_effect) if block.effect == effect else DASH for effect in effects]
            for block in blocks
        ],
    )
    out += [
        "",
        "Seeds needed: per condition, for 80% power at alpha 0.05 (two-sided), from the pooled SD: the "
        "standard deviation of the seeds' mean rewards, both conditions' pooled (`harness plan seeds --from-runs "
        "A B` gives the same); P(higher): the share of seed pairs in which the first condition read higher "
        "(ties half).",
        "",
    ]
    return out


def _guard_section(document: SummaryDocument, figure_dir: Optional[Path]) -> list[str]:
    """Each run's heat-guard figure found beside the report (drawn from its capture by summarize or report)."""
    if figure_dir is None:
        return []
    out: list[str] = []
    for name in document.runs:
        path = guard_figure_path(Path(figure_dir), name)
        text = figure_text(path) if path.exists() else None
        if text is not None:
            title, caption = map(markdown_text, text)
            out += [f"![{title}]({quote(path.name)})", "", f"*{title}.* {caption}", ""]
    if not out:
        return []
    return [
        "## The heat guard",
        "",
        "Per run: every temperature the guard watched, where it would pause and resume, and the pause windows "
        "(the `start (C)` column above is the hottest of them as the run started).",
        "",
        *out,
    ]


def write_report(document: SummaryDocument, out_dir: Path) -> Path:
    """Write report.md into `out_dir` (next to the JSON and the figures); returns its path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / REPORT_FILE_NAME
    write_text_atomic(path, render_report(document, out_dir))
    return path
