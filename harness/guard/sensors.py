"""Sensors: one small protocol, `read() -> Sample | None`, and the ones the guard knows.

- `nvml`: the GPU through nvidia-ml-py (harness.guard.nvml);
- `sysfs`: every readable kernel thermal zone, each judged against its own
  trip points (GB10 exposes several ACPI zones, the CPU side among them);
  every file of a zone is read as the capture reader reads (a regular file,
  never blocking, at most a page), the zones' probe within a time limit, and
  a value that is not a plausible temperature is skipped, with one note;
- `file:PATH`: a number in a file (degrees C, optionally followed by a
  clock-event reasons mask), for drills, tests and anything external;
- `sim`: a thermal model for the simulator (the GPU and a CPU side), told by
  the loop whether the run is paused;
- `auto`: nvml and every readable thermal zone together (the GB10 is one chip:
  its CPU side can reach a trip point while the GPU reads cool); whichever of
  them reads here, else none with a warning.

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
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.errors import HarnessError
from harness.fs.bounded import Unreadable, read_bounded
from harness.guard.config import GuardConfig, SimSensorConfig, SimZoneConfig
from harness.guard.nvml import NvmlSensor
from harness.guard.samples import (
    PLAUSIBLE_C,
    Clock,
    Limit,
    Sample,
    Sensor,
    SensorUnavailable,
    WallClock,
    ZoneTemp,
    finite,
    nvmlClocksEventReasonSwThermalSlowdown,
    wall_clock_us,
)

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

FILE_HEAD_BYTES = 256  # a file sensor reads this much at most: "84.5 0x20" fits many times over
THERMAL_ROOT = Path("/sys/class/thermal")
THERMAL_ROOT_ENV = "HARNESS_THERMAL_ROOT"  # for tests, and machines that mount sysfs elsewhere
LIMITING_TRIPS = ("hot", "critical")  # the trip points a zone's pause point is taken below
MAX_TRIP_POINTS = 32  # a zone lists a handful; a directory with thousands is not a thermal zone
# A sysfs file says it is a page long whatever it holds (4 KiB; 64 KiB on an arm64 kernel with 64 KiB pages, as a
# Grace machine's may be): the cap is on what a file says it holds, and is far above any page.
ATTRIBUTE_BYTES = 1 << 20
ZONE_PROBE_TIMEOUT_S = 5.0  # the zones' probe at opening: a driver that never answers is given up on
SKIPPED_SHOWN = 6  # the one note names this many skipped values, then counts the rest
_MILLIDEGREES = re.compile(r"-?[0-9]{1,9}")  # what the kernel prints: an int of millidegrees


def default_thermal_root() -> Path:
    """Where the kernel's thermal zones are: HARNESS_THERMAL_ROOT, else /sys/class/thermal."""
    return Path(os.environ.get(THERMAL_ROOT_ENV) or THERMAL_ROOT)


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
        """SensorUnavailable (saying why) unless the file holds a reading now: a number, and a finite one."""
        sample = self._parse()
        if sample.temp_c is None:  # nan or inf: never a temperature, and a run guarded by it is not guarded
            first = self._head().decode("utf-8", "replace").split()[0][:20]
            raise SensorUnavailable(f"{self.path} does not start with a temperature in C ({first!r} is not finite)")

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


# --------------------------------------------------------------------------- thermal zones


@dataclass(frozen=True)
class TripPoint:
    """One of a zone's trip points: `trip_point_N_temp` (millidegrees) and `trip_point_N_type`."""

    index: int
    type: str  # passive, active, hot, critical (or what the driver calls it)
    temp_c: Optional[float]  # None: unreadable, or not a temperature a zone could reach

    @property
    def limiting(self) -> bool:
        """Whether the zone's pause point is taken below it (a hot or critical point with a believable value)."""
        return self.type in LIMITING_TRIPS and self.temp_c is not None


@dataclass(frozen=True)
class ThermalZone:
    """One kernel thermal zone as found when probed."""

    zone: str
    type: str
    temp_c: Optional[float]
    error: Optional[str] = None
    trips: tuple[TripPoint, ...] = ()
    skipped: tuple[str, ...] = ()  # `temp '99999…' (400 characters)`: values that are not plausible temperatures

    @property
    def label(self) -> str:
        """`thermal_zone3 (soc)`: how reasons, notes and the figure name it."""
        return f"{self.zone} ({self.type})" if self.type and self.type != "?" else self.zone

    def lowest_limiting_trip(self) -> Optional[TripPoint]:
        """The lowest hot or critical trip point, or None."""
        found = [trip for trip in self.trips if trip.limiting]
        return min(found, key=lambda trip: trip.temp_c or 0.0) if found else None


def _zone_number(path: Path) -> int:
    digits = re.sub(r"\D", "", path.name)
    return int(digits) if digits else -1


def read_attribute(path: Path) -> str:
    """A sysfs file's text: a bounded read of a regular file that never blocks (a FIFO is Unreadable, never waited
    on, and so is a file that says it holds more than ATTRIBUTE_BYTES); FileNotFoundError, Unreadable."""
    return read_bounded(path, ATTRIBUTE_BYTES).decode("utf-8", "replace").strip()


def _degrees(text: str) -> float:
    """Degrees C from millidegrees as the kernel prints them; ValueError for anything else (400 digits too)."""
    if not _MILLIDEGREES.fullmatch(text):
        raise ValueError(f"{_shown(text)}: not a temperature")
    return int(text) / 1000.0


def _plausible(text: str) -> float:
    """`_degrees`, and a temperature a zone could reach (PLAUSIBLE_C); ValueError saying why not."""
    degrees = _degrees(text)
    low, high = PLAUSIBLE_C
    if not low <= degrees <= high:
        raise ValueError(f"{degrees:g} C: not a plausible temperature (believed between {low:g} and {high:g} C)")
    return degrees


def _shown(text: str) -> str:
    """A value as a note shows it: quoted, and cut short with its length when long."""
    return repr(text) if len(text) <= 12 else f"{text[:8]!r}... ({len(text):,} characters)"


def _read_trips(path: Path, skipped: list[str]) -> tuple[TripPoint, ...]:
    """A zone's trip points, by number; a value that is not a plausible temperature (drivers write 0, or 127 C
    placeholders, or worse) is kept as unreadable, so it never sets a limit, and said in `skipped`."""
    trips = []
    for index in range(MAX_TRIP_POINTS):
        temp_file = path / f"trip_point_{index}_temp"
        if not temp_file.exists():
            break
        try:
            kind = read_attribute(path / f"trip_point_{index}_type")
        except (OSError, Unreadable):
            kind = "?"
        temp: Optional[float] = None
        try:
            temp = _plausible(read_attribute(temp_file))
        except (OSError, Unreadable):
            pass
        except ValueError as err:
            skipped.append(f"{temp_file.name} {err}")
        trips.append(TripPoint(index, kind or "?", temp))
    return tuple(trips)


def _probe_zone(path: Path) -> ThermalZone:
    try:
        kind = read_attribute(path / "type") or "?"
    except (OSError, Unreadable):
        kind = "?"
    skipped: list[str] = []
    trips = _read_trips(path, skipped)
    try:
        temp = _plausible(read_attribute(path / "temp"))
    except (OSError, Unreadable) as err:
        why = str(err) if isinstance(err, Unreadable) else (err.strerror or str(err))
        return ThermalZone(path.name, kind, None, why, trips, tuple(skipped))
    except ValueError as err:
        return ThermalZone(path.name, kind, None, f"reads {err}", trips, (f"temp {err}", *skipped))
    return ThermalZone(path.name, kind, temp, trips=trips, skipped=tuple(skipped))


def probe_thermal_zones(root: Optional[Path] = None) -> list[ThermalZone]:
    """Every thermal_zone* under `root` (default: HARNESS_THERMAL_ROOT, else /sys/class/thermal), with its type,
    its current temperature (or why it cannot be read) and its trip points.

    Read in a thread of its own for at most ZONE_PROBE_TIMEOUT_S: a zone whose
    driver does not answer is unreadable, and so are the zones after it.
    """
    root = default_thermal_root() if root is None else Path(root)
    paths = sorted(root.glob("thermal_zone*"), key=_zone_number)
    found: list[ThermalZone] = []

    def probe_all() -> None:
        for path in paths:
            found.append(_probe_zone(path))

    worker = threading.Thread(target=probe_all, name="thermal-zones", daemon=True)
    worker.start()
    worker.join(ZONE_PROBE_TIMEOUT_S)
    zones = found[: len(paths)]
    if len(zones) < len(paths):
        stuck, *rest = paths[len(zones) :]
        zones.append(ThermalZone(stuck.name, "?", None, f"no answer within {ZONE_PROBE_TIMEOUT_S:g} s"))
        zones += [ThermalZone(path.name, "?", None, "not read: an earlier zone did not answer") for path in rest]
    return zones


def skipped_note(zones: list[ThermalZone]) -> Optional[str]:
    """One line naming the values of `zones` that are not plausible temperatures (None: there are none)."""
    skipped = [f"{zone.label} {what}" for zone in zones for what in zone.skipped]
    if not skipped:
        return None
    more = f"; and {len(skipped) - SKIPPED_SHOWN} more" if len(skipped) > SKIPPED_SHOWN else ""
    return "thermal zones: skipped, as not a plausible temperature: " + "; ".join(skipped[:SKIPPED_SHOWN]) + more


def _millidegrees(path: Path) -> Optional[float]:
    return _degrees(read_attribute(path))


def zone_limit(zone: ThermalZone, config: GuardConfig) -> Limit:
    """What a zone is judged against: `zone_margin_c` below its lowest hot or critical trip point, resumed the
    guard's hysteresis below that; a zone without such a point is judged as the GPU is (pause_at_c, resume_at_c)."""
    trip = zone.lowest_limiting_trip()
    if trip is None or trip.temp_c is None:
        return gpu_limit(config)
    return trip_limit(trip.temp_c, trip.type, config)


def trip_limit(trip_c: float, trip_type: str, config: GuardConfig) -> Limit:
    """`zone_margin_c` below a trip point, resumed the guard's hysteresis below that."""
    pause_at = trip_c - config.zone_margin_c
    return Limit(
        pause_at_c=pause_at,
        resume_at_c=pause_at - config.hysteresis_c,
        basis=f"{pause_at:g} C, {config.zone_margin_c:g} C below its {trip_type} point {trip_c:g} C",
        trip_c=trip_c,
        trip_type=trip_type,
    )


def gpu_limit(config: GuardConfig) -> Limit:
    """The GPU's limit: pause_at_c and resume_at_c."""
    return Limit(config.pause_at_c, config.resume_at_c, f"pause_at_c {config.pause_at_c:g} C")


class SysfsSensor:
    """Every readable thermal zone under `root`, each with the limit its trip points give (`zone_limit`)."""

    name = "sysfs"

    def __init__(
        self, root: Optional[Path] = None, wall_us: WallClock = wall_clock_us, config: Optional[GuardConfig] = None
    ) -> None:
        self.root = default_thermal_root() if root is None else Path(root)
        self._wall_us = wall_us
        self.config = config or GuardConfig()
        self.zones = probe_thermal_zones(self.root)
        self.watched = [zone for zone in self.zones if zone.temp_c is not None]
        if not self.watched:
            found = f"{len(self.zones)} unreadable" if self.zones else "none"
            raise SensorUnavailable(f"no readable thermal zone under {self.root} ({found})")
        self._limits = {zone.zone: zone_limit(zone, self.config) for zone in self.watched}

    def read(self) -> Optional[Sample]:
        readings = []
        for zone in self.watched:
            try:  # in the guard loop's reading thread, which gives up on a read that does not return
                temp = _millidegrees(self.root / zone.zone / "temp")
            except (OSError, Unreadable, ValueError):
                temp = None
            readings.append(ZoneTemp(zone.zone, zone.label, temp, self._limits[zone.zone]))
        if all(reading.temp_c is None for reading in readings):
            return None
        return Sample(self._wall_us(), zones=tuple(readings))

    def facts(self) -> JSONObject:
        return {"root": str(self.root), "zones": [self._zone_facts(zone) for zone in self.zones]}

    def _zone_facts(self, zone: ThermalZone) -> JSONObject:
        facts: JSONObject = {"zone": zone.zone, "type": zone.type, "readable": zone.temp_c is not None}
        limit = self._limits.get(zone.zone)
        if limit is not None:
            facts["pause_at_c"] = limit.pause_at_c
            facts["resume_at_c"] = limit.resume_at_c
            facts["trips"] = [{"type": trip.type, "temp_c": trip.temp_c} for trip in zone.trips]
        return facts

    def warnings(self) -> list[str]:
        """A zone already at or above its pause point: the run would be paused at once, and stay so; and the one
        note of values skipped as not plausible temperatures."""
        skipped = skipped_note(self.zones)
        return [
            f"{zone.label} reads {zone.temp_c:.1f} C, at or above its pause point {limit.pause_at_c:g} C "
            f"({limit.basis}): the run will be paused as soon as it starts"
            for zone in self.watched
            for limit in (self._limits[zone.zone],)
            if zone.temp_c is not None and zone.temp_c >= limit.pause_at_c
        ] + ([skipped] if skipped else [])

    def close(self) -> None:
        pass


class CombinedSensor:
    """`auto`: the GPU (NVML) and every readable thermal zone, read together into one sample."""

    def __init__(self, gpu: Sensor, zones: SysfsSensor) -> None:
        self.gpu = gpu
        self.zones = zones
        self.name = f"{gpu.name}+{zones.name}"

    def read(self) -> Optional[Sample]:
        gpu = self.gpu.read()
        zones = self.zones.read()
        if gpu is None and zones is None:
            return None
        if zones is None:
            return gpu
        if gpu is None:
            return zones
        return replace(gpu, zones=zones.zones)

    def facts(self) -> JSONObject:
        return {**self.gpu.facts(), **self.zones.facts()}

    def close(self) -> None:
        try:
            self.gpu.close()
        finally:
            self.zones.close()


# --------------------------------------------------------------------------- the simulator's machine


def _approach(temp: float, target: float, tau_s: float, elapsed_s: float) -> float:
    """Newton's law of cooling, exactly: where `temp` is after `elapsed_s` toward `target`."""
    return target + (temp - target) * math.exp(-max(0.0, elapsed_s) / tau_s)


SIM_CPU = "sim_cpu"


def sim_cpu_limit(model: SimZoneConfig, config: GuardConfig) -> Limit:
    """The simulated CPU side's limit: zone_margin_c below its critical point, as a thermal zone's."""
    return trip_limit(model.critical_c, "critical", config)


class SimSensor:
    """Newton cooling toward `hot_c` while the run runs and toward `idle_c` while it is paused (or waits to start),
    for the GPU and, with its own model, the CPU side.

    Each temperature follows T' = (target - T) / tau exactly between reads, so
    the curve does not depend on how often it is read. The CPU side is a
    thermal zone with a critical trip point: it can pause a run while the GPU
    reads cool, as a GB10's CPU cluster can.
    """

    name = "sim"

    def __init__(
        self,
        model: SimSensorConfig,
        clock: Clock = time.monotonic,
        wall_us: WallClock = wall_clock_us,
        config: Optional[GuardConfig] = None,
    ) -> None:
        self.model = model
        self._clock = clock
        self._wall_us = wall_us
        self._temp_c = model.start_c
        self._cpu_c = model.cpu.start_c
        self._cpu_limit = sim_cpu_limit(model.cpu, config or GuardConfig())
        self._at = clock()
        self._paused = False

    def _advance(self) -> tuple[float, float]:
        now = self._clock()
        gpu, cpu, elapsed = self.model, self.model.cpu, now - self._at
        if self._paused:
            self._temp_c = _approach(self._temp_c, gpu.idle_c, gpu.cool_tau_s, elapsed)
            self._cpu_c = _approach(self._cpu_c, cpu.idle_c, cpu.cool_tau_s, elapsed)
        else:
            self._temp_c = _approach(self._temp_c, gpu.hot_c, gpu.heat_tau_s, elapsed)
            self._cpu_c = _approach(self._cpu_c, cpu.hot_c, cpu.heat_tau_s, elapsed)
        self._at = now
        return self._temp_c, self._cpu_c

    def set_paused(self, paused: bool) -> None:
        self._advance()  # the time so far was spent in the old state
        self._paused = paused

    def read(self) -> Optional[Sample]:
        temp, cpu = self._advance()
        reasons = nvmlClocksEventReasonSwThermalSlowdown if temp >= self.model.throttle_at_c else 0
        zone = ZoneTemp(SIM_CPU, "CPU (sim)", round(cpu, 2), self._cpu_limit)
        return Sample(self._wall_us(), temp_c=round(temp, 2), reasons=reasons, zones=(zone,))

    def facts(self) -> JSONObject:
        limit = self._cpu_limit
        return {
            "model": self.model.model_dump(mode="json"),
            "zones": [
                {
                    "zone": SIM_CPU,
                    "type": "cpu (sim)",
                    "readable": True,
                    "pause_at_c": limit.pause_at_c,
                    "resume_at_c": limit.resume_at_c,
                    "trips": [{"type": "critical", "temp_c": self.model.cpu.critical_c}],
                }
            ],
        }

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------- opening


@dataclass
class SensorChoice:
    """The sensor a guard block asked for, as opened here (None: unguarded), and the facts for the manifest."""

    sensor: Optional[Sensor]
    facts: JSONObject
    warnings: list[str] = field(default_factory=list)


def open_sensor(
    config: GuardConfig,
    *,
    thermal_root: Optional[Path] = None,
    clock: Clock = time.monotonic,
    wall_us: WallClock = wall_clock_us,
) -> SensorChoice:
    """Open the sensor `config.sensor` names. `auto` reads NVML and every readable thermal zone, whichever read
    here (none, with a warning, when neither does); a named sensor that cannot read here is a one-line error,
    never an unguarded run. `thermal_root`: default HARNESS_THERMAL_ROOT, else /sys/class/thermal."""
    requested = config.sensor
    root = default_thermal_root() if thermal_root is None else Path(thermal_root)
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
        return _chosen(requested, SimSensor(config.sim, clock, wall_us, config), {})
    tried: dict[str, str] = {}
    opened: list[Sensor] = []
    for name in ("nvml", "sysfs") if requested == "auto" else (requested,):
        try:
            opened.append(_open_named(name, root, wall_us, config))
        except SensorUnavailable as err:
            tried[name] = str(err)
    if not opened:
        if requested != "auto":
            raise HarnessError(f"guard.sensor {requested}: {tried[requested]}")
        why = "; ".join(f"{name}: {reason}" for name, reason in tried.items())
        return SensorChoice(
            None,
            {"requested": "auto", "picked": None, "tried": dict(tried)},
            [f"heat guard off: no sensor can read a temperature here ({why})"],
        )
    sensor: Sensor = opened[0]
    if len(opened) == 2 and isinstance(opened[1], SysfsSensor):
        sensor = CombinedSensor(opened[0], opened[1])
    choice = _chosen(requested, sensor, tried)
    choice.warnings += _threshold_warnings(config, choice.facts)
    for each in opened:
        if isinstance(each, SysfsSensor):
            choice.warnings += each.warnings()
    return choice


def _open_named(name: str, thermal_root: Path, wall_us: WallClock, config: GuardConfig) -> Sensor:
    if name == "nvml":
        return NvmlSensor.open(wall_us)
    return SysfsSensor(thermal_root, wall_us, config)


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
