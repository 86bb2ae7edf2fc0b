"""The one core behind `summarize_miles.py`, `harness summarize`, `harness report` and `harness export`.

Compute, then render: `summarize` builds the document; this module writes it,
the figures beside it, the report and the step table from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypeVar

from harness.capture.files import describe_os_error
from harness.errors import ExitCode, HarnessError
from harness.fs.files import prepare_directory
from harness.stats.seeds import DEFAULT_EFFECT
from harness.summary import SUMMARY_FILE_NAME
from harness.summary.adaptive_report import render_decision_figures
from harness.summary.captures import SUMMARY_DIR_NAME
from harness.summary.document import SummaryDocument
from harness.summary.figures import render_figures
from harness.summary.guard_figure import render_guard_figures
from harness.summary.report import write_report
from harness.summary.serialize import load_summary, write_summary
from harness.summary.staleness import captures_now, changes_since
from harness.summary.summarize import summarize_with_warnings

if TYPE_CHECKING:
    from harness.capture.reader import Skipped
    from harness.summary.summarize import Summary

T = TypeVar("T")


@dataclass
class Published:
    """What a summarize, report or export call wrote."""

    document: SummaryDocument
    summary_path: Path
    figures: list[Path] = field(default_factory=list)  # drawn by this call
    figures_unchanged: list[Path] = field(default_factory=list)  # already up to date, left as they were
    report: Optional[Path] = None
    warnings: list[str] = field(default_factory=list)
    resummarized: bool = False  # `report` summarized the captures again first: they had changed


def default_summary_path(capture_dir: Path) -> Path:
    """`<capture dir>/summary/miles-gb10-lab.json`."""
    return Path(capture_dir) / SUMMARY_DIR_NAME / SUMMARY_FILE_NAME


def writing(path: Path, write: Callable[[], T]) -> T:
    """`write()`, an OSError (a full disk, no permission) becoming one line naming the file."""
    try:
        return write()
    except OSError as err:
        raise HarnessError(describe_os_error(err, str(path))) from None


def summarize_captures_in(
    capture_dir: Path, *, encode: bool = False, hint: str = "", effect: float = DEFAULT_EFFECT
) -> Summary:
    """The document (a summarize.Summary) of every capture under `capture_dir`.

    No such directory is a HarnessError (`hint` ends its line). `effect`: the
    difference the across-seed comparisons count seeds for.
    """
    capture_dir = Path(capture_dir)
    if not capture_dir.is_dir():
        raise HarnessError(f"no capture directory {capture_dir}{hint}", ExitCode.NOT_FOUND)
    return summarize_with_warnings(capture_dir, encode=encode, effect=effect)


def no_runs_message(where: str, skipped: Sequence[Skipped] = (), hint: str = "") -> str:
    """One line: nothing to summarize `where`, the directories skipped (the first one's reason), and `hint`."""
    text = f"no captures found {where} (a run is a directory with status.json)"
    if skipped:
        text += f"; {len(skipped)} skipped, first {skipped[0].directory}: {skipped[0].reason}"
    return text + hint


def summarize_to_files(
    capture_dir: Path,
    out: Optional[Path] = None,
    *,
    figures: bool = True,
    hint: str = "",
    effect: float = DEFAULT_EFFECT,
) -> Published:
    """Summarize every capture, write the JSON (and the figures next to it, those whose inputs changed).

    No run at all is an error (`hint` ends its line), and no JSON is written:
    an empty summary is never published in place of a forgotten capture root.
    """
    summary = summarize_captures_in(capture_dir, encode=True, hint=hint, effect=effect)
    if not summary.document.runs:
        raise HarnessError(no_runs_message(f"under {capture_dir}", summary.document.skipped, hint), ExitCode.NOT_FOUND)
    if out is None:  # the capture root's own summary directory: inside the root, or refused before anything is written
        directory = default_summary_path(capture_dir).parent
        writing(directory, lambda: prepare_directory(directory, capture_dir))
    out = Path(out) if out is not None else default_summary_path(capture_dir)
    path = writing(out, lambda: write_summary(summary.document, out, summary.encoded_runs))
    published = Published(summary.document, path, warnings=summary.warnings)
    if figures:
        rendered = writing(path.parent, lambda: render_figures(summary.document, path.parent))
        published.figures, published.figures_unchanged = rendered.drawn, rendered.unchanged
        _decision_figures(published, path.parent)
        _guard_figures(published, capture_dir, path.parent)
    return published


def _decision_figures(published: Published, out_dir: Path) -> None:
    """Each adaptive comparison's figure (harness decide), from the document's `decisions` block."""
    if not published.document.decisions:
        return
    rendered = writing(out_dir, lambda: render_decision_figures(published.document, out_dir))
    published.figures += rendered.drawn
    published.figures_unchanged += rendered.unchanged


def _guard_figures(published: Published, capture_dir: Path, out_dir: Path) -> None:
    """The heat guard's figure of each run (from its capture's guard.jsonl and pauses.jsonl), beside the others."""
    runs = published.document.runs
    attempts = {name: run.attempt for name, run in runs.items()}  # the attempts the tables are of, not the current
    guard = writing(out_dir, lambda: render_guard_figures(capture_dir, list(runs), out_dir, attempts))
    published.figures += guard.drawn
    published.figures_unchanged += guard.unchanged


def report_from_summary(summary_path: Path, hint: str = "", capture_dir: Optional[Path] = None) -> Published:
    """Read a summary JSON, draw its figures beside it (those out of date) and write report.md there.

    With `capture_dir` (where the summarized captures are, if they are still
    there), the captures are summarized again first when they changed since
    the summary (`staleness.changes_since`: a run rerun, restored, added,
    removed or still running), so that no report holds one attempt's tables
    and another's figures; then the heat guard's figure of each run is drawn,
    from the attempt the summary read. The report embeds those it finds
    beside it either way. A summary without a single run is an error (`hint`
    ends its line).
    """
    summary_path = Path(summary_path)
    document = load_summary(summary_path)
    if not document.runs:
        raise HarnessError(no_runs_message(f"in {summary_path}", document.skipped, hint), ExitCode.NOT_FOUND)
    captures = Path(capture_dir) if capture_dir is not None and Path(capture_dir).is_dir() else None
    changes = _changes(document, captures) if captures is not None else []
    if captures is not None and changes:
        published = summarize_to_files(captures, summary_path, hint=hint, effect=_effect(document))
        shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
        published.warnings.insert(
            0, f"the captures changed since {summary_path} was written ({shown}): summarized them again first"
        )
        published.resummarized = True
    else:
        rendered = writing(summary_path.parent, lambda: render_figures(document, summary_path.parent))
        published = Published(document, summary_path, rendered.drawn, rendered.unchanged)
        _decision_figures(published, summary_path.parent)
        if captures is not None:
            _guard_figures(published, captures, summary_path.parent)
    fresh = published.document
    published.report = writing(summary_path.parent, lambda: write_report(fresh, summary_path.parent))
    return published


def _changes(document: SummaryDocument, capture_dir: Path) -> list[str]:
    return changes_since(document, captures_now(capture_dir))


def _effect(document: SummaryDocument) -> float:
    """The effect the summary's across-seed comparisons counted seeds for (its `--effect`), else the default."""
    return next((b.effect for c in document.comparisons for b in c.across_seeds), DEFAULT_EFFECT)
