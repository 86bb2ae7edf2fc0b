"""What the trainer ran with: filter, B, O and n, and where each fact came from (docs/summary.md, "Run facts").

args.json (Miles's own dump: the truth about what ran; raw strings such as
`'None'` and `'32'` are read as the values they print); where it lacks a fact,
the manifest's `trainer_argv` (the last occurrence of a flag wins, as in
argparse); where that is missing too, the experiment over the base-run args.
The filter is on by the Miles rule (`harness.mileslog.keys.filter_is_on`); O
None or absent is Miles's default, B. Only Megatron's argument check prints
the dump, so an FSDP run (the lab's) has no args.json: its facts come from
the trainer_argv (the launch line) without a note, as the normal case. A size beyond 2^53 or below 1 is out of
range: unknown, with a note.
"""

from __future__ import annotations

import functools
import json
import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Optional, TypeGuard

from harness.capture.reader import RunCapture
from harness.lab.milesargv import apply_overrides, flag_values, read_base_args
from harness.lab.milesnames import (
    FILTER_FLAG,
    N_SAMPLES_PER_PROMPT_FLAG,
    OVER_SAMPLING_BATCH_SIZE_FLAG,
    RM_TYPE_FLAG,
    ROLLOUT_BATCH_SIZE_FLAG,
    TRAIN_BACKEND_FLAG,
    arg_name,
)
from harness.mileslog import keys
from harness.mileslog.keys import whole_number
from harness.summary.notes import RunNotes, shown
from harness.summary.sanity import out_of_range_int

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject, JSONValue


@dataclass
class RunConfig:
    """What the trainer ran with, and where each fact came from."""

    filter: bool  # False also when nothing says (with a note)
    rollout_batch_size: Optional[int]
    over_sampling_batch_size: Optional[int]
    n_samples_per_prompt: Optional[int]
    sources: dict[str, str] = field(default_factory=dict)
    rm_type: Optional[str] = None  # Miles's --rm-type, from the same sources; None when nothing says


# Each fact, and its name in Miles's argument dump and on the launch line.
_CONFIG_KEYS = {
    fact: (arg_name(flag), flag)
    for fact, flag in (
        ("filter", FILTER_FLAG),
        ("rollout_batch_size", ROLLOUT_BATCH_SIZE_FLAG),
        ("over_sampling_batch_size", OVER_SAMPLING_BATCH_SIZE_FLAG),
        ("n_samples_per_prompt", N_SAMPLES_PER_PROMPT_FLAG),
    )
}
_ABSENT = object()
_SOURCE_FILES = {"args.json": "args.json", "trainer_argv": "manifest.json trainer_argv", "experiment": "the experiment"}


def python_value(value: object) -> object:
    """A dump value as Python: `'None'` -> None, `'32'` -> 32, `'True'` -> True; others as they are."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in ("None", ""):
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _experiment_flags(experiment: JSONObject) -> Mapping[str, list[str]]:
    """The flags of the experiment over the base-run args; empty without a miles section or when they cannot be read.

    Every seed of an experiment has the same miles section, so its flags are
    worked out once per distinct section; the mapping is shared: read only.
    """
    miles = experiment.get("miles")
    if not isinstance(miles, dict):
        return {}
    args = miles.get("args")
    extra = miles.get("extra_args")
    try:
        key = json.dumps(
            [args if isinstance(args, dict) else {}, extra if isinstance(extra, str) else ""],
            sort_keys=True,
            allow_nan=False,
        )
    except ValueError:  # a NaN or an infinity among the args (a manifest read back): flags that cannot be read
        return {}
    return _flags_of_section(key)


@functools.lru_cache(maxsize=256)
def _flags_of_section(key: str) -> Mapping[str, list[str]]:
    args, extra = json.loads(key)
    try:
        return flag_values(apply_overrides(_base_run_words(), args) + shlex.split(extra))
    except (OSError, ValueError):
        return {}


@functools.lru_cache(maxsize=1)
def _base_run_words() -> tuple[str, ...]:
    """The base-run args, read once a process (a summary reads them for every run without args.json or argv)."""
    return tuple(read_base_args())


def resolve_config(capture: RunCapture, notes: RunNotes) -> RunConfig:
    """The run's filter, B, O and n: args.json, else trainer_argv, else the experiment (see the module doc)."""
    argv = (capture.manifest or {}).get("trainer_argv")
    argv_flags = flag_values(argv) if _words(argv) else None
    experiment_flags: Optional[Mapping[str, list[str]]] = None
    raw: dict[str, object] = {}
    sources: dict[str, str] = {}
    for fact, (name, flag) in _CONFIG_KEYS.items():
        if capture.args is not None and name in capture.args:
            raw[fact], sources[fact] = capture.args[name], "args.json"
            continue
        if argv_flags is not None:
            values = argv_flags.get(flag)
            sources[fact] = "trainer_argv"
        else:
            if experiment_flags is None:
                experiment_flags = _experiment_flags(capture.experiment)
            values = experiment_flags.get(flag) if experiment_flags else None
            sources[fact] = "experiment" if experiment_flags else "none"
        if values is None:
            raw[fact] = _ABSENT
        else:
            raw[fact] = values[-1] if values else True

    refused: set[str] = set()

    def whole(fact: str, value: object) -> Optional[int]:
        number = whole_number(python_value(value))
        where = _SOURCE_FILES.get(sources[fact], sources[fact])
        if out_of_range_int(number) or (number is not None and number < 1):
            why = "is beyond 2^53" if out_of_range_int(number) else "is not a positive number"
            notes.flag(f"{where} {_CONFIG_KEYS[fact][0]} {shown(number)} {why}: unknown")
            refused.add(fact)
            return None
        return number

    filter_path = raw["filter"]
    filter_on: Optional[bool]
    if filter_path is _ABSENT:
        filter_on = False if sources["filter"] != "none" else None
    else:
        filter_on = keys.filter_is_on(filter_path)
    batch = whole("rollout_batch_size", raw["rollout_batch_size"]) if raw["rollout_batch_size"] is not _ABSENT else None
    over = raw["over_sampling_batch_size"]
    over_value = None if over is _ABSENT else python_value(over)
    over_int = batch if over_value is None else whole("over_sampling_batch_size", over_value)
    samples = (
        whole("n_samples_per_prompt", raw["n_samples_per_prompt"])
        if raw["n_samples_per_prompt"] is not _ABSENT
        else None
    )

    used = sorted({source for source in sources.values() if source != "args.json"})
    # Megatron's argument check prints the dump: an FSDP run has none, and the launch line is its source (no note).
    fsdp_without_dump = capture.args is None and used == ["trainer_argv"] and _backend(argv_flags) == "fsdp"
    if used == ["none"]:
        notes.append("no args.json, trainer_argv or experiment: filter, B, O and n unknown (filter taken as off)")
    elif used and not fsdp_without_dump:
        where = {
            "trainer_argv": "the manifest's trainer_argv",
            "experiment": "the experiment over the current base-run args",
        }
        facts = ", ".join(fact for fact in _CONFIG_KEYS if sources[fact] != "args.json")
        lead = f"args.json missing: {facts}" if capture.args is None else f"args.json has no {facts}:"
        notes.append(f"{lead} read from {' and '.join(where[s] for s in used if s in where)}")
    for fact, value in (("rollout_batch_size", batch), ("n_samples_per_prompt", samples)):
        if value is None and fact not in refused:
            notes.append(f"{fact} unknown: not found or not a whole number")
    if over_int is None and over_value is not None and "over_sampling_batch_size" not in refused:
        notes.append(f"over_sampling_batch_size {over_value!r} is not a whole number: unknown")
    rm_type = _rm_type(capture, argv_flags)
    return RunConfig(bool(filter_on), batch, over_int, samples, sources, rm_type)


def _rm_type(capture: RunCapture, argv_flags: Optional[Mapping[str, list[str]]]) -> Optional[str]:
    """The run's `--rm-type` by the same order of sources (args.json, trainer_argv, the experiment)."""
    value: object = None
    if capture.args is not None and arg_name(RM_TYPE_FLAG) in capture.args:
        value = python_value(capture.args[arg_name(RM_TYPE_FLAG)])
    else:
        flags = argv_flags if argv_flags is not None else _experiment_flags(capture.experiment)
        given = flags.get(RM_TYPE_FLAG)
        value = given[-1] if given else None
    return value if isinstance(value, str) and value else None


def _backend(argv_flags: Optional[Mapping[str, list[str]]]) -> Optional[str]:
    """The run's `--train-backend` from the trainer_argv (the last one given); None without one."""
    values = argv_flags.get(TRAIN_BACKEND_FLAG) if argv_flags else None
    return values[-1] if values else None


def _words(value: JSONValue) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(word, str) for word in value)
