"""Experiment files: YAML -> a validated, typed Experiment (extends, overrides, seeds).

Everything is checked here, once, before anything starts; every error names
the file, the key and the reason on one line. Inside the harness the types
are trusted.
"""

from __future__ import annotations

import copy
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness.errors import ExitCode, HarnessError
from harness.lab import milesargv

CURRENT_FILTER_PATH = "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
DEPRECATED_FILTER_PATHS = {
    "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std": CURRENT_FILTER_PATH,
}
FILTER_FLAG = "--dynamic-sampling-filter-path"

# Flags the harness sets from `steps` and `seed`; setting them elsewhere would
# make the run name, the seed sweep and the expected step count lie.
OWNED_FLAGS = {"--num-rollout": "steps", "--seed": "seed", "--rollout-seed": "seed"}

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SENSOR = re.compile(r"^(auto|nvml|sysfs|none|sim|file:.+)$")
SIZE = re.compile(r"^[0-9]+[bkmgBKMG]?$")
# HOST:/CONTAINER[:ro|rw]; HOST may hold ${VAR} or ${VAR:-default}, expanded at launch.
VOLUME = re.compile(r"^(?P<source>(?:\$\{[^}]*\}|[^:$])+):(?P<target>/[^:]*)(?::(?P<mode>ro|rw))?$")

ArgValue = Union[bool, int, float, str, None, List[Union[int, float, str]]]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class MilesConfig(_Strict):
    """Miles flags (names without dashes; true = bare flag, false/null = removed) and MILES_EXTRA_ARGS."""

    args: Dict[str, ArgValue] = Field(default_factory=dict)
    extra_args: str = ""

    @field_validator("args")
    @classmethod
    def _plain_names(cls, args: Dict[str, ArgValue]) -> Dict[str, ArgValue]:
        for name in args:
            if name.startswith("-"):
                raise ValueError(f"flag {name!r}: write flag names without leading dashes")
            if f"--{name}" in OWNED_FLAGS:
                raise ValueError(f"flag {name!r} is set by the experiment's `{OWNED_FLAGS['--' + name]}` key")
        return args

    @field_validator("extra_args")
    @classmethod
    def _splits_like_a_shell(cls, extra_args: str) -> str:
        try:
            words = shlex.split(extra_args)
        except ValueError as err:
            raise ValueError(f"cannot be split like a shell command line: {err}") from None
        for word in words:
            if word.split("=", 1)[0] in OWNED_FLAGS:
                raise ValueError(f"{word.split('=', 1)[0]} is set by the experiment's `{OWNED_FLAGS[word.split('=', 1)[0]]}` key")
        return extra_args


class ContainerConfig(_Strict):
    """How the trainer's container is started."""

    gpus: Union[Literal["all", "none"], List[int]] = "all"
    shm_size: str = "32g"
    ipc: Literal["host", "private", "shareable"] = "host"
    init: bool = True  # a tiny init as PID 1 reaps the processes Ray leaves behind and forwards signals
    env: Dict[str, str] = Field(default_factory=dict)
    pass_env: List[str] = Field(default_factory=list)
    volumes: List[str] = Field(default_factory=list)
    ulimits: Dict[str, int] = Field(default_factory=lambda: {"memlock": -1, "stack": 67108864})

    @field_validator("gpus")
    @classmethod
    def _indices(cls, gpus: Union[str, List[int]]) -> Union[str, List[int]]:
        if isinstance(gpus, list) and (not gpus or any(i < 0 for i in gpus) or len(set(gpus)) != len(gpus)):
            raise ValueError("a list of GPU indices must be non-empty, distinct and >= 0")
        return gpus

    @field_validator("shm_size")
    @classmethod
    def _size(cls, size: str) -> str:
        if not SIZE.match(size):
            raise ValueError(f"{size!r} is not a size like 32g or 512m")
        return size

    @field_validator("volumes")
    @classmethod
    def _volume_specs(cls, volumes: List[str]) -> List[str]:
        for volume in volumes:
            if not VOLUME.match(volume):
                raise ValueError(f"{volume!r} is not HOST:/CONTAINER[:ro|rw]")
        return volumes


class GuardConfig(_Strict):
    """The heat guard: pause at `pause_at_c`, resume at `resume_at_c`."""

    sensor: str = "auto"
    pause_at_c: float = 86.0
    resume_at_c: float = 78.0
    poll_s: float = Field(default=2.0, gt=0)
    min_pause_s: float = Field(default=30.0, ge=0)
    max_pause_s: float = Field(default=600.0, gt=0)
    on_max_pause: Literal["resume", "stop"] = "resume"

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


class CompareConfig(_Strict):
    """The run this one is compared against, and the baseline runs whose spread frames the reward."""

    baseline: str
    baselines: List[str] = Field(default_factory=list)


class LimitsConfig(_Strict):
    """The run's time limit; reaching it stops the run gracefully."""

    max_minutes: Optional[float] = Field(default=None, gt=0)


class Experiment(_Strict):
    """One resolved experiment: what `experiments/<name>.yaml` and its parents say."""

    name: str
    extends: Optional[str] = None
    description: str = ""
    seed: int = Field(default=1, ge=1)
    steps: int = Field(gt=0)
    image: str = "miles-gb10-lab:latest"
    engine: Literal["docker", "process"] = "docker"
    command: Optional[List[str]] = None
    miles: MilesConfig = Field(default_factory=MilesConfig)
    container: ContainerConfig = Field(default_factory=ContainerConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    compare: Optional[CompareConfig] = None
    limits: LimitsConfig = Field(default_factory=LimitsConfig)

    @field_validator("name")
    @classmethod
    def _safe_name(cls, name: str) -> str:
        check_safe_name(name)
        return name

    @model_validator(mode="after")
    def _engine_command(self) -> "Experiment":
        if self.engine == "process" and not self.command:
            raise ValueError("engine: process needs a `command` (the trainer entry to run, e.g. [python3, entry.py])")
        if self.engine == "docker" and self.command is not None:
            raise ValueError("`command` is for engine: process; a Docker run always uses the image's own entrypoint")
        return self

    @property
    def run_name(self) -> str:
        """`<name>` for seed 1, `<name>-s<k>` for seed k."""
        return run_name(self.name, self.seed)

    def trainer_args(self, base_args: Sequence[str]) -> list[str]:
        """The trainer's flags without MILES_EXTRA_ARGS: the base run with this experiment applied."""
        overrides: dict[str, Any] = dict(self.miles.args)
        overrides.update({"num-rollout": self.steps, "seed": self.seed, "rollout-seed": self.seed})
        return milesargv.apply_overrides(base_args, overrides)

    def extra_words(self) -> list[str]:
        """MILES_EXTRA_ARGS split as the image's entry splits it."""
        return shlex.split(self.miles.extra_args)

    def effective_flags(self, base_args: Sequence[str]) -> dict[str, list[str]]:
        """Each flag's values as Miles will see them (extra args win, as they come last)."""
        return milesargv.flag_values(self.trainer_args(base_args) + self.extra_words())

    def filter_path(self, base_args: Sequence[str]) -> Optional[str]:
        """The dynamic-sampling filter the trainer will use, if any."""
        values = self.effective_flags(base_args).get(FILTER_FLAG)
        return values[0] if values else None

    def to_dict(self) -> dict[str, Any]:
        """The resolved experiment with the same keys as the YAML."""
        return self.model_dump(mode="json")


class Sweep(_Strict):
    """A sweep file: one experiment over several seeds."""

    name: Optional[str] = None
    description: str = ""
    sweep: str
    seeds: List[int] = Field(min_length=1)

    @field_validator("seeds")
    @classmethod
    def _positive_distinct(cls, seeds: List[int]) -> List[int]:
        if any(s < 1 for s in seeds) or len(set(seeds)) != len(seeds):
            raise ValueError("seeds must be distinct integers >= 1")
        return seeds


def run_name(name: str, seed: int) -> str:
    """`<name>` for seed 1, `<name>-s<k>` for seed k."""
    return name if seed == 1 else f"{name}-s{seed}"


def check_safe_name(name: str) -> None:
    """Raise ValueError unless `name` can be a directory and container name."""
    if not SAFE_NAME.match(name) or ".." in name:
        raise ValueError(
            f"{name!r} is not a safe name (letters, digits, '.', '_', '-'; starts with a letter or digit; at most 64)"
        )


# --- Loading --------------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that refuses duplicate keys instead of silently keeping the last."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def read_yaml(path: Path) -> dict[str, Any]:
    """One experiment or sweep file as a dict; syntax errors name the line."""
    try:
        text = path.read_text()
    except OSError as err:
        raise HarnessError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise HarnessError(f"{where}: YAML syntax error: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise HarnessError(f"{path}: YAML syntax error: {err}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: expected a mapping of keys, got {type(data).__name__}")
    return data


def deep_merge(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """Child onto parent: mappings merge key by key; lists, strings and scalars replace."""
    merged = copy.deepcopy(dict(parent))
    for key, value in child.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def parse_set(assignments: Sequence[str]) -> list[tuple[list[str], Any]]:
    """`key.path=value` strings -> (path, YAML-typed value) pairs."""
    parsed = []
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise HarnessError(f"--set {assignment!r}: expected KEY.PATH=VALUE, e.g. --set steps=2")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        parsed.append((key.split("."), value))
    return parsed


def apply_set(data: dict[str, Any], assignments: Sequence[tuple[list[str], Any]]) -> dict[str, Any]:
    """A copy of `data` with each (path, value) assigned."""
    result = copy.deepcopy(data)
    for path, value in assignments:
        node = result
        for depth, part in enumerate(path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise HarnessError(f"--set {'.'.join(path)}: {'.'.join(path[:depth + 1])} is not a mapping")
            node = child
        node[path[-1]] = value
    return result


@dataclass(frozen=True)
class Loaded:
    """A resolved experiment, the files it came from (child first), and warnings to show."""

    experiment: Experiment
    files: Tuple[Path, ...]
    warnings: Tuple[str, ...] = field(default_factory=tuple)


class ExperimentStore:
    """The experiment files of one directory, read on demand (a broken file hurts only its readers)."""

    def __init__(self, directory: Path, base_args: Optional[Sequence[str]] = None) -> None:
        self.directory = directory
        self._base_args = list(base_args) if base_args is not None else None

    @property
    def base_args(self) -> list[str]:
        """The section-1.1 run's flags, read once."""
        if self._base_args is None:
            self._base_args = milesargv.read_base_args()
        return self._base_args

    def names(self) -> list[str]:
        """Stems of every *.yaml file, sorted."""
        if not self.directory.is_dir():
            raise HarnessError(f"{self.directory}: experiments directory not found")
        return sorted(p.stem for p in self.directory.glob("*.yaml"))

    def path(self, name: str) -> Path:
        """The file of experiment `name`; unknown names list the known ones."""
        path = self.directory / f"{name}.yaml"
        if not path.is_file():
            known = ", ".join(self.names()) or "none"
            raise HarnessError(f"unknown experiment {name!r} in {self.directory} (known: {known})")
        return path

    def is_sweep(self, name: str) -> bool:
        """True when the file is a sweep (`sweep:` + `seeds:`)."""
        return "sweep" in read_yaml(self.path(name))

    def load_sweep(self, name: str) -> Sweep:
        """A validated sweep file; its experiment is checked when loaded."""
        path = self.path(name)
        data = read_yaml(path)
        sweep = _validate(Sweep, data, path, origin=lambda loc: path)
        if (sweep.name or name) != name:
            raise HarnessError(f"{path}: name: {sweep.name!r} does not match the file name {name!r}")
        return sweep

    def load(self, name: str, *, seed: Optional[int] = None, overrides: Sequence[str] = ()) -> Loaded:
        """Resolve `extends`, apply `--set` overrides and the seed, validate everything."""
        chain = self._chain(name)
        merged: dict[str, Any] = {}
        for _, data in reversed(chain):
            merged = deep_merge(merged, data)
        merged.pop("extends", None)
        child_path, child_data = chain[0]
        if "extends" in child_data:
            merged["extends"] = child_data["extends"]
        assignments = parse_set(overrides)
        merged = apply_set(merged, assignments)
        if seed is not None:
            merged["seed"] = seed

        def origin(loc: Sequence[Any]) -> str:
            path_keys = [str(part) for part in loc]
            if any(path_keys[: len(keys)] == keys for keys, _ in assignments):
                return "--set"
            for path, data in chain:
                node: Any = data
                for part in loc:
                    if not isinstance(node, dict) or part not in node:
                        break
                    node = node[part]
                else:
                    return str(path)
            return str(child_path)

        experiment = _validate(Experiment, merged, child_path, origin)
        if experiment.name != name:
            raise HarnessError(f"{origin(['name'])}: name: {experiment.name!r} does not match the file name {name!r}")
        warnings = _check_trainer_flags(experiment, self.base_args, origin)
        return Loaded(experiment, tuple(p for p, _ in chain), tuple(warnings))

    def _chain(self, name: str) -> list[tuple[Path, dict[str, Any]]]:
        """[(path, data)] from `name` up through its parents; cycles and missing parents rejected."""
        chain: list[tuple[Path, dict[str, Any]]] = []
        seen: list[str] = []
        current: Optional[str] = name
        while current is not None:
            if current in seen:
                cycle = " -> ".join([*seen, current])
                raise HarnessError(f"{chain[-1][0]}: extends: cycle in extends ({cycle})")
            if chain:
                parent_path = self.directory / f"{current}.yaml"
                if not parent_path.is_file():
                    raise HarnessError(f"{chain[-1][0]}: extends: parent experiment {current!r} not found in {self.directory}")
                path = parent_path
            else:
                path = self.path(current)
            data = read_yaml(path)
            if "sweep" in data:
                where = f"{chain[-1][0]}: extends" if chain else f"{path}"
                raise HarnessError(f"{where}: {current!r} is a sweep file, not an experiment")
            seen.append(current)
            chain.append((path, data))
            parent = data.get("extends")
            if parent is not None and not isinstance(parent, str):
                raise HarnessError(f"{path}: extends: expected the name of another experiment, got {parent!r}")
            current = parent
        return chain


def _check_trainer_flags(experiment: Experiment, base_args: Sequence[str], origin: Any) -> list[str]:
    """Cross-field rules on the effective argv; returns warnings, raises on errors."""
    flags = experiment.effective_flags(base_args)
    warnings = []

    def where(flag: str) -> str:
        name = flag.lstrip("-")
        if name in experiment.miles.args:
            return f"{origin(['miles', 'args', name])}: miles.args.{name}"
        if flag in milesargv.flag_values(experiment.extra_words()):
            return f"{origin(['miles', 'extra_args'])}: miles.extra_args"
        return f"{origin(['miles'])}: {flag} (from the base run)"

    def integer(flag: str) -> Optional[int]:
        values = flags.get(flag)
        if not values:
            return None
        try:
            return int(values[0])
        except ValueError:
            raise HarnessError(f"{where(flag)}: {flag} must be an integer, got {values[0]!r}") from None

    batch = integer("--rollout-batch-size")
    over = integer("--over-sampling-batch-size")
    if batch is not None and over is not None and over < batch:
        raise HarnessError(
            f"{where('--over-sampling-batch-size')}: --over-sampling-batch-size {over} is below "
            f"--rollout-batch-size {batch}; Miles refuses it (it must be at least the batch size)"
        )
    path = (flags.get(FILTER_FLAG) or [None])[0]
    if path in DEPRECATED_FILTER_PATHS:
        warnings.append(
            f"{where(FILTER_FLAG)}: {path} is deprecated; use {DEPRECATED_FILTER_PATHS[path]} "
            "(the same filter in current Miles)"
        )
    return warnings


def _validate(model: type, data: dict[str, Any], path: Path, origin: Any) -> Any:
    """model(**data), with the first error as one line: file, key, reason."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        errors = err.errors()
        # A NaN or infinity in a union (a Miles flag) also fails every other member: say what matters.
        first = next((e for e in errors if e["type"] == "finite_number"), errors[0])
        loc = [part for part in first["loc"] if not isinstance(part, str) or not part.startswith("function-")]
        key = ".".join(str(part) for part in loc) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise HarnessError(f"{origin(loc)}: {key}: {_reason(first, model, loc)}{more}") from None


def _reason(error: Mapping[str, Any], model: type, loc: Sequence[Any]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        known = _known_keys(model, loc[:-1])
        return "unknown key" + (f" (known: {', '.join(known)})" if known else "")
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind.endswith("_type") or kind.endswith("_parsing") or kind == "literal_error":
        return f"{message[0].lower()}{message[1:]}, got {error.get('input')!r}"
    return message


def _known_keys(model: type, loc: Sequence[Any]) -> list[str]:
    """Field names of the (nested) model at `loc`, for 'unknown key' messages."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        annotation = fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if hasattr(c, "model_fields")), None)
        if current is None:
            return []
    return list(getattr(current, "model_fields", {}))
