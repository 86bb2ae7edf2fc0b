"""Helpers for heat guard drills: a sensor reading written in one step, a guard record read back."""

from __future__ import annotations

import json
from pathlib import Path


def write_temp(path: Path, text: str) -> None:
    """Replace the sensor file in one step, as a drill script should (a reader never sees it half written)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def jsonl(path: Path) -> list[dict]:
    """Every line of a JSONL record (pauses.jsonl, guard.jsonl), or [] when there is none."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
