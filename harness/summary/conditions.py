"""The conditions a run was made under, and the notes that say where compared runs differ (docs/summary.md, "Comparisons").

Two runs are comparable only when they ran alike: a time ratio between a
guarded and an unguarded run, or between a simulated and a real one, is not
what the experiment measures. The conditions come from the manifest:

- `simulated`: the experiment's container env holds the simulator's time
  scale variable (what `run --sim` sets), else the image is the sim image;
- `time_scale`: the frame's (the manifest's or the simulator's, checked; None when unknown);
- `guard`: `off`, or `on (sensor S)` with the sensor picked when the run
  started (manifest `guard`), else what the experiment asked for
  (`experiment.guard.sensor`; `none` is off), else unknown.

A fact that is unknown for a run is not said to differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

SIM_TIME_SCALE_ENV = (
    "HARNESS_SIM_TIME_SCALE"  # harness.sim.config.TIME_SCALE_ENV, not imported: the summary stays light
)
SIM_IMAGE_PREFIX = "miles-gb10-lab/sim"


@dataclass(frozen=True)
class RunConditions:
    """What a run's numbers depend on besides its trainer flags."""

    simulated: Optional[bool]
    time_scale: Optional[float]
    guard: Optional[str]  # "off", "on (sensor nvml)", or None when the capture does not say

    def facts(self) -> dict[str, Optional[str]]:
        """The facts by the words a note uses for them."""
        return {
            "trainer": None if self.simulated is None else ("simulator" if self.simulated else "real"),
            "time scale": None if self.time_scale is None else f"{self.time_scale:g}",
            "heat guard": self.guard,
        }


def read_conditions(manifest: Optional[JSONObject], time_scale: Optional[float]) -> RunConditions:
    """A run's conditions from its manifest (None: no manifest) and its checked time scale."""
    if not isinstance(manifest, Mapping):
        return RunConditions(None, time_scale, None)
    found = manifest.get("experiment")
    experiment = found if isinstance(found, Mapping) else {}
    return RunConditions(_simulated(manifest, experiment), time_scale, _guard(manifest, experiment))


def _simulated(manifest: JSONObject, experiment: JSONObject) -> Optional[bool]:
    container = experiment.get("container")
    env = container.get("env") if isinstance(container, Mapping) else None
    if isinstance(env, Mapping) and SIM_TIME_SCALE_ENV in env:
        return True
    image = manifest.get("image", experiment.get("image"))
    if isinstance(image, str):
        return image.startswith(SIM_IMAGE_PREFIX)
    return None


def _guard(manifest: JSONObject, experiment: JSONObject) -> Optional[str]:
    facts = manifest.get("guard")
    if isinstance(facts, Mapping) and isinstance(facts.get("guarded"), bool):
        if not facts["guarded"]:
            return "off"
        picked = facts.get("picked")
        return f"on (sensor {picked})" if isinstance(picked, str) else "on"
    config = experiment.get("guard")
    sensor = config.get("sensor") if isinstance(config, Mapping) else None
    if sensor == "none":
        return "off"
    if isinstance(sensor, str) and sensor != "auto":  # auto: whether it found a sensor is not known
        return f"on (sensor {sensor.split(':', 1)[0]})"
    return None


def condition_notes(run: str, others: Sequence[str], conditions: Mapping[str, RunConditions]) -> list[str]:
    """One note per fact in which `run` and one of `others` (baseline first) differ, naming each run's value."""
    mine = conditions.get(run)
    if mine is None:
        return []
    notes = []
    for other in dict.fromkeys(others):
        theirs = conditions.get(other)
        if other == run or theirs is None:
            continue
        a, b = mine.facts(), theirs.facts()
        differ = [
            f"{fact}: {run} {a[fact]}, {other} {b[fact]}"
            for fact in a
            if a[fact] is not None and b[fact] is not None and a[fact] != b[fact]
        ]
        if differ:
            notes.append(
                f"{run} and {other} ran under different conditions ({'; '.join(differ)}): "
                "their numbers are not like for like"
            )
    return notes
