"""What a sensor reads: one Sample, the Sensor protocol, and what makes a reading implausible.

Shared by every sensor (harness.guard.sensors) and the NVML one (harness.guard.nvml).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
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
class Sample:
    """One reading: when it was taken, and whatever the sensor could read (None where it could not)."""

    time_us: int
    temp_c: Optional[float] = None
    reasons: Optional[int] = None  # NVML clock-event reasons bitmask
    power_w: Optional[float] = None


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


def implausible(sample: Sample) -> Optional[str]:
    """Why a sample cannot be a true reading (a temperature or a reasons mask out of range), or None."""
    low, high = PLAUSIBLE_C
    if sample.temp_c is not None and not low <= sample.temp_c <= high:
        return f"{sample.temp_c:.1f} C; a temperature is believed between {low:g} and {high:g} C"
    if sample.reasons is not None and (sample.reasons < 0 or sample.reasons & ~PLAUSIBLE_REASONS):
        shown = sample.reasons if sample.reasons < 0 else hex(sample.reasons)
        return f"clock-event reasons {shown}"
    return None


def finite(value: float) -> Optional[float]:
    """`value`, or None for NaN and infinities (never written to a record)."""
    return value if math.isfinite(value) else None
