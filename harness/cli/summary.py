"""`harness summarize`, `report` and `export`: thin commands over harness.summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import typer
from typing_extensions import Annotated

from harness.cli.app import (
    CaptureDirOrSim,
    JsonOption,
    SimCapturesOption,
    capture_root,
    command,
    print_messages,
    sim_root_hint,
    stdout,
    warn,
)

if TYPE_CHECKING:
    from harness.summary.document import SummaryDocument
    from harness.summary.publish import Published

EffectOption = Annotated[
    float,
    typer.Option(
        "--effect",
        help="The difference in mean reward the across-seed comparisons say how many seeds would detect.",
    ),
]


def _fmt(value: Optional[float], digits: int) -> str:
    from harness.summary.sanity import number_text

    return "-" if value is None else number_text(value, digits)


@command("summarize")
def summarize_command(
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Summary JSON to write [default: <capture dir>/summary/miles-gb10-lab.json]."),
    ] = None,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Write the JSON only, no SVG figures.")] = False,
    effect: EffectOption = 0.02,
    json_: JsonOption = False,
) -> None:
    """Summarize every capture into the lab's JSON (schema miles-gb10-lab/1) and draw its figures beside it.

    Runs of one configuration but their seed are one condition: each condition's
    figures are pooled over its seeds, and each comparison is also made across
    seeds, with a 95% bootstrap interval of the difference, Welch's p and the
    seeds needed for 80% power (docs/summary.md, "Across seeds").
    """
    import math

    from harness.errors import HarnessError
    from harness.summary.publish import summarize_to_files

    if not (math.isfinite(effect) and effect > 0):
        raise HarnessError(f"--effect must be a difference above 0, not {effect}")
    capture_dir = capture_root(capture_dir, sim)
    published = summarize_to_files(
        capture_dir, out, figures=not no_figures, hint=sim_root_hint(capture_dir), effect=effect
    )
    document = published.document
    for warning in published.warnings:
        warn(warning)
    if not no_figures:
        from harness.cli.board import summary_images

        summary_images(capture_dir, document, changed=bool(published.figures))
    if json_:
        _print_summary_json(published)
    else:
        _print_summary(published)


def _print_summary_json(published: "Published") -> None:
    import json

    document = published.document
    typer.echo(
        json.dumps(
            {
                "summary": str(published.summary_path),
                "figures": [str(p) for p in published.figures + published.figures_unchanged],
                "figures_drawn": [str(p) for p in published.figures],
                "runs": sorted(document.runs),
                "simulated": document.simulated,
                "conditions": sorted(document.conditions),
                "comparisons": [c.run for c in document.comparisons],
                "skipped": [s.to_dict() for s in document.skipped],
            },
            indent=2,
            allow_nan=False,
        )
    )


def _print_summary(published: "Published") -> None:
    from rich.text import Text

    from harness.summary.seeds import across_seeds_lines

    document = published.document
    console = stdout()
    simulated = document.simulated_runs()
    if simulated:
        which = (
            "every run" if len(simulated) == len(document.runs) else f"{len(simulated)} of {len(document.runs)} runs"
        )
        console.print(Text.assemble(("SIMULATED", "bold"), f": {which} ran on the simulated trainer, not on a GB10"))
    _print_runs(document)
    print_messages(  # a paragraph each: wrapped at words, never cropped
        console,
        [
            *(
                (f"{comparison.run} against {comparison.baseline}: {comparison.reward.verdict}", len(comparison.run))
                for comparison in document.comparisons
            ),
            *((line, 0) for line in across_seeds_lines(document.comparisons)),
        ],
    )
    console.print(f"wrote {published.summary_path}")
    for path in published.figures:
        console.print(f"wrote {str(path)}")
    if published.figures_unchanged:
        console.print(f"{len(published.figures_unchanged)} figures unchanged (their inputs are the same)")


def _print_runs(document: "SummaryDocument") -> None:
    from harness.cli.tables import Column, print_table

    columns = [
        Column("run"),
        Column("state"),
        Column("filter"),
        Column("steps", "right"),
        Column("clean", "right"),
        Column("rollout median s", "right", wrap=True),
        Column("dropped", "right"),
        Column("reward", "right"),
        Column("start C", "right", drop=2),
        Column("notes", "right", drop=1),
    ]
    rows = []
    for name, run in document.runs.items():
        agg = run.aggregates
        dropped = "-"
        if agg.dropped_groups_min is not None:
            dropped = f"{agg.dropped_groups_min}-{agg.dropped_groups_max}"
        expected = run.steps_expected
        rows.append(
            (
                name,
                run.state,
                "on" if run.filter else "off",
                f"{agg.steps}" + (f"/{expected}" if expected is not None else ""),
                str(agg.clean_steps),
                _fmt(agg.rollout_time_adjusted_median_s, 1),
                dropped,
                _fmt(agg.reward_mean, 3),
                _fmt(run.start_temp_c, 1),
                str(len(run.notes)),
            )
        )
    print_table(stdout(), columns, rows)


def _no_summary(capture_dir: Path, path: Path) -> NoReturn:
    """No summary to report on: `harness summarize` makes it where there are runs to summarize; where there are
    none, what is there to summarize instead (the simulator's runs), never a command that would find nothing."""
    from harness.capture import find_runs
    from harness.errors import ExitCode, HarnessError

    if find_runs(capture_dir)[0]:
        raise HarnessError(f"no summary at {path}: run `harness summarize` first", ExitCode.NOT_FOUND)
    raise HarnessError(
        f"nothing to report: no summary at {path}, no runs in {capture_dir}{sim_root_hint(capture_dir)}"
        if not sim_root_hint(capture_dir)
        else f"nothing to report: no runs in {capture_dir}{sim_root_hint(capture_dir)}",
        ExitCode.NOT_FOUND,
    )


@command("report")
def report_command(
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    summary: Annotated[
        Optional[Path],
        typer.Option(
            "--summary", help="Summary JSON to report on [default: <capture dir>/summary/miles-gb10-lab.json]."
        ),
    ] = None,
) -> None:
    """Write report.md (headline tables, verdicts, figures) and the figures beside the summary JSON.

    Without --summary, a capture that changed since the summary (a run rerun, restored, added or still running)
    is summarized again first, and said: the report is never of two attempts of a run.
    """
    from harness.summary.publish import default_summary_path, report_from_summary

    capture_dir = capture_root(capture_dir, sim)
    if summary is None and not default_summary_path(capture_dir).is_file():
        _no_summary(capture_dir, default_summary_path(capture_dir))
    published = report_from_summary(
        summary if summary is not None else default_summary_path(capture_dir),
        hint=sim_root_hint(capture_dir),
        capture_dir=capture_dir if summary is None else None,  # a summary elsewhere: its captures may not be here
    )
    for warning in published.warnings:
        warn(warning)
    console = stdout()
    if published.resummarized:
        console.print(f"wrote {str(published.summary_path)}")
    for path in published.figures:
        console.print(f"wrote {str(path)}")
    if published.figures_unchanged:
        console.print(f"{len(published.figures_unchanged)} figures unchanged (their inputs are the same)")
    console.print(f"wrote {str(published.report)}")


@command("export")
def export_command(
    capture_dir: CaptureDirOrSim = None,
    sim: SimCapturesOption = False,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="parquet (needs pyarrow, which make setup installs), csv, or tensorboard (every run's TensorBoard "
            "events rebuilt from its capture, under <capture dir>/tensorboard: docs/tensorboard.md).",
        ),
    ] = "parquet",
    out: Annotated[
        Optional[Path],
        typer.Option("--out", help="Table to write [default: <capture dir>/summary/steps.<format>]."),
    ] = None,
    summary: Annotated[
        Optional[Path],
        typer.Option("--summary", help="Export a published summary JSON instead of summarizing the captures."),
    ] = None,
) -> None:
    """Write every run's step rows as one tidy table: run, experiment, seed, step, then the row's columns.

    Read it with pandas.read_parquet (or read_csv). The rows are the summary's
    (docs/summary.md); the captures are summarized afresh unless --summary is given.
    """
    from harness.errors import ExitCode, HarnessError
    from harness.summary.export import FORMATS, default_export_path, export_steps
    from harness.summary.publish import default_summary_path, no_runs_message, summarize_captures_in, writing

    if format_ not in (*FORMATS, "tensorboard"):
        raise HarnessError(f"--format {format_!r}: one of {', '.join(FORMATS)}, tensorboard")
    capture_dir = capture_root(capture_dir, sim)
    if format_ == "tensorboard":
        from harness.cli.board import export_tensorboard

        if out is not None or summary is not None:
            raise HarnessError(
                "--format tensorboard writes <capture dir>/tensorboard from the captures: no --out or --summary"
            )
        return export_tensorboard(capture_dir, sim_root_hint(capture_dir))
    if summary is not None:
        from harness.summary.serialize import load_summary

        document = load_summary(summary)
        where = summary.parent
    else:
        result = summarize_captures_in(capture_dir, hint=sim_root_hint(capture_dir))
        for warning in result.warnings:
            warn(warning)
        document, where = result.document, default_summary_path(capture_dir).parent
    if not document.runs:
        looked = f"in {summary}" if summary is not None else f"under {capture_dir}"
        raise HarnessError(
            "nothing to export: " + no_runs_message(looked, document.skipped, sim_root_hint(capture_dir)),
            ExitCode.NOT_FOUND,
        )
    path = out if out is not None else default_export_path(where, format_)
    path = writing(path, lambda: export_steps(document, path, format_))
    rows = sum(len(run.steps) for run in document.runs.values())
    stdout().print(f"wrote {str(path)} ({rows} rows of {len(document.runs)} runs)")
