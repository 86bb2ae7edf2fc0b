"""The Docker engine's own log reader: HTTP chunks and Docker's frames decoded a burst at a time, nothing lost,
nothing repeated, and a stream that breaks off told from one that ended.

The decoders are fed the same bytes whole, a byte at a time and in uneven
pieces; the reader itself talks to a socket that answers with prepared bytes
(the lowest layer), and, with the `docker` marker, to the real engine, where
each stream's lines must equal what the engine sent on it.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path
from typing import Iterator

import pytest

from harness.engines import dockerlogs
from harness.engines.logstream import ChunkedBody, DockerFrames, StreamBroken, split_lines, stamp_to_ns


def frame(stream: int, data: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(data).to_bytes(4, "big") + data


def chunked(*pieces: bytes, end: bool = True) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    return body + (b"0\r\n\r\n" if end else b"")


def cut(data: bytes, sizes: tuple[int, ...]) -> Iterator[bytes]:
    """`data` in pieces of the given sizes, over and over."""
    at, turn = 0, 0
    while at < len(data):
        size = sizes[turn % len(sizes)]
        yield data[at : at + size]
        at, turn = at + size, turn + 1


FRAMES = [
    frame(1, b"2026-01-01T00:00:00.1Z out 1\n"),
    frame(2, b"2026-01-01T00:00:00.2Z err 1\n"),
    frame(1, b"2026-01-01T00:00:00.3Z out 2\n"),
    frame(1, b"2026-01-01T00:00:00.4Z " + b"x" * 40_000 + b"\n"),  # larger than one read of the socket's
    frame(2, b"2026-01-01T00:00:00.5Z last\n"),
]
PAYLOAD = b"".join(f[8:] for f in FRAMES)


@pytest.mark.parametrize("sizes", [(1 << 20,), (1,), (3, 7, 1, 50), (9, 4096)])
def test_chunks_and_frames_decode_the_same_whatever_the_pieces(sizes: tuple[int, ...]) -> None:
    body, frames = ChunkedBody(), DockerFrames()
    out = b"".join(frames.feed(body.feed(piece)) for piece in cut(chunked(*FRAMES), sizes))
    assert out == PAYLOAD and body.done and frames.pending == 0


def test_a_chunk_may_hold_several_frames_and_a_frame_span_chunks() -> None:
    data = b"".join(FRAMES)
    body, frames = ChunkedBody(), DockerFrames()
    out = b"".join(frames.feed(body.feed(piece)) for piece in cut(chunked(data[:5], data[5:100], data[100:]), (13,)))
    assert out == PAYLOAD and body.done


def test_a_chunk_extension_is_ignored_and_nothing_after_the_last_chunk_is_taken() -> None:
    body = ChunkedBody()
    assert body.feed(b"5;name=value\r\nhello\r\n0\r\n\r\n5\r\nlater\r\n") == b"hello"
    assert body.done


@pytest.mark.parametrize(
    "data",
    [b"5\r\nhelloXX", b"zz\r\nhello\r\n", b"9" * 2000],
    ids=["no CRLF after the data", "not a size", "a size line without end"],
)
def test_broken_chunked_encoding_is_a_broken_stream(data: bytes) -> None:
    with pytest.raises(StreamBroken):
        ChunkedBody().feed(data)


def test_a_frame_cut_mid_way_is_kept_for_the_next_piece() -> None:
    frames = DockerFrames()
    assert frames.feed(FRAMES[0] + FRAMES[1][:10]) == FRAMES[0][8:]
    assert frames.pending == 10
    assert frames.feed(FRAMES[1][10:]) == FRAMES[1][8:] and frames.pending == 0


def test_a_long_line_sent_in_pieces_stays_whole_when_the_other_stream_s_lines_come_between() -> None:
    # Docker's stdout and stderr copiers run side by side: a stdout line cut into 16 KiB pieces can have
    # stderr lines between its frames (seen with the real engine); each stream's line is kept whole.
    long = b"2026-01-01T00:00:00.4Z " + b"y" * 40_000
    pieces = [long[:16_000], long[16_000:32_000], long[32_000:] + b"\n"]
    data = (
        frame(1, pieces[0])
        + frame(2, b"2026-01-01T00:00:00.5Z err 1\n")
        + frame(1, pieces[1])
        + frame(2, b"2026-01-01T00:00:00.6Z err 2\n2026-01-01T00:00:00.7Z err")  # stderr's own line open too
        + frame(1, pieces[2] + b"2026-01-01T00:00:00.8Z out 2\n")
        + frame(2, b" 3\n")
    )
    for sizes in [(len(data),), (1,), (3, 7, 1, 50)]:
        frames = DockerFrames()
        out = b"".join(frames.feed(piece) for piece in cut(data, sizes)) + frames.finish()
        assert out.split(b"\n") == [
            b"2026-01-01T00:00:00.5Z err 1",
            b"2026-01-01T00:00:00.6Z err 2",
            long,
            b"2026-01-01T00:00:00.8Z out 2",
            b"2026-01-01T00:00:00.7Z err 3",
            b"",
        ], sizes


def test_a_stream_that_ends_inside_a_line_gives_each_stream_s_last_line() -> None:
    frames = DockerFrames()
    out = frames.feed(frame(1, b"2026-01-01T00:00:00.1Z out") + frame(2, b"2026-01-01T00:00:00.2Z err"))
    assert out == b"" and frames.pending == 0
    assert frames.finish() == b"2026-01-01T00:00:00.1Z out\n2026-01-01T00:00:00.2Z err\n"
    assert frames.finish() == b""


def test_the_oldest_unfinished_line_s_stamp_is_told_until_its_end_comes() -> None:
    frames = DockerFrames()
    assert frames.unfinished_since() is None
    frames.feed(frame(2, b"2026-01-01T00:00:01.5Z " + b"e" * 100) + frame(1, b"2026-01-01T00:00:02Z out"))
    assert frames.unfinished_since() == stamp_to_ns("2026-01-01T00:00:01.5Z")
    assert frames.feed(frame(2, b"e end\n")) == b"2026-01-01T00:00:01.5Z " + b"e" * 101 + b" end\n"
    assert frames.unfinished_since() == stamp_to_ns("2026-01-01T00:00:02Z")
    assert frames.feed(frame(1, b" 1\n")).endswith(b"out 1\n") and frames.unfinished_since() is None


def test_the_request_asks_for_both_streams_with_stamps_from_since() -> None:
    path = dockerlogs.logs_path("abc", since=1764600000.25, follow=True)
    assert path.startswith("/containers/abc/logs?")
    assert all(part in path for part in ("stdout=1", "stderr=1", "timestamps=1", "follow=1", "since=1764600000.25"))
    assert "since" not in dockerlogs.logs_path("abc", since=None, follow=False)


def test_the_reader_speaks_to_a_local_socket_and_plain_tcp_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    assert dockerlogs.speaks("unix:///var/run/docker.sock") and dockerlogs.speaks("tcp://10.0.0.2:2375")
    assert not dockerlogs.speaks("ssh://user@host") and not dockerlogs.speaks("npipe:////./pipe/docker_engine")
    monkeypatch.setenv("DOCKER_TLS_VERIFY", "1")
    assert not dockerlogs.speaks("tcp://10.0.0.2:2376")


class Answering:
    """A unix socket that answers one request with prepared bytes, then closes (the engine's side of it)."""

    def __init__(self, directory: Path, answer: bytes) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "engine.sock"
        self.answer = answer
        self.request = b""
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(self.path))
        self.server.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def host(self) -> str:
        return f"unix://{self.path}"

    def _serve(self) -> None:
        connection, _ = self.server.accept()
        with connection:
            while b"\r\n\r\n" not in self.request:
                self.request += connection.recv(4096)
            for piece in cut(self.answer, (7, 300, 1)):
                connection.sendall(piece)
        self.server.close()


def read(answering: Answering) -> list[str]:
    return list(split_lines(dockerlogs.open_logs(answering.host, "abc", since=None, follow=False)))


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.multiplexed-stream\r\n"
LINES = [f[8:].decode().rstrip("\n") for f in FRAMES]


def test_a_chunked_answer_gives_every_line_once_in_order(tmp_path: Path) -> None:
    answering = Answering(tmp_path, HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(*FRAMES))
    assert read(answering) == LINES
    assert answering.request.startswith(b"GET /containers/abc/logs?") and b"HTTP/1.1\r\n" in answering.request


def test_an_answer_of_stated_length_or_up_to_the_close_reads_the_same(tmp_path: Path) -> None:
    data = b"".join(FRAMES)
    assert read(Answering(tmp_path / "a", HEAD + b"Content-Length: %d\r\n\r\n" % len(data) + data)) == LINES
    assert read(Answering(tmp_path / "b", HEAD + b"\r\n" + data)) == LINES


@pytest.mark.parametrize(
    "answer",
    [
        HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(*FRAMES[:3], end=False),
        HEAD + b"Content-Length: 5000\r\n\r\n" + b"".join(FRAMES[:3]),
        HEAD + b"\r\n" + b"".join(FRAMES[:3]) + FRAMES[3][:100],
    ],
    ids=["chunked without its last chunk", "shorter than its length", "cut inside a frame"],
)
def test_a_stream_that_breaks_off_is_a_connection_error_after_its_whole_lines(tmp_path: Path, answer: bytes) -> None:
    lines: list[str] = []
    with pytest.raises(StreamBroken) as broken:
        lines.extend(split_lines(dockerlogs.open_logs(Answering(tmp_path, answer).host, "abc", None, False)))
    assert isinstance(broken.value, ConnectionError)  # so DockerRun.logs reopens after the last whole line
    assert lines == LINES[:3]


def test_an_error_answer_is_refused_with_the_engine_s_message(tmp_path: Path) -> None:
    body = b'{"message":"No such container: abc"}'
    answer = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    with pytest.raises(dockerlogs.LogsRefused) as refused:
        dockerlogs.open_logs(Answering(tmp_path, answer).host, "abc", None, False)
    assert refused.value.status == 404 and refused.value.message == "No such container: abc"


class Pieces:
    """A socket whose every read gives the next of prepared pieces, as the engine wrote them, then b"" (closed)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces

    def recv(self, size: int) -> bytes:
        piece = self.pieces.pop(0) if self.pieces else b""
        assert len(piece) <= size
        return piece

    def close(self) -> None:
        pass


def test_a_burst_the_engine_writes_32_kib_at_a_time_is_read_without_waits_and_a_trickle_is_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Docker follows a log in writes of about 32 KiB, half a read: waiting after each held a burst of 100,000 lines
    # to 0.75 MB/s (20 s where the engine sent it in 1).
    waits: list[float] = []
    monkeypatch.setattr(dockerlogs.time, "sleep", waits.append)
    line = b"2026-01-01T00:00:00.1Z " + b"x" * 96 + b"\n"  # a frame of 128 bytes: 256 in each write
    burst = list(cut(frame(1, line) * 256 * 40, (32 << 10,)))
    trickle = [frame(2, b"2026-01-01T00:00:01.0Z live %d\n" % n) for n in range(3)]

    lines = list(split_lines(dockerlogs.LogBody(Pieces(burst + trickle), {}, b"", follow=True)))

    assert len(burst) == 40 and lines == [line.decode().rstrip("\n")] * 256 * 40 + [
        f"2026-01-01T00:00:01.0Z live {n}" for n in range(3)
    ]
    assert waits == [dockerlogs.FOLLOW_BATCH_S] * 3  # after each read of the trickle, none within the burst


SCRIPT = r"""
for i in $(seq 1 300); do echo "out $i"; echo "err $i" >&2; done
head -c 40000 /dev/zero | tr '\0' y; echo
echo last
"""


@pytest.mark.docker
def test_the_engine_s_log_read_by_the_harness_gives_each_stream_s_lines_whole_and_in_order(busybox_image: str) -> None:
    from harness.engines.dockerapi import docker_host
    from harness.engines.dockerrun import DockerRun
    from support.lab import docker_client

    client = docker_client()
    container = client.containers.run(busybox_image, ["sh", "-c", SCRIPT], detach=True)
    try:
        container.wait()
        ours = list(DockerRun(client, container).logs())
        # What the engine sent, a stream at a time (the SDK's plain reader joins the frames of both, and Docker
        # can put stderr's lines between the pieces of the 40,000-character stdout line).
        url = client.api._url("/containers/{0}/logs", container.id)
        body = client.api._get(url, params={"stdout": 1, "stderr": 1, "timestamps": 1}).content
        frames, at = [], 0
        while at < len(body):  # Docker's frames, read by the test: stream byte, 3 zero bytes, big-endian size
            size = int.from_bytes(body[at + 4 : at + 8], "big")
            frames.append((body[at], body[at + 8 : at + 8 + size]))
            at += 8 + size
        stdout = list(split_lines(data for stream, data in frames if stream == 1))
        stderr = list(split_lines(data for stream, data in frames if stream == 2))
        assert [line for line in ours if " err " not in line] == stdout and len(stdout) == 302
        assert [line for line in ours if " err " in line] == stderr and len(stderr) == 300
        texts = [line.split(" ", 1)[1] for line in ours]
        assert [t for t in texts if t.startswith("y")] == ["y" * 40_000]  # cut by Docker, whole
        with pytest.raises(dockerlogs.LogsRefused) as refused:
            dockerlogs.open_logs(docker_host(), "no-such-container-of-the-tests", None, False)
        assert refused.value.status == 404
    finally:
        container.remove(force=True)


HELD = r"""
head -c 20000 /dev/zero | tr '\0' e >&2
for i in $(seq 1 30); do echo "out $i"; sleep 0.1; done
echo " end" >&2
echo last
"""


@pytest.mark.docker
def test_a_stream_that_breaks_while_a_long_line_is_unfinished_resumes_early_enough_to_give_it_whole(
    busybox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Docker sends stderr's first 16 KiB at once and the rest with the newline 3 s later; stdout's lines between
    # move the position past its 2 s window. The break comes then: the reopen must start no later than the
    # unfinished line, or its first piece is never sent again.
    from harness.engines import dockerrun as docker_engine
    from harness.engines.dockerrun import DockerRun
    from support.lab import docker_client

    original = docker_engine.DockerRun._open_logs
    opened: list[object] = []

    class Breaking:
        def __init__(self, body: dockerlogs.LogBody) -> None:
            self.body = body
            self.unfinished_since = body.unfinished_since

        def __iter__(self) -> Iterator[bytes]:
            seen = b""
            for chunk in self.body:
                yield chunk
                seen += chunk
                if b"out 25\n" in seen:
                    raise ConnectionResetError("connection reset by peer")

    def breaking(self: DockerRun, since: object, follow: bool) -> object:
        body = original(self, since, follow)
        opened.append(since)
        assert isinstance(body, dockerlogs.LogBody)  # the harness's own reader, which holds a line apart
        return Breaking(body) if len(opened) == 1 else body

    monkeypatch.setattr(docker_engine.DockerRun, "_open_logs", breaking)
    client = docker_client()
    container = client.containers.run(busybox_image, ["sh", "-c", HELD], detach=True)
    try:
        texts = [line.split(" ", 1)[1] for line in DockerRun(client, container).logs(follow=True)]
    finally:
        container.remove(force=True)
    assert len(opened) >= 2
    assert [t for t in texts if t.startswith("e")] == ["e" * 20_000 + " end"]
    assert [t for t in texts if t.startswith("out ")] == [f"out {i}" for i in range(1, 31)]
    assert texts.count("last") == 1 and len(texts) == 32  # stdout and stderr are copied apart: in either order


@pytest.mark.docker
def test_a_container_with_a_tty_is_read_as_the_sdk_reads_it(busybox_image: str) -> None:
    from harness.engines.dockerrun import DockerRun
    from support.lab import docker_client

    client = docker_client()
    container = client.containers.run(busybox_image, ["sh", "-c", "echo one; echo two"], detach=True, tty=True)
    try:
        container.wait()
        lines = [line.split(" ", 1)[1].rstrip("\r") for line in DockerRun(client, container).logs()]
        assert lines == ["one", "two"]  # not taken for frames: a TTY's log has none
    finally:
        container.remove(force=True)
