"""The heat guard's configuration: the `guard:` block of an experiment (docs/guard.md gives each default's reason).

Configuration that cannot be meant is refused here, once, before any run
starts: a threshold outside the range a sensor's reading is believed in
(PLAUSIBLE_C), hysteresis the wrong way round, a pause whose shortest length
exceeds its longest, a poll too fast to be a poll, samples kept more often
than they are taken.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.guard.samples import PLAUSIBLE_C


class _GuardModel(BaseModel):
    # As strict as the experiment schema that embeds it (harness.experiments.schema).
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


SENSOR = re.compile(r"^(auto|nvml|sysfs|none|sim|file:.+)$")
MIN_POLL_S = 0.05  # a poll faster than this is a busy loop of fsynced lines, not a guard
MAX_ZONE_MARGIN_C = 50.0  # a margin wider than this puts a zone's pause point below any room's temperature


def plausible_temperature(value: float) -> float:
    """`value` when a sensor could report it (PLAUSIBLE_C), else ValueError saying why it cannot be meant."""
    low, high = PLAUSIBLE_C
    if value < low:
        raise ValueError(
            f"{value:g} C is below {low:g} C: a reading that low counts as missing, so it could never be judged; "
            f"give degrees C between {low:g} and {high:g}"
        )
    if value > high:
        raise ValueError(
            f"{value:g} C is above {high:g} C: a reading that high counts as missing, so it could never be reached; "
            f"give degrees C between {low:g} and {high:g}"
        )
    return value


# A temperature the guard could act on: within the range a sensor's reading is believed in.
Temperature = Annotated[float, AfterValidator(plausible_temperature)]


class SimZoneConfig(_GuardModel):
    """The `sim` sensor's CPU-side temperature: its own heating and cooling, and a critical trip point of its own."""

    start_c: Temperature = 60.0
    idle_c: Temperature = 45.0
    hot_c: Temperature = 100.0
    heat_tau_s: float = Field(default=40.0, gt=0)
    cool_tau_s: float = Field(default=150.0, gt=0)
    critical_c: Temperature = 105.0  # judged as a thermal zone's critical trip point: paused zone_margin_c below it

    @model_validator(mode="after")
    def _idle_below_hot(self) -> "SimZoneConfig":
        if self.idle_c >= self.hot_c:
            raise ValueError(f"idle_c ({self.idle_c}) must be below hot_c ({self.hot_c})")
        return self


class SimSensorConfig(_GuardModel):
    """The `sim` sensor's thermal model: heats toward `hot_c` while the run runs, cools toward `idle_c` while paused
    (or waiting to start); `cpu` is a second, CPU-side temperature judged against a trip point of its own."""

    start_c: Temperature = 45.0
    idle_c: Temperature = 40.0
    hot_c: Temperature = 95.0
    heat_tau_s: float = Field(default=30.0, gt=0)
    cool_tau_s: float = Field(default=15.0, gt=0)
    throttle_at_c: float = (
        87.0  # above it the model reports a software thermal slowdown, as GB10 does (above hot_c: never)
    )
    cpu: SimZoneConfig = Field(default_factory=SimZoneConfig)

    @model_validator(mode="after")
    def _idle_below_hot(self) -> "SimSensorConfig":
        if self.idle_c >= self.hot_c:
            raise ValueError(f"idle_c ({self.idle_c}) must be below hot_c ({self.hot_c})")
        return self


class GuardConfig(_GuardModel):
    """The heat guard: pause at `pause_at_c`, resume at `resume_at_c`. docs/guard.md gives each default's reason."""

    sensor: str = "auto"
    pause_at_c: Temperature = 85.0
    resume_at_c: Temperature = 78.0
    zone_margin_c: float = Field(default=10.0, ge=0, le=MAX_ZONE_MARGIN_C)
    poll_s: float = 1.0
    min_pause_s: float = Field(default=30.0, ge=0)
    max_pause_s: float = Field(default=300.0, gt=0)
    on_max_pause: Literal["resume", "stop"] = "resume"
    on_pause_failure: Literal["stop", "continue"] = "stop"  # a freeze the engine refused, at once and on its retry
    missing_polls: int = Field(default=3, ge=1)
    on_missing: Literal["pause_if_hot", "pause", "carry_on"] = "pause_if_hot"
    record_every_s: float = Field(default=30.0, gt=0)
    start_below_c: Optional[Temperature] = None
    start_timeout_s: float = Field(default=600.0, gt=0)
    on_start_timeout: Literal["start", "refuse"] = "start"
    sim: SimSensorConfig = Field(default_factory=SimSensorConfig)

    @field_validator("sensor")
    @classmethod
    def _sensor(cls, sensor: str) -> str:
        if not SENSOR.match(sensor):
            raise ValueError(f"{sensor!r} is not one of auto, nvml, sysfs, none, sim, file:PATH")
        return sensor

    @field_validator("poll_s")
    @classmethod
    def _poll(cls, poll_s: float) -> float:
        if poll_s < MIN_POLL_S:
            raise ValueError(
                f"{poll_s:g} s is below {MIN_POLL_S:g} s: each poll may write an fsynced line, and a faster poll "
                "is a busy loop that catches no heat sooner than the sensor updates"
            )
        return poll_s

    @model_validator(mode="after")
    def _consistent(self) -> "GuardConfig":
        if self.resume_at_c >= self.pause_at_c:
            raise ValueError(f"resume_at_c ({self.resume_at_c}) must be below pause_at_c ({self.pause_at_c})")
        if self.min_pause_s > self.max_pause_s:
            raise ValueError(f"min_pause_s ({self.min_pause_s}) must not exceed max_pause_s ({self.max_pause_s})")
        if self.record_every_s < self.poll_s:
            raise ValueError(
                f"record_every_s ({self.record_every_s}) must not be below poll_s ({self.poll_s}): a sample is "
                "recorded at a poll, so none can be kept more often than one is taken"
            )
        if self.start_below_c is not None and self.start_below_c >= self.pause_at_c:
            raise ValueError(
                f"start_below_c ({self.start_below_c}) must be below pause_at_c ({self.pause_at_c}): a run started "
                "that hot would be paused at once"
            )
        if self.start_below_c is not None and self.sensor == "none":
            raise ValueError("start_below_c needs a sensor to read the temperature it waits for (sensor is none)")
        return self

    @property
    def hysteresis_c(self) -> float:
        """How far below its pause point a temperature must fall before the run resumes."""
        return self.pause_at_c - self.resume_at_c
