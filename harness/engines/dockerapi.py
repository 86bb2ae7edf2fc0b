"""A few read-only questions to the Docker engine without the docker SDK (for pre-flight checks).

`harness run --dry-run` shows the same pre-flight checks as a run, and must
stay fast and light: the SDK pulls in requests and friends. Two GET requests
over the engine's socket are all the checks need.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import TYPE_CHECKING, Optional
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:
    from harness.jsontypes import JSONValue

DEFAULT_HOST = "unix:///var/run/docker.sock"


def docker_host() -> str:
    """The engine the harness talks to: DOCKER_HOST, else the local socket."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def is_local(host: str) -> bool:
    """Whether the engine's files (bind-mount sources) are this machine's files."""
    return host.startswith("unix://")


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DockerApiError(Exception):
    """The engine could not be asked (unreachable, or a host form this client does not speak)."""


class DockerApi:
    """GET requests to the Docker engine API, answered as (HTTP status, parsed JSON or None)."""

    def __init__(self, host: Optional[str] = None, timeout_s: float = 5.0) -> None:
        self.host = host or docker_host()
        self.timeout_s = timeout_s

    def _connection(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.host)
        if parts.scheme == "unix":
            return _UnixConnection(parts.path, self.timeout_s)
        if parts.scheme in ("tcp", "http") and not os.environ.get("DOCKER_TLS_VERIFY"):
            return http.client.HTTPConnection(parts.hostname or "localhost", parts.port or 2375, timeout=self.timeout_s)
        raise DockerApiError(f"cannot check {self.host} without the docker SDK")

    def get(self, path: str) -> tuple[int, JSONValue]:
        connection = self._connection()
        try:
            connection.request("GET", path, headers={"Host": "docker"})
            response = connection.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as err:
            raise DockerApiError(f"the Docker engine at {self.host} does not answer: {err}") from None
        finally:
            connection.close()
        try:
            return response.status, json.loads(body) if body else None
        except ValueError:
            return response.status, None

    def image_exists(self, image: str) -> bool:
        status, _ = self.get(f"/images/{quote(image, safe='/:@')}/json")
        if status not in (200, 404):
            raise DockerApiError(f"the Docker engine answered {status} about image {image}")
        return status == 200

    def runtimes(self) -> list[str]:
        status, info = self.get("/info")
        if status != 200 or not isinstance(info, dict):
            raise DockerApiError(f"the Docker engine answered {status} to /info")
        runtimes = info.get("Runtimes")
        return sorted(runtimes) if isinstance(runtimes, dict) else []
