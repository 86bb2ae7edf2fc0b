"""The one core behind `summarize_miles.py`, `harness summarize`, `harness report` and `harness export`.

Compute, then render: `summarize` builds the document; this module writes it,
the figures beside it, the report and the step table from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from harness.errors import ExitCode, HarnessError
from harness.summary import SUMMARY_FILE_NAME
from harness.summary.captures import SUMMARY_DIR_NAME
from harness.summary.document import SummaryDocument


@dataclass
class Published:
    """What a summarize, report or export call wrote."""

    document: SummaryDocument
    summary_path: Path
    figures: list[Path] = field(default_factory=list)  # drawn by this call
    figures_unchanged: list[Path] = field(default_factory=list)  # already up to date, left as they were
    report: Optional[Path] = None
    warnings: list[str] = field(default_factory=list)


def default_summary_path(capture_dir: Path) -> Path:
    """`<capture dir>/summary/miles-gb10-lab.json`."""
    return Path(capture_dir) / SUMMARY_DIR_NAME / SUMMARY_FILE_NAME


def writing(path: Path, write):  # noqa: ANN001, ANN201
    """`write()`, an OSError (a full disk, no permission) becoming one line naming the file."""
    from harness.capture.files import describe_os_error

    try:
        return write()
    except OSError as err:
        raise HarnessError(describe_os_error(err, str(path))) from None


def summarize_captures_in(capture_dir: Path, *, encode: bool = False):  # noqa: ANN201 - summarize.Summary
    """The document of every capture under `capture_dir` (HarnessError when there is no such directory)."""
    from harness.summary.summarize import summarize_with_warnings

    capture_dir = Path(capture_dir)
    if not capture_dir.is_dir():
        raise HarnessError(f"no capture directory {capture_dir}", ExitCode.NOT_FOUND)
    return summarize_with_warnings(capture_dir, encode=encode)


def summarize_to_files(capture_dir: Path, out: Optional[Path] = None, *, figures: bool = True) -> Published:
    """Summarize every capture, write the JSON (and the figures next to it, those whose inputs changed)."""
    from harness.summary.serialize import write_summary

    summary = summarize_captures_in(capture_dir, encode=True)
    out = Path(out) if out is not None else default_summary_path(capture_dir)
    path = writing(out, lambda: write_summary(summary.document, out, summary.encoded_rows))
    published = Published(summary.document, path, warnings=summary.warnings)
    if figures:
        from harness.summary.figures import render_figures

        rendered = writing(path.parent, lambda: render_figures(summary.document, path.parent))
        published.figures, published.figures_unchanged = rendered.drawn, rendered.unchanged
    return published


def report_from_summary(summary_path: Path) -> Published:
    """Read a summary JSON, draw its figures beside it (those out of date) and write report.md there."""
    from harness.summary.figures import render_figures
    from harness.summary.report import write_report
    from harness.summary.serialize import load_summary

    summary_path = Path(summary_path)
    document = load_summary(summary_path)
    rendered = writing(summary_path.parent, lambda: render_figures(document, summary_path.parent))
    report = writing(summary_path.parent, lambda: write_report(document, summary_path.parent))
    return Published(document, summary_path, rendered.drawn, rendered.unchanged, report)
