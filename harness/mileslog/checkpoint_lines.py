"""What Miles's FSDP backend prints about checkpoints (MILES-LOGS section 7): saves, loads, and the silent fallbacks.

    [FSDP] Saved checkpoint to DIR/iter_0000010
    [FSDP] Loaded model from DIR/iter_0000010/model
    [FSDP] Loaded optimizer from DIR/iter_0000010/optimizer
    [FSDP] Checkpoint directory DIR not found; skipping load.          each of these four: trains from scratch
    [FSDP] No tracker file at DIR/latest_checkpointed_iteration.txt; skipping load.
    [FSDP] Model checkpoint DIR/iter_0000010/model not found; skipping load.
    [FSDP] Failed to load model from DIR/iter_0000010/model: <error>
    Checkpoint DIR/rollout/global_dataset_state_dict_9.pt does not exist.   the data source starts from the first prompt

And where a rollout's id shows first: `ft event=gather_start rollout_id=N` as
the rollout starts, else its `perf N: {...}` line as it ends.

`read_checkpoint_line` is called on every line a checkpointed run prints, so
it answers most lines with two substring tests and no pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Optional

from harness.mileslog.lines import find_metric, strip_ansi

Kind = Literal["saved", "loaded_model", "loaded_optimizer", "skipped", "load_failed", "data_missing"]

_FSDP = "[FSDP] "
_SAVED = re.compile(r"\[FSDP\] Saved checkpoint to (\S.*?)\s*$")
_LOADED = re.compile(r"\[FSDP\] Loaded (model|optimizer) from (\S.*?)\s*$")
_SKIPPED = re.compile(
    r"\[FSDP\] (?:Checkpoint directory (\S.*?) not found|No tracker file at (\S.*?)|Model checkpoint (\S.*?) not found);"
    r" skipping load\."
)
_LOAD_FAILED = re.compile(r"\[FSDP\] Failed to load model from (\S+?): (.*?)\s*$")
_DATA_MISSING = re.compile(r"(?:^|[ \]-] )(Checkpoint (\S+) does not exist\.)")
_GATHER = re.compile(r"ft event=gather_start rollout_id=([0-9]{1,12})\b")
_REPEAT = re.compile(r"\s*\[repeated \d{1,12}x across cluster\]\s*$")
MAX_QUOTED = 300
_BY_KIND: tuple[tuple[re.Pattern[str], Kind], ...] = (
    (_SAVED, "saved"),
    (_SKIPPED, "skipped"),
    (_LOAD_FAILED, "load_failed"),
)


@dataclass(frozen=True)
class CheckpointLine:
    """One checkpoint line: its kind, the path it names, and the words quoted from it."""

    kind: Kind
    path: str
    quoted: str  # from `[FSDP]` (or `Checkpoint`) to the end, as the trainer printed it


def read_checkpoint_line(line: str) -> Optional[CheckpointLine]:
    """The checkpoint line `line` is, or None (most lines: two substring tests)."""
    if _FSDP not in line and "does not exist." not in line:
        return None
    text = _REPEAT.sub("", strip_ansi(line))
    start = text.find(_FSDP)
    if start < 0:
        match = _DATA_MISSING.search(text)
        return CheckpointLine("data_missing", match.group(2), _quote(match.group(1))) if match else None
    quoted = _quote(text[start:])
    for pattern, kind in _BY_KIND:
        match = pattern.search(text, start)
        if match is not None:
            path = next(group for group in match.groups() if group)
            return CheckpointLine(kind, path, quoted)
    match = _LOADED.search(text, start)
    if match is not None:
        return CheckpointLine(
            "loaded_model" if match.group(1) == "model" else "loaded_optimizer", match.group(2), quoted
        )
    return None


def rollout_started(line: str) -> Optional[int]:
    """The rollout id a line shows a rollout under way with: its `ft event=gather_start`, or a `perf`/`rollout`
    metric line (printed as the rollout ends); None for any other line."""
    if "rollout_id=" in line:
        match = _GATHER.search(line)
        if match is not None:
            return int(match.group(1))
    if ": {" in line:
        head = find_metric(strip_ansi(line))
        if head is not None and head.group(1) in ("perf", "rollout"):
            return int(head.group(2))
    return None


def _quote(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_QUOTED else text[: MAX_QUOTED - 3] + "..."
