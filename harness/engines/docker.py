"""The Docker engine: a launch spec becomes a labelled container; its handle streams every log line.

The image's own entrypoint runs (the experiment reaches it through the
environment and mounts), nothing is auto-removed, and the exit code comes
from `container.wait()`.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Iterable, Iterator, Optional

from harness.engines.logstream import LogPosition, split_lines
from harness.errors import ExitCode, HarnessError
from harness.launch import LaunchSpec

RECONNECT_DELAYS_S = (0.0, 0.2, 0.5, 1.0, 2.0)
MAX_STREAM_FAILURES = 30


def connect(client: Any = None) -> Any:
    """The injected client, or one from the environment with no read timeout (log streams can be quiet)."""
    if client is not None:
        return client
    import docker

    try:
        client = docker.from_env(timeout=None)
        client.ping()
    except docker.errors.DockerException as err:
        raise HarnessError(f"Docker engine unavailable: {err}", ExitCode.ENGINE_UNAVAILABLE) from None
    return client


class DockerEngine:
    """Starts launch specs as containers."""

    name = "docker"

    def __init__(self, client: Any = None) -> None:
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = connect()
        return self._client

    def start(self, spec: LaunchSpec, extra_labels: dict[str, str]) -> "DockerRun":
        """Create and start the container of `spec`."""
        import docker
        from docker.types import DeviceRequest, Mount, Ulimit

        try:
            container = self.client.containers.create(
                image=spec.image,
                name=spec.container_name,
                environment=dict(spec.env),
                labels={**spec.labels, **extra_labels},
                mounts=[Mount(m.target, m.source, type="bind", read_only=m.read_only) for m in spec.mounts],
                device_requests=[
                    DeviceRequest(
                        driver=r.driver,
                        count=r.count,
                        device_ids=list(r.device_ids) if r.device_ids else None,
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
            )
        except docker.errors.ImageNotFound:
            raise HarnessError(
                f"image {spec.image!r} not found on this Docker host; build it with `make image`",
                ExitCode.ENGINE_UNAVAILABLE,
            ) from None
        except docker.errors.APIError as err:
            if err.status_code == 409:
                raise HarnessError(
                    f"a container named {spec.container_name} already exists (left by an earlier run?); "
                    "`harness recover` resolves it, or remove it with docker rm",
                    ExitCode.BAD_INPUT,
                ) from None
            raise HarnessError(f"Docker refused to create the container: {err.explanation or err}",
                               ExitCode.ENGINE_UNAVAILABLE) from None
        run = DockerRun(self.client, container)
        try:
            container.start()
        except docker.errors.APIError as err:
            container.remove(force=True)  # it never ran: there is no log or state to keep
            raise HarnessError(f"Docker could not start {spec.container_name}: {err.explanation or err}",
                               ExitCode.ENGINE_UNAVAILABLE) from None
        return run

    def facts(self) -> dict[str, Any]:
        """Docker host, versions and GPU runtimes, for the manifest."""
        version = self.client.version()
        info = self.client.info()
        return {
            "engine": "docker",
            "docker_host": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
            "docker_version": version.get("Version"),
            "docker_api_version": version.get("ApiVersion"),
            "docker_daemon_host": info.get("Name"),
            "runtimes": sorted((info.get("Runtimes") or {}).keys()),
            "default_runtime": info.get("DefaultRuntime"),
            "kernel": info.get("KernelVersion"),
            "architecture": info.get("Architecture"),
        }


class DockerRun:
    """A started container."""

    def __init__(self, client: Any, container: Any) -> None:
        self.client = client
        self.container = container
        self.id = container.id
        self._exit_code: Optional[int] = None
        self._waiter: Optional[threading.Thread] = None
        self._wait_error: Optional[BaseException] = None

    # --- logs -------------------------------------------------------------------------------

    def _open_logs(self, since: Optional[float], follow: bool) -> Iterable[bytes]:
        """The raw log byte stream (tests wrap this to break the connection on purpose)."""
        kwargs: dict[str, Any] = {"stream": True, "follow": follow, "timestamps": True}
        if since is not None:
            kwargs["since"] = since
        return self.client.api.logs(self.id, **kwargs)

    def log_lines(self) -> Iterator[str]:
        """Every line, timestamp-prefixed; a broken stream is reopened after the last line, losing and repeating nothing."""
        position = LogPosition()
        failures = 0
        while True:
            state = self._state()
            if state is None:
                return
            running = bool(state.get("Running") or state.get("Paused"))
            try:
                for line in position.new_lines(split_lines(self._open_logs(position.since(), follow=running))):
                    failures = 0
                    yield line
            except Exception as err:  # the connection broke: reopen after the last whole line
                failures += 1
                if failures > MAX_STREAM_FAILURES:
                    raise HarnessError(f"the log stream of {self.id[:12]} keeps failing: {err}",
                                       ExitCode.ENGINE_UNAVAILABLE) from None
                time.sleep(RECONNECT_DELAYS_S[min(failures, len(RECONNECT_DELAYS_S)) - 1])
                continue
            if not running:
                return
            # A follow stream ended (normally with the container): read once more, after the last line.

    def _state(self) -> Optional[dict[str, Any]]:
        import docker

        try:
            return self.client.api.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            return None

    # --- lifecycle ----------------------------------------------------------------------------

    def wait(self, timeout: Optional[float] = None) -> Optional[int]:
        """Exit code from `container.wait()`, or None while still running after `timeout`."""
        if self._waiter is None:
            self._waiter = threading.Thread(target=self._wait_forever, name=f"wait-{self.id[:12]}", daemon=True)
            self._waiter.start()
        self._waiter.join(timeout)
        if self._waiter.is_alive():
            return None
        if self._wait_error is not None:
            raise HarnessError(f"lost the container while waiting for it: {self._wait_error}",
                               ExitCode.ENGINE_UNAVAILABLE)
        return self._exit_code

    def _wait_forever(self) -> None:
        while True:
            try:
                self._exit_code = int(self.container.wait()["StatusCode"])
                return
            except Exception as err:  # a dropped connection: the container may well still run
                state = self._state()
                if state is None:
                    self._wait_error = err
                    return
                if not (state.get("Running") or state.get("Paused")):
                    self._exit_code = int(state.get("ExitCode", -1))
                    return
                time.sleep(0.5)

    def pause(self) -> None:
        self.container.pause()

    def resume(self) -> None:
        self.container.unpause()

    def is_paused(self) -> bool:
        state = self._state()
        return bool(state and state.get("Paused"))

    def stop(self, grace_s: float) -> None:
        import docker

        try:
            if self.is_paused():
                self.container.unpause()  # a frozen process cannot act on SIGTERM
            self.container.stop(timeout=max(0, int(round(grace_s))))
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as err:
            if err.status_code != 409:  # 409: not running any more
                raise

    def kill(self) -> None:
        import docker

        try:
            if self.is_paused():
                self.container.unpause()
            self.container.kill()
        except (docker.errors.NotFound, docker.errors.APIError):
            pass

    def remove(self) -> None:
        import docker

        try:
            self.container.remove(v=True)
        except docker.errors.NotFound:
            pass

    def facts(self) -> dict[str, Any]:
        """Container and image identity for the manifest."""
        import docker

        facts: dict[str, Any] = {"container_id": self.id, "container_name": self.container.name}
        try:
            image = self.client.images.get(self.container.attrs["Image"])
            facts["image_id"] = image.id
            facts["image_digests"] = image.attrs.get("RepoDigests") or []
            facts["image_labels"] = (image.attrs.get("Config") or {}).get("Labels") or {}
        except docker.errors.DockerException as err:
            facts["image_error"] = str(err)
        return facts

