"""A container's log stream read straight from the engine's socket, a burst at a time.

The docker SDK reads a log stream frame by frame: for each line, a header
read and a payload read through urllib3 and http.client's chunked decoding,
and a wake-up of the reading thread for nearly every line Docker sends. At
2,000 lines/s that was most of what a run cost the harness (bench/run_overhead.py).
Here the same request (`GET /containers/ID/logs`) is made over the engine's
socket, each read takes whatever has arrived (up to 64 KiB), and a follow
stream that had little to give (less than `BURST_READ_BYTES`) waits
`FOLLOW_BATCH_S` before the next read, so a chatty trainer costs a few
wake-ups a second, as the process engine's 50 ms poll of its log file does,
and a burst is read as fast as the engine sends it. The HTTP framing and Docker's frames are
decoded by `harness.engines.logstream` (ChunkedBody, DockerFrames), which
also keeps a line Docker sent in pieces whole when the other stream's lines
came between them (the SDK's reader joins the two streams' frames as they come).

Only engines this client speaks (a unix socket, plain TCP) are read here;
`speaks` tells, and the Docker engine uses the SDK's reader otherwise.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Iterator, Optional
from urllib.parse import quote, urlencode, urlsplit

from harness.engines.dockerapi import answer_message
from harness.engines.logstream import ChunkedBody, DockerFrames, StreamBroken

FOLLOW_BATCH_S = 0.05  # the most a live line waits in the socket for the lines after it
READ_BYTES = 1 << 16
# A read of at least this much is part of a burst: the next read is made at once. Docker follows a log in writes of
# about 32 KiB, so a burst comes half a read at a time: waiting after each read short of READ_BYTES held a burst of
# 100,000 lines to 0.75 MB/s, 20 s where the engine sent it in 1 (tests/test_lifecycle_docker.py).
BURST_READ_BYTES = 16 << 10
CONNECT_TIMEOUT_S = 10.0
HEAD_MAX_BYTES = 64 * 1024


class LogsRefused(Exception):
    """The engine answered the log request with an error (no such container, one being removed, ...)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"the Docker engine answered {status} to the log request: {message}")
        self.status = status
        self.message = message


def speaks(host: str) -> bool:
    """Whether `open_logs` can read from this engine (a unix socket, or TCP without TLS)."""
    scheme = urlsplit(host).scheme
    return scheme == "unix" or (scheme in ("tcp", "http") and not os.environ.get("DOCKER_TLS_VERIFY"))


def logs_path(container_id: str, since: Optional[float], follow: bool) -> str:
    """The request's path and query: both streams, timestamps, from `since` (as the SDK asks it)."""
    query: dict[str, object] = {"stdout": 1, "stderr": 1, "timestamps": 1, "follow": int(follow), "tail": "all"}
    if since is not None and since > 0:
        query["since"] = since
    return f"/containers/{quote(container_id, safe='')}/logs?{urlencode(query)}"


def open_logs(host: str, container_id: str, since: Optional[float], follow: bool) -> "LogBody":
    """The payload of the container's log (lines with their stamps), in pieces of whole lines.

    The request is made before this returns, so a refused connection or an
    error answer (LogsRefused) is raised here; a stream that breaks off
    raises an OSError (StreamBroken when it ends inside its framing).
    """
    sock = _connect(host)
    try:
        request = f"GET {logs_path(container_id, since, follow)} HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"
        sock.sendall(request.encode("ascii"))
        status, headers, rest = _read_head(sock)
        if status != 200:
            raise LogsRefused(status, answer_message(_read_all(sock, headers, rest)))
    except BaseException:
        sock.close()
        raise
    return LogBody(sock, headers, rest, follow)


def _connect(host: str) -> socket.socket:
    parts = urlsplit(host)
    if parts.scheme == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(parts.path)
        except BaseException:
            sock.close()
            raise
    else:
        sock = socket.create_connection((parts.hostname or "localhost", parts.port or 2375), CONNECT_TIMEOUT_S)
    sock.settimeout(None)  # a log stream may be quiet for as long as the trainer is
    return sock


def _read_head(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """(status, headers with lower-case names, the body bytes read with the head)."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_MAX_BYTES:
            raise StreamBroken("the Docker engine's answer to the log request has no end of its head")
        chunk = sock.recv(READ_BYTES)
        if not chunk:
            raise StreamBroken("the Docker engine closed the log request before answering")
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    status_line, *lines = head.decode("latin-1").split("\r\n")
    words = status_line.split(" ", 2)
    if len(words) < 2 or not words[0].startswith("HTTP/") or not words[1].isdigit():
        raise StreamBroken(f"the Docker engine's answer to the log request is not HTTP: {status_line[:80]!r}")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(words[1]), headers, rest


def _body(sock: socket.socket, headers: dict[str, str], rest: bytes, follow: bool) -> Iterator[bytes]:
    """The response's body as it arrives: chunked, of a stated length, or up to the close."""
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    decoder = ChunkedBody() if chunked else None
    length = None if chunked or "content-length" not in headers else int(headers["content-length"])
    data, short = rest, False
    while True:
        if decoder is not None:
            body = decoder.feed(data)
            if body:
                yield body
            if decoder.done:
                return
        elif data:
            body = data if length is None else data[:length]
            if length is not None:
                length -= len(body)
            yield body
        if length == 0:
            return
        if follow and short:
            time.sleep(FOLLOW_BATCH_S)  # the socket had little: let the lines after it arrive, one wake-up for many
        data = sock.recv(READ_BYTES)
        if not data:
            if decoder is not None or length is not None:
                raise StreamBroken("the log stream broke off before its end")
            return
        short = len(data) < BURST_READ_BYTES


class LogBody:
    """The lines of a log answer as they arrive (iterate it once), and where a line it holds unfinished began."""

    def __init__(self, sock: socket.socket, headers: dict[str, str], rest: bytes, follow: bool) -> None:
        self._frames = DockerFrames()
        self._pieces = self._payload(sock, headers, rest, follow)

    def __iter__(self) -> Iterator[bytes]:
        return self._pieces

    def unfinished_since(self) -> Optional[int]:
        """The stamp (ns) of the oldest line begun and not ended (a reopen must start at or before it)."""
        return self._frames.unfinished_since()

    def _payload(self, sock: socket.socket, headers: dict[str, str], rest: bytes, follow: bool) -> Iterator[bytes]:
        frames = self._frames
        try:
            for body in _body(sock, headers, rest, follow):
                payload = frames.feed(body)
                if payload:
                    yield payload
            if frames.pending:
                raise StreamBroken("the log stream broke off inside a frame")
            rest = frames.finish()
            if rest:
                yield rest
        finally:
            sock.close()


def _read_all(sock: socket.socket, headers: dict[str, str], rest: bytes) -> bytes:
    sock.settimeout(CONNECT_TIMEOUT_S)  # an error answer is short and whole
    try:
        return b"".join(_body(sock, headers, rest, follow=False))
    except OSError:
        return b""
