"""The summary's values of one step, by the summary's own rules (harness.summary.frames and rows).

A step's values are computed as the summary computes them, over what the
board knows when the step comes: the run's start and manifest, the step and
the one before it (the rule on end times going back compares neighbours),
and the pause windows that began before its rollout ended. Each value is a
pure function of those, so a live run and its replay agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol, Sequence

from harness.capture.columns import MetricsColumns
from harness.capture.reader import RunCapture
from harness.capture.records import PauseWindow
from harness.summary.frames import read_frame
from harness.summary.notes import RunNotes
from harness.summary.rows import build_rows
from harness.summary.run_config import resolve_config
from harness.times import parse_time_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject
    from harness.summary.run_config import RunConfig


# The summary's step values put on the board (docs/summary.md, "The rules"), in this order.
DERIVED_FIELDS = (
    "rollout_time_s",
    "pause_overlap_s",
    "rollout_time_adjusted_s",
    "clean",
    "reward",
    "dropped_groups",
    "dropped_all_right",
    "dropped_all_wrong",
    "dropped_other",
    "batches",
    "zero_std_all_right",
    "zero_std_all_wrong",
    "zero_std_other",
    "step_time_s",
)


class HeldStep(Protocol):
    row: JSONObject
    previous: Optional[JSONObject]
    step: int


class WindowLike(Protocol):
    start_us: int
    end_us: Optional[int]
    reason: str
    line: int
    peak_c: Optional[float]


def step_values(
    run: str,
    started_at: Optional[str],
    manifest: Optional[JSONObject],
    held: HeldStep,
    windows: Sequence[WindowLike],
    config: Optional["RunConfig"] = None,
) -> tuple[dict[str, float], Optional[str]]:
    """({field: value} of the step's known summary values, the Miles key of its reward or None).

    `config`: the run's configuration, resolved once per run by the caller (`run_config`); else here.
    """
    rows = [held.row]
    before = _step(held.previous) if held.previous is not None else None
    if held.previous is not None and before is not None and before < held.step:
        rows.insert(0, held.previous)
    status: JSONObject = {"run": run, "state": "running", "started_at": started_at}
    capture = RunCapture(
        name=run,
        status=status,
        manifest=manifest,
        args=None,
        steps=_columns(rows),
        pauses=[PauseWindow(w.start_us, w.end_us, w.reason, w.line, w.peak_c) for w in windows],
        notes=[],
        directory=None,
    )
    frame = read_frame(capture, config)
    built = build_rows(frame, RunNotes())
    table = built.table
    position = len(table) - 1
    values: dict[str, float] = {}
    for name in DERIVED_FIELDS:
        value = getattr(table, name)[position]
        if value is None:
            continue
        values[name] = float(value)  # bools (clean) as 0 or 1
    return values, built.reward_key


def run_config(run: str, manifest: Optional[JSONObject]) -> "RunConfig":
    """The run's filter, B, O and n from its manifest, as the summary resolves them (once per run)."""
    capture = RunCapture(run, None, manifest, None, _columns([]), [], [], None)
    return resolve_config(capture, RunNotes())


def _step(row: JSONObject) -> Optional[int]:
    step = row.get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _columns(rows: list[JSONObject]) -> MetricsColumns:
    """Metrics rows (checked by the caller: an integer step, a metrics object) as the summary's columns."""
    steps: list[int] = []
    complete: list[bool] = []
    ends: list[Optional[int]] = []
    step_ends: list[Optional[int]] = []
    metrics: list[JSONObject] = []
    for row in rows:
        step = _step(row)
        found = row.get("metrics")
        if step is None or not isinstance(found, dict):
            continue
        steps.append(step)
        complete.append(row.get("complete") is True)
        ends.append(parse_time_us(row.get("t_rollout_end")))
        step_ends.append(parse_time_us(row.get("t_step_end")))
        metrics.append(found)
    return MetricsColumns(steps, complete, ends, step_ends, metrics, list(range(1, len(steps) + 1)))
