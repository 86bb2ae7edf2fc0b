"""Experiment -> LaunchSpec: everything an engine needs to start a run, decided up front.

`plan_launch` is pure: it reads nothing and starts nothing (the base run's
flags, the project root and the user's environment are arguments), so
`--dry-run` shows exactly what `run` would do and tests can pin it.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional, Sequence, Tuple, Union

from harness.capture.attempts import RunAttempts
from harness.checkpoints.layout import (
    CONTAINER_ROOT,
    CheckpointSpec,
    checkpoint_root,
    plan_checkpoints,
)
from harness.checkpoints.start import CheckpointStart
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
from harness.errors import HarnessError
from harness.experiments.naming import run_name
from harness.experiments.schema import ENV_REFERENCE, VOLUME, Experiment, redact_env_maps, redacted_experiment
from harness.experiments.store import ExperimentStore
from harness.jsontypes import JSONValue
from harness.lab.milesnames import ROLLOUT_GLOBAL_DATASET_FLAG
from harness.run.simswap import SimTarget, simulated
from harness.secrets import is_secret_env, redact_text, shown_json, shown_words
from harness.sim.config import sizes_problem

# Keys of the resolved experiment that do not change what a run measures (the
# guard decides when the run is frozen, and its pauses are taken out of the times;
# `cluster` only says where Ray places the run; `export`, where its records are shown besides the capture;
# `checkpoint` and `resume`, when it saves and whether it continues: a resumed run measures what one run would).
_NOT_IN_RUN_ID = ("description", "compare", "limits", "extends", "guard", "cluster", "export", "checkpoint", "resume")


def compute_run_id(experiment: Experiment, trainer_argv: Sequence[str], image: str, run: Optional[str] = None) -> str:
    """`<run>-<8 hex>`: the run name (the experiment's, or `run`) plus a hash of what changes the results (a
    secret's value does not)."""
    facts = {k: v for k, v in redacted_experiment(experiment).items() if k not in _NOT_IN_RUN_ID}
    container = facts.get("container")
    if isinstance(container, dict):  # which names are secret is not a fact of the run; their values are not in it
        facts["container"] = {key: value for key, value in container.items() if key != "secret_env"}
    facts["trainer_argv"] = list[JSONValue](shown_words(trainer_argv))  # nor a URL password's
    facts["image"] = image
    canonical = json.dumps(facts, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return f"{run or experiment.run_name}-{hashlib.sha256(canonical.encode()).hexdigest()[:8]}"


def _device_requests(gpus: Union[str, Sequence[int]]) -> Tuple[DeviceRequest, ...]:
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
    run_name: Optional[str] = None,
) -> LaunchSpec:
    """The launch spec of one run; pure (all inputs are arguments, nothing is read or started).

    `run_name`: a variant's own run name (`run --name`), instead of the experiment's.
    """
    trainer_args = experiment.trainer_args(base_args)
    trainer_argv = (*TRAINER_COMMAND, *trainer_args, *experiment.extra_words())
    run = run_name or experiment.run_name
    run_id = compute_run_id(experiment, trainer_argv, experiment.image, run)  # the checkpoint flags are not in it
    capture_dir = str(PurePosixPath(project_root) / capture_root / run)  # an absolute capture_root wins
    checkpoints = _checkpoints(experiment, run, run_id, project_root, environ, base_args)
    if checkpoints is not None:
        trainer_args = [*trainer_args, *checkpoints.save_flags()]
        trainer_argv = (*TRAINER_COMMAND, *trainer_args, *experiment.extra_words())
    mounts = tuple(_mount(v, project_root, environ) for v in experiment.container.volumes)
    if checkpoints is not None and experiment.engine == "docker":
        mounts = (*mounts, Mount(source=checkpoints.root, target=CONTAINER_ROOT))

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
        mounts=mounts,
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
        checkpoint=checkpoints,
    )


def _checkpoints(
    experiment: Experiment,
    run: str,
    run_id: str,
    project_root: str,
    environ: Mapping[str, str],
    base_args: Sequence[str],
) -> Optional[CheckpointSpec]:
    """The run's checkpoint spec, when its experiment has a `checkpoint` block (pure)."""
    if experiment.checkpoint is None:
        return None
    return plan_checkpoints(
        experiment.checkpoint,
        run=run,
        run_id=run_id,
        in_container=experiment.engine == "docker",
        root=checkpoint_root(project_root, environ),
        data_state=ROLLOUT_GLOBAL_DATASET_FLAG in experiment.effective_flags(base_args),
    )


def redact_manifest(manifest: dict[str, object], spec: "LaunchSpec") -> dict[str, object]:
    """A manifest with no secret in clear: the experiment's env maps by the name rule, the harness's own command
    line by the values of the spec's secrets, and every string in it by the URL rule.

    The env and the launch spec come from `display_env` / `to_dict`; a secret
    given with `--set` would still be in the recorded command line, found by value.
    """
    redacted = dict(manifest)
    experiment = redacted.get("experiment")
    if isinstance(experiment, dict):
        container = experiment.get("container")
        listed = container.get("secret_env") if isinstance(container, dict) else None
        names = [str(name) for name in listed] if isinstance(listed, list) else []
        redacted["experiment"] = redact_env_maps(
            experiment, lambda name: name in spec.secret_env or is_secret_env(name, names)
        )
    argv = redacted.get("harness_argv")
    if isinstance(argv, list):
        values = spec.secret_values()
        redacted["harness_argv"] = [redact_text(str(word), values) for word in argv]
    words = redacted.get("trainer_argv")
    if isinstance(words, list):
        redacted["trainer_argv"] = shown_words([str(word) for word in words])
    shown: dict[str, object] = shown_json(redacted)
    return shown


@dataclass(frozen=True)
class Planned:
    """One run, resolved and planned, with the warnings to show before it starts."""

    experiment: Experiment
    spec: LaunchSpec
    warnings: tuple[str, ...] = ()
    sim: Optional[SimTarget] = None  # on the simulator (harness.run.simswap), at its time scale
    checkpoints: Optional[CheckpointStart] = None  # decided once the capture is known (harness.run.resume)

    @property
    def time_scale(self) -> float:
        """Wall seconds per trainer second: 1 for a real run."""
        return self.sim.time_scale if self.sim is not None else 1.0


@dataclass(frozen=True)
class PlanScope:
    """Where an experiment's runs stand besides its own file: under a variant's run name (`variant`: `<variant>`,
    `<variant>-s<k>`, so a configuration changed with `--set` has a capture of its own beside the experiment's),
    and in the sweep file named `sweep` (its `guard` block over the experiment's)."""

    variant: Optional[str] = None
    sweep: Optional[str] = None


def plan_runs(
    store: ExperimentStore,
    name: str,
    seeds: Sequence[int],
    overrides: Sequence[str],
    capture_root: Path,
    environ: dict[str, str],
    sim: Optional[SimTarget] = None,
    scope: PlanScope = PlanScope(),
) -> list[Planned]:
    """Every run of experiment `name` over `seeds` (the file's own seed when none); on the simulator with `sim`;
    under a variant's name or a sweep's guard block as `scope` says."""
    variant, sweep = scope.variant, scope.sweep
    if variant is not None:
        store.check_variant_name(variant)
    plans = []
    own_seed: list[Optional[int]] = [None]
    for seed in list(seeds) or own_seed:
        loaded = store.load(name, seed=seed, overrides=overrides, sweep=sweep)
        experiment = loaded.experiment if sim is None else simulated(loaded.experiment, sim)
        spec = plan_launch(
            experiment,
            base_args=store.base_args,
            capture_root=str(capture_root),
            project_root=str(Path.cwd()),
            environ=environ,
            run_name=run_name(variant, experiment.seed) if variant is not None else None,
        )
        if sim is not None:
            refuse_sim_sizes(spec)
        missing = tuple(
            f"{env} is listed in container.pass_env but not set in this environment; the container gets none"
            for env in spec.missing_env
        )
        plans.append(Planned(experiment, spec, loaded.warnings + missing + _checkpoint_warnings(spec), sim))
    return plans


def _checkpoint_warnings(spec: LaunchSpec) -> tuple[str, ...]:
    """What a checkpointed run should know before it runs: without the data source's state, a resume is not exact."""
    if spec.checkpoint is None or spec.checkpoint.data_state:
        return ()
    return (
        f"{spec.experiment}: checkpoint without {ROLLOUT_GLOBAL_DATASET_FLAG}: Miles saves no data source state then, so a "
        "resumed attempt takes prompts from the first again (set miles.args.rollout-global-dataset: true)",
    )


def refuse_sim_sizes(spec: LaunchSpec) -> None:
    """A run on the simulator with sizes no GB10 run could have is refused before anything starts (one line)."""
    problem = sizes_problem(spec.trainer_argv)
    if problem is not None:
        raise HarnessError(f"run {spec.run} on the simulator: {problem}")


def attempt_container_name(spec: LaunchSpec, attempt: int) -> str:
    """The container of one attempt: the spec's name (its run id and capture tag) and the attempt's number, so a
    kept container never blocks a later attempt, nor the same run in another capture root."""
    return f"{spec.container_name}-a{attempt}"


def next_attempt_spec(spec: LaunchSpec) -> LaunchSpec:
    """The spec as the run's next attempt would start it now (its container named for that attempt): `--dry-run`."""
    return replace(spec, container_name=attempt_container_name(spec, RunAttempts(Path(spec.capture_dir)).next_number()))
