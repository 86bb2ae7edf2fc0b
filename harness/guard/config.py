"""The heat guard's configuration: the `guard:` block of an experiment (docs/guard.md gives each default's reason)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _GuardModel(BaseModel):
    # As strict as the experiment schema that embeds it (harness.experiments.schema).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


SENSOR = re.compile(r"^(auto|nvml|sysfs|none|sim|file:.+)$")


class SimSensorConfig(_GuardModel):
    """The `sim` sensor's thermal model: heats toward `hot_c` while the run runs, cools toward `idle_c` while paused."""

    start_c: float = 45.0
    idle_c: float = 40.0
    hot_c: float = 95.0
    heat_tau_s: float = Field(default=30.0, gt=0)
    cool_tau_s: float = Field(default=15.0, gt=0)
    throttle_at_c: float = 87.0  # above it the model reports a software thermal slowdown, as GB10 does

    @model_validator(mode="after")
    def _idle_below_hot(self) -> "SimSensorConfig":
        if self.idle_c >= self.hot_c:
            raise ValueError(f"idle_c ({self.idle_c}) must be below hot_c ({self.hot_c})")
        return self


class GuardConfig(_GuardModel):
    """The heat guard: pause at `pause_at_c`, resume at `resume_at_c`. docs/guard.md gives each default's reason."""

    sensor: str = "auto"
    pause_at_c: float = 85.0
    resume_at_c: float = 78.0
    poll_s: float = Field(default=1.0, gt=0)
    min_pause_s: float = Field(default=30.0, ge=0)
    max_pause_s: float = Field(default=300.0, gt=0)
    on_max_pause: Literal["resume", "stop"] = "resume"
    missing_polls: int = Field(default=3, ge=1)
    on_missing: Literal["pause_if_hot", "pause", "carry_on"] = "pause_if_hot"
    record_every_s: float = Field(default=30.0, gt=0)
    sim: SimSensorConfig = Field(default_factory=SimSensorConfig)

    @field_validator("sensor")
    @classmethod
    def _sensor(cls, sensor: str) -> str:
        if not SENSOR.match(sensor):
            raise ValueError(f"{sensor!r} is not one of auto, nvml, sysfs, none, sim, file:PATH")
        return sensor

    @model_validator(mode="after")
    def _hysteresis(self) -> "GuardConfig":
        if self.resume_at_c >= self.pause_at_c:
            raise ValueError(f"resume_at_c ({self.resume_at_c}) must be below pause_at_c ({self.pause_at_c})")
        if self.min_pause_s > self.max_pause_s:
            raise ValueError(f"min_pause_s ({self.min_pause_s}) must not exceed max_pause_s ({self.max_pause_s})")
        return self
