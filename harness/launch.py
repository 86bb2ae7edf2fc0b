"""Experiment -> LaunchSpec: everything an engine needs to start a run, decided up front.

`plan_launch` is pure: it reads nothing and starts nothing (the base run's
flags, the project root and the user's environment are arguments), so
`--dry-run` shows exactly what `run` would do and tests can pin it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any, Mapping, Optional, Sequence, Tuple

from harness.experiments import ENV_REFERENCE, REDACTED, VOLUME, Experiment, redact_userinfo, userinfo_in

LABEL_PREFIX = "org.miles-gb10-lab"
LABEL_RUN = f"{LABEL_PREFIX}.run"
LABEL_RUN_ID = f"{LABEL_PREFIX}.run-id"
LABEL_EXPERIMENT = f"{LABEL_PREFIX}.experiment"
LABEL_CAPTURE_DIR = f"{LABEL_PREFIX}.capture-dir"

ENV_TRAINER_ARGS = "MILES_ARGS"
ENV_EXTRA_ARGS = "MILES_EXTRA_ARGS"
TRAINER_COMMAND = ("python3", "train.py")

# Keys of the resolved experiment that do not change what a run measures (the
# guard decides when the run is frozen, and its pauses are taken out of the times;
# `cluster` only says where Ray places the run).
_NOT_IN_RUN_ID = ("description", "compare", "limits", "extends", "guard", "cluster")


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

    def display_env(self) -> dict[str, str]:
        """The environment with every secret's value, and every password in a URL, shown as ***."""
        return {name: shown_env_value(name in self.secret_env, value) for name, value in self.env.items()}

    def secret_values(self) -> list[str]:
        """The secrets' values and the user:password of URLs in env values, longest first (to find them in text
        that was written with them)."""
        values = {self.env[name] for name in self.secret_env if self.env.get(name)}
        values.update(info for value in self.env.values() for info in userinfo_in(value))
        return sorted(values, key=len, reverse=True)

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON-ready data, secrets as ***."""
        data = asdict(self)
        data["env"] = self.display_env()
        return data


def shown_env_value(secret: bool, value: str) -> str:
    """An env value as it may be shown: *** for a secret, else with the password of any URL in it as ***."""
    return REDACTED if secret else redact_userinfo(value)


def redacted_experiment(experiment: Experiment) -> dict[str, Any]:
    """The resolved experiment as `to_dict` gives it, each secret's value (and URL password) in container.env as ***."""
    data = experiment.to_dict()
    env = data["container"]["env"]
    data["container"]["env"] = {name: shown_env_value(experiment.container.is_secret(name), value)
                                for name, value in env.items()}
    return data


def redact_text(text: str, secret_values: Sequence[str]) -> str:
    """`text` with every occurrence of a secret's value replaced by ***."""
    for value in secret_values:
        text = text.replace(value, REDACTED)
    return text


def redact_manifest(manifest: dict[str, Any], spec: "LaunchSpec") -> dict[str, Any]:
    """A manifest with no secret in clear: the experiment's container.env, and the harness's own command line.

    The env and the launch spec come from `display_env` / `to_dict`; a secret
    given with `--set` would still be in the recorded command line, found by value.
    """
    redacted = dict(manifest)
    experiment = redacted.get("experiment")
    if isinstance(experiment, dict) and isinstance(experiment.get("container"), dict):
        container = dict(experiment["container"])
        container["env"] = {name: shown_env_value(name in spec.secret_env, str(value))
                            for name, value in (container.get("env") or {}).items()}
        redacted["experiment"] = {**experiment, "container": container}
    if isinstance(redacted.get("harness_argv"), list):
        values = spec.secret_values()
        redacted["harness_argv"] = [redact_text(str(word), values) for word in redacted["harness_argv"]]
    return redacted


def compute_run_id(experiment: Experiment, trainer_argv: Sequence[str], image: str) -> str:
    """`<run>-<8 hex>`: the run name plus a hash of what changes the results (a secret's value does not)."""
    facts = {k: v for k, v in redacted_experiment(experiment).items() if k not in _NOT_IN_RUN_ID}
    facts["container"].pop("secret_env")
    facts["trainer_argv"] = list(trainer_argv)
    facts["image"] = image
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return f"{experiment.run_name}-{hashlib.sha256(canonical.encode()).hexdigest()[:8]}"


def _device_requests(gpus: Any) -> Tuple[DeviceRequest, ...]:
    if gpus == "none":
        return ()
    if gpus == "all":
        return (DeviceRequest(count=-1),)
    return (DeviceRequest(device_ids=tuple(str(i) for i in gpus)),)


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` from `environ` (an unset VAR without default becomes empty)."""
    return ENV_REFERENCE.sub(lambda m: environ.get(m.group(1)) or (m.group(2) or ""), text)


def _mount(volume: str, project_root: str, environ: Mapping[str, str]) -> Mount:
    parts = VOLUME.match(volume)
    assert parts is not None, volume  # validated with the experiment
    source = expand_env(parts["source"], environ)
    if not source.startswith("/"):
        source = str(PurePosixPath(project_root) / source)
    return Mount(source=source, target=parts["target"], read_only=parts["mode"] == "ro")


def plan_launch(
    experiment: Experiment,
    *,
    base_args: Sequence[str],
    capture_root: str,
    project_root: str,
    environ: Mapping[str, str],
) -> LaunchSpec:
    """The launch spec of one run; pure (all inputs are arguments, nothing is read or started)."""
    trainer_args = experiment.trainer_args(base_args)
    trainer_argv = (*TRAINER_COMMAND, *trainer_args, *experiment.extra_words())
    run = experiment.run_name
    run_id = compute_run_id(experiment, trainer_argv, experiment.image)
    capture_dir = str(PurePosixPath(project_root) / capture_root / run)  # an absolute capture_root wins

    env = {
        ENV_TRAINER_ARGS: shlex.join(trainer_args),
        ENV_EXTRA_ARGS: experiment.miles.extra_args,
        **experiment.container.env,
    }
    if experiment.engine == "process" and experiment.container.gpus != "all":
        gpus = experiment.container.gpus
        env["CUDA_VISIBLE_DEVICES"] = "" if gpus == "none" else ",".join(str(i) for i in gpus)
    missing = []
    for name in experiment.container.pass_env:
        if name in environ:
            env[name] = environ[name]
        else:
            missing.append(name)

    return LaunchSpec(
        run=run,
        run_id=run_id,
        experiment=experiment.name,
        seed=experiment.seed,
        engine=experiment.engine,
        image=experiment.image,
        command=tuple(experiment.command) if experiment.command else None,
        container_name=f"mgl-{run_id}",
        trainer_argv=trainer_argv,
        env=env,
        labels={
            LABEL_RUN: run,
            LABEL_RUN_ID: run_id,
            LABEL_EXPERIMENT: experiment.name,
            LABEL_CAPTURE_DIR: capture_dir,
        },
        mounts=tuple(_mount(v, project_root, environ) for v in experiment.container.volumes),
        device_requests=_device_requests(experiment.container.gpus) if experiment.engine == "docker" else (),
        shm_size=experiment.container.shm_size,
        ipc_mode=experiment.container.ipc,
        init=experiment.container.init,
        ulimits=dict(experiment.container.ulimits),
        capture_dir=capture_dir,
        steps_expected=experiment.steps,
        max_minutes=experiment.limits.max_minutes,
        missing_env=tuple(missing),
        secret_env=tuple(name for name in env if experiment.container.is_secret(name)),
    )


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
