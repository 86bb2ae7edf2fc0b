"""guard.jsonl read back: the heat guard's samples and what each temperature was judged against.

The guard writes two kinds of line (harness/guard/loop.py): samples
`{"t", "temp_c", "reasons", "power_w", "paused", "gpu_c", "zones"}` and
watch lines `{"t", "watch": {"sensor", "pause_at_c", "resume_at_c",
"zones": [...]}}`. Older captures have samples without `gpu_c` and `zones`
(their `temp_c` was the one temperature watched) and no watch line.

Read as every reader of a capture reads (harness.fs.bounded): bounded,
regular files only, a bad line a note, never an exception; a line torn by a
power-off (its tail NUL bytes, or cut short) is never parsed, and every
complete line before it is kept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.fs.bounded import iter_jsonl
from harness.times import parse_time_us

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

GUARD_LOG = "guard.jsonl"


@dataclass(frozen=True)
class GuardSample:
    """One sample: when, the hottest temperature, the GPU's, each zone's, the clock-event reasons, paused or not."""

    t_us: int
    temp_c: Optional[float]
    gpu_c: Optional[float]
    zones: dict[str, Optional[float]]
    reasons: Optional[int]
    paused: bool


@dataclass(frozen=True)
class WatchedZone:
    """A temperature watched beside the GPU's, as a watch line names it."""

    name: str
    label: str
    pause_at_c: Optional[float]
    resume_at_c: Optional[float]
    trip_c: Optional[float]
    trip_type: Optional[str]


@dataclass
class GuardLog:
    """Every complete sample of guard.jsonl, in order, and the limits its watch lines gave (the last per zone)."""

    samples: list[GuardSample] = field(default_factory=list)
    sensor: Optional[str] = None
    pause_at_c: Optional[float] = None
    resume_at_c: Optional[float] = None
    zones: dict[str, WatchedZone] = field(default_factory=dict)

    def zone_names(self) -> list[str]:
        """Every zone named by a watch line or a sample, in the order first seen."""
        names = dict.fromkeys(self.zones)
        for sample in self.samples:
            names.update(dict.fromkeys(sample.zones))
        return list(names)


def _number(value: JSONValue) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _text(value: JSONValue) -> Optional[str]:
    return value if isinstance(value, str) else None


def read_guard_log(path: Path, notes: list[str]) -> GuardLog:
    """guard.jsonl at `path` (none: an empty log); a note for each line that is not a sample or a watch line."""
    log = GuardLog()
    for number, obj in iter_jsonl(Path(path), notes):
        t_us = parse_time_us(obj.get("t"))
        if t_us is None:
            notes.append(f"{GUARD_LOG} line {number}: t {obj.get('t')!r} is not an RFC 3339 time: skipped")
            continue
        watch = obj.get("watch")
        if isinstance(watch, dict):
            _read_watch(log, watch)
            continue
        if "temp_c" not in obj:
            notes.append(f"{GUARD_LOG} line {number}: neither a sample nor a watch line: skipped")
            continue
        log.samples.append(_sample(t_us, obj))
    return log


def _sample(t_us: int, obj: JSONObject) -> GuardSample:
    zones_raw = obj.get("zones")
    zones = {str(k): _number(v) for k, v in zones_raw.items()} if isinstance(zones_raw, dict) else {}
    reasons = obj.get("reasons")
    gpu = _number(obj.get("gpu_c")) if "gpu_c" in obj else (_number(obj.get("temp_c")) if not zones else None)
    return GuardSample(
        t_us=t_us,
        temp_c=_number(obj.get("temp_c")),
        gpu_c=gpu,  # a sample from before zones were watched: its one temperature was the GPU's (or the sensor's)
        zones=zones,
        reasons=reasons if isinstance(reasons, int) and not isinstance(reasons, bool) else None,
        paused=obj.get("paused") is True,
    )


def _read_watch(log: GuardLog, watch: JSONObject) -> None:
    log.sensor = _text(watch.get("sensor")) or log.sensor
    log.pause_at_c = _number(watch.get("pause_at_c")) or log.pause_at_c
    log.resume_at_c = _number(watch.get("resume_at_c")) or log.resume_at_c
    zones = watch.get("zones")
    for zone in zones if isinstance(zones, list) else []:
        if not isinstance(zone, dict) or not isinstance(zone.get("name"), str):
            continue
        name = str(zone["name"])
        log.zones[name] = WatchedZone(
            name=name,
            label=_text(zone.get("label")) or name,
            pause_at_c=_number(zone.get("pause_at_c")),
            resume_at_c=_number(zone.get("resume_at_c")),
            trip_c=_number(zone.get("trip_c")),
            trip_type=_text(zone.get("trip_type")),
        )
