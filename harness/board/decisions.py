"""An adaptive comparison's decision on TensorBoard: the text `decision` of the TensorBoard run
`decisions/<record name>`, one entry per interim (step = the interim), rewritten whole after each interim.

The text is the record's answer, one line per comparison, as `harness decide` prints it (SIMULATED first for
simulated runs). The events are the lesser record: the caller turns a failure into a warning.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.board.eventfile import EventFile, missing_writer
from harness.board.names import TENSORBOARD_DIR_NAME
from harness.board.records import Text
from harness.summary.decisions import decision_summary

if TYPE_CHECKING:
    from harness.stats.record import Record

DECISIONS_RUN = "decisions"  # <capture root>/tensorboard/decisions/<name>: never a capture run's condition
DECISION_TAG = "decision"


def decision_events_dir(capture_root: Path, name: str) -> Path:
    """`<capture root>/tensorboard/decisions/<name>`."""
    return Path(capture_root) / TENSORBOARD_DIR_NAME / DECISIONS_RUN / name


def write_decision_text(capture_root: Path, record: Record) -> bool:
    """The record's answer after each of its interims, as text events (the old file replaced); False where
    tensorboardX is missing. OSError when the file cannot be written."""
    from dataclasses import replace

    if missing_writer() is not None or record.header is None:
        return False
    texts = []
    now = time.time()
    for count in range(1, len(record.interims) + 1):
        upto = replace(record, interims=record.interims[:count], torn=None)
        lines = [comparison.answer for comparison in decision_summary(upto).comparisons]
        if record.header.simulated:
            lines.insert(0, "SIMULATED: the simulator's runs, not a GB10's")
        texts.append(Text(DECISION_TAG, count, now, "\n\n".join(lines)))
    directory = decision_events_dir(capture_root, record.header.name)
    old = list(directory.glob("events.out.tfevents.*")) if directory.is_dir() else []
    events = EventFile(directory, Path(capture_root))
    try:
        events.write(texts)
    finally:
        events.close()
    for path in old:
        if path != events.path:
            path.unlink(missing_ok=True)
    return True
