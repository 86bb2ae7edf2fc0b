"""Experiment -> LaunchSpec: everything an engine needs to start a run, decided up front.

`plan_launch` is pure: it reads nothing and starts nothing (the base run's
flags, the project root and the user's environment are arguments), so
`--dry-run` shows exactly what `run` would do and tests can pin it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import PurePosixPath
from typing import Any, Mapping, Sequence, Tuple

from harness.engines.spec import (
    ENV_EXTRA_ARGS,
    ENV_TRAINER_ARGS,
    LABEL_CAPTURE_DIR,
    LABEL_EXPERIMENT,
    LABEL_RUN,
    LABEL_RUN_ID,
    TRAINER_COMMAND,
    DeviceRequest,
    LaunchSpec,
    Mount,
)
from harness.experiments.schema import ENV_REFERENCE, VOLUME, Experiment, redacted_experiment
from harness.secrets import redact_text, shown_env_value

# Keys of the resolved experiment that do not change what a run measures (the
# guard decides when the run is frozen, and its pauses are taken out of the times;
# `cluster` only says where Ray places the run).
_NOT_IN_RUN_ID = ("description", "compare", "limits", "extends", "guard", "cluster")


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


def container_name(run_id: str, capture_dir: str) -> str:
    """`mgl-<run id>-<capture tag>`: the run id names the configuration, the tag the capture, so two capture roots
    running one experiment at once on one Docker engine never ask for the same name."""
    return f"mgl-{run_id}-{hashlib.sha256(capture_dir.encode()).hexdigest()[:6]}"


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
        container_name=container_name(run_id, capture_dir),
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


def redact_manifest(manifest: dict[str, Any], spec: "LaunchSpec") -> dict[str, Any]:
    """A manifest with no secret in clear: the experiment's container.env, and the harness's own command line.

    The env and the launch spec come from `display_env` / `to_dict`; a secret
    given with `--set` would still be in the recorded command line, found by value.
    """
    redacted = dict(manifest)
    experiment = redacted.get("experiment")
    if isinstance(experiment, dict) and isinstance(experiment.get("container"), dict):
        container = dict(experiment["container"])
        container["env"] = {
            name: shown_env_value(name in spec.secret_env, str(value))
            for name, value in (container.get("env") or {}).items()
        }
        redacted["experiment"] = {**experiment, "container": container}
    if isinstance(redacted.get("harness_argv"), list):
        values = spec.secret_values()
        redacted["harness_argv"] = [redact_text(str(word), values) for word in redacted["harness_argv"]]
    return redacted
