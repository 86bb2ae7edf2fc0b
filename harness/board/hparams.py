"""A run's hyperparameters for TensorBoard's hparams plugin: its resolved flags and the summary's run facts.

From the manifest alone (secrets are `***` there already): the run, the
experiment, its seed and steps, the image and engine, the time scale, whether
it is simulated, the summary's filter, B, O and n (harness.summary.run_config,
the same rules) and every flag of the trainer's argv as Miles saw it
(`--lr`: 1e-06; a bare flag: true; several values: one string).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from harness.board.names import HARNESS_PREFIX
from harness.board.records import Hparams, HparamValue
from harness.capture.columns import MetricsColumns
from harness.capture.reader import RunCapture
from harness.lab.milesargv import flag_values
from harness.summary.conditions import read_conditions
from harness.summary.notes import RunNotes
from harness.summary.run_config import resolve_config

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

# The metrics the hparams table shows for each run: the last value of each tag.
HPARAM_METRICS = tuple(
    HARNESS_PREFIX + name
    for name in ("reward", "rollout_time_adjusted_s", "pause_overlap_s", "dropped_groups", "batches")
)
_SESSION_STATES = {"succeeded": "success", "failed": "failure", "no_metrics": "failure", "not_started": "failure"}


def session_state(state: str) -> str:
    """The hparams session status of a final run state: success, failure, or unknown (interrupted, stopped)."""
    return _SESSION_STATES.get(state, "unknown")


def hparams_of(run: str, manifest: JSONObject, wall_time: float) -> Hparams:
    """The run's hyperparameters (see the module doc)."""
    experiment = manifest.get("experiment")
    experiment = experiment if isinstance(experiment, dict) else {}
    values: dict[str, HparamValue] = {"run": run}
    for key in ("name", "seed", "steps", "engine"):
        _put(values, "experiment" if key == "name" else key, experiment.get(key))
    _put(values, "image", manifest.get("image"))
    _put(values, "time_scale", manifest.get("time_scale"))
    time_scale = manifest.get("time_scale")
    scale = float(time_scale) if isinstance(time_scale, (int, float)) and not isinstance(time_scale, bool) else None
    simulated = read_conditions(manifest, scale).simulated
    if simulated is not None:
        values["simulated"] = simulated
    empty = MetricsColumns([], [], [], [], [], [])
    config = resolve_config(RunCapture(run, None, manifest, None, empty, [], []), RunNotes())
    values["filter"] = config.filter
    for key in ("rollout_batch_size", "over_sampling_batch_size", "n_samples_per_prompt"):
        _put(values, key, getattr(config, key))
    argv = manifest.get("trainer_argv")
    if isinstance(argv, list) and all(isinstance(word, str) for word in argv):
        for flag, words in flag_values([str(word) for word in argv]).items():
            values[flag] = _flag_value(words)
    return Hparams(wall_time, values, HPARAM_METRICS)


def _put(values: dict[str, HparamValue], key: str, value: JSONValue) -> None:
    if isinstance(value, (str, bool)):
        values[key] = value
    elif isinstance(value, (int, float)):
        values[key] = float(value)


def _flag_value(words: list[str]) -> HparamValue:
    if not words:
        return True
    if len(words) > 1:
        return " ".join(words)
    number = _number(words[0])
    return number if number is not None else words[0]


def _number(word: str) -> Optional[float]:
    try:
        value = float(word)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None
