"""The experiment schema: typed, strict models of an experiment file and a sweep file.

Cross-field rules live in the models; the loader (harness.experiments.store)
adds the rules that need the whole argv or the other files.
"""

from __future__ import annotations

import re
import shlex
from typing import TYPE_CHECKING, Callable, Dict, List, Literal, Optional, Sequence, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from typing_extensions import Annotated

from harness.checkpoints.config import CheckpointConfig, ResumeConfig
from harness.experiments.flags import HARNESS_ENV, FlagName, FlagValue, refuse_flags
from harness.experiments.naming import ExperimentName, ImageReference, RunName, Seed, run_name
from harness.experiments.yamlfile import shown
from harness.guard.config import GuardConfig
from harness.lab import milesargv
from harness.lab.milesnames import FILTER_FLAG
from harness.secrets import is_secret_env, shown_env_value, shown_json

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


SIZE = re.compile(r"^[0-9]+[bkmgBKMG]?$")
SIZE_UNITS = {"b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
INT64_MAX = 2**63 - 1  # Docker's sizes and limits are 64-bit integers
MAX_STEPS = 1_000_000
MAX_GPU_INDEX = 255  # far more GPUs than one host has; an index becomes a device name (`device=3`)


# HOST:/CONTAINER[:ro|rw]; HOST may hold ${VAR} or ${VAR:-default}, expanded at launch.
VOLUME = re.compile(r"^(?P<source>(?:\$\{[^}]*\}|[^:$])+):(?P<target>/[^:]*)(?::(?P<mode>ro|rw))?$")


ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def _env_name(name: str) -> str:
    if not ENV_NAME.match(name):
        raise ValueError(f"{shown(name)} is not an environment variable name (letters, digits, '_')")
    if name in HARNESS_ENV:
        raise ValueError(f"{name} is set by the harness from {HARNESS_ENV[name]}; set that instead")
    return name


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
        refuse_flags(words)
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
        if isinstance(gpus, list) and (
            not gpus or any(not 0 <= i <= MAX_GPU_INDEX for i in gpus) or len(set(gpus)) != len(gpus)
        ):
            raise ValueError(f"a list of GPU indices must be non-empty, distinct and 0 to {MAX_GPU_INDEX}")
        return gpus

    @field_validator("shm_size")
    @classmethod
    def _size(cls, size: str) -> str:
        if not SIZE.match(size):
            raise ValueError(f"{shown(size)} is not a size like 32g or 512m")
        digits, unit = (size[:-1], size[-1].lower()) if size[-1].isalpha() else (size, "b")
        if len(digits) > 20 or int(digits) * SIZE_UNITS[unit] > INT64_MAX:
            raise ValueError(f"{shown(size)} is more bytes than Docker's 64-bit size holds")
        return size

    @field_validator("ulimits")
    @classmethod
    def _limits(cls, ulimits: Dict[str, int]) -> Dict[str, int]:
        for name, limit in ulimits.items():
            if not -1 <= limit <= INT64_MAX:
                raise ValueError(
                    f"{shown(name)}: {shown(limit)} is out of range: -1 (unlimited) to {INT64_MAX} (Docker's 64-bit limit)"
                )
        return ulimits

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
        return is_secret_env(name, self.secret_env)


class CompareConfig(_Strict):
    """The run this one is compared against, and the baseline runs whose spread frames the reward."""

    baseline: RunName
    baselines: List[RunName] = Field(default_factory=list)


RESOURCE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]{0,63}$")


# Ray's own resources, which the run's task asks for through other keys (or not at all).
RAY_RESERVED_RESOURCES = {
    "GPU": "every run asks for one GPU",
    "CPU": "set cluster.num_cpus",
    "memory": "Ray's memory resource is not used",
    "object_store_memory": "not a task resource",
}


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
                raise ValueError(
                    f"{shown(name)} is not a Ray resource name (a letter or '_', then letters, digits, "
                    "'_', '.', ':', '/', '-')"
                )
            if not amount > 0:
                raise ValueError(f"{name}: {amount} is not a positive amount")
        return resources


class LimitsConfig(_Strict):
    """The run's time limit; reaching it stops the run gracefully."""

    max_minutes: Optional[float] = Field(default=None, gt=0)


class ExportConfig(_Strict):
    """Where a run's records go besides its capture (docs/tensorboard.md): TensorBoard event files, written live
    (on by default), and an offline W&B run directory (`wandb: offline`, or `--wandb`), which never sends anything."""

    tensorboard: bool = True
    wandb: Optional[Literal["offline"]] = None


class Experiment(_Strict):
    """One resolved experiment: what `experiments/<name>.yaml` and its parents say."""

    name: RunName
    extends: Optional[ExperimentName] = None
    description: str = ""
    seed: Seed = 1
    # A step takes minutes on a GB10: a million is years of training, and keeps the figure printable everywhere.
    steps: int = Field(gt=0, le=MAX_STEPS)
    image: ImageReference = "miles-gb10-lab:latest"
    engine: Literal["docker", "process"] = "docker"
    command: Optional[List[Word]] = None
    miles: MilesConfig = Field(default_factory=MilesConfig)
    container: ContainerConfig = Field(default_factory=ContainerConfig)
    guard: GuardConfig = Field(default_factory=GuardConfig)
    compare: Optional[CompareConfig] = None
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)
    checkpoint: Optional[CheckpointConfig] = None  # docs/checkpoints.md
    resume: ResumeConfig = Field(default_factory=ResumeConfig)

    @field_validator("command")
    @classmethod
    def _command_flags(cls, command: Optional[List[str]]) -> Optional[List[str]]:
        # The image's entry passes the command's words after MILES_EXTRA_ARGS, and a trainer run bare reads them
        # alone: an abbreviation there is expanded unseen too.
        refuse_flags(command or [], owned=False)
        return command

    @model_validator(mode="after")
    def _engine_command(self) -> "Experiment":
        if self.engine == "process" and not self.command:
            raise ValueError("engine: process needs a `command` (the trainer entry to run, e.g. [python3, entry.py])")
        if self.engine == "docker" and self.command is not None:
            raise ValueError("`command` is for engine: process; a Docker run always uses the image's own entrypoint")
        if self.resume.auto and self.checkpoint is None:
            raise ValueError("resume.auto needs a `checkpoint` block: an attempt resumes from a checkpoint")
        return self

    @property
    def run_name(self) -> str:
        """`<name>` for seed 1, `<name>-s<k>` for seed k."""
        return run_name(self.name, self.seed)

    def trainer_args(self, base_args: Sequence[str]) -> list[str]:
        """The trainer's flags without MILES_EXTRA_ARGS: the base run with this experiment applied."""
        overrides: dict[str, object] = dict(self.miles.args)
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

    def to_dict(self) -> JSONObject:
        """The resolved experiment with the same keys as the YAML (secrets in clear: see redacted_experiment)."""
        data: JSONObject = self.model_dump(mode="json")
        return data

    def is_secret(self, name: str) -> bool:
        """True when environment variable `name`'s value is never shown, in whichever env map it is set."""
        return self.container.is_secret(name)


class Sweep(_Strict):
    """A sweep file: one experiment over several seeds."""

    name: Optional[RunName] = None
    description: str = ""
    sweep: ExperimentName
    seeds: List[Seed] = Field(min_length=1)
    # Guard keys for every run of the sweep, over the experiment's own (a cooled start, say); each run's guard block
    # is validated whole when it is loaded, and names this file for a bad key.
    guard: Dict[str, object] = Field(default_factory=dict)

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: List[int]) -> List[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError("seeds must be distinct")
        return seeds


def env_map_paths(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> tuple[tuple[str, ...], ...]:
    """Every env map of the schema, as key paths: each mapping keyed by `EnvName`, found by walking the models, so
    that an env map added later goes through the secret rule too (`redact_env_maps`)."""
    found: list[tuple[str, ...]] = []
    for name, field in model.model_fields.items():
        for kind in (field.annotation, *get_args(field.annotation)):
            if get_origin(kind) is dict and get_args(kind)[0] == EnvName:
                found.append((*prefix, name))
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                found += env_map_paths(kind, (*prefix, name))
    return tuple(dict.fromkeys(found))


ENV_MAPS = env_map_paths(Experiment)


def env_map_at(loc: Sequence[object]) -> Optional[tuple[str, ...]]:
    """The env map a key path lies in or is (`container.env.HF_TOKEN` -> container.env), or None."""
    keys = tuple(str(part) for part in loc)
    return next((path for path in ENV_MAPS if keys[: len(path)] == path), None)


def redact_env_maps(data: JSONObject, is_secret: Callable[[str], bool]) -> JSONObject:
    """`data` (an experiment as JSON) with every env map's secrets as ***, and every URL password in any of its
    values (flags, `command`, volumes, env) as *** (a copy)."""
    redacted: JSONObject = shown_json(dict(data))
    for path in ENV_MAPS:
        parents = [redacted]
        for part in path[:-1]:
            child = parents[-1].get(part)
            if not isinstance(child, dict):
                break
            parents.append(dict(child))
        else:
            env = parents[-1].get(path[-1])
            if isinstance(env, dict):
                parents[-1][path[-1]] = {
                    str(name): shown_env_value(is_secret(str(name)), str(value)) for name, value in env.items()
                }
            for depth in range(len(parents) - 1, 0, -1):
                parents[depth - 1][path[depth - 1]] = parents[depth]
    return redacted


def redacted_experiment(experiment: Experiment) -> JSONObject:
    """The resolved experiment as `to_dict` gives it, each secret's value in every env map, and every URL password,
    as ***."""
    return redact_env_maps(experiment.to_dict(), experiment.is_secret)
