"""The Docker engine: a launch spec becomes a labelled container; its handle streams every log line.

The image's own entrypoint runs (the experiment reaches it through the
environment and mounts), nothing is auto-removed, and the exit code comes
from `container.wait()`. The engine going away (connection refused, dockerd
restarting) is waited out for `ENGINE_PATIENCE_S`, then reported as
EngineUnavailable: the container keeps its labels and logs for `recover`.
"""

from __future__ import annotations

import shutil
import threading
import time
from itertools import chain
from typing import (
    TYPE_CHECKING,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Sequence,
    TypedDict,
    TypeVar,
)

from harness.engines import dockerlogs, milesimage
from harness.engines.base import (
    CREATED,
    EXITED,
    GONE,
    PAUSED,
    RUNNING,
    Description,
    EngineUnavailable,
    NotStarted,
    Problem,
    RunGone,
)
from harness.engines.dockerapi import DockerApi, DockerApiError, OutputTooLarge, docker_host, is_local
from harness.engines.logstream import LogPosition, split_bursts
from harness.engines.spec import LaunchSpec
from harness.errors import ExitCode, HarnessError
from harness.fs.failpoints import failpoint

if TYPE_CHECKING:  # the docker SDK is imported when an engine is made, never at `harness --help`
    from docker import DockerClient
    from docker.models.containers import Container

    from harness.jsontypes import JSONObject, JSONValue

RECONNECT_DELAYS_S = (0.0, 0.2, 0.5, 1.0, 2.0)
ENGINE_PATIENCE_S = 60.0  # how long a lost engine is waited for before the run is given up as failed
DATA_TARGET = "/data"
GPU_HOOKS = ("nvidia-container-runtime-hook", "nvidia-ctk")

T = TypeVar("T")


class ContainerState(TypedDict, total=False):
    """The keys of `docker inspect`'s State that the engine reads (the Docker Engine API's ContainerState)."""

    Status: str
    Running: bool
    Paused: bool
    Restarting: bool
    ExitCode: int
    StartedAt: str
    FinishedAt: str


class ContainerConfig(TypedDict, total=False):
    Labels: Optional[dict[str, str]]
    Env: Optional[list[str]]
    Cmd: Optional[list[str]]


class ContainerInspect(TypedDict, total=False):
    """The keys of `docker inspect` that the engine reads."""

    Name: str
    State: ContainerState
    Config: Optional[ContainerConfig]


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
            raise EngineUnavailable(f"Docker engine unavailable: {_short(err)}") from None
        raise
    return client


def is_connection_error(err: BaseException) -> bool:
    """True for the ways a lost engine shows itself (refused, reset, a socket gone), not for API answers."""
    import docker
    import requests
    import urllib3

    if isinstance(err, docker.errors.APIError):
        return False
    return isinstance(
        err,
        (
            requests.exceptions.ConnectionError,
            requests.exceptions.ChunkedEncodingError,
            requests.exceptions.Timeout,
            urllib3.exceptions.HTTPError,
            OSError,
            docker.errors.DockerException,
        ),
    )


# What a run's container that was removed from outside (`docker rm -f`) is recorded as.
_REMOVED = "its container was removed while it ran"
_MARKED_FOR_REMOVAL = "marked for removal"
# The exit of a SIGKILL (128 + 9): `docker kill`, the kernel's OOM killer, or the kill that starts `docker rm -f`.
_SIGKILL_EXIT = 137
# docker inspect's State.Status of a container being removed ("dead": its removal began and failed).
_BEING_REMOVED = ("removing", "dead")


def ended_by_removal(exit_code: Optional[int], state_after: Optional[ContainerState]) -> bool:
    """Whether a container's end was its removal from outside, from the engine's two answers whichever came first
    (pure): the wait's (`exit_code`, None when it broke) and, asked after it, the container's state (None: not there).

    `docker rm -f` marks the container for removal, kills it, then removes it, so the wait may answer the kill's 137
    before the container is gone: a 137 whose container is gone or being removed is a removal, as is a broken wait
    whose container is; a 137 whose container is still there is a kill, and any other exit is the trainer's own.
    """
    if exit_code is not None and exit_code != _SIGKILL_EXIT:
        return False
    return state_after is None or state_after.get("Status") in _BEING_REMOVED


def _short(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def _engine_call(what: str, call: Callable[[], T]) -> T:
    """Run one API call; a lost engine becomes EngineUnavailable (API answers pass through)."""
    try:
        return call()
    except Exception as err:
        if is_connection_error(err):
            raise EngineUnavailable(f"the Docker engine went away ({what}): {_short(err)}") from None
        raise


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

    def start(self, spec: LaunchSpec, extra_labels: dict[str, str]) -> "DockerRun":
        """Create and start the container of `spec`; NotStarted (with the container gone) if it did not start."""
        import docker
        from docker.types import DeviceRequest, Mount, Ulimit

        try:
            container = _engine_call(
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
            _engine_call("starting the container", container.start)
        except docker.errors.APIError as err:
            container.remove(force=True)  # it never ran: there is no log or state to keep
            raise NotStarted(
                f"Docker could not start {spec.container_name}: {err.explanation or err}", ExitCode.ENGINE_UNAVAILABLE
            ) from None
        return run

    def attach(self, id: str) -> "DockerRun":
        """The container with this id or name."""
        import docker

        try:
            container = _engine_call(f"looking up {id}", lambda: self.client.containers.get(id))
        except docker.errors.NotFound:
            raise HarnessError(
                f"no container {id!r} on the Docker engine at {docker_host()}", ExitCode.NOT_FOUND
            ) from None
        return DockerRun(self.client, container)

    def list(self, labels: Mapping[str, Optional[str]]) -> list["DockerRun"]:
        """Every container, running or not, that carries these labels."""
        import docker

        wanted = [name if value is None else f"{name}={value}" for name, value in labels.items()]
        listed = _engine_call(
            "listing containers", lambda: self.client.containers.list(all=True, filters={"label": wanted}, sparse=True)
        )
        found = []
        for entry in listed:
            entry_id = entry.id
            if entry_id is None:  # a listed container always has its id
                continue
            try:
                container = _engine_call(f"looking up {entry_id[:12]}", lambda: self.client.containers.get(entry_id))
            except docker.errors.NotFound:
                continue  # removed since it was listed (another harness finished with it)
            found.append(DockerRun(self.client, container))
        return found

    def facts(self) -> JSONObject:
        """Docker host, versions and GPU runtimes, for the manifest."""
        version = _engine_call("asking its version", self.client.version)
        info = _engine_call("asking for its facts", self.client.info)
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


_STATES = {
    "created": CREATED,
    "running": RUNNING,
    "restarting": RUNNING,
    "paused": PAUSED,
    "exited": EXITED,
    "removing": EXITED,
    "dead": EXITED,
}


class DockerRun:
    """A container the engine started or found."""

    def __init__(self, client: DockerClient, container: Container) -> None:
        if container.id is None:  # docker-py's models may lack one; a container the engine hands back has one
            raise HarnessError("the Docker engine handed back a container without an id", ExitCode.ENGINE_UNAVAILABLE)
        self.client = client
        self.container = container
        self.id: str = container.id
        self._exit_code: Optional[int] = None
        self._waiter: Optional[threading.Thread] = None
        self._waiter_lock = threading.Lock()  # the runner and the heat guard may both ask `wait` at once
        self._wait_error: Optional[HarnessError] = None
        self.outages: list[str] = []  # each time the engine went away and came back (or did not)

    # --- what it is -------------------------------------------------------------------------------

    def _inspect(self) -> Optional[ContainerInspect]:
        """The container's inspect data; None once it no longer exists."""
        import docker

        try:
            data: ContainerInspect = _engine_call(
                f"inspecting {self.id[:12]}", lambda: self.client.api.inspect_container(self.id)
            )
        except docker.errors.NotFound:
            return None
        return data

    def _state(self) -> Optional[ContainerState]:
        data = self._inspect()
        return None if data is None else data["State"]

    def describe(self) -> Description:
        data = self._inspect()
        if data is None:
            return Description(self.id, self.container.name or "", GONE)
        state = data["State"]
        status = _STATES.get(state.get("Status", ""), EXITED)
        exit_code = int(state.get("ExitCode", -1)) if status == EXITED else None
        return Description(
            id=self.id,
            name=data.get("Name", "").lstrip("/"),
            state=status,
            exit_code=exit_code,
            labels=dict((data.get("Config") or {}).get("Labels") or {}),
            started_at=_docker_time(state.get("StartedAt")),
            finished_at=_docker_time(state.get("FinishedAt")),
        )

    def given_values(self) -> Optional[tuple[dict[str, str], list[str]]]:
        """The environment and command the container was given (to know the secrets its output may repeat); None
        once it no longer exists."""
        data = self._inspect()
        if data is None:
            return None
        config = data.get("Config") or {}
        env = {name: value for name, _, value in (entry.partition("=") for entry in config.get("Env") or [])}
        return env, [*(config.get("Cmd") or [])]

    # --- logs ---------------------------------------------------------------------------------------

    def _open_logs(self, since: Optional[float], follow: bool) -> Iterable[bytes]:
        """The raw log byte stream (tests wrap this to break the connection on purpose): read from the engine's
        socket a burst at a time (harness.engines.dockerlogs), or by the SDK where that client cannot speak to it or
        the container has a TTY (its log is not multiplexed; the harness never starts one so)."""
        host = docker_host()
        if dockerlogs.speaks(host) and not (self.container.attrs.get("Config") or {}).get("Tty"):
            return dockerlogs.open_logs(host, self.id, since, follow)
        return self.client.api.logs(self.id, stream=True, follow=follow, timestamps=True, since=since)

    def logs(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[str]:
        """Every line after `since`, timestamp-prefixed; a broken stream is reopened after the last line,
        losing and repeating nothing; an engine gone longer than ENGINE_PATIENCE_S is EngineUnavailable."""
        return chain.from_iterable(self.log_bursts(since, follow=follow))

    def log_bursts(self, since: Optional[LogPosition] = None, *, follow: bool = False) -> Iterator[list[str]]:
        """The lines of `logs`, in the groups that came in one read of the stream."""
        import docker

        position = since if since is not None else LogPosition()
        outage = _Outage(self, "reading the log")
        while True:
            try:
                state = self._state()
                if state is None:
                    return
                running = follow and bool(state.get("Running") or state.get("Paused") or state.get("Restarting"))
                stream = self._open_logs(position.since(), follow=running)
                unfinished = getattr(stream, "unfinished_since", None)  # the SDK's reader holds no line apart
                for burst in position.new_bursts(split_bursts(stream), unfinished):
                    outage.over()
                    yield burst
            except docker.errors.NotFound:
                raise RunGone(_REMOVED) from None
            except docker.errors.APIError as err:
                if err.status_code == 409 and _MARKED_FOR_REMOVAL in str(err):
                    raise RunGone(_REMOVED) from None  # `docker rm -f` while the stream was open
                raise
            except dockerlogs.LogsRefused as err:  # the same answers, from the harness's own reader
                if err.status == 404 or (err.status == 409 and _MARKED_FOR_REMOVAL in err.message):
                    raise RunGone(_REMOVED) from None
                raise
            except Exception as err:  # the connection broke: reopen after the last whole line
                if not (isinstance(err, EngineUnavailable) or is_connection_error(err)):
                    raise
                outage.wait(err)
                continue
            outage.over()
            if not running:
                return
            # A follow stream ended (normally with the container): read once more, after the last line.

    # --- lifecycle ----------------------------------------------------------------------------------

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Exit code from `container.wait()`, or None while still running after `timeout`."""
        with self._waiter_lock:  # one waiter thread, started before anyone joins it
            if self._waiter is None:
                waiter = threading.Thread(target=self._wait_forever, name=f"wait-{self.id[:12]}", daemon=True)
                waiter.start()
                self._waiter = waiter
        self._waiter.join(timeout)
        if self._waiter.is_alive():
            return None
        if self._wait_error is not None:
            raise self._wait_error
        return self._exit_code

    def _wait_forever(self) -> None:
        outage = _Outage(self, "waiting for the container")
        while True:
            exit_code: Optional[int] = None
            try:
                exit_code = int(self.container.wait()["StatusCode"])
            except Exception:  # a dropped connection, or the container gone: it may well still run
                pass
            if exit_code is not None and exit_code != _SIGKILL_EXIT:
                self._exit_code = exit_code
                return
            # A broken wait, or a SIGKILL's exit (which `docker rm -f` also sends before it removes): whether the
            # container is still there decides between a removal, a kill and a run that goes on.
            try:
                state = self._state()
            except EngineUnavailable as lost:
                if exit_code is not None:  # the engine answered the exit: it stands
                    self._exit_code = exit_code
                    return
                try:
                    outage.wait(lost)
                except EngineUnavailable as gone:
                    self._wait_error = gone
                    return
                continue
            if state is None or ended_by_removal(exit_code, state):
                self._wait_error = RunGone(_REMOVED)
                return
            outage.over()
            if exit_code is not None:
                self._exit_code = exit_code
                return
            if not (state.get("Running") or state.get("Paused") or state.get("Restarting")):
                self._exit_code = int(state.get("ExitCode", -1))
                return
            time.sleep(0.5)

    def pause(self) -> None:
        """`docker pause`; a refusal (the runtime could not freeze it, it is not running) is a HarnessError in the
        engine's own words."""
        import docker

        try:
            _engine_call(f"pausing {self.id[:12]}", self.container.pause)
        except docker.errors.APIError as err:
            raise HarnessError(str(err.explanation or err)) from None

    def resume(self) -> None:
        _engine_call(f"resuming {self.id[:12]}", self.container.unpause)

    def is_paused(self) -> bool:
        state = self._state()
        return bool(state and state.get("Paused"))

    def stop(self, grace_s: float) -> None:
        import docker

        try:
            if self.is_paused():
                self.resume()  # a frozen process cannot act on SIGTERM
            _engine_call(f"stopping {self.id[:12]}", lambda: self.container.stop(timeout=max(0, int(round(grace_s)))))
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as err:
            if err.status_code != 409:  # 409: not running any more
                raise

    def kill(self) -> None:
        import docker

        try:
            if self.is_paused():
                self.resume()
            _engine_call(f"killing {self.id[:12]}", self.container.kill)
        except (docker.errors.NotFound, docker.errors.APIError):
            pass

    def remove(self) -> None:
        import docker

        try:
            _engine_call(f"removing {self.id[:12]}", lambda: self.container.remove(v=True))
        except docker.errors.NotFound:
            pass

    def facts(self) -> JSONObject:
        """Container and image identity for the manifest."""
        import docker

        facts: JSONObject = {"container_id": self.id, "container_name": self.container.name}
        try:
            image = _engine_call("looking up the image", lambda: self.client.images.get(self.container.attrs["Image"]))
            facts["image_id"] = image.id
            facts["image_digests"] = image.attrs.get("RepoDigests") or []
            facts["image_labels"] = (image.attrs.get("Config") or {}).get("Labels") or {}
        except (docker.errors.DockerException, EngineUnavailable) as err:
            facts["image_error"] = str(err)
        return facts


class _Outage:
    """Waits out a lost engine with growing delays; gives up after ENGINE_PATIENCE_S without an answer."""

    def __init__(self, run: DockerRun, what: str) -> None:
        self.run = run
        self.what = what
        self.since: Optional[float] = None
        self.tries = 0
        self.first_error = ""

    def wait(self, err: BaseException) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since, self.tries, self.first_error = now, 0, _short(err)
        if now - self.since > ENGINE_PATIENCE_S:
            message = (
                f"the Docker engine went away while {self.what} and did not answer for "
                f"{ENGINE_PATIENCE_S:g} s: {self.first_error}"
            )
            self.run.outages.append(message)
            raise EngineUnavailable(message)
        self.tries += 1
        time.sleep(RECONNECT_DELAYS_S[min(self.tries, len(RECONNECT_DELAYS_S)) - 1])

    def over(self) -> None:
        if self.since is not None and self.tries > 1:
            self.run.outages.append(
                f"the Docker engine went away while {self.what} for "
                f"{time.monotonic() - self.since:.0f} s ({self.first_error}), and came back"
            )
        self.since = None


def _docker_time(value: object) -> Optional[str]:
    """Docker's time, or None for its zero time (never started or never finished)."""
    if not isinstance(value, str) or value.startswith("0001-"):
        return None
    return value
