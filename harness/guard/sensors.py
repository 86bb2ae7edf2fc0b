"""Sensors: one small protocol, `read() -> Sample | None`, and the ones the guard knows.

- `nvml`: the GPU through nvidia-ml-py (harness.guard.nvml);
- `sysfs`: the hottest of the kernel's thermal zones (GB10 exposes several ACPI zones);
- `file:PATH`: a number in a file (degrees C, optionally followed by a
  clock-event reasons mask), for drills, tests and anything external;
- `sim`: a thermal model for the simulator, told by the loop whether the run is paused;
- `auto`: nvml, else sysfs, else none with a warning.

A sensor never raises from `read`: a reading it cannot take is None (or a
field of the sample is None), and the policy decides what a missing reading means.
What a sensor found when it opened (what was picked, what is unsupported) is
its `facts()`, recorded once in the run's manifest.
"""

from __future__ import annotations

import math
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.errors import HarnessError
from harness.guard.config import GuardConfig, SimSensorConfig
from harness.guard.samples import (
    Clock,
    Sample,
    Sensor,
    SensorUnavailable,
    WallClock,
    finite,
    nvmlClocksEventReasonSwThermalSlowdown,
    wall_clock_us,
)

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

FILE_HEAD_BYTES = 256  # a file sensor reads this much at most: "84.5 0x20" fits many times over
THERMAL_ROOT = Path("/sys/class/thermal")


class FileSensor:
    """Degrees C as the first word of a file; an optional second word is a reasons mask (0x20, 32).

    Only a regular file is read, opened non-blocking and only its head: a FIFO
    nobody writes, or a device like /dev/zero, is a missing reading, never a
    guard stuck in `read`. `problem` says why the last read found no reading
    worth a note (None when it read, or when the file is merely absent or bad).
    """

    name = "file"

    def __init__(self, path: Path, wall_us: WallClock = wall_clock_us) -> None:
        self.path = Path(path)
        self._wall_us = wall_us
        self.problem: Optional[str] = None

    def read(self) -> Optional[Sample]:
        try:
            sample = self._parse()
        except SensorUnavailable:
            return None
        self.problem = None
        return sample

    def check(self) -> None:
        """SensorUnavailable (saying why) unless the file holds a reading now."""
        self._parse()

    def _parse(self) -> Sample:
        self.problem = None
        try:
            text = self._head().decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise SensorUnavailable(f"cannot read {self.path}: {getattr(err, 'strerror', None) or err}") from None
        words = text.split()
        try:
            temp = finite(float(words[0]))
            reasons = int(words[1], 0) if len(words) > 1 else None
        except (ValueError, IndexError):
            first = words[0][:20] if words else ""
            raise SensorUnavailable(f"{self.path} does not start with a temperature in C ({first!r})") from None
        return Sample(self._wall_us(), temp_c=temp, reasons=reasons)

    def _head(self) -> bytes:
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                self.problem = f"{self.path} is not a regular file"
                raise SensorUnavailable(self.problem)
            return os.read(fd, FILE_HEAD_BYTES)
        finally:
            os.close(fd)

    def facts(self) -> JSONObject:
        return {"path": str(self.path), "readable": self.read() is not None}

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ThermalZone:
    """One kernel thermal zone as found when probed."""

    zone: str
    type: str
    temp_c: Optional[float]
    error: Optional[str] = None


def _zone_number(path: Path) -> int:
    digits = re.sub(r"\D", "", path.name)
    return int(digits) if digits else -1


def probe_thermal_zones(root: Path = THERMAL_ROOT) -> list[ThermalZone]:
    """Every thermal_zone* under `root`, with its type and current temperature (or why it cannot be read)."""
    zones = []
    for path in sorted(Path(root).glob("thermal_zone*"), key=_zone_number):
        try:
            kind = (path / "type").read_text().strip()
        except OSError:
            kind = "?"
        try:
            zones.append(ThermalZone(path.name, kind, _millidegrees(path / "temp")))
        except (OSError, ValueError) as err:
            zones.append(ThermalZone(path.name, kind, None, getattr(err, "strerror", None) or str(err)))
    return zones


def _millidegrees(path: Path) -> Optional[float]:
    return finite(int(path.read_text().strip()) / 1000.0)


class SysfsSensor:
    """The hottest readable thermal zone under `root` (/sys/class/thermal)."""

    name = "sysfs"

    def __init__(self, root: Path = THERMAL_ROOT, wall_us: WallClock = wall_clock_us) -> None:
        self.root = Path(root)
        self._wall_us = wall_us
        self.zones = probe_thermal_zones(self.root)
        self._paths = [self.root / zone.zone / "temp" for zone in self.zones if zone.temp_c is not None]
        if not self._paths:
            found = f"{len(self.zones)} unreadable" if self.zones else "none"
            raise SensorUnavailable(f"no readable thermal zone under {self.root} ({found})")

    def read(self) -> Optional[Sample]:
        hottest: Optional[float] = None
        for path in self._paths:
            try:
                temp = _millidegrees(path)
            except (OSError, ValueError):
                continue
            if temp is not None and (hottest is None or temp > hottest):
                hottest = temp
        return None if hottest is None else Sample(self._wall_us(), temp_c=hottest)

    def facts(self) -> JSONObject:
        return {
            "root": str(self.root),
            "zones": [{"zone": z.zone, "type": z.type, "readable": z.temp_c is not None} for z in self.zones],
        }

    def close(self) -> None:
        pass


class SimSensor:
    """Newton cooling toward `hot_c` while the run runs and toward `idle_c` while it is paused.

    The temperature follows T' = (target - T) / tau exactly between reads, so
    the curve does not depend on how often it is read.
    """

    name = "sim"

    def __init__(self, model: SimSensorConfig, clock: Clock = time.monotonic, wall_us: WallClock = wall_clock_us):
        self.model = model
        self._clock = clock
        self._wall_us = wall_us
        self._temp_c = model.start_c
        self._at = clock()
        self._paused = False

    def _advance(self) -> float:
        now = self._clock()
        model = self.model
        target, tau = (model.idle_c, model.cool_tau_s) if self._paused else (model.hot_c, model.heat_tau_s)
        self._temp_c = target + (self._temp_c - target) * math.exp(-max(0.0, now - self._at) / tau)
        self._at = now
        return self._temp_c

    def set_paused(self, paused: bool) -> None:
        self._advance()  # the time so far was spent in the old state
        self._paused = paused

    def read(self) -> Optional[Sample]:
        temp = self._advance()
        reasons = nvmlClocksEventReasonSwThermalSlowdown if temp >= self.model.throttle_at_c else 0
        return Sample(self._wall_us(), temp_c=round(temp, 2), reasons=reasons)

    def facts(self) -> JSONObject:
        return {"model": self.model.model_dump(mode="json")}

    def close(self) -> None:
        pass


@dataclass
class SensorChoice:
    """The sensor a guard block asked for, as opened here (None: unguarded), and the facts for the manifest."""

    sensor: Optional[Sensor]
    facts: JSONObject
    warnings: list[str] = field(default_factory=list)


def open_sensor(
    config: GuardConfig,
    *,
    thermal_root: Path = THERMAL_ROOT,
    clock: Clock = time.monotonic,
    wall_us: WallClock = wall_clock_us,
) -> SensorChoice:
    """Open the sensor `config.sensor` names. `auto` falls back (nvml, sysfs, none with a warning);
    a named sensor that cannot read here is a one-line error, never an unguarded run."""
    requested = config.sensor
    if requested == "none":
        return SensorChoice(None, {"requested": "none", "picked": None})
    if requested.startswith("file:"):
        file_sensor = FileSensor(Path(requested[len("file:") :]), wall_us)
        try:
            file_sensor.check()
        except SensorUnavailable as err:
            raise HarnessError(f"guard.sensor {requested}: {err}") from None
        return _chosen(requested, file_sensor, {})
    if requested == "sim":
        return _chosen(requested, SimSensor(config.sim, clock, wall_us), {})
    tried: dict[str, str] = {}
    for name in ("nvml", "sysfs") if requested == "auto" else (requested,):
        try:
            sensor = _open_named(name, thermal_root, wall_us)
        except SensorUnavailable as err:
            tried[name] = str(err)
            continue
        choice = _chosen(requested, sensor, tried)
        choice.warnings += _threshold_warnings(config, choice.facts)
        return choice
    if requested != "auto":
        raise HarnessError(f"guard.sensor {requested}: {tried[requested]}")
    why = "; ".join(f"{name}: {reason}" for name, reason in tried.items())
    return SensorChoice(
        None,
        {"requested": "auto", "picked": None, "tried": dict(tried)},
        [f"heat guard off: no sensor can read a temperature here ({why})"],
    )


def _open_named(name: str, thermal_root: Path, wall_us: WallClock) -> Sensor:
    if name == "nvml":
        from harness.guard.nvml import NvmlSensor

        return NvmlSensor.open(wall_us)
    return SysfsSensor(thermal_root, wall_us)


def _chosen(requested: str, sensor: Sensor, tried: dict[str, str]) -> SensorChoice:
    facts: JSONObject = {"requested": requested, "picked": sensor.name}
    if tried:
        facts["tried"] = dict(tried)
    facts.update(sensor.facts())
    return SensorChoice(sensor, facts)


def _threshold_warnings(config: GuardConfig, facts: JSONObject) -> list[str]:
    """Warn when the GPU's own slowdown threshold (where NVML reports one) is below pause_at_c."""
    warnings = []
    devices = facts.get("devices")
    for device in devices if isinstance(devices, list) else []:
        if not isinstance(device, dict):
            continue
        thresholds = device.get("thresholds_c")
        slowdown = thresholds.get("slowdown") if isinstance(thresholds, dict) else None
        if isinstance(slowdown, (int, float)) and config.pause_at_c >= slowdown:
            warnings.append(
                f"guard.pause_at_c {config.pause_at_c:g} C is at or above GPU {device['index']}'s slowdown "
                f"threshold {slowdown:g} C: the GPU will throttle itself before the guard pauses the run"
            )
    return warnings
