"""The conditions a run was made under, and the notes that say where compared runs differ (docs/summary.md, "Comparisons").

Two runs are comparable only when they ran alike: a time ratio between a
guarded and an unguarded run, or between a simulated and a real one, is not
what the experiment measures. The conditions come from the manifest:

- `simulated`: the run's time scale is not 1 (only the simulator runs at
  another), or the experiment's container env holds the simulator's time
  scale variable (what `run --sim` sets), else the image is the sim image;
- `time_scale`: the frame's (the manifest's or the simulator's, checked; None when unknown);
- `guard`: `off`, or `on (sensor S)` with the sensor picked when the run
  started (manifest `guard`), else what the experiment asked for
  (`experiment.guard.sensor`; `none` is off), else unknown.

A fact that is unknown for a run is not said to differ.

`config_hash`: what a run measured, without its seed, as a hash (the
condition its seeds share; docs/summary.md, "Across seeds"): the resolved
experiment from the manifest without the keys that do not change the numbers
(those the run id leaves out: description, compare, limits, extends, guard,
cluster; and the secrets' names) and without `seed`; the trainer's argv
without the seed flags' values; the image; the time scale; and whether it is
simulated. Two runs with the same hash differ only in their seed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import orjson

from harness.lab.milesnames import CHECKPOINT_FLAGS, NO_SAVE_OPTIM_FLAG, ROLLOUT_SEED_FLAG, SEED_FLAG

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue

SIM_TIME_SCALE_ENV = (
    "HARNESS_SIM_TIME_SCALE"  # harness.sim.config.TIME_SCALE_ENV, not imported: the summary stays light
)
SIM_IMAGE_PREFIX = "miles-gb10-lab/sim"
# harness.run.plan's _NOT_IN_RUN_ID, and the seed: what the condition leaves out of the experiment.
NOT_IN_CONDITION = ("description", "compare", "limits", "extends", "guard", "cluster", "seed", "checkpoint", "resume")
# Flags without a value (the rest of CHECKPOINT_FLAGS take one: a directory, a path, a number).
_BARE_CHECKPOINT_FLAGS = (NO_SAVE_OPTIM_FLAG,)
SEED_FLAGS = (SEED_FLAG, ROLLOUT_SEED_FLAG)  # harness.experiments.flags.OWNED_FLAGS' seed flags


@dataclass(frozen=True)
class RunConditions:
    """What a run's numbers depend on besides its trainer flags."""

    simulated: Optional[bool]
    time_scale: Optional[float]
    guard: Optional[str]  # "off", "on (sensor nvml)", or None when the capture does not say
    config: Optional[JSONObject] = None  # the configuration without the seed (None: no manifest says it)
    config_hash: Optional[str] = None

    def facts(self) -> dict[str, Optional[str]]:
        """The facts by the words a note uses for them."""
        return {
            "trainer": None if self.simulated is None else ("simulator" if self.simulated else "real"),
            "time scale": None if self.time_scale is None else f"{self.time_scale:g}",
            "heat guard": self.guard,
        }


def read_conditions(manifest: Optional[JSONObject], time_scale: Optional[float]) -> RunConditions:
    """A run's conditions from its manifest (None: no manifest) and its checked time scale."""
    if not isinstance(manifest, dict):
        return RunConditions(None, time_scale, None)
    found = manifest.get("experiment")
    experiment = found if isinstance(found, dict) else {}
    # only the simulator runs at a time scale other than 1, whatever image the manifest names
    simulated = True if time_scale is not None and time_scale != 1 else _simulated(manifest, experiment)
    config = condition_config(manifest, experiment, simulated, time_scale) if experiment else None
    return RunConditions(
        simulated, time_scale, _guard(manifest, experiment), config, config_hash(config) if config else None
    )


def condition_config(
    manifest: JSONObject, experiment: JSONObject, simulated: Optional[bool], time_scale: Optional[float]
) -> JSONObject:
    """The run's configuration without its seed (the module doc), as plain data."""
    config = {key: value for key, value in experiment.items() if key not in NOT_IN_CONDITION}
    container = config.get("container")
    if isinstance(container, dict):
        config["container"] = {key: value for key, value in container.items() if key != "secret_env"}
    argv = manifest.get("trainer_argv")
    config["trainer_argv"] = without_seed_flags(without_checkpoint_flags(argv)) if isinstance(argv, list) else None
    config["image"] = manifest.get("image")
    config["time_scale"] = time_scale
    config["simulated"] = simulated
    return config


def without_seed_flags(argv: Sequence[JSONValue]) -> list[JSONValue]:
    """The argv with each seed flag's value blanked (`--seed 3` and `--seed=3` alike)."""
    out: list[JSONValue] = []
    blank_next = False
    for word in argv:
        if blank_next:
            out.append("<seed>")
            blank_next = False
        elif isinstance(word, str) and word in SEED_FLAGS:
            out.append(word)
            blank_next = True
        elif isinstance(word, str) and word.split("=", 1)[0] in SEED_FLAGS and "=" in word:
            out.append(word.split("=", 1)[0] + "=<seed>")
        else:
            out.append(word)
    return out


def without_checkpoint_flags(argv: Sequence[JSONValue]) -> list[JSONValue]:
    """The argv without the checkpoint flags the harness passes (where a run saves, and whether it loads, is not
    what it measures: each seed saves in a directory of its own)."""
    out: list[JSONValue] = []
    skip_next = False
    for word in argv:
        if skip_next:
            skip_next = False
            continue
        name = word.split("=", 1)[0] if isinstance(word, str) else None
        if name in CHECKPOINT_FLAGS:
            skip_next = "=" not in str(word) and name not in _BARE_CHECKPOINT_FLAGS
            continue
        out.append(word)
    return out


def config_hash(config: JSONObject) -> Optional[str]:
    """A short stable hash of a configuration (sorted keys, compact JSON); None when it is not plain JSON data."""
    try:
        canonical = orjson.dumps(config, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return None
    return hashlib.sha256(canonical).hexdigest()[:12]


def config_differences(a: JSONObject, b: JSONObject, prefix: str = "", depth: int = 2) -> list[str]:
    """The keys (dotted, `depth` levels deep) in which two configurations differ."""
    out = []
    for key in sorted(set(a) | set(b)):
        left, right = a.get(key), b.get(key)
        if left == right:
            continue
        name = f"{prefix}{key}"
        if depth > 1 and isinstance(left, dict) and isinstance(right, dict):
            out += config_differences(left, right, f"{name}.", depth - 1)
        else:
            out.append(name)
    return out


def _simulated(manifest: JSONObject, experiment: JSONObject) -> Optional[bool]:
    container = experiment.get("container")
    env = container.get("env") if isinstance(container, dict) else None
    if isinstance(env, dict) and SIM_TIME_SCALE_ENV in env:
        return True
    image = manifest.get("image", experiment.get("image"))
    if isinstance(image, str):
        return image.startswith(SIM_IMAGE_PREFIX)
    return None


def _guard(manifest: JSONObject, experiment: JSONObject) -> Optional[str]:
    facts = manifest.get("guard")
    if isinstance(facts, dict) and isinstance(facts.get("guarded"), bool):
        if not facts["guarded"]:
            return "off"
        picked = facts.get("picked")
        return f"on (sensor {picked})" if isinstance(picked, str) else "on"
    config = experiment.get("guard")
    sensor = config.get("sensor") if isinstance(config, dict) else None
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
