"""A container the Docker engine started or found: its state, its log, its wait, pause and stop.

Every call to the engine goes through `engine_call`: a lost engine (connection
refused, dockerd restarting) becomes EngineUnavailable, and the log stream and
the wait wait it out for `ENGINE_PATIENCE_S` before they give up; a container
removed from outside (`docker rm -f`) is told apart from a kill
(`ended_by_removal`).
"""

from __future__ import annotations

import threading
import time
from itertools import chain
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, TypedDict, TypeVar

from harness.engines import dockerlogs
from harness.engines.base import CREATED, EXITED, GONE, PAUSED, RUNNING, Description, EngineUnavailable, RunGone
from harness.engines.dockerapi import docker_host
from harness.engines.logstream import LogPosition, split_bursts
from harness.errors import ExitCode, HarnessError

if TYPE_CHECKING:  # the docker SDK is imported when an engine is made, never at `harness --help`
    from docker import DockerClient
    from docker.models.containers import Container

    from harness.jsontypes import JSONObject

RECONNECT_DELAYS_S = (0.0, 0.2, 0.5, 1.0, 2.0)
ENGINE_PATIENCE_S = 60.0  # how long a lost engine is waited for before the run is given up as failed

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


def short_error(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def engine_call(what: str, call: Callable[[], T]) -> T:
    """Run one API call; a lost engine becomes EngineUnavailable (API answers pass through)."""
    try:
        return call()
    except Exception as err:
        if is_connection_error(err):
            raise EngineUnavailable(f"the Docker engine went away ({what}): {short_error(err)}") from None
        raise


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
            data: ContainerInspect = engine_call(
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
            engine_call(f"pausing {self.id[:12]}", self.container.pause)
        except docker.errors.APIError as err:
            raise HarnessError(str(err.explanation or err)) from None

    def resume(self) -> None:
        engine_call(f"resuming {self.id[:12]}", self.container.unpause)

    def is_paused(self) -> bool:
        state = self._state()
        return bool(state and state.get("Paused"))

    def stop(self, grace_s: float) -> None:
        import docker

        try:
            if self.is_paused():
                self.resume()  # a frozen process cannot act on SIGTERM
            engine_call(f"stopping {self.id[:12]}", lambda: self.container.stop(timeout=max(0, int(round(grace_s)))))
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
            engine_call(f"killing {self.id[:12]}", self.container.kill)
        except (docker.errors.NotFound, docker.errors.APIError):
            pass

    def remove(self) -> None:
        import docker

        try:
            engine_call(f"removing {self.id[:12]}", lambda: self.container.remove(v=True))
        except docker.errors.NotFound:
            pass

    def facts(self) -> JSONObject:
        """Container and image identity for the manifest."""
        import docker

        facts: JSONObject = {"container_id": self.id, "container_name": self.container.name}
        try:
            image = engine_call("looking up the image", lambda: self.client.images.get(self.container.attrs["Image"]))
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
            self.since, self.tries, self.first_error = now, 0, short_error(err)
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
