"""report.md: the headline numbers in tables, the verdicts, the figures embedded.

Drawn from the summary document alone, so a report can be rebuilt from a
published JSON. Numbers are rounded here, for display only: seconds to 0.1,
rewards to 0.001, ratios to 0.01, step-time sums in minutes to 0.1. A dash
means null in the JSON (not logged or not applicable). Every reward figure
says where it came from: `printed` by Miles, or `derived` from what it
printed (a Miles that does not print the reward before the filter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from harness.capture import write_text_atomic
from harness.summary.document import SummaryDocument
from harness.summary.figures import figure_paths, reward_text, rollout_time_text
from harness.summary.guard_figure import figure_text, guard_figure_path

REPORT_FILE_NAME = "report.md"
CLEAN_DEFINITION = (
    "A step is *clean* when no heat-guard pause overlaps its rollout, so its rollout time needs no correction; "
    'the clean median is the raw rollout time\'s median over the clean complete steps (docs/summary.md, "The rules").'
)
DASH = "-"


def _num(value: Optional[float], digits: int, suffix: str = "") -> str:
    return DASH if value is None else f"{value:.{digits}f}{suffix}"


def _int(value: Optional[float]) -> str:
    if value is None:
        return DASH
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _reward_from(document: SummaryDocument, run: str) -> str:
    """Where a run's reward figures came from: `printed` by Miles, or `derived` (docs/summary.md, "The rules")."""
    summary = document.runs.get(run)
    return (summary.reward_source if summary is not None else None) or DASH


def render_report(document: SummaryDocument, figure_dir: Optional[Path] = None) -> str:
    """The report as Markdown text; figures are linked by file name (they sit beside it)."""
    runs = document.runs
    out: list[str] = ["# miles-gb10-lab: summary", ""]
    out.append(
        f"{len(runs)} runs, generated {document.generated_at} by harness {document.harness_version} "
        f"(schema {document.schema}). Rollout times have the heat-guard pause time taken out; "
        "medians and means are over complete steps."
    )
    out.append("")
    out.append(CLEAN_DEFINITION)
    out.append("")
    scaled = sorted(n for n, r in runs.items() if r.time_scale != 1)
    unit = "trainer s" if scaled else "s"
    if scaled:
        out.append(
            "Seconds are the trainer's (*trainer s*): for a simulated run, wall seconds = trainer seconds x its "
            f"time scale, which is not 1 for {', '.join(scaled)}; the pause columns give both."
        )
    else:
        out.append(
            "Seconds are wall seconds: every run here has time scale 1, so the trainer's seconds are the wall's."
        )
    out.append("")

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
            f"pauses ({unit})",
        ]
        + (["pauses (wall s)"] if scaled else []),
        rows,
    )
    out.append("")

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

    for comparison in document.comparisons:
        run, baseline = comparison.run, comparison.baseline
        out += [f"## {run} against {baseline}", ""]
        base_median = comparison.baseline_rollout_time_adjusted_median_s
        if comparison.by_batches:
            out.append(
                f"Rollout time by batches of prompts needed ({baseline}: median {_num(base_median, 1, ' ' + unit)}):"
            )
            out.append("")
            out += _table(
                ["batches", "steps", f"median ({unit})", f"ratio to {baseline}"],
                [
                    [k, str(v.steps), _num(v.rollout_time_adjusted_median_s, 1), _num(v.ratio, 2, "x")]
                    for k, v in comparison.by_batches.items()
                ],
            )
            out.append("")
        reward = comparison.reward
        out += _table(
            ["reward", "mean", "first 4 steps", "from"],
            [
                [run, _num(reward.run_mean, 3), _num(reward.run_mean_first4, 3), _reward_from(document, run)],
                [
                    baseline,
                    _num(reward.baseline_mean, 3),
                    _num(reward.baseline_mean_first4, 3),
                    _reward_from(document, baseline),
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
        out += [f"**Verdict.** {reward.verdict}", ""]
        for note in comparison.notes:
            out.append(f"- {note}")
        if comparison.notes:
            out.append("")
        paths = figure_paths(Path("."), run)
        for key, text in (("rollout_time", rollout_time_text), ("reward", reward_text)):
            title, caption = text(document, comparison)
            name = paths[key].name
            if figure_dir is None or (Path(figure_dir) / name).exists():
                out += [f"![{title}]({name})", "", f"*{title}.* {caption}", ""]
    if not document.comparisons:
        out += ["No run has a `compare` block, so there are no comparisons or figures.", ""]
    out += _guard_section(document, figure_dir)

    noted = [(n, r.notes) for n, r in runs.items() if r.notes]
    if noted or document.skipped:
        out += ["## Notes", ""]
        for name, notes in noted:
            out += [f"- **{name}**: {note}" for note in notes]
        for skipped in document.skipped:
            out.append(f"- skipped `{skipped.directory}`: {skipped.reason}")
        out.append("")
    return "\n".join(out)


def _guard_section(document: SummaryDocument, figure_dir: Optional[Path]) -> list[str]:
    """Each run's heat-guard figure found beside the report (drawn from its capture by summarize or report)."""
    if figure_dir is None:
        return []
    out: list[str] = []
    for name in document.runs:
        path = guard_figure_path(Path(figure_dir), name)
        text = figure_text(path) if path.exists() else None
        if text is not None:
            title, caption = text
            out += [f"![{title}]({path.name})", "", f"*{title}.* {caption}", ""]
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
