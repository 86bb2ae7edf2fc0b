"""The lines the guard writes (CONTRACT: docs/guard.md, "Records"): pauses.jsonl's windows, guard.jsonl's samples
and its watch lines, each as the loop (harness.guard.loop) writes it."""

from __future__ import annotations

from typing import Optional, TypedDict

from harness.guard.config import GuardConfig
from harness.guard.samples import Sample, ZoneTemp


class PauseRecord(TypedDict):
    """One line of pauses.jsonl: a window, `end` None while it is open."""

    start: str
    end: Optional[str]
    reason: Optional[str]
    peak_c: Optional[float]


class FailedPauseRecord(PauseRecord):
    """The closing line of a window whose freeze the engine refused: closed at its start, with the engine's words
    and what the guard did then."""

    failed: str
    on_pause_failure: str


class SampleRecord(TypedDict):
    """One sample line of guard.jsonl: `temp_c` the hottest watched temperature, `gpu_c` the GPU's, `zones` each
    other watched temperature by name (null: unread at this poll); `paused` as the poll decided."""

    t: str
    temp_c: Optional[float]
    reasons: Optional[int]
    power_w: Optional[float]
    paused: bool
    gpu_c: Optional[float]
    zones: dict[str, Optional[float]]


class WatchedRecord(TypedDict):
    """One watched temperature in a watch line: its name and label, and the limit it is judged against."""

    name: str
    label: str
    pause_at_c: float
    resume_at_c: float
    basis: str
    trip_c: Optional[float]
    trip_type: Optional[str]


class WatchLimits(TypedDict):
    """What a watch line says: the sensor, the GPU's thresholds, and each zone's."""

    sensor: str
    pause_at_c: float
    resume_at_c: float
    zones: list[WatchedRecord]


class WatchRecord(TypedDict):
    """A watch line of guard.jsonl (it has no `temp_c`: readers of samples pass over it)."""

    t: str
    watch: WatchLimits


def sample_record(sample: Optional[Sample], *, paused: bool, t: str) -> SampleRecord:
    """The sample line of one poll at time `t` (its sample's own time when it read one; nulls when it did not)."""
    zones = sample.zones if sample is not None else ()
    return {
        "t": t,
        "temp_c": sample.hottest_c if sample is not None else None,
        "reasons": sample.reasons if sample is not None else None,
        "power_w": sample.power_w if sample is not None else None,
        "paused": paused,
        "gpu_c": sample.temp_c if sample is not None else None,
        "zones": {zone.name: zone.temp_c for zone in zones},
    }


def watch_record(t: str, sensor: str, config: GuardConfig, zones: tuple[ZoneTemp, ...]) -> WatchRecord:
    """The watch line at time `t`: the sensor, the GPU's thresholds and each watched zone's limit."""
    return {
        "t": t,
        "watch": {
            "sensor": sensor,
            "pause_at_c": config.pause_at_c,
            "resume_at_c": config.resume_at_c,
            "zones": [
                {
                    "name": zone.name,
                    "label": zone.label,
                    "pause_at_c": zone.limit.pause_at_c,
                    "resume_at_c": zone.limit.resume_at_c,
                    "basis": zone.limit.basis,
                    "trip_c": zone.limit.trip_c,
                    "trip_type": zone.limit.trip_type,
                }
                for zone in zones
            ],
        },
    }
