"""The one core behind `summarize_miles.py`, `harness summarize` and `harness report`.

Compute, then render: `summarize` builds the document; this module writes it,
the figures beside it, and the report from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.errors import ExitCode, HarnessError
from harness.summary import SUMMARY_FILE_NAME
from harness.summary.captures import SUMMARY_DIR_NAME


@dataclass
class Published:
    """What a summarize or report call wrote."""

    document: dict[str, Any]
    summary_path: Path
    figures: list[Path] = field(default_factory=list)
    report: Optional[Path] = None


def default_summary_path(capture_dir: Path) -> Path:
    """`<capture dir>/summary/miles-gb10-lab.json`."""
    return Path(capture_dir) / SUMMARY_DIR_NAME / SUMMARY_FILE_NAME


def summarize_to_files(capture_dir: Path, out: Optional[Path] = None, *, figures: bool = True) -> Published:
    """Summarize every capture, write the JSON (and the figures next to it)."""
    from harness.summary.summarize import summarize, write_summary

    capture_dir = Path(capture_dir)
    if not capture_dir.is_dir():
        raise HarnessError(f"no capture directory {capture_dir}", ExitCode.NOT_FOUND)
    out = Path(out) if out is not None else default_summary_path(capture_dir)
    document = summarize(capture_dir)
    path = write_summary(document, out)
    written: list[Path] = []
    if figures:
        from harness.summary.figures import render_figures

        written = render_figures(document, path.parent)
    return Published(document, path, written)


def report_from_summary(summary_path: Path) -> Published:
    """Read a summary JSON, (re)draw its figures beside it and write report.md there."""
    from harness.summary.figures import render_figures
    from harness.summary.report import write_report
    from harness.summary.summarize import load_summary

    summary_path = Path(summary_path)
    document = load_summary(summary_path)
    written = render_figures(document, summary_path.parent)
    report = write_report(document, summary_path.parent)
    return Published(document, summary_path, written, report)
