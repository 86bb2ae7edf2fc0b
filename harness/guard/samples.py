"""What a sensor reads: one Sample, the Sensor protocol, and what makes a reading implausible.

Shared by every sensor (harness.guard.sensors) and the NVML one (harness.guard.nvml).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Optional, Protocol, runtime_checkable

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

# nvidia-ml-py's names and values for the clock-event reasons that mean heat (a
# test pins them to pynvml's), so that deciding never imports NVML.
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040
THERMAL_REASONS = {
    "HwSlowdown": nvmlClocksEventReasonHwSlowdown,
    "SwThermalSlowdown": nvmlClocksEventReasonSwThermalSlowdown,
    "HwThermalSlowdown": nvmlClocksEventReasonHwThermalSlowdown,
}

# A reading outside these is a sensor's garbage (an unset or zeroed file, a wedged driver), never a GPU in a room
# people work in: a missing reading. 0 C is the usual garbage, so the floor is above it.
PLAUSIBLE_C = (5.0, 150.0)
# NVML's clock-event reasons are bits 0x1 to 0x100 (and "unknown", bit 63): a mask with bits above 0xFFFF, or a
# negative one (-1 would set every thermal bit), is not one NVML gives.
PLAUSIBLE_REASONS = 0xFFFF | 1 << 63

WallClock = Callable[[], int]  # microseconds since the epoch, UTC
Clock = Callable[[], float]  # monotonic seconds


def wall_clock_us() -> int:
    """Now, in microseconds since the epoch."""
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Limit:
    """What one watched temperature is judged against: pause at or above `pause_at_c`, resume at or below
    `resume_at_c`; `basis` says where the pause point comes from, for the pause's reason."""

    pause_at_c: float
    resume_at_c: float
    basis: str  # `pause_at_c 85 C`, or `94.5 C, 10 C below its critical point 104.5 C`
    trip_c: Optional[float] = None  # the trip point the pause point is taken below (None: the GPU's thresholds)
    trip_type: Optional[str] = None  # hot or critical


@dataclass(frozen=True)
class ZoneTemp:
    """A temperature watched beside the GPU's (a thermal zone, the simulator's CPU side), with its own limit."""

    name: str  # stable: a key of guard.jsonl's `zones` (`thermal_zone3`, `sim_cpu`)
    label: str  # for people: `thermal_zone3 (soc)`
    temp_c: Optional[float]  # None: unreadable at this poll
    limit: Limit


@dataclass(frozen=True)
class Sample:
    """One reading: when it was taken, and whatever the sensor could read (None where it could not).

    `temp_c` is the GPU's temperature (judged against pause_at_c); `zones` the
    other temperatures the sensor watches, each with its own limit.
    """

    time_us: int
    temp_c: Optional[float] = None
    reasons: Optional[int] = None  # NVML clock-event reasons bitmask
    power_w: Optional[float] = None
    zones: tuple[ZoneTemp, ...] = ()

    def temperatures(self) -> list[float]:
        """Every temperature read at this poll, the GPU's first."""
        found = [self.temp_c] if self.temp_c is not None else []
        return found + [zone.temp_c for zone in self.zones if zone.temp_c is not None]

    @property
    def hottest_c(self) -> Optional[float]:
        """The hottest temperature read at this poll (None: none was read)."""
        return max(self.temperatures(), default=None)


class Sensor(Protocol):
    """Something that reads the machine's temperature."""

    name: str

    def read(self) -> Optional[Sample]:
        """This poll's reading, or None when nothing could be read. Never raises."""

    def facts(self) -> JSONObject:
        """What the sensor found when it opened: for the manifest, once."""

    def close(self) -> None:
        """Release what the sensor holds."""


@runtime_checkable
class PauseAware(Protocol):
    """A sensor whose reading depends on whether the run is paused (the simulated one)."""

    def set_paused(self, paused: bool) -> None:
        """The loop paused (True) or resumed (False) the run."""


class SensorUnavailable(Exception):
    """A sensor that cannot read here; the message says why in a few words."""


def _implausible_c(temp_c: Optional[float]) -> bool:
    low, high = PLAUSIBLE_C
    return temp_c is not None and not low <= temp_c <= high


def _believed(low: float, high: float) -> str:
    return f"a temperature is believed between {low:g} and {high:g} C"


def implausible(sample: Sample) -> Optional[str]:
    """Why a sample cannot be a true reading of the GPU (its temperature or reasons mask out of range), or None."""
    if _implausible_c(sample.temp_c):
        return f"{sample.temp_c:.1f} C; {_believed(*PLAUSIBLE_C)}"
    if sample.reasons is not None and (sample.reasons < 0 or sample.reasons & ~PLAUSIBLE_REASONS):
        shown = sample.reasons if sample.reasons < 0 else hex(sample.reasons)
        return f"clock-event reasons {shown}"
    return None


def without_implausible_zones(sample: Sample) -> tuple[Sample, list[str]]:
    """`sample` with each zone whose temperature cannot be true read as missing, and why, per zone."""
    why = [
        f"{zone.label}: {zone.temp_c:.1f} C; {_believed(*PLAUSIBLE_C)}"
        for zone in sample.zones
        if zone.temp_c is not None and _implausible_c(zone.temp_c)
    ]
    if not why:
        return sample, []
    zones = tuple(replace(zone, temp_c=None) if _implausible_c(zone.temp_c) else zone for zone in sample.zones)
    return replace(sample, zones=zones), why


def finite(value: float) -> Optional[float]:
    """`value`, or None for NaN and infinities (never written to a record)."""
    return value if math.isfinite(value) else None
