"""The heat guard: sensors, a pure hysteresis policy, and the loop that pauses and resumes a run.

    session = GuardSession.open(experiment.guard)   # once; session.facts() -> manifest["guard"]
    loop = session.start(handle, pauses_path=capture.pauses_path, samples_path=capture.guard_path)
    ...                                             # the run; loop.reading for live progress
    loop.stop()                                     # thaws the run, closes the open window
    session.close()

docs/guard.md has the rules, the defaults and their reasons.
"""

from harness.guard.loop import GuardHooks, GuardLoop, GuardReading, Pausable
from harness.guard.policy import Action, Decision, GuardState, decide
from harness.guard.samples import Sample, Sensor, SensorUnavailable
from harness.guard.sensors import SensorChoice, open_sensor
from harness.guard.session import GuardSession

__all__ = [
    "Action",
    "Decision",
    "GuardHooks",
    "GuardLoop",
    "GuardReading",
    "GuardSession",
    "GuardState",
    "Pausable",
    "Sample",
    "Sensor",
    "SensorChoice",
    "SensorUnavailable",
    "decide",
    "open_sensor",
]
