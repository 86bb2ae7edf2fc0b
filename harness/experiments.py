"""Experiment files: YAML -> a validated, typed Experiment (extends, overrides, seeds).

Everything is checked here, once, before anything starts; every error names
the file, the key and the reason on one line. Inside the harness the types
are trusted.
"""

from __future__ import annotations

import copy
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from typing_extensions import Annotated

from harness.capture.reader import not_regular
from harness.errors import HarnessError
from harness.lab import milesargv
from harness.yamlfile import MAX_DEPTH, BoundedLoader, load_mapping, one_line, shown

CURRENT_FILTER_PATH = "miles.rollout.filter_hub.common_filters.apply_reward_nonzero_std_filter"
DEPRECATED_FILTER_PATHS = {
    "miles.rollout.filter_hub.dynamic_sampling_filters.check_reward_nonzero_std": CURRENT_FILTER_PATH,
}
FILTER_FLAG = "--dynamic-sampling-filter-path"
BASE_RUN_LABEL = "harness/lab/base-run.args"

# Flags the harness sets from `steps` and `seed`; setting them elsewhere would
# make the run name, the seed sweep and the expected step count lie.
OWNED_FLAGS = {"--num-rollout": "steps", "--seed": "seed", "--rollout-seed": "seed"}

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Directory names the capture tree uses for itself (dot-names are refused by SAFE_NAME).
RESERVED_NAMES = {"summary": "the summary's directory in the capture tree"}
FLAG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# An environment variable whose value is never shown: by its name, or listed in container.secret_env.
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|CREDENTIAL", re.IGNORECASE)
REDACTED = "***"
# The user:password@ part of a URL (`https://user:pw@host/...`): shown as ***@ wherever an env value is shown.
URL_USERINFO = re.compile(r"(?<=://)[^/?#@\s]+@")
# The harness sets these from miles.args / miles.extra_args: set by hand they would bypass every check on flags.
HARNESS_ENV = {"MILES_ARGS": "miles.args", "MILES_EXTRA_ARGS": "miles.extra_args"}
SECRET_FLAG_HINT = (
    "passes a secret on the trainer's command line, which the trainer prints in its log; pass it by environment "
    "instead (container.env, or container.pass_env from your shell, e.g. WANDB_API_KEY for W&B), which reaches "
    "the container only through its environment"
)
SENSOR = re.compile(r"^(auto|nvml|sysfs|none|sim|file:.+)$")
SIZE = re.compile(r"^[0-9]+[bkmgBKMG]?$")
# HOST:/CONTAINER[:ro|rw]; HOST may hold ${VAR} or ${VAR:-default}, expanded at launch.
VOLUME = re.compile(r"^(?P<source>(?:\$\{[^}]*\}|[^:$])+):(?P<target>/[^:]*)(?::(?P<mode>ro|rw))?$")
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _flag_name(name: str) -> str:
    if name.startswith("-"):
        raise ValueError(f"flag {shown(name)}: write flag names without leading dashes")
    if not FLAG_NAME.match(name):
        raise ValueError(f"flag {shown(name)}: a flag name is letters, digits, '-', '_' and '.'")
    owner = _owned_flag(f"--{name}")
    if owner:
        raise ValueError(f"flag {shown(name)} is set by the harness: {owner}")
    return name


def _owned_flag(flag: str) -> Optional[str]:
    """Why `flag` may not be given by hand (it, or an abbreviation argparse would expand to it, is owned)."""
    for owned, key in OWNED_FLAGS.items():
        if flag == owned:
            return f"use the experiment's `{key}` key"
        if len(flag) > 2 and owned.startswith(flag):
            return f"it abbreviates {owned}, which argparse would set; use the experiment's `{key}` key"
    return None


def _flag_value(value: Any) -> Any:
    scalar = (int, float, str)
    if value is None or isinstance(value, (bool, *scalar)):
        words = [value]
    elif isinstance(value, list) and all(isinstance(v, scalar) and not isinstance(v, bool) for v in value):
        words = value
    else:
        raise ValueError(
            f"expected a word, a number, true/false/null, or a list of words and numbers (for a flag that takes "
            f"several values), got {shown(value)}"
        )
    for word in words:
        if isinstance(word, float) and not math.isfinite(word):
            raise ValueError(f"{word} is not a finite number: Miles would read the word {word!r} as text, or fail")
        if isinstance(word, str) and milesargv.is_flag(word):
            raise ValueError(f"the value {shown(word)} would be read as a flag; a value may not start with '-'")
    return value


FlagName = Annotated[str, AfterValidator(_flag_name)]
FlagValue = Annotated[Any, AfterValidator(_flag_value)]


def _env_name(name: str) -> str:
    if not ENV_NAME.match(name):
        raise ValueError(f"{shown(name)} is not an environment variable name (letters, digits, '_')")
    if name in HARNESS_ENV:
        raise ValueError(f"{name} is set by the harness from {HARNESS_ENV[name]}; set that instead")
    return name


def redact_userinfo(text: str) -> str:
    """`text` with the user:password part of every URL in it shown as ***."""
    return URL_USERINFO.sub(f"{REDACTED}@", text)


def userinfo_in(text: str) -> list[str]:
    """The user:password parts of the URLs in `text` (to find them in text that was written with them)."""
    return [match.group(0)[:-1] for match in URL_USERINFO.finditer(text)]


# Trainer flags that the secret rule's words would catch but that never hold a secret: data-set columns
# (`--input-key messages`) and token counts or tokenizers (`--max-tokens-per-gpu 9216`).
NOT_SECRET_FLAGS = {"input-key", "label-key", "metadata-key", "tool-key", "multimodal-keys"}
_NOT_SECRET_WORDS = re.compile(r"tokens|tokeni[sz]\w*", re.IGNORECASE)
# Miles's own secret flags, also caught when abbreviated (argparse expands `--wandb-k` to `--wandb-key`).
KNOWN_SECRET_FLAGS = ("wandb-key",)


def is_secret_flag(name: str) -> bool:
    """True when a flag's name (with or without dashes) follows the secret rule, like an env variable's."""
    bare = name.lstrip("-")
    if any(known.startswith(bare) and len(bare) > known.rfind("-") + 1 for known in KNOWN_SECRET_FLAGS):
        return True
    return bare not in NOT_SECRET_FLAGS and bool(SECRET_NAME.search(_NOT_SECRET_WORDS.sub("", bare)))


def secret_flags(words: Sequence[str]) -> list[str]:
    """Names of the flags in `words` (`--f v` or `--f=v`) that follow the secret rule and carry a value."""
    return [flag.name for flag in milesargv.parse_flags(words) if flag.name and flag.values
            and is_secret_flag(flag.name)]


def _split_or_none(text: Any) -> Optional[list[str]]:
    try:
        return shlex.split(text) if isinstance(text, str) else None
    except ValueError:
        return None  # refused, without quoting it, by the validation of miles.extra_args


def _no_nul(text: str) -> str:
    if "\x00" in text:  # no process can receive it: the start would fail with an unhelpful error
        raise ValueError("contains a NUL character, which no environment or command line can carry")
    return text


EnvName = Annotated[str, AfterValidator(_env_name)]
Word = Annotated[str, AfterValidator(_no_nul)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class MilesConfig(_Strict):
    """Miles flags (names without dashes; true = bare flag, false/null = removed) and MILES_EXTRA_ARGS."""

    args: Dict[FlagName, FlagValue] = Field(default_factory=dict)
    extra_args: str = ""

    @field_validator("extra_args")
    @classmethod
    def _splits_like_a_shell(cls, extra_args: str) -> str:
        try:
            words = shlex.split(extra_args)
        except ValueError as err:
            raise ValueError(f"cannot be split like a shell command line: {err}") from None
        for flag in milesargv.parse_flags(words):
            owner = _owned_flag(flag.name)
            if owner:
                raise ValueError(f"{one_line(flag.name, 80)} is set by the harness: {owner}")
        return extra_args


class ContainerConfig(_Strict):
    """How the trainer's container is started."""

    gpus: Union[Literal["all", "none"], List[int]] = "all"
    shm_size: str = "32g"
    ipc: Literal["host", "private", "shareable"] = "host"
    init: bool = True  # a tiny init as PID 1 reaps the processes Ray leaves behind and forwards signals
    env: Dict[EnvName, Word] = Field(default_factory=dict)
    pass_env: List[EnvName] = Field(default_factory=list)
    secret_env: List[EnvName] = Field(default_factory=list)
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
            raise ValueError(f"{shown(size)} is not a size like 32g or 512m")
        return size

    @field_validator("volumes")
    @classmethod
    def _volume_specs(cls, volumes: List[str]) -> List[str]:
        for volume in volumes:
            if not VOLUME.match(volume):
                raise ValueError(f"{shown(volume)} is not HOST:/CONTAINER[:ro|rw]")
        return volumes

    @model_validator(mode="after")
    def _no_secret_in_a_mount(self) -> "ContainerConfig":
        for volume in self.volumes:
            for reference in ENV_REFERENCE.finditer(volume):
                if self.is_secret(reference.group(1)):
                    raise ValueError(
                        f"volumes: {shown(volume)} reads the secret ${{{reference.group(1)}}}; a secret reaches the "
                        "container only through its environment"
                    )
        return self

    def is_secret(self, name: str) -> bool:
        """True when the value of environment variable `name` must never be shown."""
        return bool(SECRET_NAME.search(name)) or name in self.secret_env


class SimSensorConfig(_Strict):
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


class GuardConfig(_Strict):
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


def check_safe_name(name: Any) -> None:
    """Raise ValueError unless `name` can be a run's directory and container name."""
    if not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name:
        raise ValueError(
            f"{shown(name)} is not a safe name (letters, digits, '.', '_', '-'; starts with a letter or digit; "
            "at most 64)"
        )
    if name in RESERVED_NAMES:
        raise ValueError(f"{name!r} is reserved: it is {RESERVED_NAMES[name]}")


def check_experiment_name(value: Any) -> None:
    """Raise ValueError unless `value` can name an experiment file: a name, never a path."""
    if not isinstance(value, str) or not SAFE_NAME.match(value) or ".." in value:
        raise ValueError(
            f"{shown(value)} is not an experiment name: give the stem of a file in the experiments directory "
            "(letters, digits, '.', '_', '-'), never a path"
        )


def _safe_name(name: str) -> str:
    check_safe_name(name)
    return name


def _experiment_name(name: str) -> str:
    check_experiment_name(name)
    return name


RunName = Annotated[str, AfterValidator(_safe_name)]
ExperimentName = Annotated[str, AfterValidator(_experiment_name)]


class CompareConfig(_Strict):
    """The run this one is compared against, and the baseline runs whose spread frames the reward."""

    baseline: RunName
    baselines: List[RunName] = Field(default_factory=list)


RESOURCE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]{0,63}$")
# Ray's own resources, which the run's task asks for through other keys (or not at all).
RAY_RESERVED_RESOURCES = {"GPU": "every run asks for one GPU", "CPU": "set cluster.num_cpus",
                          "memory": "Ray's memory resource is not used", "object_store_memory": "not a task resource"}


class ClusterConfig(_Strict):
    """How a run is placed under `--ray` (docs/cluster.md): always one GPU, plus these Ray resources."""

    resources: Dict[str, float] = Field(default_factory=dict)  # custom Ray resources, e.g. {spark: 1}
    num_cpus: float = Field(default=0, ge=0)  # the run's task itself idles; the trainer uses the GPU's host
    env: Dict[EnvName, Word] = Field(default_factory=dict)  # NCCL/RoCE settings of a run over several hosts

    @field_validator("resources")
    @classmethod
    def _resources(cls, resources: Dict[str, float]) -> Dict[str, float]:
        for name, amount in resources.items():
            if name in RAY_RESERVED_RESOURCES:
                raise ValueError(f"{name!r} is Ray's own resource: {RAY_RESERVED_RESOURCES[name]}")
            if not RESOURCE_NAME.match(name):
                raise ValueError(f"{shown(name)} is not a Ray resource name (a letter or '_', then letters, digits, "
                                 "'_', '.', ':', '/', '-')")
            if not amount > 0:
                raise ValueError(f"{name}: {amount} is not a positive amount")
        return resources


class LimitsConfig(_Strict):
    """The run's time limit; reaching it stops the run gracefully."""

    max_minutes: Optional[float] = Field(default=None, gt=0)


class Experiment(_Strict):
    """One resolved experiment: what `experiments/<name>.yaml` and its parents say."""

    name: RunName
    extends: Optional[ExperimentName] = None
    description: str = ""
    seed: int = Field(default=1, ge=1)
    steps: int = Field(gt=0)
    image: str = "miles-gb10-lab:latest"
    engine: Literal["docker", "process"] = "docker"
    command: Optional[List[Word]] = None
    miles: MilesConfig = Field(default_factory=MilesConfig)
    container: ContainerConfig = Field(default_factory=ContainerConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    compare: Optional[CompareConfig] = None
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)

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
        """The resolved experiment with the same keys as the YAML (secrets in clear: see launch.redacted_experiment)."""
        return self.model_dump(mode="json")


class Sweep(_Strict):
    """A sweep file: one experiment over several seeds."""

    name: Optional[RunName] = None
    description: str = ""
    sweep: ExperimentName
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


_SEED_RUN = re.compile(r"^(?P<name>.+)-s(?P<seed>[1-9][0-9]*)$")


def makers_of(run: str) -> list[tuple[str, int]]:
    """Every (experiment name, seed) whose run name is `run`."""
    makers = [(run, 1)]
    match = _SEED_RUN.match(run)
    if match and int(match["seed"]) >= 2:
        makers.append((match["name"], int(match["seed"])))
    return makers


# --- Loading --------------------------------------------------------------------------------


def key_text(path: Sequence[Any]) -> str:
    """A key path for messages (`miles.args.lr`), each part cut short: keys come from the file too."""
    return ".".join(one_line(str(part), 60) for part in path)[:240] or "(top level)"


def deep_merge(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """Child onto parent: mappings merge key by key; lists, strings and scalars replace."""
    merged = copy.deepcopy(dict(parent))
    for key, value in child.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass(frozen=True)
class Override:
    """One `--set KEY.PATH=VALUE`: where it goes, its YAML-typed value, and the text as typed."""

    path: Tuple[str, ...]
    value: Any
    raw: str

    def hides_secrets(self, is_secret: Callable[[str], bool]) -> bool:
        """True when the value sets a secret's value (or a whole mapping that may hold one)."""
        env, args = ("container", "env"), ("miles", "args")
        if self.path[:2] == env:
            return len(self.path) == 2 or is_secret(self.path[2]) or self.path[2] in HARNESS_ENV
        if self.path[:2] == args:
            return len(self.path) == 2 or is_secret_flag(self.path[2])
        if self.path == ("miles", "extra_args"):
            words = _split_or_none(self.value)
            return words is None or bool(secret_flags(words))
        if self.path == ("command",):
            return not isinstance(self.value, list) or bool(secret_flags([str(word) for word in self.value]))
        return env[: len(self.path)] == self.path or args[: len(self.path)] == self.path

    def quoted(self, is_secret: Callable[[str], bool]) -> str:
        """`--set KEY=VALUE` for messages: the value cut short, or *** for a secret."""
        value = REDACTED if self.hides_secrets(is_secret) else one_line(redact_userinfo(self.raw), 80)
        return f"--set {key_text(self.path)}={value}"


def parse_set(assignments: Sequence[str]) -> list[Override]:
    """`key.path=value` strings -> overrides with YAML-typed values."""
    parsed = []
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise HarnessError(f"--set {one_line(key, 80)}: expected KEY.PATH=VALUE, e.g. --set steps=2")
        if key.count(".") >= MAX_DEPTH:
            raise HarnessError(f"--set {one_line(key, 80)}: more than {MAX_DEPTH} keys deep")
        try:
            value = yaml.load(raw, Loader=BoundedLoader) if raw.strip() else ""
        except (yaml.YAMLError, ValueError, TypeError, OverflowError):
            value = raw  # not YAML: the text as typed
        parsed.append(Override(tuple(key.split(".")), value, raw))
    return parsed


def apply_set(data: dict[str, Any], overrides: Sequence[Override], is_secret: Callable[[str], bool]) -> dict[str, Any]:
    """A copy of `data` with each override assigned."""
    result = copy.deepcopy(data)
    for override in overrides:
        if override.path[0] == "extends":
            raise HarnessError(
                f"{override.quoted(is_secret)}: `extends` picks which files are read and cannot be overridden; "
                "write a new experiment file"
            )
        node = result
        for depth, part in enumerate(override.path[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = key_text(override.path[: depth + 1])
                raise HarnessError(f"{override.quoted(is_secret)}: {where} is not a mapping")
            node = child
        node[override.path[-1]] = copy.deepcopy(override.value)
    return result


def _secret_test(data: Mapping[str, Any]) -> Callable[[str], bool]:
    """Whether an env name is secret, from still-unvalidated data (its container.secret_env, if well formed)."""
    container = data.get("container")
    listed = container.get("secret_env") if isinstance(container, dict) else None
    names = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    return lambda name: bool(SECRET_NAME.search(str(name))) or name in names


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
        self._read: dict[Path, dict[str, Any]] = {}

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
        """The file of experiment `name` (a name, never a path); unknown names list the known ones."""
        try:
            check_experiment_name(name)
        except ValueError as err:
            raise HarnessError(str(err)) from None
        path = self.directory / f"{name}.yaml"
        why = not_regular(path)
        if why:
            raise HarnessError(f"{path}: {why}; an experiment is a regular YAML file")
        if not path.is_file():
            known = ", ".join(self.names()) or "none"
            raise HarnessError(f"unknown experiment {name!r} in {self.directory} (known: {one_line(known)})")
        return path

    def read(self, path: Path) -> dict[str, Any]:
        """One file's mapping, read once per store (never mutated by the store)."""
        if path not in self._read:
            self._read[path] = load_mapping(path)
        return self._read[path]

    def is_sweep(self, name: str) -> bool:
        """True when the file is a sweep (`sweep:` + `seeds:`)."""
        return "sweep" in self.read(self.path(name))

    def load_sweep(self, name: str) -> Sweep:
        """A validated sweep file; its experiment is checked when loaded."""
        path = self.path(name)
        sweep = _validate(Sweep, self.read(path), lambda loc: f"{path}: {key_text(loc)}")
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
        merged = apply_set(merged, assignments, _secret_test(merged))
        if seed is not None:
            merged["seed"] = seed
        is_secret = _secret_test(merged)

        def place(loc: Sequence[Any]) -> str:
            """Where the key at `loc` was set, for messages: `--set KEY=VALUE`, else `FILE: key`."""
            keys = tuple(str(part) for part in loc)
            key = key_text(keys)
            for override in reversed(assignments):
                shared = min(len(keys), len(override.path))
                if shared and keys[:shared] == override.path[:shared]:
                    quoted = override.quoted(is_secret)
                    return quoted if override.path == keys else f"{quoted}: {key}"
            return f"{_first_file_with(chain, loc) or child_path}: {key}"

        _refuse_secret_flags(merged, place)
        experiment = _validate(Experiment, merged, place, is_secret)
        if experiment.name != name:
            raise HarnessError(f"{place(['name'])}: {experiment.name!r} does not match the file name {name!r}")
        self._check_one_capture(experiment, child_path)
        warnings = _check_trainer_flags(experiment, self.base_args, place)
        return Loaded(experiment, tuple(p for p, _ in chain), tuple(warnings))

    def _chain(self, name: str) -> list[tuple[Path, dict[str, Any]]]:
        """[(path, data)] from `name` up through its parents; paths, cycles and missing parents rejected."""
        path = self.path(name)
        chain = [(path, self.read(path))]
        seen = [name]
        while True:
            path, data = chain[-1]
            if "sweep" in data:
                where = f"{chain[-2][0]}: extends" if len(chain) > 1 else str(path)
                raise HarnessError(f"{where}: {seen[-1]!r} is a sweep file, not an experiment")
            if "extends" not in data or data["extends"] is None:
                return chain
            parent = data["extends"]
            try:
                check_experiment_name(parent)
            except ValueError as err:
                raise HarnessError(f"{path}: extends: {err}") from None
            if parent in seen:
                raise HarnessError(f"{path}: extends: cycle in extends ({' -> '.join([*seen, parent])})")
            parent_path = self.directory / f"{parent}.yaml"
            why = not_regular(parent_path)
            if why:
                raise HarnessError(f"{path}: extends: {parent_path}: {why}")
            if not parent_path.is_file():
                raise HarnessError(f"{path}: extends: parent experiment {parent!r} not found in {self.directory}")
            seen.append(parent)
            chain.append((parent_path, self.read(parent_path)))

    def _check_one_capture(self, experiment: Experiment, path: Path) -> None:
        """Refuse a run name that another experiment file also makes: two runs would share one capture."""
        run = experiment.run_name
        for other, seed in makers_of(run):
            other_path = self.directory / f"{other}.yaml"
            if other == experiment.name or not other_path.is_file() or self._is_sweep_file(other_path):
                continue
            how = "as its own run" if seed == 1 else f"with seed {seed}"
            raise HarnessError(
                f"{path}: run {run} (seed {experiment.seed}) is also made by {other_path} {how}; two experiments "
                "would share one capture: rename one of them"
            )

    def _is_sweep_file(self, path: Path) -> bool:
        try:
            return "sweep" in self.read(path)
        except HarnessError:
            return False  # unreadable, but still named like a run: it would collide once fixed


def _first_file_with(chain: Sequence[tuple[Path, dict[str, Any]]], loc: Sequence[Any]) -> Optional[Path]:
    """The first file of the chain (child first) that sets the key at `loc`."""
    for path, data in chain:
        node: Any = data
        for part in loc:
            if not isinstance(node, dict) or part not in node:
                break
            node = node[part]
        else:
            return path
    return None


def _refuse_secret_flags(data: Mapping[str, Any], place: Callable[[Any], str]) -> None:
    """Refuse a secret given as a trainer flag, by every route a flag takes, before anything can show it.

    The trainer prints its whole argv when it starts, so no redaction could keep
    the value out of container.log: a secret reaches the trainer by environment only.
    """
    miles = data.get("miles")
    miles = miles if isinstance(miles, dict) else {}
    args = miles.get("args")
    for name, value in (args.items() if isinstance(args, dict) else ()):
        if is_secret_flag(str(name)) and value is not True and value is not False and value is not None:
            flag = "--" + one_line(str(name).lstrip("-"), 60)
            raise HarnessError(f"{place(['miles', 'args', name])}: {flag} {SECRET_FLAG_HINT}")
    sources = [(["miles", "extra_args"], _split_or_none(miles.get("extra_args")))]
    command = data.get("command")
    if isinstance(command, list):
        sources.append((["command"], [str(word) for word in command]))
    for loc, words in sources:
        for name in secret_flags(words or []):
            raise HarnessError(f"{place(loc)}: {one_line(name, 60)} {SECRET_FLAG_HINT}")


def _check_trainer_flags(experiment: Experiment, base_args: Sequence[str], place: Callable[[Any], str]) -> list[str]:
    """Cross-field rules on the effective argv (base run + args + extra_args); returns warnings, raises on errors."""
    sources: list[tuple[str, milesargv.Flag]] = []
    for flag in milesargv.parse_flags(experiment.trainer_args(base_args)):
        name = flag.name[2:]
        if flag.name in OWNED_FLAGS:
            sources.append((place([OWNED_FLAGS[flag.name]]), flag))
        elif name in experiment.miles.args:
            sources.append((place(["miles", "args", name]), flag))
        else:
            sources.append((f"the base run ({BASE_RUN_LABEL})", flag))
    extra = place(["miles", "extra_args"])
    sources += [(extra, flag) for flag in milesargv.parse_flags(experiment.extra_words())]
    _refuse_conflicts(sources)

    flags = {flag.name: list(flag.values) for _, flag in sources if flag.name}  # the last one wins, as in argparse
    where = {flag.name: source for source, flag in sources}

    def integer(flag: str) -> Optional[int]:
        values = flags.get(flag)
        if not values:
            return None
        try:
            return int(values[0])
        except ValueError:
            raise HarnessError(f"{where[flag]}: {flag} must be an integer, got {shown(values[0])}") from None

    batch = integer("--rollout-batch-size")
    over = integer("--over-sampling-batch-size")
    if batch is not None and over is not None and over < batch:
        raise HarnessError(
            f"{where['--over-sampling-batch-size']}: --over-sampling-batch-size {over} is below "
            f"--rollout-batch-size {batch}; Miles refuses it (it must be at least the batch size)"
        )
    path = (flags.get(FILTER_FLAG) or [None])[0]
    warnings = []
    if path in DEPRECATED_FILTER_PATHS:
        warnings.append(
            f"{where[FILTER_FLAG]}: {path} is deprecated; use {DEPRECATED_FILTER_PATHS[path]} "
            "(the same filter in current Miles)"
        )
    return warnings


def _refuse_conflicts(sources: Sequence[tuple[str, milesargv.Flag]]) -> None:
    """A flag given twice with different values is an error naming both places (the same value twice is harmless)."""
    first: dict[str, tuple[str, milesargv.Flag]] = {}
    for source, flag in sources:
        if not flag.name:
            continue
        if flag.name not in first:
            first[flag.name] = (source, flag)
            continue
        earlier_source, earlier = first[flag.name]
        if _same_values(earlier.values, flag.values):
            continue
        hint = (f"set miles.args.{flag.name[2:]} to change a flag of the base run" if earlier_source.startswith("the base run")
                else "give it once")
        raise HarnessError(
            f"{source}: {flag.name} is given twice with different values: {_words(flag.values)} here and "
            f"{_words(earlier.values)} at {earlier_source}; {hint}"
        )


def _same_values(a: Sequence[str], b: Sequence[str]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        try:
            if float(x) != float(y):
                return False
        except ValueError:
            return False
    return True


def _words(values: Sequence[str]) -> str:
    return one_line(shlex.join(values), 60) if values else "(no value)"


def _validate(model: type, data: dict[str, Any], place: Callable[[Any], str],
              is_secret: Callable[[str], bool] = lambda name: False) -> Any:
    """model(**data), with the first error as one line: where the key was set, and the reason."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        errors = err.errors()
        # A NaN or infinity in a union (a Miles flag) also fails every other member: say what matters.
        first = next((e for e in errors if e["type"] == "finite_number"), errors[0])
        loc = [part for part in first["loc"] if part != "[key]"
               and not (isinstance(part, str) and part.startswith("function-"))]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        secret = ((loc[:2] == ["container", "env"] and (len(loc) == 2 or is_secret(str(loc[2]))))
                  or (loc[:2] == ["miles", "args"] and (len(loc) == 2 or is_secret_flag(str(loc[2])))))
        raise HarnessError(f"{place(loc)}: {one_line(_reason(first, model, loc, secret), 240)}{more}") from None


def _reason(error: Mapping[str, Any], model: type, loc: Sequence[Any], secret: bool) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        known = _known_keys(model, loc[:-1])
        return "unknown key" + (f" (known: {', '.join(known)})" if known else "")
    if kind == "missing":
        return "required key is missing"
    message = str(error["msg"])
    message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind.endswith("_type") or kind.endswith("_parsing") or kind == "literal_error":
        got = REDACTED if secret else shown(error.get("input"))
        return f"{message[0].lower()}{message[1:]}, got {got}"
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
