"""What this machine's sensors support, for `harness guard probe`: NVML query by query, and the thermal zones."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.guard.config import GuardConfig
from harness.guard.nvml import NvmlProbe, probe_nvml
from harness.guard.samples import SensorUnavailable
from harness.guard.sensors import ThermalZone, default_thermal_root, probe_thermal_zones, zone_limit

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject


@dataclass(frozen=True)
class MachineProbe:
    """NVML's answers (or why it cannot start) and the kernel's thermal zones."""

    nvml: Optional[NvmlProbe]
    nvml_error: Optional[str]
    thermal_root: Path
    zones: list[ThermalZone]

    def readable_by(self) -> list[str]:
        """The sensors that can read a temperature here, in the order `auto` tries them."""
        sensors = []
        if self.nvml is not None and self.nvml.can_read_temperature():
            sensors.append("nvml")
        if any(zone.temp_c is not None for zone in self.zones):
            sensors.append("sysfs")
        return sensors

    def why_unreadable(self) -> str:
        """One line: why neither NVML nor a thermal zone gives a temperature."""
        if self.nvml_error is not None:
            nvml = self.nvml_error
        elif self.nvml is not None and not self.nvml.devices:
            nvml = "NVML: no GPU"
        else:
            nvml = "NVML: no GPU reports its temperature"
        zones = (
            f"{len(self.zones)} thermal zones under {self.thermal_root}, none readable"
            if self.zones
            else f"no thermal zones under {self.thermal_root}"
        )
        return f"no temperature can be read here: {nvml}; sysfs: {zones}"

    def to_dict(self) -> JSONObject:
        return {
            "nvml": None
            if self.nvml is None
            else {
                **self.nvml.facts(),
                "values": [{q: r.value for q, r in d.queries.items()} for d in self.nvml.devices],
            },
            "nvml_error": self.nvml_error,
            "sysfs": {
                "root": str(self.thermal_root),
                "zones": [{**asdict(zone), **self.zone_limit(zone)} for zone in self.zones],
            },
            "temperature_readable_by": list(self.readable_by()),
        }

    @staticmethod
    def zone_limit(zone: ThermalZone, config: Optional[GuardConfig] = None) -> JSONObject:
        """Where a guard with `config` (default: the defaults) would pause and resume for this zone, and why."""
        limit = zone_limit(zone, config or GuardConfig())
        return {"pause_at_c": limit.pause_at_c, "resume_at_c": limit.resume_at_c, "basis": limit.basis}


def probe_machine(thermal_root: Optional[Path] = None) -> MachineProbe:
    """Probe NVML (started and shut down again) and the thermal zones under `thermal_root` (default:
    HARNESS_THERMAL_ROOT, else /sys/class/thermal)."""
    root = default_thermal_root() if thermal_root is None else Path(thermal_root)
    try:
        nvml, error = probe_nvml(), None
    except SensorUnavailable as err:
        nvml, error = None, str(err)
    return MachineProbe(nvml, error, root, probe_thermal_zones(root))
