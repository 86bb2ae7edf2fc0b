"""The heat guard: sensors, a pure hysteresis policy, and the loop that pauses and resumes a run.

    choice = open_sensor(experiment.guard)          # once; choice.facts -> manifest["guard"]
    if choice.sensor is not None:
        with GuardLoop(handle, choice.sensor, experiment.guard,
                       pauses_path=capture.pauses_path, samples_path=capture.guard_path):
            ...                                     # the run; loop.reading for live progress
        choice.sensor.close()

docs/guard.md has the rules, the defaults and their reasons.
"""

from harness.guard.loop import GuardLoop, GuardReading, Pausable
from harness.guard.policy import Action, Decision, GuardState, decide
from harness.guard.sensors import Sample, Sensor, SensorChoice, SensorUnavailable, open_sensor

__all__ = [
    "Action", "Decision", "GuardLoop", "GuardReading", "GuardState", "Pausable", "Sample", "Sensor",
    "SensorChoice", "SensorUnavailable", "decide", "open_sensor",
]
