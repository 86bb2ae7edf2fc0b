"""LaunchSpec: everything an engine needs to start a run, decided up front (harness.run.plan builds it).

Engines execute a spec and nothing else; `--dry-run` prints one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Mapping, Optional, Tuple

from harness.checkpoints.layout import CheckpointSpec
from harness.secrets import (
    redact_userinfo,
    secret_values_of,
    shown_env_value,
    shown_json,
    shown_words,
    userinfo_in,
)

if TYPE_CHECKING:
    from harness.jsontypes import JSONObject

LABEL_PREFIX = "org.miles-gb10-lab"
LABEL_RUN = f"{LABEL_PREFIX}.run"
LABEL_RUN_ID = f"{LABEL_PREFIX}.run-id"
LABEL_EXPERIMENT = f"{LABEL_PREFIX}.experiment"
LABEL_CAPTURE_DIR = f"{LABEL_PREFIX}.capture-dir"

ENV_TRAINER_ARGS = "MILES_ARGS"
ENV_EXTRA_ARGS = "MILES_EXTRA_ARGS"
TRAINER_COMMAND = ("python3", "train.py")


@dataclass(frozen=True)
class Mount:
    """A bind mount: host path -> container path."""

    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class DeviceRequest:
    """A GPU request as Docker takes it (count -1 = all GPUs)."""

    driver: str = "nvidia"
    count: Optional[int] = None
    device_ids: Optional[Tuple[str, ...]] = None
    capabilities: Tuple[Tuple[str, ...], ...] = (("gpu", "utility"),)


@dataclass(frozen=True)
class LaunchSpec:
    """What an engine executes for one run; built by `plan_launch`, never mutated."""

    run: str
    run_id: str
    experiment: str
    seed: int
    engine: str
    image: str
    command: Optional[Tuple[str, ...]]
    container_name: str
    trainer_argv: Tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)  # secrets in clear, for the engine only: show display_env()
    labels: Mapping[str, str]
    mounts: Tuple[Mount, ...]
    device_requests: Tuple[DeviceRequest, ...]
    shm_size: str
    ipc_mode: str
    init: bool
    ulimits: Mapping[str, int]
    capture_dir: str
    steps_expected: int
    max_minutes: Optional[float]
    missing_env: Tuple[str, ...] = field(default_factory=tuple)
    secret_env: Tuple[str, ...] = field(default_factory=tuple)  # names in `env` whose values are never shown
    checkpoint: Optional[CheckpointSpec] = None  # where and how often it saves (docs/checkpoints.md); None: never

    def display_env(self) -> dict[str, str]:
        """The environment with every secret's value, and every password in a URL, shown as ***."""
        return {name: shown_env_value(name in self.secret_env, value) for name, value in self.env.items()}

    def secret_values(self) -> list[str]:
        """The secrets' values and the URL passwords of every value the engine is given (env, argv, command,
        mounts), longest first: to find them in text that was written with them (the trainer's output)."""
        words = [*self.trainer_argv, *(self.command or ()), *(mount.source for mount in self.mounts)]
        return secret_values_of(self.env, words, self.secret_env)

    def shown(self) -> "LaunchSpec":
        """The spec as it may be shown (printed, written), never executed: every value by the secret rule (env
        secrets and URL passwords as ***, a secret flag's values as ***)."""
        return replace(
            self,
            command=tuple(shown_words(self.command)) if self.command else None,
            trainer_argv=tuple(shown_words(self.trainer_argv)),
            env=self.display_env(),
            labels=shown_json(dict(self.labels)),
            mounts=tuple(Mount(redact_userinfo(m.source), redact_userinfo(m.target), m.read_only) for m in self.mounts),
        )

    def to_dict(self) -> JSONObject:
        """The spec as JSON-ready data, as `shown` shows it (secrets as ***)."""
        data: JSONObject = shown_json(asdict(self.shown()))
        if self.checkpoint is None:
            del data["checkpoint"]  # a run without checkpoints is shown as it was before they existed
        return data


def docker_run_command(spec: LaunchSpec) -> list[str]:
    """The `docker run` line that starts what `spec` starts; secrets (and URLs with a password) passed by name."""
    argv = ["docker", "run", "--name", spec.container_name]
    for request in spec.device_requests:
        if request.count == -1:
            argv += ["--gpus", "all"]
        else:
            argv += ["--gpus", f'"device={",".join(request.device_ids or ())}"']
    argv += ["--shm-size", spec.shm_size, "--ipc", spec.ipc_mode, *(["--init"] if spec.init else [])]
    for name, limit in spec.ulimits.items():
        argv += ["--ulimit", f"{name}={limit}"]
    for mount in spec.mounts:
        argv += ["-v", f"{mount.source}:{mount.target}{':ro' if mount.read_only else ''}"]
    for name, value in spec.env.items():
        argv += ["-e", name if name in spec.secret_env or userinfo_in(value) else f"{name}={value}"]
    for name, value in spec.labels.items():
        argv += ["--label", f"{name}={value}"]
    return [*argv, spec.image]
