"""The Docker engine: a launch spec becomes a labelled container; its handle streams every log line.

The image's own entrypoint runs (the experiment reaches it through the
environment and mounts), nothing is auto-removed, and the exit code comes
from `container.wait()`. The engine going away (connection refused, dockerd
restarting) is waited out for `ENGINE_PATIENCE_S`, then reported as
EngineUnavailable: the container keeps its labels and logs for `recover`.
"""

from __future__ import annotations

import shutil
from typing import (
    TYPE_CHECKING,
    Mapping,
    Optional,
    Sequence,
)

from harness.engines import milesimage
from harness.engines.base import (
    EngineUnavailable,
    NotStarted,
    Problem,
)
from harness.engines.dockerapi import DockerApi, DockerApiError, OutputTooLarge, docker_host, is_local
from harness.engines.dockerrun import DockerRun, engine_call, is_connection_error, short_error
from harness.engines.spec import LaunchSpec
from harness.errors import ExitCode, HarnessError
from harness.fs.failpoints import failpoint

if TYPE_CHECKING:  # the docker SDK is imported when an engine is made, never at `harness --help`
    from docker import DockerClient

    from harness.jsontypes import JSONObject, JSONValue

DATA_TARGET = "/data"
GPU_HOOKS = ("nvidia-container-runtime-hook", "nvidia-ctk")


def connect(client: Optional[DockerClient] = None) -> DockerClient:
    """The injected client, or one from the environment with no read timeout (log streams can be quiet)."""
    if client is not None:
        return client
    import docker

    try:
        # No read timeout: types-docker says an int, docker-py hands it to requests, where None is none.
        client = docker.from_env(timeout=None)  # type: ignore[arg-type]
        client.ping()
    except docker.errors.DockerException as err:
        raise EngineUnavailable(f"Docker engine unavailable: {err}") from None
    except Exception as err:
        if is_connection_error(err):
            raise EngineUnavailable(f"Docker engine unavailable: {short_error(err)}") from None
        raise
    return client


class DockerEngine:
    """Starts launch specs as containers and finds them again by label."""

    name = "docker"

    def __init__(self, client: Optional[DockerClient] = None, api: Optional[DockerApi] = None) -> None:
        self._client = client
        self._api = api
        self._image_facts: dict[str, JSONObject] = {}  # run id -> what its image preflight found

    @property
    def client(self) -> DockerClient:
        if self._client is None:
            self._client = connect()
        return self._client

    # --- before anything starts ---------------------------------------------------------------

    def preflight(self, spec: LaunchSpec) -> list[Problem]:
        """Image on the engine, bind-mount sources, a GPU runtime, the image's Miles (harness.engines.milesimage):
        each missing one with its fix."""
        api = self._api or DockerApi()
        host = api.host
        problems = []
        try:
            info = api.image_inspect(spec.image)
            if info is None:
                problems.append(
                    Problem(
                        f"image {spec.image!r} is not on the Docker engine at {host}; build it with `make image`",
                        ExitCode.ENGINE_UNAVAILABLE,
                    )
                )
            else:
                problems += self._check_image(api, spec, info)
            if spec.device_requests and not _has_gpu_runtime(api.runtimes(), host):
                problems.append(
                    Problem(
                        f"the run asks for GPUs, but the Docker engine at {host} has no NVIDIA runtime; install the "
                        "NVIDIA Container Toolkit, or set container.gpus: none",
                        ExitCode.ENGINE_UNAVAILABLE,
                    )
                )
        except DockerApiError as err:
            problems.append(Problem(f"{err}; start it, or set DOCKER_HOST", ExitCode.ENGINE_UNAVAILABLE))
        if is_local(host):
            problems += mount_problems(spec)
        return problems

    def _check_image(self, api: DockerApi, spec: LaunchSpec, info: dict[str, JSONValue]) -> list[Problem]:
        """The image preflight: which Miles the image holds and whether the run's paths load (cached per image id);
        its facts are kept for `image_facts`."""
        config = info.get("Config")
        labels = config.get("Labels") if isinstance(config, dict) else None
        if isinstance(labels, dict) and labels.get(milesimage.SIM_LABEL) == "1":
            self._image_facts[spec.run_id] = milesimage.check_facts(None, reason="the simulator's own image")
            return []
        flags = milesimage.path_flags(spec.trainer_argv)

        def run_probe(image: str, argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
            try:
                return api.run_probe(
                    image,
                    ["-c", milesimage.PROBE, *argv],
                    timeout_s,
                    labels={milesimage.PROBE_LABEL: "1"},
                    max_output=milesimage.MAX_PROBE_OUTPUT_BYTES,
                )
            except DockerApiError as err:
                raise milesimage.ProbeError(str(err)) from None
            except OutputTooLarge as err:
                raise milesimage.ProbeFlood(err.stream, err.total, err.head, err.tail) from None

        outcome = milesimage.probe_image(
            spec.image, str(info.get("Id") or spec.image), milesimage.paths_to_probe(flags), run_probe
        )
        facts = milesimage.check_facts(outcome.check, reason=outcome.reason, cached=outcome.cached)
        self._image_facts[spec.run_id] = facts
        if outcome.problem is not None:
            return [outcome.problem]
        return milesimage.judge(spec.image, outcome.check, flags) if outcome.check is not None else []

    def image_facts(self, spec: LaunchSpec) -> Optional[JSONObject]:
        """What the image preflight found for `spec`'s image (asked now if `preflight` has not), for the manifest."""
        if spec.run_id not in self._image_facts:
            api = self._api or DockerApi()
            try:
                info = api.image_inspect(spec.image)
            except DockerApiError:
                return None
            if info is None:
                return None
            self._check_image(api, spec, info)
        return self._image_facts.get(spec.run_id)

    # --- start, find -----------------------------------------------------------------------------

    def start(self, spec: LaunchSpec, extra_labels: dict[str, str]) -> DockerRun:
        """Create and start the container of `spec`; NotStarted (with the container gone) if it did not start."""
        import docker
        from docker.types import DeviceRequest, Mount, Ulimit

        try:
            container = engine_call(
                "creating the container",
                lambda: self.client.containers.create(
                    image=spec.image,
                    name=spec.container_name,
                    environment=dict(spec.env),
                    labels={**spec.labels, **extra_labels},
                    mounts=[Mount(m.target, m.source, type="bind", read_only=m.read_only) for m in spec.mounts],
                    device_requests=[
                        DeviceRequest(  # no count, no device ids: 0 and [], as docker-py reads None
                            driver=r.driver,
                            count=r.count if r.count is not None else 0,
                            device_ids=list(r.device_ids) if r.device_ids else [],
                            capabilities=[list(c) for c in r.capabilities],
                        )
                        for r in spec.device_requests
                    ],
                    shm_size=spec.shm_size,
                    ipc_mode=spec.ipc_mode,
                    init=spec.init,
                    ulimits=[Ulimit(name=name, soft=limit, hard=limit) for name, limit in spec.ulimits.items()],
                    auto_remove=False,
                    detach=True,
                ),
            )
        except EngineUnavailable as err:
            raise NotStarted(err.message, ExitCode.ENGINE_UNAVAILABLE) from None
        except docker.errors.ImageNotFound:
            raise NotStarted(
                f"image {spec.image!r} not found on this Docker host; build it with `make image`",
                ExitCode.ENGINE_UNAVAILABLE,
            ) from None
        except docker.errors.APIError as err:
            if err.status_code == 409:
                raise NotStarted(
                    f"a container named {spec.container_name} already exists (kept by an earlier run?); "
                    "`harness recover` settles a leftover, or remove it with docker rm",
                    ExitCode.BAD_INPUT,
                ) from None
            raise NotStarted(
                f"Docker refused to create the container: {err.explanation or err}", ExitCode.ENGINE_UNAVAILABLE
            ) from None
        run = DockerRun(self.client, container)
        failpoint("after-create")
        try:
            engine_call("starting the container", container.start)
        except docker.errors.APIError as err:
            container.remove(force=True)  # it never ran: there is no log or state to keep
            raise NotStarted(
                f"Docker could not start {spec.container_name}: {err.explanation or err}", ExitCode.ENGINE_UNAVAILABLE
            ) from None
        return run

    def attach(self, id: str) -> DockerRun:
        """The container with this id or name."""
        import docker

        try:
            container = engine_call(f"looking up {id}", lambda: self.client.containers.get(id))
        except docker.errors.NotFound:
            raise HarnessError(
                f"no container {id!r} on the Docker engine at {docker_host()}", ExitCode.NOT_FOUND
            ) from None
        return DockerRun(self.client, container)

    def list(self, labels: Mapping[str, Optional[str]]) -> list[DockerRun]:
        """Every container, running or not, that carries these labels."""
        import docker

        wanted = [name if value is None else f"{name}={value}" for name, value in labels.items()]
        listed = engine_call(
            "listing containers", lambda: self.client.containers.list(all=True, filters={"label": wanted}, sparse=True)
        )
        found = []
        for entry in listed:
            entry_id = entry.id
            if entry_id is None:  # a listed container always has its id
                continue
            try:
                container = engine_call(f"looking up {entry_id[:12]}", lambda: self.client.containers.get(entry_id))
            except docker.errors.NotFound:
                continue  # removed since it was listed (another harness finished with it)
            found.append(DockerRun(self.client, container))
        return found

    def facts(self) -> JSONObject:
        """Docker host, versions and GPU runtimes, for the manifest."""
        version = engine_call("asking its version", self.client.version)
        info = engine_call("asking for its facts", self.client.info)
        return {
            "engine": "docker",
            "docker_host": docker_host(),
            "docker_version": version.get("Version"),
            "docker_api_version": version.get("ApiVersion"),
            "docker_daemon_host": info.get("Name"),
            "runtimes": sorted((info.get("Runtimes") or {}).keys()),
            "default_runtime": info.get("DefaultRuntime"),
            "kernel": info.get("KernelVersion"),
            "architecture": info.get("Architecture"),
        }


def _has_gpu_runtime(runtimes: list[str], host: str) -> bool:
    """The nvidia runtime, or (for a local engine) the toolkit's hook that `--gpus` uses with runc."""
    if "nvidia" in runtimes:
        return True
    return is_local(host) and any(shutil.which(hook) for hook in GPU_HOOKS)


def mount_problems(spec: LaunchSpec) -> list[Problem]:
    """Bind-mount sources that do not exist (the data directory says how to make it)."""
    from pathlib import Path

    problems = []
    for mount in spec.mounts:
        if Path(mount.source).exists():
            continue
        if spec.checkpoint is not None and mount.source == spec.checkpoint.root:
            continue  # the checkpoint root: the harness makes it before the start (docs/checkpoints.md)
        if mount.target == DATA_TARGET:
            problems.append(
                Problem(
                    f"the data directory {mount.source} (mounted at {DATA_TARGET}) does not exist; "
                    "`make data` downloads the model and data set there (MILES_LAB_DATA moves it)"
                )
            )
        else:
            problems.append(Problem(f"the bind-mount source {mount.source} (for {mount.target}) does not exist"))
    return problems
