"""A few questions to the Docker engine without the docker SDK (for pre-flight checks).

`harness run --dry-run` shows the same pre-flight checks as a run, and must
stay fast and light: the SDK pulls in requests and friends. A few requests
over the engine's socket are all the checks need: GETs, and the image
preflight's one short container (`run_probe`: create, start, wait, logs,
remove), which only ever removes the container it made. Every answer is read
bounded: the engine's own up to MAX_ANSWER_BYTES, what the container printed
as its head and tail (`Kept`), whatever it printed.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from typing import TYPE_CHECKING, Callable, Optional, Sequence
from urllib.parse import quote, urlsplit

if TYPE_CHECKING:
    from harness.jsontypes import JSONValue

DEFAULT_HOST = "unix:///var/run/docker.sock"
MAX_ANSWER_BYTES = 64 << 20  # an answer of the engine's own (an image's inspect, /info) is kilobytes
READ_BYTES = 64 << 10
TAIL_BYTES = 4 << 10  # what is kept of the end of a container's output that was too long


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


class OutputTooLarge(Exception):
    """A container printed more on `stream` than the caller reads: only its head and tail were kept."""

    def __init__(self, stream: str, total: int, head: bytes, tail: bytes) -> None:
        super().__init__(f"{total:,} bytes on {stream}")
        self.stream, self.total, self.head, self.tail = stream, total, head, tail


class Kept:
    """What is kept of one stream a container printed: its first `limit` bytes and its last TAIL_BYTES, and how
    long it was, whatever it printed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = b""  # of what came after the head
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail = (self.tail + data)[-TAIL_BYTES:]

    def whole(self, stream: str) -> str:
        """All of it, as text; OutputTooLarge when it was longer than `limit`."""
        if self.total > self.limit:
            raise OutputTooLarge(stream, self.total, bytes(self.head), self.tail)
        return self.head.decode("utf-8", "replace")


class Frames:
    """A log stream without a TTY, read as it comes: frames of [stream, 0, 0, 0, size (4 bytes, big-endian)] and
    their payload, each payload given to `stdout` or `stderr` (1 and 2) without holding a frame whole."""

    def __init__(self, stdout: Kept, stderr: Kept) -> None:
        self.stdout, self.stderr = stdout, stderr
        self.header = b""
        self.stream = 1
        self.left = 0  # payload bytes of the current frame still to come

    def feed(self, data: bytes) -> None:
        at = 0
        while at < len(data):
            if self.left == 0:
                need = 8 - len(self.header)
                self.header += data[at : at + need]
                at += need
                if len(self.header) < 8:
                    return
                self.stream, self.left = self.header[0], int.from_bytes(self.header[4:8], "big")
                self.header = b""
                continue
            piece = data[at : at + self.left]
            at += len(piece)
            self.left -= len(piece)
            (self.stderr if self.stream == 2 else self.stdout).add(piece)


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

    def request(
        self,
        method: str,
        path: str,
        body: Optional[JSONValue] = None,
        timeout_s: Optional[float] = None,
        sink: Optional[Callable[[bytes], None]] = None,
    ) -> tuple[int, bytes]:
        """One request: (HTTP status, the raw body, at most MAX_ANSWER_BYTES); with `sink`, the body is given to it
        piece by piece as it comes instead (and b"" returned)."""
        connection = self._connection()
        if timeout_s is not None:
            connection.timeout = timeout_s
        try:
            headers = {"Host": "docker"}
            data = None
            if body is not None:
                data = json.dumps(body, allow_nan=False).encode()
                headers["Content-Type"] = "application/json"
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            raw = bytearray()
            while True:
                piece = response.read(READ_BYTES)
                if not piece:
                    break
                if sink is not None:
                    sink(piece)
                    continue
                raw += piece
                if len(raw) > MAX_ANSWER_BYTES:
                    raise DockerApiError(
                        f"the Docker engine at {self.host} answered {method} {path.split('?')[0]} with more than "
                        f"{MAX_ANSWER_BYTES:,} bytes"
                    )
        except (OSError, http.client.HTTPException) as err:
            raise DockerApiError(f"the Docker engine at {self.host} does not answer: {err}") from None
        finally:
            connection.close()
        return response.status, bytes(raw)

    def get(self, path: str) -> tuple[int, JSONValue]:
        status, body = self.request("GET", path)
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            return status, None

    def image_inspect(self, image: str) -> Optional[dict[str, JSONValue]]:
        """`docker image inspect`'s object, or None when the engine has no such image."""
        status, info = self.get(f"/images/{quote(image, safe='/:@')}/json")
        if status == 404:
            return None
        if status != 200 or not isinstance(info, dict):
            raise DockerApiError(f"the Docker engine answered {status} about image {image}")
        return info

    def run_probe(
        self,
        image: str,
        argv: Sequence[str],
        timeout_s: float,
        labels: Optional[dict[str, str]] = None,
        max_output: int = MAX_ANSWER_BYTES,
    ) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `python3 ARGV...` in a fresh container of `image` without network;
        the container is removed whatever happens. DockerApiError when it cannot run or outlasts `timeout_s`;
        OutputTooLarge when it printed more than `max_output` bytes on either stream (only the head and the tail
        of what it printed are ever held)."""
        config: JSONValue = {
            "Image": image,
            "Entrypoint": ["python3"],
            "Cmd": [str(word) for word in argv],
            "NetworkDisabled": True,
            "Labels": dict(labels or {}),
            "Env": ["PYTHONDONTWRITEBYTECODE=1"],
            "HostConfig": {"NetworkMode": "none"},
        }
        status, body = self.request("POST", "/containers/create", config)
        if status != 201:
            raise DockerApiError(f"the Docker engine would not create a container of {image}: {answer_message(body)}")
        ident = str(json.loads(body)["Id"])
        try:
            status, body = self.request("POST", f"/containers/{ident}/start")
            if status not in (204, 304):
                raise DockerApiError(f"python3 does not start in {image}: {answer_message(body)}")
            try:
                status, body = self.request("POST", f"/containers/{ident}/wait", timeout_s=timeout_s)
            except DockerApiError:
                raise DockerApiError(f"python3 in {image} gave no answer within {timeout_s:g} s") from None
            code = int(json.loads(body).get("StatusCode", -1)) if status == 200 else -1
            stdout, stderr = Kept(max_output), Kept(max_output)
            status, _ = self.request(
                "GET", f"/containers/{ident}/logs?stdout=1&stderr=1", sink=Frames(stdout, stderr).feed
            )
            if status != 200:
                return code, "", ""
            return code, stdout.whole("stdout"), stderr.whole("stderr")
        finally:
            try:
                self.request("DELETE", f"/containers/{ident}?force=1&v=1")
            except DockerApiError:
                pass

    def runtimes(self) -> list[str]:
        status, info = self.get("/info")
        if status != 200 or not isinstance(info, dict):
            raise DockerApiError(f"the Docker engine answered {status} to /info")
        runtimes = info.get("Runtimes")
        return sorted(runtimes) if isinstance(runtimes, dict) else []


def answer_message(body: bytes) -> str:
    """The engine's error message in a response body."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", "replace").strip()[:300]
    return str(data.get("message", data))[:300] if isinstance(data, dict) else str(data)[:300]
